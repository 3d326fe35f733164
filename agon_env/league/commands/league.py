"""``agon league RUN [RUN ...]``: every snapshot of every adapter plays every other in both seats.

    agon league runs/agon-seed0                      # its snapshots and final adapters
    agon league runs/grpo-seed0 runs/agon-seed0      # across runs (one base model)
    agon league runs/agon-seed0 --pairs 12 --minutes 10 --problems 20 --threads 1
    agon league verify runs/agon-seed0/league/league.json

Each pairing is appended to ``pairings.jsonl`` in the league folder as it ends, so a killed
league run again plays only what it lacks (:mod:`agon_env.league.play`); league.json, league.md
and the pictures are then written from every finished pairing (:mod:`agon_env.league.report`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import tyro

from agon_env.command import CommandArgs, run_command
from agon_env.league.play import Arena, LeagueProgress, play_league
from agon_env.league.players import Contender, LeagueError, league_contenders, training_seats
from agon_env.run_folder import check_writable

LEAGUE = "league"
"""The league folder's name in the first run folder, when no ``--out`` is given."""


@dataclass
class LeagueOptions(CommandArgs):
    """What bounds a league and where it is written (``agon league`` and ``agon study league``)."""

    out: str | None = None
    """The league folder (default: ``<first RUN>/league``); a killed league continues there."""
    problems: int = 20
    """Held-out (test-split) problems every pairing plays."""
    pairs: int = 0
    """Play at most this many pairings (each pair of players in both seats; 0 = every one)."""
    minutes: float = 0.0
    """Start no pairing that would likely end past this many minutes (0 = no budget); the same
    command continues the league."""
    seed: int = 0
    """Draws the problems, the order of the pairs and every sampling seed."""
    device: str = "auto"
    """Where the base model runs (auto: CUDA when there is one)."""
    threads: int = 0
    """torch CPU threads (0 = torch's default); 1 is fastest on a busy machine."""
    quiet: bool = False
    """Print no progress."""


@dataclass
class LeagueArgs(LeagueOptions):
    """Cross-play between the snapshots of run folders (``agon train --snapshot-every K``): every
    player drafts for every other on the same held-out problems and sampling seeds; writes
    pairings.jsonl (resumable), league.json, league.md and the pictures."""

    runs: Annotated[list[str], tyro.conf.Positional, tyro.conf.arg(metavar="RUN ...")] = field(
        default_factory=list
    )
    """Run folders of one base model (their snapshots and final adapters play)."""


@dataclass
class StudyLeagueArgs(LeagueOptions):
    """Cross-play between the units of a study (its arms' runs, ``<arm>-seed<k>``), or of several
    studies of one base: every snapshot and final adapter of every unit plays every other."""

    studies: Annotated[list[str], tyro.conf.Positional, tyro.conf.arg(metavar="DIR ...")] = field(
        default_factory=list
    )
    """Study folders (``agon study run --out DIR``); the league goes to ``<first DIR>/league``."""


def unit_label(run: Path) -> str:
    """A run's label in the league: its folder's name."""
    return Path(run).resolve().name


def _identity(c: Contender, sampling: Any) -> str:
    from agon_env.agents.adapters import ADAPTER_WEIGHTS

    weights = hashlib.sha256((c.weights / ADAPTER_WEIGHTS).read_bytes()).hexdigest()[:16]
    cfg = c.run.config
    return json.dumps(
        {"model": cfg.model.name, "player": c.player.id, "weights": weights, "sampling": asdict(sampling)},
        sort_keys=True,
    )


def build_arena(contenders: Sequence[Contender], problems: int, seed: int, device: str) -> Arena:
    """The real players on one shared base, each with its run's sampling and prompts."""
    from agon_env.agents import HFBackend, LLMAgent
    from agon_env.evaluation.runs import PolicyLoader, run_task_kwargs, settings_for
    from agon_env.evaluation.splits import load_eval_data

    first = contenders[0].run.config
    data = load_eval_data(first.env.id, run_task_kwargs(first, first.env.id), "test", problems, 0, seed)
    loader = PolicyLoader(device)
    base = loader.shared_base(first.model.name, loader.dtype(first))

    def agent(c: Contender) -> LLMAgent:
        settings = settings_for(c.run, data.test.task)
        name = f"league:{c.player.id}"
        if name not in base.adapters:
            base.load(name, c.weights)
        return LLMAgent(
            name=c.player.adapter,
            base=base,
            adapter=name,
            backend=HFBackend(base),
            sampling=settings.sampling(c.player.adapter),
            prompts=settings.prompts,
            template_kwargs=settings.cfg.model.chat_template_kwargs,
        )

    def identity(c: Contender) -> str:
        return _identity(c, settings_for(c.run, data.test.task).sampling(c.player.adapter))

    return Arena(contenders, data, agent, identity, seed)


