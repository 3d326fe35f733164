"""Hugging Face ``evaluate`` modules shipped inside the package.

``evaluate.load("accuracy")`` fetches a script from the hub, which needs a network;
these load from a local path instead::

    import evaluate
    from agon_env.evaluation.metrics import module_path

    acc = evaluate.load(module_path("agon_accuracy"))
    acc.compute(predictions=["42", "7"], references=["42", "8"])
    # {'accuracy': 0.5, 'ci_low': 0.0126, 'ci_high': 0.9874, 'correct': 1, 'n': 2}

    pak = evaluate.load(module_path("agon_pass_at_k"))
    pak.compute(predictions=[["41", "42"], ["7", "9"]], references=["42", "8"], k=[1, 2])

Both score answers as the env does (math-verify with agon's normalisation) unless
``match="exact"``; the statistics are those of :mod:`agon_env.stats`.
"""

from __future__ import annotations

from pathlib import Path

MODULES = ("agon_accuracy", "agon_pass_at_k")


def judge(prediction: str, reference: str, match: str = "math", timeout: float = 10.0) -> bool:
    """Whether a final answer matches its reference: as the env scores it, or as exact strings.

    ``timeout`` bounds one math-verify check (the first one also starts its worker process).
    A check that overruns it or cannot run raises ``VerifierTimeout`` / ``VerifierError``
    (:mod:`agon_env.envs.tasks.errors`) rather than counting the prediction wrong.
    """
    if match == "exact":
        return prediction.strip() == reference.strip()
    if match == "math":
        from agon_env.envs.tasks.verify import answers_match

        return bool(answers_match(reference, prediction, timeout=timeout))
    raise ValueError(f'match must be "math" or "exact", got {match!r}')


def judge_all(
    pairs: list[tuple[str, str]], match: str = "math", timeout: float = 10.0
) -> tuple[list[bool | None], int, int]:
    """``(verdicts, score_errors, score_timeouts)`` of ``(prediction, reference)`` pairs.

    A pair the verifier could not judge is ``None`` in ``verdicts`` (unjudged, not wrong: the
    metrics leave it out of every count, :func:`agon_env.stats.judged`) and is counted.
    """
    from agon_env.envs.tasks.errors import VerifierError, VerifierTimeout

    verdicts: list[bool | None] = []
    errors = timeouts = 0
    for prediction, reference in pairs:
        try:
            verdicts.append(judge(prediction, reference, match, timeout))
        except VerifierTimeout:
            verdicts.append(None)
            timeouts += 1
        except VerifierError:
            verdicts.append(None)
            errors += 1
    return verdicts, errors, timeouts


def module_path(name: str) -> str:
    """The folder ``evaluate.load`` takes for one of :data:`MODULES`."""
    if name not in MODULES:
        raise KeyError(f"unknown metric module {name!r}; shipped: {', '.join(MODULES)}")
    return str(Path(__file__).parent / name)
