"""The one way evalkit reads and writes its JSON (and other text) artefacts.

Sorted keys, indent 2, a trailing newline: the same data gives the same bytes,
so git diffs of boards and run folders read well. Writes are atomic (a unique
temp file in the same folder, fsync, rename): a reader never sees half a file,
and concurrent writers never share a temp name. A temp file is ``.<name>.<random>.tmp``
(`partial_path`), so what a killed writer leaves behind is found and removed by
`remove_partials`. Inside `unsynced` the fsync is left to the caller's commit point.

A full disk (ENOSPC, EDQUOT) or a folder it may not write (EACCES, EROFS) is a `DiskFull` (exit 8)
naming the file: the temp file is removed and the file it would have replaced is untouched, so the
same command resumes once space is freed. Reading is bounded (`evalkit.limits`): a JSON input's size
(JSON_FILE_BYTES) is checked before it is read and its nesting (NESTING_DEPTH) before it is used.

JSON has no NaN or Infinity (Python's json writes them, strict parsers refuse them): every JSON text
evalkit writes goes through `encode` (``allow_nan=False``), and a non-finite number is `NonFinite`
naming the file and the key path, with nothing written.
"""

from __future__ import annotations

import contextvars
import errno
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalkit import limits
from evalkit.errors import CorpusError, DiskFull, LimitExceeded, NonFinite

PARTIAL_SUFFIX = ".tmp"
# Writing that more space or permission would let through: the disk is full (or read-only, or not ours).
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS})
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


def disk_full(err: OSError, path: str | Path | None = None) -> DiskFull:
    """The `DiskFull` for a write that failed with `err` (one of `DISK_ERRNOS`): one line naming the file."""
    where = path or err.filename or "a file"
    why = "not writable" if err.errno in (errno.EACCES, errno.EROFS) else "no space left on the disk"
    return DiskFull(f"{where}: cannot write it: {why} ({err.strerror}); nothing was left half-written: free "
                    "space (or fix the permissions) and run the same command again to resume")


def write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    try:
        _write_text(path, text)
    except OSError as e:
        if e.errno in DISK_ERRNOS:
            raise disk_full(e, path) from None
        raise


def _write_text(path: Path, text: str) -> None:
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


def nesting_depth(value: Any, bound: int) -> int:
    """How deep `value` nests (a scalar: 0), measured iteratively; stops counting once past `bound`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if deepest > bound:
                return deepest
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def check_depth(value: Any, where: str) -> Any:
    """`value`, or `LimitExceeded` if it nests deeper than NESTING_DEPTH."""
    bound = limits.NESTING_DEPTH.int_value()
    if nesting_depth(value, bound) > bound:
        raise LimitExceeded(f"{where}: nested deeper than {bound} levels; limit {limits.NESTING_DEPTH.describe()}")
    return value


def loads(text: str, where: str) -> Any:
    """JSON text → value, bounded in nesting (`LimitExceeded`); `json.JSONDecodeError` as json raises it."""
    try:
        value = json.loads(text)
    except RecursionError:  # deeper than the interpreter goes: deeper than any bound too
        raise LimitExceeded(f"{where}: nested deeper than {limits.NESTING_DEPTH.int_value()} levels; "
                            f"limit {limits.NESTING_DEPTH.describe()}") from None
    return check_depth(value, where)


def read_bounded(path: Path, limit: limits.Limit, what: str = "file") -> bytes:
    """The bytes of `path`, refused (`LimitExceeded`) when larger than `limit`: checked with a stat before
    reading, and again while reading (a file that grows meanwhile)."""
    bound = limit.int_value()
    try:
        size = path.stat().st_size
        if size > bound:
            raise LimitExceeded(f"{path}: {what} of {size} bytes is larger than {limit.describe()}")
        with open(path, "rb") as f:
            data = f.read(bound + 1)
    except FileNotFoundError:
        raise CorpusError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise CorpusError(f"{path}: is a folder, expected a file") from None
    if len(data) > bound:
        raise LimitExceeded(f"{path}: {what} is larger than {limit.describe()}")
    return data


def read_bounded_text(path: str | Path, limit: limits.Limit = limits.JSON_FILE_BYTES, what: str = "file") -> str:
    """The UTF-8 text of `path`, its size checked before it is read (`LimitExceeded`); `CorpusError` if absent
    or not UTF-8."""
    raw = read_bounded(Path(path), limit, what)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_json(path: str | Path, limit: limits.Limit | None = None) -> Any:
    """A JSON file as data; `CorpusError` naming the file and line when it is absent or not JSON. `limit`: the
    file is an input (JSON_FILE_BYTES, say): its size is checked before it is read and its nesting after
    (`LimitExceeded`). Without it — evalkit's own artefacts, which hold records nested up to the bound and
    more — only what no interpreter can parse is refused."""
    text = read_bounded_text(path, limit, "JSON file") if limit is not None else _read_text(Path(path))
    try:
        return loads(text, str(path)) if limit is not None else _loads_unbounded(text, str(path))
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorpusError(f"{path}: file not found") from None


def _loads_unbounded(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise LimitExceeded(f"{where}: nested too deep to parse; limit {limits.NESTING_DEPTH.describe()}") from None
