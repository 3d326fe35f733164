"""pass@k with the unbiased estimator of Chen et al. (2021), over several answers per problem."""

from __future__ import annotations

import datasets
import evaluate

from agon_env.evaluation.metrics import judge_all
from agon_env.stats import mean_pass_at_k, problem_counts, rate

_DESCRIPTION = """
pass@k over problems with n sampled answers each: 1 - C(n-c, k) / C(n, k) per problem
(c = correct answers among n), averaged over problems. pass@1 also gets a Clopper–Pearson
interval over all sampled answers pooled (samples of one problem are correlated, so it is
somewhat too narrow when n > 1). Answers are compared as the agon env compares them
(math-verify with normalisation) unless ``match="exact"``.
"""

_KWARGS = """
Args:
    predictions (list of list of str): n sampled final answers per problem.
    references (list of str): the gold answer of each problem.
    k (list of int): the k values, each at most the smallest n; default [1].
    confidence (float): coverage of the pass@1 interval, default 0.95.
    match (str): "math" (default) or "exact".
    timeout (float): seconds allowed per math-verify check, default 10.
Returns:
    {"pass@1": ..., "pass@k": ..., "pass@1_ci_low": ..., "pass@1_ci_high": ..., "n_problems": ...,
     "score_errors": ..., "score_timeouts": ...} (answers the verifier could not judge count as wrong)
Examples:
    >>> pak = evaluate.load(module_path("agon_pass_at_k"))
    >>> pak.compute(predictions=[["41", "42"], ["7", "9"]], references=["42", "8"], k=[1, 2])["pass@2"]
    0.5
"""

_CITATION = """
@article{chen2021codex,
  title={Evaluating Large Language Models Trained on Code},
  author={Chen, Mark and others}, journal={arXiv:2107.03374}, year={2021}}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class AgonPassAtK(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("string")),
                    "references": datasets.Value("string"),
                }
            ),
        )

    def _compute(
        self,
        predictions,
        references,
        k=(1,),
        confidence: float = 0.95,
        match: str = "math",
        timeout: float = 10.0,
    ):
        verdicts, errors, timeouts = [], 0, 0
        for samples, gold in zip(predictions, references, strict=True):
            v, e, t = judge_all([(p, gold) for p in samples], match, timeout)
            verdicts.append(v)
            errors, timeouts = errors + e, timeouts + t
        if any(not v for v in verdicts):
            raise ValueError("every problem needs at least one predicted answer")
        counts = problem_counts(verdicts)  # judged answers only: a problem with none is left out
        if not counts:
            raise ValueError("the verifier judged no answer: pass@k is undefined")
        smallest = min(n for n, _ in counts)
        bad = [kk for kk in k if not 1 <= kk <= smallest]
        if bad:
            raise ValueError(f"k={bad} exceeds the smallest number of answers per problem ({smallest})")
        out = {f"pass@{kk}": mean_pass_at_k(counts, kk) for kk in k}
        pooled = rate([x for v in verdicts for x in v], confidence)
        out.update({"pass@1_ci_low": pooled.low, "pass@1_ci_high": pooled.high, "n_problems": len(counts)})
        out.update({"score_errors": errors, "score_timeouts": timeouts, "unjudged": pooled.unjudged})
        return out
