"""The ``agon`` command line: ``agon envs``, ``agon episode``, ``agon train`` and friends.

Each subcommand lives next to the code it drives as a ``main(argv) -> int`` over a
dataclass parsed by tyro (its ``--help`` shows every field's docstring and default);
:data:`COMMANDS` maps a name to that function by its import path, so a new command is one
row and heavy imports (torch, transformers, matplotlib) happen only when that command runs.
What the commands share (common options, one-line errors, exit codes) is
:mod:`agon_env.command`, below this table: no command module imports this one back.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from agon_env.command import dispatch, table_usage

COMMANDS = {
    "envs": ("agon_env.commands.envs:envs_main", "list the registered env ids"),
    "episode": (
        "agon_env.commands.envs:episode_main",
        "play one scripted episode: a wrong draft, a right challenge",
    ),
    "train": (
        "agon_env.algorithms.commands.train:main",
        "train adapters with an algorithm plugin (GRPO, agon, ...)",
    ),
    "eval": (
        "agon_env.evaluation.commands.eval:eval_main",
        "evaluate run folders or the untrained base: pass@1 with intervals, baselines, blind spots",
    ),
    "plot": (
        "agon_env.evaluation.commands.eval:plot_main",
        "figures from run folders and eval reports (PNG)",
    ),
    "probe": (
        "agon_env.evaluation.commands.probe:run_probe_cli",
        "will a rival help here? solve vs verify rates and the cascade gap, before training",
    ),
    "study": (
        "agon_env.study.commands.study:main",
        "an ablation across arms and seeds: register, run, report, ... (agon study --help lists them)",
    ),
    "league": (
        "agon_env.league.commands.league:main",
        "cross-play between snapshots: every adapter at every step in both seats, rated (verify: recompute)",
    ),
    "answer": ("agon_env.serving.commands.answer:main", "the trained pair answers: draft, then challenge"),
    "serve": ("agon_env.serving.commands.serve:main", "serve a run's pair behind an OpenAI-compatible API"),
    "export": (
        "agon_env.serving.commands.export:main",
        "write a run's adapters for plain peft / vLLM, with a model card",
    ),
}
"""Subcommand -> (``module:function`` taking the remaining arguments, one-line help)."""


def usage() -> str:
    return table_usage("agon", __doc__.splitlines()[0], COMMANDS)


def _start(name: str, rest: list[str]) -> int:
    module, _, attr = COMMANDS[name][0].partition(":")
    try:
        command = getattr(importlib.import_module(module), attr)
    except ImportError as exc:  # an optional layer is not installed
        print(f"agon {name}: not available in this installation ({exc})", file=sys.stderr)
        return 2
    return int(command(rest) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch("agon", sys.argv[1:] if argv is None else argv, COMMANDS, usage(), _start)


if __name__ == "__main__":
    sys.exit(main())
