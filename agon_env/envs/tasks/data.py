"""Locating and loading task data: local files first, the Hugging Face hub when online.

Data is read by path (JSONL / JSON / parquet through ``datasets``) or by hub id. Nothing
is copied into the package. ``local_data_dir()`` finds the project's offline copies:
``$AGON_DATA_DIR`` when set, else ``../shared/data`` next to the working directory.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from agon_env.envs.tasks.errors import DataUnavailableError
from agon_env.errors import InputError, MissingFile
from agon_env.json_value import JSONRecord

if TYPE_CHECKING:
    from agon_env.registry import EnvSpec

_SUFFIX_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


def _offline_mode() -> bool:
    return "1" in (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("HF_DATASETS_OFFLINE"))


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub answers a TCP connect: ``datasets`` would otherwise retry for ~30 s offline.

    Behind a proxy a direct connect says nothing, so the hub counts as reachable there.
    """
    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname or "", url.port or 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def local_data_dir() -> Path | None:
    """The folder of offline datasets, or ``None`` when there is none."""
    env = os.environ.get("AGON_DATA_DIR")
    candidates = [Path(env)] if env else []
    candidates += [Path.cwd() / ".." / "shared" / "data", Path.cwd() / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    return None


def local_file(name: str) -> Path | None:
    """``name`` inside :func:`local_data_dir`, if both exist."""
    root = local_data_dir()
    if root is None:
        return None
    p = root / name
    return p if p.exists() else None


def offline_status(spec: EnvSpec) -> str:
    """``yes`` when ``make(spec.id)`` works here without network, else what it needs, in a few
    words (an :class:`agon_env.registry.EnvSpec`'s ``offline`` and ``data``)."""
    if not spec.offline:
        return "needs path= or the hub"
    missing = [f for f in spec.data if local_file(f) is None]
    if not missing:
        return "yes"
    where = local_data_dir() or "$AGON_DATA_DIR (unset)"
    return f"needs {', '.join(missing)} in {where}, or the hub"


def load_rows(source: str | os.PathLike[str], split: str = "train", **hub_kwargs: Any) -> list[JSONRecord]:
    """Rows of a local file (by suffix) or a hub dataset id, as plain dicts.

    A path that looks local but does not exist fails with the path, rather than being
    sent to the hub (which would fail offline with a confusing network error); a hub id
    with no hub in reach fails at once with :class:`DataUnavailableError`.
    """
    from datasets import load_dataset

    path = Path(source)
    suffix = "".join(path.suffixes[-1:]).lower()
    if suffix in _SUFFIX_BUILDERS or path.exists():
        if not path.exists():
            raise MissingFile(f"dataset file not found: {path}")
        if path.is_dir():
            ds = load_dataset(str(path), split=split)
        else:
            builder = _SUFFIX_BUILDERS.get(suffix)
            if builder is None:
                raise InputError(f"unsupported data file {path}: use one of {sorted(_SUFFIX_BUILDERS)}")
            ds = load_dataset(builder, data_files=str(path), split="train")
    else:
        if _offline_mode():  # the user asked for the datasets cache: read it, say so if it is not there
            try:
                return [dict(r) for r in load_dataset(str(source), split=split, **hub_kwargs)]
            except Exception as exc:
                raise DataUnavailableError(
                    f"dataset {source!r} is not in the datasets cache (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE "
                    "is set) nor in $AGON_DATA_DIR; set $AGON_DATA_DIR to a folder with its offline copy "
                    f"(docs/envs.md) or pass path= ({type(exc).__name__})"
                ) from None
        if not hub_reachable():
            root = local_data_dir()
            where = f"{root} has no copy" if root else "no data folder: $AGON_DATA_DIR is unset"
            raise DataUnavailableError(
                f"dataset {source!r} is not on this machine ({where}) and the hub is unreachable: "
                "set $AGON_DATA_DIR to a folder with its offline copy (docs/envs.md), pass path=, or set "
                "HF_HUB_OFFLINE=1 to read the datasets cache"
            )
        ds = load_dataset(str(source), split=split, **hub_kwargs)
    return [dict(r) for r in ds]
