"""league.json, league.md and the pictures: the one module that writes a league and reads it back.

:func:`write_league` derives every figure from the pairings' outcomes
(:func:`agon_env.league.ratings.league_figures`) and writes them as one document,
:class:`LeagueDocument` (players, problems, each pairing's outcomes, the figures, ``meta`` and a
format version); league.md and the two pictures are drawn from that document alone.
:func:`verify_league` reads it back, recomputes every figure from its outcomes with its seed, and
names each one that disagrees.

``meta["training_seats"]`` (``{"run:adapter": "drafter" | "challenger" | "both"}``) says the seat
each adapter trained in, for the swapped-seat check; an adapter absent from it is not checked.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agon_env.evaluation.report import clean, write_text_atomic
from agon_env.league.errors import LeagueFileError
from agon_env.league.games import Outcome, Pairing, Player
from agon_env.league.pictures import MATRIX_PNG, RATINGS_PNG, draw_matrix, draw_ratings
from agon_env.league.ratings import BOTH, WINS, league_figures
from agon_env.vocabulary import ROLES

LEAGUE_VERSION = 1
LEAGUE_JSON = "league.json"
LEAGUE_MD = "league.md"
TRAINING_SEATS = "training_seats"
"""The key of ``meta`` that maps ``run:adapter`` to the seat it trained in."""


def training_seats(meta: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """``meta["training_seats"]`` keyed by ``(run, adapter)`` (the run: all before the last ``:``)."""
    seats = meta.get(TRAINING_SEATS) or {}
    wrong = sorted(
        f"{key}: {seat!r}" for key, seat in seats.items() if seat not in (*ROLES, BOTH) or ":" not in key
    )
    if wrong:
        raise ValueError(
            f"{TRAINING_SEATS} maps run:adapter to one of {(*ROLES, BOTH)}, not {', '.join(wrong)}"
        )
    return {tuple(key.rsplit(":", 1)): str(seat) for key, seat in seats.items()}  # type: ignore[misc]


def _outcome(value: Any) -> Outcome:
    if value is None or isinstance(value, bool):
        return value
    raise LeagueFileError(f"an outcome must be true, false or null, got {value!r}")


@dataclass(frozen=True)
class LeagueDocument:
    """A league as league.json holds it."""

    version: int
    seed: int
    meta: Mapping[str, Any]
    players: tuple[Player, ...]
    problems: tuple[str, ...]
    pairings: tuple[Pairing, ...]
    figures: Mapping[str, Any]
    """The derived figures as written (:meth:`agon_env.league.ratings.LeagueFigures.to_dict`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "seed": self.seed,
            "meta": clean(dict(self.meta)),
            "players": [{"id": p.id, **p.to_record()} for p in self.players],
            "problems": list(self.problems),
            "pairings": [
                {
                    "drafter": p.drafter.id,
                    "challenger": p.challenger.id,
                    "draft_correct": list(p.draft_correct),
                    "final_correct": list(p.final_correct),
                }
                for p in self.pairings
            ],
            "figures": clean(dict(self.figures)),
        }

    @classmethod
    def from_json(cls, doc: Any, where: str = "document") -> LeagueDocument:
        """The document from its JSON; :class:`LeagueFileError` naming ``where`` when it is not one."""
        try:
            if not isinstance(doc, Mapping) or doc.get("version") != LEAGUE_VERSION:
                raise LeagueFileError("no league version")
            players = tuple(Player.from_record(p) for p in doc["players"])
            by_id = {p.id: p for p in players}
            problems = tuple(str(q) for q in doc["problems"])
            pairings = tuple(
                Pairing(
                    by_id[p["drafter"]],
                    by_id[p["challenger"]],
                    problems,
                    tuple(_outcome(o) for o in p["draft_correct"]),
                    tuple(_outcome(o) for o in p["final_correct"]),
                )
                for p in doc["pairings"]
            )
            return cls(
                int(doc["version"]),
                int(doc["seed"]),
                doc.get("meta") or {},
                players,
                problems,
                pairings,
                doc["figures"],
            )
        except (KeyError, TypeError, ValueError) as e:
            raise LeagueFileError(f"{where}: not a league written by `agon league` ({e})") from None


