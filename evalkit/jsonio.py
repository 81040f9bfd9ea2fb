"""The one way evalkit reads and writes its JSON (and other text) artefacts.

Sorted keys, indent 2, a trailing newline: the same data gives the same bytes,
so git diffs of boards and run folders read well. Writes are atomic (a unique
temp file in the same folder, fsync, rename): a reader never sees half a file,
and concurrent writers never share a temp name. A temp file is ``.<name>.<random>.tmp``
(`partial_path`), so what a killed writer leaves behind is found and removed by
`remove_partials`. Inside `unsynced` the fsync is left to the caller's commit point.

JSON has no NaN or Infinity (Python's json writes them, strict parsers refuse them): every JSON text
evalkit writes goes through `encode` (``allow_nan=False``), and a non-finite number is `NonFinite`
naming the file and the key path, with nothing written.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .errors import CorpusError, NonFinite

PARTIAL_SUFFIX = ".tmp"
_fsync = contextvars.ContextVar("evalkit_fsync", default=True)  # False inside `unsynced` (per thread: Dask's too)


def nonfinite_path(data: Any, at: str = "") -> str | None:
    """The key path (``a.b[2]``) of the first NaN / Infinity in `data`, or None when there is none."""
    if isinstance(data, float) and not math.isfinite(data):
        return at or "(the value itself)"
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, (list, tuple)) else ()
    for k, v in items:
        found = nonfinite_path(v, f"{at}[{k}]" if isinstance(k, int) else f"{at}.{k}" if at else str(k))
        if found:
            return found
    return None


def encode(data: Any, where: str | Path = "JSON", **kwargs: Any) -> str:
    """``json.dumps(data, ensure_ascii=False, **kwargs)`` refusing NaN / Infinity: `NonFinite` naming
    `where` (the file) and the key path."""
    try:
        return json.dumps(data, ensure_ascii=False, allow_nan=False, **kwargs)
    except ValueError:
        at = nonfinite_path(data)
        if at is None:
            raise
        raise NonFinite(f"{where}: {at} is not a finite number, which JSON cannot hold; nothing was written") from None


def dumps(data: Any, where: str | Path = "JSON") -> str:
    return encode(data, where, indent=2, sort_keys=True) + "\n"


def line(data: Any, where: str | Path = "JSON") -> str:
    """One compact JSONL line (sorted keys), newline-terminated."""
    return encode(data, where, sort_keys=True, separators=(",", ":")) + "\n"


def canonical_sha(data: Any) -> str:
    """SHA-256 hex of data as canonical JSON (sorted keys, compact, UTF-8): the key of a request or record."""
    canon = encode(data, "a request", sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def write_json(path: str | Path, data: Any) -> None:
    write_text(path, dumps(data, path))


def _temp_beside(path: Path) -> tuple[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=PARTIAL_SUFFIX, dir=path.parent)


def partial_path(path: str | Path) -> Path:
    """A new, empty temp file beside `path`, for a writer that renames it over `path` once complete."""
    fd, tmp = _temp_beside(Path(path))
    os.close(fd)
    return Path(tmp)


def remove_partials(folder: str | Path, recursive: bool = True) -> list[Path]:
    """Delete the temp files writers left in `folder` (and its subfolders) when stopped; return them."""
    pattern = f".*{PARTIAL_SUFFIX}"
    found = [p for p in (Path(folder).rglob(pattern) if recursive else Path(folder).glob(pattern)) if p.is_file()]
    for p in found:
        p.unlink(missing_ok=True)
    return found


@contextmanager
def unsynced() -> Iterator[None]:
    """The writes inside are atomic but not fsynced: the caller makes them durable at its commit point, with
    one `os.sync()` before it records them (a sweep's members, before each sweep.json), not one fsync a file."""
    token = _fsync.set(False)
    try:
        yield
    finally:
        _fsync.reset(token)


def write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            if _fsync.get():
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; artefacts are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: str | Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorpusError(f"{path}: file not found") from None
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
