"""``agon export RUN --out DIR``: the command over :func:`agon_env.serving.export.export` (what it
writes is that module's docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import tyro

from agon_env.command import CommandArgs, run_command
from agon_env.serving.errors import ExportError
from agon_env.serving.export import export


@dataclass
class ExportArgs(CommandArgs):
    """``agon export``: a run's adapters for plain peft and vLLM, with a model card."""

    run: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN")] = ""
    """A run folder written by ``agon train`` (its ``adapters/`` are exported)."""
    out: str = "export"
    """The folder to write (``OUT/<adapter>/`` and ``OUT/README.md``); refused when it holds files."""
    base_model: str | None = None
    """Where the base loads from, in the adapters' ``base_model_name_or_path`` and the card (None:
    the adapters name the Hub id of the run's model, else the folder it resolved to; the card's
    snippet loads the folder it resolved to on this machine, offline)."""
    eval_report: str | None = None
    """An ``eval.json`` whose figures and cascade direction the card reports
    (None: ``RUN/eval/eval.json``)."""
    push_to_hub: str | None = None
    """``OWNER/NAME``: upload the folder to the Hugging Face Hub afterwards (needs network and a token)."""


def run(args: ExportArgs) -> int:
    if not args.run:
        raise ExportError("give a run folder: agon export RUN --out DIR")
    out = export(args.run, args.out, args.base_model, args.eval_report)
    print(f"exported {', '.join(sorted(p.name for p in out.iterdir() if p.is_dir()))} to {out}")
    if args.push_to_hub:
        from huggingface_hub import create_repo, upload_folder

        create_repo(args.push_to_hub, repo_type="model", exist_ok=True)
        upload_folder(folder_path=str(out), repo_id=args.push_to_hub, repo_type="model")
        print(f"pushed to https://huggingface.co/{args.push_to_hub}")
    return 0


def main(argv: Sequence[str]) -> int:
    """``agon export ARGV``."""
    return run_command(ExportArgs, argv, "agon export", run)