def league_document(pairings: Sequence[Pairing], *, meta: Mapping[str, Any], seed: int = 0) -> LeagueDocument:
    """The document of ``pairings``: its figures derived here, from the outcomes alone."""
    figures = league_figures(pairings, training_seats(meta), seed=seed)
    players = tuple(sorted({p.drafter for p in pairings} | {p.challenger for p in pairings}))
    return LeagueDocument(
        LEAGUE_VERSION, seed, meta, players, pairings[0].problems, tuple(pairings), figures.to_dict()
    )


def read_league(path: str | Path) -> LeagueDocument:
    """The league at ``path`` (league.json, or the folder holding it)."""
    path = Path(path)
    path = path / LEAGUE_JSON if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no league (agon league writes {LEAGUE_JSON})")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise LeagueFileError(f"{path}: not a league written by `agon league`") from None
    return LeagueDocument.from_json(doc, str(path))


def write_league(out: Path, pairings: Sequence[Pairing], *, meta: Mapping[str, Any], seed: int = 0) -> Path:
    """league.json, league.md, league_matrix.png and league_ratings.png in the folder ``out``;
    returns league.json's path (written last and whole: its presence means the league is done)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = league_document(pairings, meta=meta, seed=seed)
    record = doc.to_json()
    draw_matrix(out / MATRIX_PNG, doc.players, record["figures"]["pairings"])
    draw_ratings(out / RATINGS_PNG, doc.players, record["figures"]["ratings"])
    write_text_atomic(out / LEAGUE_MD, render_league(record))
    path = out / LEAGUE_JSON
    write_text_atomic(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return path


def _differences(written: Any, recomputed: Any, where: str) -> list[str]:
    if isinstance(written, Mapping) and isinstance(recomputed, Mapping):
        keys = sorted(set(written) | set(recomputed))
        return [d for k in keys for d in _differences(written.get(k), recomputed.get(k), f"{where}.{k}")]
    if isinstance(written, list) and isinstance(recomputed, list) and len(written) == len(recomputed):
        return [
            d
            for i, (a, b) in enumerate(zip(written, recomputed, strict=True))
            for d in _differences(a, b, f"{where}[{i}]")
        ]
    numbers = (int, float)
    if isinstance(written, numbers) and isinstance(recomputed, numbers) and not isinstance(written, bool):
        if math.isclose(written, recomputed, rel_tol=1e-9, abs_tol=1e-9):
            return []
    elif written == recomputed:
        return []
    return [f"{where}: file has {json.dumps(written)}, the outcomes give {json.dumps(recomputed)}"]


def verify_league(path: Path) -> list[str]:
    """Every figure of the league at ``path`` recomputed from its outcomes (and league.md re-rendered
    beside it): one line per disagreement, naming the figure; an empty list means it verifies."""
    doc = read_league(path)
    path = Path(path)
    path = path / LEAGUE_JSON if path.is_dir() else path
    again = league_document(doc.pairings, meta=doc.meta, seed=doc.seed).to_json()
    found = _differences(clean(dict(doc.figures)), again["figures"], "figures")
    md = path.with_name(LEAGUE_MD)
    if md.is_file() and md.read_text(encoding="utf-8") != render_league(doc.to_json()):
        found.append(f"{md.name}: not the rendering of {path.name}")
    return found


def _pct(rate: Mapping[str, Any] | None) -> str:
    if not rate or rate.get("rate") is None:
        return "–"
    counts = f"({rate['successes']}/{rate['trials']})"
    return f"{100 * rate['rate']:.1f} [{100 * rate['low']:.1f}, {100 * rate['high']:.1f}] {counts}"


def _points(r: Mapping[str, Any] | None) -> str:
    return "–" if not r else f"{r['rating']:+.0f} [{r['low']:+.0f}, {r['high']:+.0f}]"


def _gain(gain: Mapping[str, Any] | None) -> str:
    if gain is None:
        return "–"
    return f"{100 * gain['mean']:+.1f} [{100 * gain['low']:+.1f}, {100 * gain['high']:+.1f}]"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _matrix(record: Mapping[str, Any]) -> list[str]:
    cells = {(p["drafter"], p["challenger"]): p["accuracy"] for p in record["figures"]["pairings"]}
    ids = [p["id"] for p in record["players"]]
    drafters = [i for i in ids if any(d == i for d, _ in cells)]
    challengers = [i for i in ids if any(c == i for _, c in cells)]
    rows = [
        [
            d,
            *(
                "–"
                if (d, c) not in cells or cells[(d, c)]["rate"] is None
                else f"{100 * cells[(d, c)]['rate']:.0f}"
                for c in challengers
            ),
        ]
        for d in drafters
    ]
    return _table(["drafter \\ challenger", *challengers], rows)


def render_league(record: Mapping[str, Any]) -> str:
    """league.md from league.json's document alone (so verify can re-render it)."""
    fig = record["figures"]
    unjudged = sum(p["accuracy"]["unjudged"] for p in fig["pairings"])
    lines = [
        "# League",
        "",
        f"{len(record['players'])} players (run:adapter@step), {len(record['pairings'])} pairings, "
        f"{len(record['problems'])} held-out problems, seed {record['seed']}. Every figure recomputes from "
        f"league.json's outcomes: `agon league verify`. Unjudged answers ({unjudged} of the cascade's) "
        "are left out of every rate and game and counted, never wrong.",
        "",
        "## Cross-play matrix",
        "",
        "The cascade's accuracy (%) for each drafter (row) under each challenger (column): a row says how "
        "good a drafter's drafts are whoever reads them, a column how good a reader a challenger is "
        f"whoever drafts. Drawn in {MATRIX_PNG}.",
        "",
        *_matrix(record),
        "",
        "## Pairings",
        "",
        "Accuracy with its exact 95 % interval (right/judged); conversion is the challenger right where the "
        "draft was wrong, corruption the challenger wrong where the draft was right; the gain is cascade − "
        "draft, paired by problem (bootstrap over problems).",
        "",
        *_table(
            ["drafter", "challenger", "draft %", "cascade %", "conversion %", "corruption %", "gain (pp)"],
            [
                [
                    p["drafter"],
                    p["challenger"],
                    _pct(p["draft_accuracy"]),
                    _pct(p["accuracy"]),
                    _pct(p["conversion"]),
                    _pct(p["corruption"]),
                    _gain(p["gain"]),
                ]
                for p in fig["pairings"]
            ],
        ),
        "",
        "## Ratings",
        "",
        "Bradley–Terry ratings fitted by maximum likelihood, in Elo points (a difference of 400 is 10:1 odds "
        "of a win; 0 is a virtual player each player met once in each outcome), with 95 % bootstrap "
        f"intervals over problems. Drawn over training steps in {RATINGS_PNG}.",
    ]
    for seat in ROLES:
        rows = [[r["player"], _points(r), str(r["games"])] for r in fig["ratings"].get(seat, [])]
        lines += ["", f"As {seat} — a win is {WINS[seat]}:", "", *_table(["player", "rating", "games"], rows)]
    lines += [
        "",
        "## Swapped seats",
        "",
        "Each player of an adapter that trained in one seat, rated in both; the gap is its rating in the "
        "seat it did not train in minus the mean rating there of the players that trained there (below 0: "
        "swapping the roles costs).",
        "",
    ]
    swapped = fig["swapped_seats"]
    if swapped:
        lines += _table(
            ["player", "trained as", "rating there", "rating in the other seat", "gap"],
            [
                [
                    s["player"],
                    s["trained"],
                    _points(s["trained_rating"]),
                    _points(s["other_rating"]),
                    "–" if s["gap"] is None else _points({"rating": s["gap"]["mean"], **s["gap"]}),
                ]
                for s in swapped
            ],
        )
    else:
        lines.append(f"No adapter trained in one seat only (meta's `{TRAINING_SEATS}`): nothing to swap.")
    lines += [
        "",
        "## Transitivity",
        "",
        "A triple of players is cyclic when its head-to-head majorities run in a circle (A beats B beats C "
        "beats A): no rating can order it. The share is over the triples decided in all three pairs; the "
        "baseline is the share when every game is a coin flip, with the same games per pair.",
        "",
    ]
    for seat in ROLES:
        t = fig["transitivity"][seat]
        share = "–" if t["share"] is None else f"{100 * t['share']:.0f} %"
        base = "–" if t["baseline"] is None else f"{100 * t['baseline']:.0f} %"
        counts = f"{t['cyclic']} of {t['decided']} triples cyclic ({share}; random: {base})"
        lines.append(f"- as {seat}: {counts}: {t['verdict']}.")
    meta = record.get("meta") or {}
    if meta:
        lines += ["", "## Meta", "", "```json", json.dumps(meta, indent=1, ensure_ascii=False), "```"]
    return "\n".join(lines) + "\n"
