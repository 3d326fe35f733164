"""What ``agon eval`` is given, checked before any model loads or any sample is drawn.

Each check is a pure function of the command's values (the caller reads the run folders), and
each refuses in one line naming the flag: an interval's coverage outside (0, 1) is refused at
once rather than after the set-up; a seed given twice would draw the same samples twice and
count them as two; a run given twice, by its folder or by its adapters' weights (a copied or
renamed run), would count one run as two ("runs: 2", a t-interval on one degree of freedom,
its trials pooled twice).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from agon_env.errors import InputError


def check_confidence(confidence: float, flag: str = "--confidence") -> None:
    """An interval's coverage: strictly between 0 and 1."""
    if not (math.isfinite(confidence) and 0 < confidence < 1):
        raise InputError(f"{flag} {confidence}: an interval's coverage must be in (0, 1), e.g. 0.95")


def check_seeds(seeds: Sequence[int], flag: str = "--seeds") -> None:
    """At least one sampling seed, none twice."""
    if not seeds:
        raise InputError(f"{flag}: give at least one sampling seed, e.g. {flag} 0 or {flag} 0 1 2")
    repeated = sorted({s for s in seeds if list(seeds).count(s) > 1})
    if repeated:
        raise InputError(
            f"{flag} {' '.join(map(str, seeds))}: seed {', '.join(map(str, repeated))} given twice; "
            "a seed draws the same samples each time, so give each seed once"
        )


def check_distinct_folders(runs: Sequence[str | Path]) -> None:
    """No run folder twice, however it is spelled (``run``, ``run/``, ``./run``, a link to it)."""
    seen: dict[Path, str] = {}
    for run in runs:
        where = Path(run).resolve()
        if where in seen:
            raise InputError(
                f"{seen[where]} and {run} are one run folder: give each run once "
                "(evaluate more sampling seeds with --seeds)"
            )
        seen[where] = str(run)


def check_distinct_adapters(hashes: Mapping[str, Mapping[str, str]]) -> None:
    """No two runs with the same adapters: ``hashes`` maps each run to its adapters' weight
    hashes (:func:`agon_env.evaluation.runs.weights_hashes`). Two runs that share only some
    adapters (one left untrained from the same seed) are two runs; all of them is one run twice."""
    seen: dict[tuple[tuple[str, str], ...], str] = {}
    for run, adapters in hashes.items():
        key = tuple(sorted(adapters.items()))
        if key in seen:
            weights = ", ".join(f"{name} {digest}" for name, digest in key)
            raise InputError(
                f"{seen[key]} and {run} hold the same adapters (weights {weights}): "
                "one run given twice; evaluate it once"
            )
        seen[key] = run


SAMPLING_FLAGS = {
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_new_tokens": "--max-new-tokens",
    "max_batch_size": "--batch-size",
}
"""A sampling override's field -> the flag that gives it (``agon eval``'s and ``agon probe``'s)."""


def check_sampling(**overrides: float | None) -> None:
    """Refuse, naming its flag, an override :class:`~agon_env.options.SamplingParams` would refuse
    (a negative temperature, no tokens): before any set-up, and as the user's error, not a defect."""
    from agon_env.options import SamplingParams

    for key, value in overrides.items():
        if value is None:
            continue
        try:
            SamplingParams(**{key: value})
        except ValueError as exc:
            raise InputError(f"{SAMPLING_FLAGS[key]} {value}: {exc}") from None
