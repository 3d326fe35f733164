"""``agon train``: ``TrainConfig`` on the command line, parsed by tyro.

    agon train                                   # TrainConfig() as it is: SmolLM2 + arith
    agon train --algo coop --optim.lr 1e-4 --steps 50
    agon train --config configs/paper-qwen3-0.6b-deepmath.yaml
    agon train --out-dir runs/x --resume         # continue a killed run
    agon train --env.kwargs difficulty=3         # a dict field: KEY=VALUE ..., on top of the preset's
    agon train --print-config                    # the resolved config as YAML

Every field is a dotted flag (``--optim.lr``) whose help is its docstring and default;
:data:`SHORT_NAMES` adds a few short ones. ``--config`` picks a preset, which becomes
the defaults the flags override. Also runnable as ``python -m agon_env.algorithms.commands.train``.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import tyro
import yaml
from tyro.constructors import ConstructorRegistry, PrimitiveConstructorSpec, PrimitiveTypeInfo

from agon_env.algorithms.resume import stored_base
from agon_env.algorithms.validation import resolve
from agon_env.config import (
    ConfigError,
    TrainConfig,
    convert,
    parse_assignments,
    preset_config,
    preset_names,
    task_kwargs,
    to_dict,
)
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.resolved import ResolvedRun

SHORT_NAMES = {
    "--model": "--model.name",
    "--env": "--env.id",
    "--n": "--grpo.num-generations",
    "--lr": "--optim.lr",
    "--exchange": "--env.exchange",
    "--device": "--model.device",
    "--backend": "--model.backend",
}
"""The only flags that are not a dotted key: ``--model tiny`` is ``--model.name tiny``;
``--device`` and ``--backend`` are spelled as ``agon eval``, ``probe``, ``answer`` and ``serve``
spell them (a study passes one device flag to a unit's train and eval)."""

_REGISTRY = ConstructorRegistry()


def _inline(value: JSONValue) -> str:
    return (
        yaml.safe_dump(value, default_flow_style=True, width=1 << 30).removesuffix("\n").removesuffix("\n...")
    )


@_REGISTRY.primitive_rule
def _dict_rule(info: PrimitiveTypeInfo) -> PrimitiveConstructorSpec | None:
    """``dict[str, X]`` fields (``env.kwargs``, ``temperatures``) as ``KEY=VALUE ...``; values are YAML."""
    if info.type_origin is not dict:
        return None
    value_type = (typing.get_args(info.type) or (str, Any))[1]

    def parse(items: list[str]) -> JSONRecord:
        return {k: convert(k, value_type, v) for k, v in parse_assignments(items).items()}

    return PrimitiveConstructorSpec(
        nargs="*",
        metavar="KEY=VALUE",
        instance_from_str=parse,
        is_instance=lambda x: isinstance(x, dict),
        str_from_instance=lambda d: [f"{k}={_inline(v)}" for k, v in d.items()],
    )


def _expand(arg: str) -> str:
    name, sep, value = arg.partition("=")
    return SHORT_NAMES.get(name, name) + sep + value


def train_flags(overrides: Mapping[str, JSONValue]) -> list[str]:
    """``agon train`` flags that set ``overrides`` (dotted ``TrainConfig`` keys, as
    :func:`~agon_env.config.from_dict` reads them): ``{"optim.lr": 1e-4,
    "progress": False}`` -> ``["--optim.lr", "1e-4", "--no-progress"]``; the inverse of this parser."""
    flags: list[str] = []
    for key, value in overrides.items():
        prefix, _, leaf = key.replace("_", "-").rpartition(".")
        scope = f"--{prefix}." if prefix else "--"
        if isinstance(value, bool):
            flags.append(f"{scope}{'' if value else 'no-'}{leaf}")
        elif isinstance(value, Mapping):
            flags += [f"{scope}{leaf}", *(f"{k}={_inline(v)}" for k, v in value.items())]
        elif isinstance(value, (list, tuple)):
            flags += [f"{scope}{leaf}", *map(str, value)]
        else:
            flags += [f"{scope}{leaf}", str(value)]
    return flags


def _description() -> str:
    from agon_env.algorithms.registry import algorithm_names, get_algorithm

    algos = "; ".join(f"{n}: {get_algorithm(n).summary}" for n in algorithm_names())
    shorts = ", ".join(f"{k} = {v}" for k, v in SHORT_NAMES.items())
    return (
        f"Train LoRA adapters in the draft-and-challenge env. Algorithms -- {algos}.\n"
        f"--config NAME_OR_PATH: a preset (./configs/NAME.yaml or a .yaml path; here: "
        f"{', '.join(preset_names()) or 'none'}); its values become the defaults below.\n"
        f"--print-config: print the resolved config as YAML and exit. --debug (or AGON_DEBUG=1): "
        f"tracebacks instead of one-line errors. Short names: {shorts}."
    )


def debugging(argv: Sequence[str]) -> bool:
    """``--debug`` (or ``AGON_DEBUG=1``): show tracebacks instead of one-line errors."""
    from agon_env.command import debugging as debug_env

    return debug_env("--debug" in argv)


def _own_options(argv: Sequence[str]) -> tuple[str | None, bool, list[str]]:
    """``(--config's value, --print-config given, the rest)``: the flags of ``agon train`` that
    are no ``TrainConfig`` field (see :func:`_description`) out of ``argv``; the rest is tyro's."""
    preset, print_config, rest = None, False, []
    args = iter(argv)
    for arg in args:
        name, sep, value = arg.partition("=")
        if name == "--config":
            preset = value if sep else next(args, None)
            if not preset or preset.startswith("--"):
                raise ConfigError("--config: name a preset or a .yaml path, e.g. --config configs/x.yaml")
        elif arg == "--print-config":
            print_config = True
        elif arg != "--debug":  # read by debugging()
            rest.append(arg)
    return preset, print_config, rest


def parse_train_args(argv: Sequence[str]) -> tuple[ResolvedRun, bool]:
    """``(run, print_config)`` from ``agon train`` arguments; the config is validated and
    resolved once (:func:`~agon_env.algorithms.validation.resolve`).

    With ``--resume`` the flags go on top of the run folder's own config, not the defaults, so
    ``agon train --resume --out-dir D`` continues D as configured
    (:mod:`agon_env.algorithms.resume` refuses a flag that changes what the run is).

    ``--help`` and flag errors exit through tyro (``SystemExit``); a bad preset or value
    raises :class:`ConfigError`.
    """
    preset, print_config, rest = _own_options(argv)
    base = preset_config(preset) if preset else TrainConfig()
    args = [_expand(a) for a in rest]

    def parse(default: TrainConfig) -> TrainConfig:
        return tyro.cli(
            TrainConfig,
            args=args,
            default=default,
            prog="agon train",
            description=_description(),
            registry=_REGISTRY,
        )

    cfg = parse(base)
    if cfg.resume:
        stored = stored_base(cfg.run_dir)
        if stored is not None:
            if preset:
                raise ConfigError(
                    f"--config {preset} with --resume: {cfg.run_dir}/config.yaml is the run's config; "
                    "drop --config"
                )
            base = stored
            cfg = parse(base)
    kwargs_given = any(a.partition("=")[0] == "--env.kwargs" for a in args)
    cfg.env.kwargs = task_kwargs(base.env, cfg.env.id, cfg.env.kwargs if kwargs_given else None)
    cfg.temperatures = {**base.temperatures, **cfg.temperatures}
    cfg.model.chat_template_kwargs = {**base.model.chat_template_kwargs, **cfg.model.chat_template_kwargs}
    return resolve(cfg), print_config


def run_train(argv: Sequence[str]) -> int:
    """``agon train ARGV`` under the one command contract (:func:`agon_env.command.guarded`)."""
    from agon_env.command import exit_code, guarded

    try:
        return guarded("agon train", lambda: _train(argv), debugging(argv))
    except SystemExit as exc:  # --help, or a flag tyro refused (it printed why)
        return exit_code(exc)


def _train(argv: Sequence[str]) -> int:
    run, print_config = parse_train_args(argv)
    cfg = run.config
    if print_config:
        print(yaml.safe_dump(to_dict(cfg), sort_keys=False), end="")
        return 0
    # Only now the trainer: --help stays fast.
    from agon_env.algorithms.run import train

    try:
        train(run)
    except OSError as exc:  # a full disk, a folder turned read-only: one line, what is kept, what next
        from agon_env.algorithms.checkpoint import write_fault

        fault = write_fault(exc, cfg.run_dir)
        if fault is None:
            raise
        raise fault from exc
    except KeyboardInterrupt:
        if debugging(argv):
            raise
        print(f"agon train: {interrupted_message(cfg)}", file=sys.stderr)
        return 130  # the shell's code for SIGINT
    return 0


def interrupted_message(cfg: TrainConfig) -> str:
    """What Ctrl-C leaves behind, in one line: the last checkpoint and how to continue from it."""
    from agon_env.algorithms.checkpoint import checkpoint_step

    step = checkpoint_step(cfg.run_dir)
    if step is None:
        return f"interrupted before the first checkpoint; {cfg.run_dir} has nothing to resume from"
    return (
        f"interrupted; {cfg.run_dir} holds the checkpoint of step {step} of {cfg.steps}: "
        "the same command with --resume continues it"
    )


def main(argv: Sequence[str] | None = None) -> int:
    return run_train(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
