"""``agon train``: every config leaf becomes a flag, with its field docstring as help.

    agon train                                   # the embedded default (SmolLM2 + arith)
    agon train --algo coop --lr 1e-4 --steps 50
    agon train --config configs/paper-qwen3-0.6b-deepmath.yaml
    agon train --out-dir runs/x --resume         # continue a killed run
    agon train --set env.kwargs.difficulty=3     # any dotted key

Also runnable as ``python -m agon_env.algorithms.cli_train``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from agon_env.algorithms.config import (
    ALIASES,
    ConfigError,
    leaf_fields,
    load_config,
    preset_names,
    short_names,
)

_DEST = "cfg:"


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


def add_train_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from agon_env.algorithms.registry import algorithm_names, get_algorithm

    algos = "; ".join(f"{n}: {get_algorithm(n).summary}" for n in algorithm_names())
    p = subparsers.add_parser(
        "train",
        help="train adapters with an algorithm plugin (GRPO, agon, ...)",
        description=f"Train LoRA adapters in the draft-and-challenge env. Algorithms -- {algos}.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    presets = ", ".join(preset_names())
    p.add_argument("--config", default="default", help=f"preset name or YAML path ({presets})")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override any dotted key")
    p.add_argument("--print-config", action="store_true", help="print the resolved config as YAML and exit")
    aliases: dict[str, list[str]] = {}
    for short, key in short_names().items():
        aliases.setdefault(key, []).append(short)
    for alias, key in ALIASES.items():
        aliases.setdefault(key, []).append(alias)
    fields = leaf_fields()
    for alias, key in ALIASES.items():
        if key not in fields:  # a dict entry such as env.kwargs.difficulty
            kw = {"dest": _DEST + key, "default": argparse.SUPPRESS, "metavar": "VALUE"}
            p.add_argument(f"--{alias}", help=f"shorthand for --set {key}=VALUE", **kw)
    for key, (tp, doc) in fields.items():
        short = [n.replace("_", "-") for n in sorted(aliases.get(key, []), key=len)]
        flags = list(dict.fromkeys([*(f"--{n}" for n in short), f"--{key.replace('_', '-')}", f"--{key}"]))
        kw: dict[str, Any] = {"dest": _DEST + key, "default": argparse.SUPPRESS, "help": doc}
        if tp is bool:
            kw.update(nargs="?", const="true", metavar="BOOL")
        else:
            kw.update(metavar=_type_name(tp).upper().split("[")[0])
        p.add_argument(*flags, **kw)
    p.set_defaults(func=run_train)
    return p


def config_from_args(args: argparse.Namespace) -> Any:
    overrides: dict[str, Any] = {k[len(_DEST) :]: v for k, v in vars(args).items() if k.startswith(_DEST)}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: write it as KEY=VALUE, e.g. --set env.kwargs.difficulty=3")
        overrides[key.strip()] = value
    return load_config(args.config, overrides)


def run_train(args: argparse.Namespace) -> int:
    try:
        cfg = config_from_args(args)
    except (ConfigError, ValueError) as exc:
        print(f"agon train: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        import yaml

        from agon_env.algorithms.config import to_dict

        print(yaml.safe_dump(to_dict(cfg), sort_keys=False), end="")
        return 0
    from agon_env.algorithms.checkpoint import RunFolderError
    from agon_env.algorithms.run import train

    try:
        train(cfg)
    except (RunFolderError, ConfigError) as exc:
        print(f"agon train: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agon")
    add_train_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["train", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
