"""The run folder ``agon train`` writes: every file name in it, spelled once, and its config read back.

::

    runs/agon-seed0/
      config.yaml          the validated TrainConfig (written before the first step)
      resolved.yaml        what it resolved to: seats, env keywords, channel, per-policy
                           sampling, device (agon_env.resolved; written with config.yaml)
      metrics.jsonl        one JSON line per step (names: agon_env.metric_names)
      samples.jsonl        a few rendered prompts and completions per role per step
      tb/                  TensorBoard events (--report-to tensorboard, the default)
      wandb/               the wandb run's local files (--report-to wandb)
      checkpoint.pt        everything --resume needs (rewritten every save_every steps)
      adapters/<name>/     each trained adapter as a peft folder (written after the last step;
                           its files are agon_env.agents.adapters', which writes them)
      snapshots/step-000010/<name>/
                           each adapter's weights at that step (--snapshot-every K), a peft
                           folder like adapters/<name>/, for ``agon league``
      curves.png           reward, accuracy and format per step (after the last step)
      heldout.json         the end-of-run held-out check
      eval/                where ``agon eval RUN`` writes eval.json and eval.md by default

Training writes it and evaluation reads it; both ask here for the names, so neither
imports the other to learn them, and :func:`read_metrics` is the one reader of
``metrics.jsonl``. Torch-free: only the checkpoint's *contents* need torch.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from agon_env.config import ConfigError, TrainConfig, from_dict, import_modules, read_yaml, to_dict
from agon_env.errors import RunFolderError
from agon_env.json_value import JSONRecord
from agon_env.resolved import ResolvedRun, from_record, settle, to_record
from agon_env.upgrade import upgrade_config

CONFIG = "config.yaml"
RESOLVED = "resolved.yaml"
METRICS = "metrics.jsonl"
SAMPLES = "samples.jsonl"
TENSORBOARD = "tb"
CHECKPOINT = "checkpoint.pt"
ADAPTERS = "adapters"
SNAPSHOTS = "snapshots"
SNAPSHOT_STEP = "step-{:06d}"
"""One snapshot's folder under ``snapshots/``: the step, zero-padded so names sort as steps do."""
EXPORT_MARKER = "agon_export.json"
"""Written by ``agon export``: the folder is a run (its config, resolved run and reports) whose
adapters lie at its top level (``DIR/agent_a/``), so ``agon answer`` and ``agon serve`` take it."""
CURVES = "curves.png"
HELDOUT = "heldout.json"
EVAL = "eval"
"""The folder ``agon eval RUN`` writes its report to when no ``--out`` is given."""
EVAL_REPORT = "eval.json"
"""The machine-readable report ``agon eval`` writes (``agon plot`` reads it back)."""


