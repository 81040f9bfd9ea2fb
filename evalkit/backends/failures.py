"""The failure sidecar: every failed provider call, in full, next to the cassette.

``<cassette>.failures.jsonl`` (for ``gemma.jsonl``: ``gemma.failures.jsonl``)
is created, empty, as soon as a cassette is opened for recording, and never in
replay. It holds failures only: a call whose answer the member is left with
(an HTTP error, a malformed answer, a truncation the retry did not cure). A
truncated attempt that succeeded on its retry is *recovered*: written apart, to
``<cassette>.recovered.jsonl`` (same fields; `read_recovered`), so "failures"
means failures. One JSON object per line, per call::

    {"ts_ms": 1767000000000, "model": "...", "call_type": "extract", "member": "task/member",
     "classification": "http_error" | "not_an_answer" | "truncation" | "malformed",
     "raw_body": "<the complete response body or error text>", "finish_reason": "...",
     "completion_tokens": 123, "max_tokens": 1024}

``http_error``: an HTTP error, a timeout, a dropped connection or an answer past its size limit;
``not_an_answer``: a 2xx response whose body is not an answer of the protocol (an HTML page, an
empty or cut-off body, an event stream, JSON of another shape); ``truncation``: an answer cut off at
its token budget; ``malformed``: an answer whose text holds no JSON object (the model's own output).
``raw_body`` is never shortened. When a file would pass 20 MB it is renamed to
``<cassette>.failures.N.jsonl`` (``.recovered.N.jsonl``; N = 1, 2, ...) and a fresh one is started.
Only what came back from the provider is written, after the secret scrubber
(`evalkit.backends.redact`): no request headers, no keys.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from evalkit._util.jsonio import encode

Classification = Literal["http_error", "not_an_answer", "truncation", "malformed"]
ROTATE_BYTES = 20 * 1024 * 1024


@dataclass
class Failure:
    classification: Classification
    raw_body: str
    model: str = ""
    call_type: str = ""
    member: str = ""
    finish_reason: str | None = None
    completion_tokens: int | None = None
    max_tokens: int | None = None
    ts_ms: int = 0
    recovered: bool = False  # the attempt failed but its retry succeeded: the recovered sidecar, not a failure

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        del d["recovered"]  # which file it is in says it
        if not d["ts_ms"]:
            d["ts_ms"] = int(time.time() * 1000)
        return d


FAILURES, RECOVERED = "failures", "recovered"  # the two sidecars


def sidecar_path(cassette: str | Path, n: int | None = None, kind: str = FAILURES) -> Path:
    """``dir/x.jsonl`` → ``dir/x.failures.jsonl`` (``dir/x.failures.N.jsonl`` for rotation N); `kind`
    ``recovered``: ``dir/x.recovered.jsonl``."""
    p = Path(cassette)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    middle = kind if n is None else f"{kind}.{n}"
    return p.with_name(f"{stem}.{middle}.jsonl")


class FailureLog:
    def __init__(self, cassette: str | Path, rotate_bytes: int = ROTATE_BYTES):
        self.cassette = Path(cassette)
        self.path = sidecar_path(self.cassette)
        self.rotate_bytes = rotate_bytes
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch(exist_ok=True)  # eagerly: an empty sidecar means "nothing failed"

    def _rotate(self, kind: str) -> None:
        n = 1
        while sidecar_path(self.cassette, n, kind).exists():
            n += 1
        os.replace(sidecar_path(self.cassette, kind=kind), sidecar_path(self.cassette, n, kind))
        sidecar_path(self.cassette, kind=kind).touch()

    def write(self, failure: Failure) -> None:
        """Append `failure` to the failures sidecar, or to the recovered one when its retry succeeded."""
        kind = RECOVERED if failure.recovered else FAILURES
        path = sidecar_path(self.cassette, kind=kind)
        line = (encode(failure.to_json(), path, sort_keys=True) + "\n").encode("utf-8")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size and size + len(line) > self.rotate_bytes:
            self._rotate(kind)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)


def _read(cassette: str | Path, kind: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    n = 1
    while sidecar_path(cassette, n, kind).exists():
        out += [json.loads(line) for line in sidecar_path(cassette, n, kind).read_text(encoding="utf-8").splitlines()
                if line]
        n += 1
    path = sidecar_path(cassette, kind=kind)
    if path.exists():
        out += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return out


def read_failures(cassette: str | Path) -> list[dict[str, Any]]:
    """Every failure recorded next to `cassette`, oldest rotation first (recovered attempts are not failures)."""
    return _read(cassette, FAILURES)


def read_recovered(cassette: str | Path) -> list[dict[str, Any]]:
    """Every recovered attempt (a truncation that succeeded on retry) recorded next to `cassette`."""
    return _read(cassette, RECOVERED)
