"""A sample cache keyed by (model, prompt, seed), and an agent wrapper that uses it.

Why: an evaluation asks the same policy the same question many times. The base's
few-shot sample of a problem is also the first draft of the untrained MoA, and the
same base is evaluated again next to every run folder; a drafter's standalone sample
is also its draft in both the cascade and the self-cascade. Answering those from a
cache makes each extra mode cost only its new turns, and pairs the modes on the very
same drafts (a paired comparison rather than two independent noisy ones).

The key is ``(agent identity, observation, row seed)``. The evaluator derives each
row's seed from the policy, the problem id and the turn (``agon_env.seeding``), so two
problems that happen to read the same (arithmetic at low difficulty repeats prompts)
still get independent samples, while the same draft asked for by two methods is one
entry. The agent identity is the caller's string: model source, adapter fingerprint
and sampling settings, so a changed temperature or adapter never hits a stale entry.

On disk a cache is one append-only JSONL file per agent identity (a half-written last
line from a killed process is skipped on load).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from agon_env.agents.protocol import Agent, Completion

_OBS_FIELDS = ("text", "problem", "draft", "role", "own", "words")
"""Every field an agent renders from (``own`` picks the self-refinement prompts, ``words`` the
wording of the worked examples: a cache written before observations named it is not reused)."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def observation_key(identity: str, obs: Mapping[str, object], seed: int) -> str:
    payload = {f: obs.get(f) for f in _OBS_FIELDS}
    payload["role"], payload["own"] = int(payload["role"] or 0), int(payload["own"] or 0)
    return _digest(json.dumps([identity, payload, int(seed)], sort_keys=True, default=str))


class SampleCache:
    """Completions by key, in memory and optionally persisted under ``folder``."""

    def __init__(self, folder: str | Path | None = None) -> None:
        self.folder = Path(folder) if folder is not None else None
        self._mem: dict[str, dict[str, Completion]] = {}
        self.hits = 0
        self.misses = 0

    def _file(self, identity: str) -> Path | None:
        if self.folder is None:
            return None
        return self.folder / f"{_digest(identity)[:24]}.jsonl"

    def _table(self, identity: str, persistent: bool) -> dict[str, Completion]:
        if identity in self._mem:
            return self._mem[identity]
        table: dict[str, Completion] = {}
        path = self._file(identity) if persistent else None
        if path is not None and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # torn final line of a killed writer
                if isinstance(row, dict) and "key" in row:
                    table[row["key"]] = Completion(
                        text=row["text"],
                        completion_ids=list(row.get("completion_ids") or []),
                        finish_reason=row.get("finish_reason", "stop"),
                        agent=row.get("agent", ""),
                        temperature=row.get("temperature"),
                    )
        self._mem[identity] = table
        return table

    def get(self, identity: str, key: str, persistent: bool = False) -> Completion | None:
        return self._table(identity, persistent).get(key)

    def put(self, identity: str, items: Mapping[str, Completion], persistent: bool = False) -> None:
        table = self._table(identity, persistent)
        table.update(items)
        path = self._file(identity) if persistent else None
        if path is None or not items:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists()
        with path.open("a", encoding="utf-8") as f:
            if new:
                f.write(json.dumps({"identity": identity}) + "\n")
            for key, c in items.items():
                row = {
                    "key": key,
                    "text": c.text,
                    "completion_ids": list(c.completion_ids),
                    "finish_reason": c.finish_reason,
                    "agent": c.agent,
                    "temperature": c.temperature,
                }
                f.write(json.dumps(row) + "\n")


class CachedAgent:
    """An :class:`Agent` that answers from a :class:`SampleCache` and samples only the misses.

    Every call must pass per-row ``seeds``: they are part of the key and go to the
    wrapped agent for the misses. Cached completions carry text, token ids and the
    temperature they were sampled at, but no log-probs (evaluation needs none).
    """

    def __init__(self, agent: Agent, identity: str, cache: SampleCache, persistent: bool = False) -> None:
        self.agent, self.identity, self.cache, self.persistent = agent, identity, cache, persistent
        self.name = getattr(agent, "name", identity)

    def act(
        self, observations: Sequence[Mapping[str, object]], *, seeds: Sequence[int] | None = None
    ) -> list[Completion]:
        if seeds is None or len(seeds) != len(observations):
            raise ValueError("CachedAgent.act needs one seed per observation (they key the cache)")
        keys = [observation_key(self.identity, o, s) for o, s in zip(observations, seeds, strict=True)]
        out: list[Completion | None] = [self.cache.get(self.identity, k, self.persistent) for k in keys]
        todo = [i for i, c in enumerate(out) if c is None]
        self.cache.hits += len(keys) - len(todo)
        self.cache.misses += len(todo)
        if todo:
            fresh = self.agent.act([observations[i] for i in todo], seeds=[seeds[i] for i in todo])
            if len(fresh) != len(todo):
                raise ValueError(f"agent {self.name!r} returned {len(fresh)} completions for {len(todo)}")
            for i, c in zip(todo, fresh, strict=True):
                out[i] = c
            self.cache.put(
                self.identity, {keys[i]: c for i, c in zip(todo, fresh, strict=True)}, self.persistent
            )
        return [c for c in out if c is not None]