@dataclass(frozen=True)
class RunFolder:
    """The paths of one run folder (nothing is read or created by building one)."""

    path: Path
    """The folder itself (``TrainConfig.run_dir``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def resolved(self) -> Path:
        return self.path / RESOLVED

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def samples(self) -> Path:
        return self.path / SAMPLES

    @property
    def tensorboard(self) -> Path:
        return self.path / TENSORBOARD

    @property
    def checkpoint(self) -> Path:
        return self.path / CHECKPOINT

    @property
    def adapters(self) -> Path:
        """``adapters/``; an export's top level (:data:`EXPORT_MARKER`), where plain peft and vLLM
        expect each adapter's folder."""
        return self.path if (self.path / EXPORT_MARKER).is_file() else self.path / ADAPTERS

    @property
    def run_name(self) -> str:
        """The run's name: the folder's, or for an export (:data:`EXPORT_MARKER`) the run it was
        exported from, so the model ids ``agon serve`` gives clients survive an export."""
        marker = self.path / EXPORT_MARKER
        if marker.is_file():
            try:
                name = json.loads(marker.read_text()).get("run")
            except (OSError, ValueError, AttributeError):
                name = None
            if isinstance(name, str) and name:
                return name
        return self.path.resolve().name

    def adapter(self, name: str) -> Path:
        """The peft folder of adapter ``name``."""
        return self.adapters / name

    @property
    def snapshots(self) -> Path:
        return self.path / SNAPSHOTS

    def snapshot_dir(self, step: int) -> Path:
        """The folder of the snapshots of ``step``: one peft folder per adapter."""
        return self.snapshots / SNAPSHOT_STEP.format(step)

    def snapshot(self, step: int, name: str) -> Path:
        """The peft folder of adapter ``name`` as it was after ``step`` steps."""
        return self.snapshot_dir(step) / name

    def snapshot_adapters(self, step: int) -> list[str]:
        """The adapters whose snapshot of ``step`` is written, by name (not the hidden temporary
        folder of a write cut short)."""
        folder = self.snapshot_dir(step)
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))

    def snapshot_steps(self) -> list[int]:
        """The steps the folder holds snapshots of, in order (one whose folder holds no adapter
        yet -- only the hidden temporary folder of a write cut short -- is not listed)."""
        if not self.snapshots.is_dir():
            return []
        steps = (snapshot_step(p.name) for p in self.snapshots.iterdir())
        return sorted(s for s in steps if s is not None and self.snapshot_adapters(s))

    @property
    def curves(self) -> Path:
        return self.path / CURVES

    @property
    def heldout(self) -> Path:
        return self.path / HELDOUT

    @property
    def eval_dir(self) -> Path:
        return self.path / EVAL

    @property
    def eval_report(self) -> Path:
        """``eval/eval.json``: the report of ``agon eval RUN`` with the default ``--out``."""
        return self.eval_dir / EVAL_REPORT


def snapshot_step(name: str) -> int | None:
    """The step of a snapshot folder's ``name`` (``step-000010`` -> 10); None for any other name."""
    head, _, digits = name.partition("-")
    if head != "step" or not digits.isdigit() or SNAPSHOT_STEP.format(int(digits)) != name:
        return None
    return int(digits)


def load_run_config(run_dir: str | Path) -> TrainConfig:
    """The config ``agon train`` wrote to ``<run_dir>/config.yaml``, its ``imports`` imported.

    Raises :class:`RunFolderError` when ``run_dir`` is no folder, :class:`ConfigError` (one
    line) when its ``config.yaml`` is missing or does not read back."""
    folder = RunFolder(Path(run_dir))
    if not folder.path.is_dir():
        raise RunFolderError(f"{run_dir}: no such run folder")
    if not folder.config.is_file():
        raise ConfigError(
            f"{folder.config}: no such file; is {run_dir} a run folder written by `agon train`?"
        )
    try:
        cfg = from_dict(upgrade_config(read_yaml(folder.config, "run config")))
    except ConfigError as exc:
        raise ConfigError(f"{folder.config}: {exc}") from None
    import_modules(cfg)
    return cfg


def write_resolved(run_dir: str | Path, run: ResolvedRun) -> None:
    """Write ``config.yaml`` and ``resolved.yaml``: what the run was asked to be and what it is."""
    folder = RunFolder(Path(run_dir))
    folder.config.write_text(yaml.safe_dump(to_dict(run.config), sort_keys=False))
    folder.resolved.write_text(yaml.safe_dump(to_record(run), sort_keys=False))


def load_resolved(run_dir: str | Path) -> ResolvedRun:
    """The run a folder holds, as training resolved it (``resolved.yaml`` over ``config.yaml``).

    A folder written before ``resolved.yaml`` existed is settled from its config alone, as
    :func:`agon_env.resolved.settle` does for training, but without the algorithm's fields:
    its adapters are then the folder's own, and its mode and reward scheme the env's
    defaults (evaluation reads neither)."""
    cfg = load_run_config(run_dir)
    folder = RunFolder(Path(run_dir))
    if not folder.resolved.is_file():
        return settle(cfg)
    try:
        return from_record(cfg, read_yaml(folder.resolved, "resolved run"))
    except ConfigError as exc:
        raise ConfigError(f"{folder.resolved}: {exc}") from None