def play(
    runs: Sequence[tuple[str, Path]], args: LeagueOptions, out: Path, contenders: Sequence[Contender] = ()
) -> LeagueProgress:
    """The league of ``runs`` (``(label, folder)``) played into ``out`` as ``args`` bound it."""
    contenders = contenders or league_contenders(runs)
    check_writable(out, "--out")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    arena = build_arena(contenders, args.problems, args.seed, args.device)
    log = (lambda _m: None) if args.quiet else (lambda m: print(f"agon league: {m}", flush=True))
    players = [c.player for c in contenders]
    log(f"{len(players)} players, {len(arena.problems)} problems, into {out}")
    return play_league(
        players,
        arena.problems,
        arena.play,
        out,
        seed=args.seed,
        pairs=args.pairs,
        minutes=args.minutes,
        log=log,
    )


def report(
    out: Path,
    progress: LeagueProgress,
    args: LeagueOptions,
    runs: Sequence[tuple[str, Path]],
    contenders: Sequence[Contender],
) -> Path:
    """league.json, league.md and the pictures of every finished pairing (the ratings' module)."""
    from agon_env.league.report import TRAINING_SEATS, write_league

    meta = {
        "runs": {label: str(path) for label, path in runs},
        "problems": args.problems,
        "pairs": args.pairs,
        "complete": progress.left == 0,
        "pairings_left": progress.left,
        "command": "agon league",
        TRAINING_SEATS: training_seats(contenders),
    }
    return write_league(out, progress.pairings, meta=meta, seed=args.seed)


def run_league(args: LeagueArgs) -> int:
    if not args.runs:
        raise LeagueError("agon league: name at least one run folder (agon league RUN [RUN ...])")
    runs = [(unit_label(Path(r)), Path(r)) for r in args.runs]
    return _league(runs, args, Path(args.out) if args.out else Path(runs[0][1]) / LEAGUE)


STUDY_RUNS = "runs"
"""Where a study folder keeps its units' run folders (``DIR/runs/<arm>-seed<k>/``)."""


def study_runs(studies: Sequence[Path]) -> list[tuple[str, Path]]:
    """Every unit run of ``studies`` that holds a config, labelled ``<arm>-seed<k>`` (prefixed by its
    study's folder name when there are several studies, so two studies' units stay apart)."""
    found = []
    for study in studies:
        units = sorted(p for p in (Path(study) / STUDY_RUNS).glob("*") if (p / "config.yaml").is_file())
        if not units:
            raise LeagueError(f"agon study league: {study} holds no unit runs under {STUDY_RUNS}/")
        prefix = f"{Path(study).resolve().name}/" if len(studies) > 1 else ""
        found += [(f"{prefix}{u.name}", u) for u in units]
    return found


def run_study_league(args: StudyLeagueArgs) -> int:
    if not args.studies:
        raise LeagueError("agon study league: name a study folder (agon study league DIR [DIR ...])")
    studies = [Path(s) for s in args.studies]
    return _league(study_runs(studies), args, Path(args.out) if args.out else studies[0] / LEAGUE)


def _league(runs: Sequence[tuple[str, Path]], args: LeagueOptions, out: Path) -> int:
    contenders = league_contenders(runs)
    progress = play(runs, args, out, contenders)
    path = report(out, progress, args, runs, contenders)
    if not args.quiet:
        left = f"; {progress.left} pairings left: the same command continues" if progress.left else ""
        print(f"agon league: {len(progress.pairings)} pairings in {path}{left}")
    return 0


@dataclass
class VerifyArgs(CommandArgs):
    """Recompute every figure of a league.json from the pairings it holds."""

    file: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="FILE")] = ""
    """The league.json to check."""


def run_verify(args: VerifyArgs) -> int:
    from agon_env.league.report import verify_league

    problems = verify_league(Path(args.file))
    for problem in problems:
        print(f"agon league verify: {problem}")
    if not problems:
        print(f"agon league verify: {args.file}: every figure recomputes")
    return 1 if problems else 0


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if argv[:1] == ["verify"]:
        return run_command(VerifyArgs, argv[1:], "agon league verify", run_verify)
    return run_command(LeagueArgs, argv, "agon league", run_league)
