"""One seed derivation for every random draw: ``derive_seed(seed, *keys)``.

A run has one seed. Everything random in training and evaluation -- adapter init, data
order, an episode's env reset, each turn's sampling noise -- draws from
``derive_seed(run_seed, *keys)``, where the keys name the draw (``"sample"``, the step,
the episode, the turn, the agent, ...). The derivation is a stable hash (BLAKE2b of the
keys' JSON), so

* the same keys give the same seed in every process, on every machine and Python
  version (unlike ``hash()``), which data-parallel ranks and resumed runs rely on;
* different keys give unrelated seeds, so two policies, two turns or two methods never
  share a random stream unless their keys say so (a test can ask for that by passing
  equal keys).

Keys are ints and strings; anything else is refused rather than stringified, so a key
cannot silently change meaning with a ``repr``.
"""

from __future__ import annotations

import hashlib
import json

SEED_BITS = 62
"""Seeds fit torch's and vLLM's signed 64-bit generators with room to spare."""


def derive_seed(seed: int, *keys: int | str) -> int:
    """A seed in ``[0, 2**62)`` determined by ``seed`` and ``keys`` alone."""
    for k in (seed, *keys):
        if not isinstance(k, (int, str)) or isinstance(k, bool):
            raise TypeError(f"seed keys must be int or str, got {k!r} ({type(k).__name__})")
    payload = json.dumps([seed, *keys], separators=(",", ":")).encode()
    digest = hashlib.blake2b(payload, digest_size=8).digest()
    return int.from_bytes(digest, "little") % (1 << SEED_BITS)