WRITE_FAULTS = frozenset(
    {
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EFBIG,
    }
)
"""The ``OSError`` numbers that mean "this folder cannot be written" (not a defect of the code)."""


def check_writable(folder: str | Path, flag: str, shown: str | Path | None = None) -> None:
    """Refuse, in one line, a ``folder`` that cannot be created or written, before any work is done.

    It need not exist: its nearest existing ancestor is where it would be created, so that must be
    a folder one can create a file in (tried, not guessed from permission bits, which root ignores
    and which say nothing of a read-only mount or ``/proc``). ``flag`` names the option it came from,
    ``shown`` the path the user gave (a file in ``folder``; default ``folder``).
    """
    folder = Path(folder)
    shown = folder if shown is None else shown
    nearest = folder
    while not nearest.exists() and nearest.parent != nearest:
        nearest = nearest.parent
    if not nearest.is_dir():
        raise RunFolderError(f"{flag} {shown}: {nearest} is a file, not a folder; choose another path")
    try:
        with tempfile.TemporaryFile(dir=nearest):
            pass
    except OSError as exc:
        raise RunFolderError(
            f"{flag} {shown}: cannot write in {nearest} ({exc.strerror or exc}); choose a writable folder"
        ) from None


def check_file_writable(path: str | Path, flag: str) -> None:
    """Refuse, in one line, a file ``path`` that cannot be written, before the work it would hold:
    a folder there, a folder it cannot be created in (:func:`check_writable`), or a file that is
    there but takes no bytes -- a read-only file, ``/dev/full`` -- found by writing one byte and
    taking it back (an open that succeeds says nothing of ``/dev/full``, which fails on write)."""
    path = Path(path)
    if path.is_dir():
        raise RunFolderError(f"{flag} {path}: is a folder, not a file; name the file to write")
    check_writable(path.parent, flag, shown=path)
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # not there yet: its folder takes files (above)
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
        return  # a FIFO or socket: opening it would wait for a reader
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            os.write(fd, b"\n")
            if stat.S_ISREG(mode):
                os.ftruncate(fd, size)  # the byte taken back: the file is as it was
        finally:
            os.close(fd)
    except OSError as exc:
        raise RunFolderError(
            f"{flag} {path}: cannot write it ({exc.strerror or exc}); choose another file"
        ) from None


def append_lines(path: str | Path, lines: Iterable[str]) -> None:
    """Append ``lines`` to ``path`` whole or not at all: a write cut short (a full disk) is taken
    back to the file's size before it, so no half line is left for a reader to trip on, and the
    ``OSError`` names the file (a bare ``write`` error names none)."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        size = os.fstat(fd).st_size
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            os.ftruncate(fd, size)
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
    finally:
        os.close(fd)


def read_metrics(run_dir: str | Path) -> list[JSONRecord]:
    """Every step's record in ``<run_dir>/metrics.jsonl``, in order (``[]`` when there is no file).

    A run killed while writing a step leaves that last line half-written: it is skipped, so a
    killed run still plots, summarises and evaluates. Any earlier line that is not a JSON object
    raises :class:`RunFolderError` naming the file and line: that is a damaged log, not a kill.
    """
    return read_records(RunFolder(Path(run_dir)).metrics)


def read_records(path: str | Path) -> list[JSONRecord]:
    """The JSON objects of a JSONL log the run appends to (``metrics.jsonl``, ``samples.jsonl``),
    read as :func:`read_metrics` says: a cut last line skipped, any other bad line refused."""
    path = Path(path)
    if not path.is_file():
        return []
    numbered = [(n, line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]
    numbered = [(n, line) for n, line in numbered if line.strip()]
    records = []
    for n, line in numbered:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict):
            records.append(record)
        elif n != numbered[-1][0]:
            raise RunFolderError(
                f"{path} line {n} is not a JSON object ({line[:40]!r}): the log is damaged "
                "(only a killed run's last line may be cut off)"
            )
    return records
