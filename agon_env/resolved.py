"""A run, resolved: everything it is after validation, worked out once.

A :class:`~agon_env.config.TrainConfig` says what a user asked for; a :class:`ResolvedRun`
says what that *is*: the algorithm's seats, mode and reward scheme, the env's keywords with
the channel the run plays, how each policy samples (its ``temperatures`` override applied),
the device and dtype ``auto`` stood for. Training builds it once
(:func:`agon_env.algorithms.validation.resolve`), writes it to the run folder
(``resolved.yaml``, beside ``config.yaml``) and hands it to the trainer and the held-out
check; ``agon eval`` and ``agon probe`` read it back (:meth:`agon_env.run_folder.RunFolder.resolved`).
Nothing downstream works a field of it out again: an adapter's temperature, the channel
a reader reads through, the env's keywords are looked up here.

::

    who builds it                          who reads it
    algorithms.validation.resolve(cfg) --> Trainer.build (plugin, env, base, agents, sampling)
                                       --> run.train (device, held-out check's agents)
                                       --> resolved.yaml --> RunFolder.resolved()
                                                               --> agon eval (Settings, the eval env)
                                                               --> agon probe (a run's adapter)
                                                               --> agon answer / serve (Cascade)

A finished run's base loads on this machine's device (``auto`` unless a command says
otherwise, never the training machine's) in the run's ``model.dtype`` through
:func:`dtype_on`, the rule training itself follows.

This module is part of the floor: torch-free, and it imports nothing above
:mod:`agon_env.config`, :mod:`agon_env.options` and :mod:`agon_env.vocabulary`. The
algorithm's own fields are given to :func:`settle` as plain values, so the floor needs no
plugin table.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agon_env.config import ConfigError, TrainConfig, convert, plain
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.options import ENV_KWARGS, EnvOptions, SamplingParams
from agon_env.vocabulary import BASE


@dataclass(frozen=True)
class ResolvedRun:
    """A validated run with every derived setting worked out (see the module docstring)."""

    config: TrainConfig
    """The validated config it came from (``config.yaml``); fields it does not derive
    (``grpo``, ``optim``, ``steps``, ...) are read there."""
    algo: str
    """The algorithm plugin's name."""
    adapters: tuple[str, ...]
    """The plugin's trained adapters, one LoRA each (empty when read from a run folder written
    before ``resolved.yaml`` existed: its adapters are then the folder's)."""
    env: EnvOptions
    """The env the run trains on: the config's env keywords, the plugin's mode and reward
    scheme, and the channel training plays (``exchange``: the plugin's own where it fixes
    one, as hidden-draft fixes ``none``)."""
    exchange: str
    """The channel a reader of this run's drafts reads through at inference (the config's
    ``env.exchange``): ``agon eval``'s cascades read drafts through it. It differs from
    ``env.exchange`` only for a plugin that fixes its own channel in training."""
    sampling: dict[str, SamplingParams] = field(default_factory=dict)
    """How each policy samples: :data:`BASE` at the run's ``sampling``, each adapter
    with its ``temperatures`` override. The update reads the temperature each completion was
    sampled at from the completion itself."""
    device: str = "cpu"
    """``cpu`` or ``cuda`` (what ``model.device = auto`` stood for on the machine that trained)."""
    dtype: str = "float32"
    """The base's dtype (``auto``: bf16 on CUDA, fp32 on CPU, where bf16 is slow)."""

    @property
    def env_id(self) -> str:
        return self.config.env.id

    @property
    def task_kwargs(self) -> JSONRecord:
        """The task's keywords (``difficulty``...), without the env's."""
        return dict(self.config.env.kwargs)

    def env_keywords(self) -> JSONRecord:
        """The env's keywords as the run trains on them, for ``agon_env.make`` (evaluation
        takes :meth:`reader_options` instead and picks the rest per method)."""
        return dataclasses.asdict(self.env)

    def reader_options(self) -> JSONRecord:
        """The env keywords an evaluation env takes from this run (``lam``, ``gamma``,
        ``max_text_length``, ...): all but the three evaluation picks per method (``mode``,
        ``exchange``; the reward scheme is irrelevant to accuracy)."""
        picked = ("mode", "reward_scheme", "exchange")
        return {k: v for k, v in dataclasses.asdict(self.env).items() if k not in picked}

    def policy_sampling(self, name: str) -> SamplingParams:
        """How policy ``name`` (an adapter or :data:`BASE`) samples; an adapter the
        run does not know samples as the base (a renamed or extra adapter in a folder)."""
        return self.sampling.get(name) or self.sampling[BASE]

    def with_sampling(self, **overrides: JSONValue) -> ResolvedRun:
        """This run with the command line's sampling ``overrides`` (``None``: keep the run's).

        A temperature given there is every policy's: it replaces the per-adapter ones too
        (``--temperature 0`` is greedy for all)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        if not given:
            return self
        sampling = {n: dataclasses.replace(p, **given) for n, p in self.sampling.items()}
        config = dataclasses.replace(self.config, sampling=dataclasses.replace(self.config.sampling, **given))
        if "temperature" in given:
            config = dataclasses.replace(config, temperatures={})
        return dataclasses.replace(self, config=config, sampling=sampling)


def dtype_on(dtype: str, device: str) -> str:
    """The one rule for a base's dtype on the machine that loads it: a run's ``model.dtype`` as
    set, ``auto`` as bf16 on CUDA and fp32 on CPU (where bf16 matmuls run ~300x slower). Training,
    ``agon eval``, the probe and the server read a run's setting through it, so a run trained in
    bf16 on a GPU is evaluated in bf16 there and in fp32 on a CPU machine, as it would train there."""
    return dtype if dtype != "auto" else "bfloat16" if device == "cuda" else "float32"


def settle(
    cfg: TrainConfig,
    *,
    adapters: Sequence[str] = (),
    mode: str = EnvOptions.mode,
    reward_scheme: str = EnvOptions.reward_scheme,
    exchange: str | None = None,
    device: str = "cpu",
    dtype: str = "float32",
) -> ResolvedRun:
    """The one place a run's derived settings are worked out, from ``cfg`` and its
    algorithm's fields (``adapters``, ``mode``, ``reward_scheme``, and ``exchange`` when the
    algorithm fixes its channel). Per-adapter sampling is resolved here and nowhere else."""
    keywords = {k: v for k, v in dataclasses.asdict(cfg.env).items() if k in ENV_KWARGS}
    env = EnvOptions(**{**keywords, "mode": mode, "reward_scheme": reward_scheme})
    if exchange is not None:
        env = dataclasses.replace(env, exchange=exchange)
    sampling = {BASE: dataclasses.replace(cfg.sampling)}
    for name in dict.fromkeys((*adapters, *cfg.temperatures)):
        temperature = float(cfg.temperatures.get(name, cfg.sampling.temperature))
        sampling[name] = dataclasses.replace(cfg.sampling, temperature=temperature)
    return ResolvedRun(
        config=cfg,
        algo=cfg.algo,
        adapters=tuple(adapters),
        env=env,
        exchange=cfg.env.exchange,
        sampling=sampling,
        device=device,
        dtype=dtype,
    )


# -- resolved.yaml ---------------------------------------------------------------------


def to_record(run: ResolvedRun) -> JSONRecord:
    """What ``resolved.yaml`` holds: every derived field (the config is ``config.yaml``)."""
    return {
        "algo": run.algo,
        "adapters": list(run.adapters),
        "env": dataclasses.asdict(run.env),
        "exchange": run.exchange,
        "sampling": {n: plain(dataclasses.asdict(p)) for n, p in run.sampling.items()},
        "device": run.device,
        "dtype": run.dtype,
    }


def from_record(cfg: TrainConfig, record: Mapping[str, JSONValue]) -> ResolvedRun:
    """A :class:`ResolvedRun` from ``config.yaml``'s config and ``resolved.yaml``'s record."""
    try:
        sampling = {
            str(n): SamplingParams(**{k: _typed(SamplingParams, k, v) for k, v in dict(p).items()})
            for n, p in dict(record["sampling"]).items()
        }
        return ResolvedRun(
            config=cfg,
            algo=str(record["algo"]),
            adapters=tuple(record.get("adapters") or ()),
            env=EnvOptions(**{k: _typed(EnvOptions, k, v) for k, v in dict(record["env"]).items()}),
            exchange=str(record["exchange"]),
            sampling=sampling,
            device=str(record.get("device", "cpu")),
            dtype=str(record.get("dtype", "float32")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"not a resolved run ({exc}); delete it to read the run from its config.yaml alone"
        ) from None


def _typed(cls: type, key: str, value: JSONValue) -> object:
    hints = typing.get_type_hints(cls)
    if key not in hints:
        raise KeyError(f"{cls.__name__} has no field {key!r}")
    return convert(key, hints[key], value)
