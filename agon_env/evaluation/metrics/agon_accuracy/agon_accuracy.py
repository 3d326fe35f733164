"""Accuracy of final answers with an exact (Clopper–Pearson) confidence interval."""

from __future__ import annotations

import datasets
import evaluate

from agon_env.evaluation.metrics import judge_all
from agon_env.stats import rate

_DESCRIPTION = """
Fraction of predictions that match their reference answer, with a two-sided exact
binomial (Clopper–Pearson) interval. By default answers are compared as the agon env
compares them (math-verify with normalisation: ``\\boxed{}``, thousands separators,
yes/no); ``match="exact"`` compares stripped strings instead.
"""

_KWARGS = """
Args:
    predictions (list of str): the model's final answers (e.g. the text inside <answer>).
    references (list of str): the gold answers.
    confidence (float): interval coverage, default 0.95.
    match (str): "math" (default) or "exact".
    timeout (float): seconds allowed per math-verify check, default 10.
Returns:
    accuracy, ci_low, ci_high, correct, n, and score_errors / score_timeouts: how many
    predictions the verifier could not judge (counted as not correct, as the env does)
Examples:
    >>> acc = evaluate.load(module_path("agon_accuracy"))
    >>> acc.compute(predictions=["42", "7"], references=["42", "8"])["accuracy"]
    0.5
"""

_CITATION = """
@article{clopper1934,
  title={The use of confidence or fiducial limits illustrated in the case of the binomial},
  author={Clopper, C. J. and Pearson, E. S.}, journal={Biometrika}, year={1934}}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class AgonAccuracy(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(
        self, predictions, references, confidence: float = 0.95, match: str = "math", timeout: float = 10.0
    ):
        verdicts, errors, timeouts = judge_all(
            list(zip(predictions, references, strict=True)), match, timeout
        )
        r = rate(verdicts, confidence)
        return {
            "accuracy": r.rate,
            "ci_low": r.low,
            "ci_high": r.high,
            "correct": r.successes,
            "n": r.trials,
            "unjudged": r.unjudged,  # in neither correct nor n
            "score_errors": errors,
            "score_timeouts": timeouts,
        }
