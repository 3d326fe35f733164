"""``agon answer RUN "question"``: the trained pair answers (``--show``: both stages).

``agon answer RUN --file in.jsonl --out out.jsonl`` answers a file of questions in batches, one
JSON line per question (:meth:`agon_env.serving.cascade.CascadeAnswer.to_dict`), appended as each
batch finishes. It is resumable: questions whose id is already in ``--out`` are skipped, so a
killed run picks up where it stopped (a line cut off by the kill is dropped and answered again).
An input line is ``{"id": ..., "question": ..., "answer": ...}``: ``id`` defaults to the line
number, ``answer`` (optional) is a reference the run's task scores the final answer against.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import tyro

from agon_env.command import CommandArgs, run_command
from agon_env.run_folder import append_lines, check_file_writable
from agon_env.serving.errors import AnswerFileError


@dataclass
class PairArgs(CommandArgs):
    """How to load a run's pair (shared by ``agon answer`` and ``agon serve``)."""

    run: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN")] = ""
    """A run folder written by ``agon train``."""
    direction: str | None = None
    """``DRAFTER>CHALLENGER`` (e.g. ``agent_b>agent_a``); None: the direction ``agon eval`` chose on
    validation, read from ``--eval-report``."""
    eval_report: str | None = None
    """The ``eval.json`` that records the chosen direction (None: ``RUN/eval/eval.json``)."""
    device: str | None = None
    """``cpu`` or ``cuda`` (None: ``auto``, CUDA when this machine has it, as training and
    ``agon eval`` read it)."""
    backend: Annotated[str, tyro.conf.arg(aliases=("--engine",))] = "auto"
    """``hf`` (transformers, in-process), ``vllm`` (one vLLM engine, both adapters as LoRA modules)
    or ``auto`` (vLLM when it is installed and the model is a folder or Hub id, else hf): the table
    ``agon train --model.backend`` and ``agon eval --backend`` name (``--engine``: the old name)."""
    early_stop: bool = True
    """Stop each draft at ``</summary>`` when the run's channel shows only the summary
    (``--no-early-stop``: draft to the end, as training did; the challenger reads the same text)."""
    seed: int = 0
    """Seeds every question's sampling (a question's answer depends on it and the question only)."""
    threads: int = 0
    """torch CPU threads for generation (0: torch's default, one per core). On a machine others
    share, 1 is often faster than the default: threads that wait for a busy core stall the rest."""

    def cascade(self, continuous: bool = False) -> Any:
        """The run's pair as asked (``continuous``: a server's, :meth:`Cascade.from_run`)."""
        from agon_env.serving.cascade import Cascade

        if not self.run:
            raise AnswerFileError("give a run folder: agon COMMAND RUN ...")
        if self.threads < 0:
            raise AnswerFileError(f"--threads {self.threads}: give 0 (torch's default) or more")
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        return Cascade.from_run(
            self.run,
            direction=self.direction,
            eval_report=self.eval_report,
            device=self.device,
            engine=self.backend,
            early_stop=self.early_stop,
            seed=self.seed,
            continuous=continuous,
        )


@dataclass
class AnswerArgs(PairArgs):
    """``agon answer``: the trained pair answers a question, or a JSONL file of them."""

    question: Annotated[str | None, tyro.conf.Positional, tyro.conf.arg(metavar="QUESTION")] = None
    """The question (omit it with ``--file``)."""
    show: bool = False
    """Print both stages: the draft, what the challenger was shown, and its completion."""
    file: str | None = None
    """A JSONL file of questions (``{"id", "question", "answer"?}`` per line)."""
    out: str | None = None
    """With ``--file``: where the answers go (JSONL, appended; ids already there are skipped)."""
    batch_size: int = 16
    """With ``--file``: questions per batched call (each stage samples a whole batch at once)."""


def read_questions(path: Path) -> list[dict[str, Any]]:
    """The questions of a JSONL file, each with a string ``id`` (its line number when it has none)."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("question"), str):
            raise AnswerFileError(f'{path} line {n}: not a JSON object with a "question" string')
        rows.append({**row, "id": str(row.get("id", n))})
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})[:3]
        raise AnswerFileError(f"{path}: ids occur twice ({', '.join(twice)}); resuming needs unique ids")
    return rows


def answered_ids(path: Path) -> set[str]:
    """Ids already in ``path``; a last line cut off by a kill is removed so appending stays valid."""
    if not path.is_file():
        return set()
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        os.truncate(path, len(text.encode("utf-8")))  # in place: a kill now loses no whole line
    done = set()
    for n, line in enumerate(text.splitlines(), 1):
        try:
            done.add(str(json.loads(line)["id"]))
        except (json.JSONDecodeError, KeyError, TypeError):
            raise AnswerFileError(f"{path} line {n}: not an answer line; choose another --out") from None
    return done


def answer_file(cascade: Any, source: Path, out: Path, batch_size: int, quiet: bool = False) -> int:
    """Answer ``source``'s questions not yet in ``out``, appending each batch; returns how many."""
    from tqdm import tqdm

    if batch_size < 1:
        raise AnswerFileError(f"--batch-size {batch_size}: a batch holds at least one question")
    rows = read_questions(source)
    done = answered_ids(out)
    todo = [r for r in rows if r["id"] not in done]
    for r in todo:
        cascade.check(r["question"])  # refuse a bad line before any work, not mid-file
    out.parent.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=len(rows), initial=len(rows) - len(todo), unit="q", disable=quiet, file=sys.stderr)
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        answers = cascade.answer_many(
            [r["question"] for r in batch],
            ids=[r["id"] for r in batch],
            references=[r.get("answer") for r in batch],
        )
        # Whole lines or none: a full disk takes the batch back and names the file.
        append_lines(out, [json.dumps(a.to_dict()) for a in answers])
        bar.update(len(batch))
    bar.close()
    return len(todo)


def _show(a: Any) -> str:
    return (
        f"--- draft ({a.draft.adapter}, {a.draft.completion_tokens} tokens, {a.draft.seconds:.2f}s)\n"
        f"{a.draft.completion}\n"
        f"--- the challenger read\n{a.challenger_text}\n"
        f"--- challenge ({a.challenge.adapter}, {a.challenge.completion_tokens} tokens, "
        f"{a.challenge.seconds:.2f}s)\n{a.challenge.completion}\n--- answer\n{a.answer}"
    )


def run(args: AnswerArgs) -> int:
    if (args.question is None) == (args.file is None):
        raise AnswerFileError("give a QUESTION or --file in.jsonl (one of them)")
    if args.file is not None:
        if args.out is None:
            raise AnswerFileError("--file needs --out (where the answers are appended)")
        source = Path(args.file)
        if not source.is_file():
            raise AnswerFileError(f"--file {source}: no such file")
        check_file_writable(args.out, "--out")  # before any model loads or any question is answered
        cascade = args.cascade()
        n = answer_file(cascade, source, Path(args.out), args.batch_size)
        print(f"answered {n} question(s); {args.out}")
        return 0
    cascade = args.cascade()
    cascade.check(args.question)
    a = cascade.answer(args.question)
    print(_show(a) if args.show else (a.answer if a.answer is not None else a.challenge.completion))
    return 0


def main(argv: Sequence[str]) -> int:
    """``agon answer ARGV``."""
    return run_command(AnswerArgs, argv, "agon answer", run)
