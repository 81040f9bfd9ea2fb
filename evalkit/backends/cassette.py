"""Record/replay cassettes: real model output, replayed offline, deterministically, for free.

A cassette is plain JSONL, one record per line::

    {"key": "<sha256 hex>", "call_type": "extract", "provider": "openai", "model": "gemma-3-270m",
     "member": "deal-memos/m01", "timestamp": "2026-01-02T03:04:05.678Z",
     "request": {"system": "...", "user": "...", "schema": {...},
                 "settings": {"max_tokens": 1024, "temperature": 0.0}},
     "response": {"content": "<the model's answer text>", "usage": {"input_tokens": 812, "output_tokens": 95},
                  "finish_reason": "stop", "latency_s": 3.21, "parse": "clean", "truncated": null,
                  "calls": 1, "usd": 0.0, "model": "<model id the provider reported>"}}

A cassette this evalkit writes begins with a header line naming its format,
``{"evalkit_cassette": 1, "created": "<RFC 3339>", "evalkit": "<version>"}`` (`FORMAT`); a file without
one (every cassette written before the header existed) is read as format 1, and a header with another
version is refused, naming it. A header line later in the file (two cassettes concatenated) is fine
when its version is one this evalkit reads.

Where a provider's prompt cache took part, ``usage`` also has ``cache_read_tokens`` /
``cache_write_tokens`` (parts of ``input_tokens``); a response a provider batch API gave has
``"batch": true``.

``key`` is the SHA-256 of the canonical *semantic* request — system prompt,
user prompt, output schema, model id, max_tokens, temperature, call type, and for a document
sent as a PDF or page images (input ``pdf`` / ``images``) its ``input``: the mode, the dpi and the
source PDFs' sha256, never the bytes (a record's ``request.input`` adds each part's media type, size
and sha256, not its base64) — and nothing else (`cassette_key`). Matching is by key alone, so record order
does not matter and cassettes from several runs can simply be concatenated;
identical keys are served first-in first-out, in file order. Editing one word
of a prompt template, the schema or a setting changes the key.

The seam sits above HTTP: only the semantic request and the response content
and usage are stored — never headers, keys, base URLs or raw HTTP bodies — and
what is stored of the response has passed the secret scrubber
(`evalkit.backends.redact`), as has what is replayed.
(``member`` is stored for people reading the file and for miss messages; it
is not part of the key.)

Recording (`RecordingBackend`) appends one line per successful call and
flushes + fsyncs it, so a SIGKILL loses at most the call in flight. It never
truncates recorded data; when the cassette already holds a request it replays
that instead of calling (resume). A provider error never produces a record;
every failed provider call goes to the failure sidecar (`evalkit.backends.failures`).

Replay (`ReplayBackend`) never calls anything: a request with no record
raises `CassetteMiss` naming the member, the key, the nearest recorded request
and the command that re-records.

Opening is indexing, so that a 100k-record cassette (630 MB) opens in a fraction
of a second and a few percent of its size in memory (`benchmarks/bench_cassette.py`):
`Cassette.load` keeps each record's key and byte span, and parses a record only
when it is served (or, on a miss, to find the nearest request). One pass reads
the lines: a line that begins as `encode_record` writes it (``{"key": "<hex>",
"call_type": …, "provider": …, "model": …`` and ends with ``}``) is indexed from
that prefix alone; any other line (other key order, a hand edit) is parsed in
full, and so is the last line.

Checks: a line that is not a record's shape, or a parsed line that is not a
valid record (each field's type, named by its key path: ``response.usage``), or one holding
NaN / Infinity (JSON has neither; nor has a recorded answer parsed as clean), raises
`CassetteCorrupt` with its line number when the cassette is opened; a line with a record's prefix whose body is damaged raises it, with
its line number, when that record is served (`load_records` parses them all).
An unreadable *last* line (a crash mid-append) is reported on stderr and
ignored — everything before it replays. When recording resumes on such a file,
that torn fragment (never a complete record) is cut off before appending. A record
repeated byte for byte (same request, answer, timestamp and latency: a cassette
concatenated twice, never two real calls) is warned about on opening, naming both lines;
recording onto such a file is refused. Equal keys with different records are the FIFO
repeats above.

The sidecar index ``<name>.idx`` (JSON: the keys and spans, and the file's size,
mtime and a sha256 of its first and last 64 KiB) lets the next open skip even the
pass. It is a cache beside cassettes of 1 MiB and more (`INDEX_MIN_BYTES`; smaller
ones, the committed ones among them, never get one; git ignores ``*.idx``): used
only while size, mtime and both ends match, so an append by another process, a
truncation or an edit means one pass again; and every served line must still
hold the key the index put there. Loading writes nothing (a dry run stays
read-only); the backends save the index when they close, a recorder including
what it appended — unless another process wrote to the file meanwhile.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import heapq
import json
import os
import re
import shutil
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from evalkit import __version__
from evalkit._util.jsonio import canonical_sha, encode, nonfinite_path, write_text
from evalkit.backends.base import Completion, ParseOutcome, Request
from evalkit.backends.failures import Failure, FailureLog
from evalkit.backends.parse import parse_record
from evalkit.backends.providers import Provider
from evalkit.backends.providers import provider as provider_of
from evalkit.backends.redact import scrub, scrub_answer
from evalkit.backends.spec import BackendSpec
from evalkit.corpus.specs import INPUT_MODES
from evalkit.errors import CassetteCorrupt, CassetteError, CassetteMiss, UsageError

CASSETTE = "cassette"  # the kind that replays a cassette
RECORD_ENV = "EVALKIT_RECORD_LLM"
REPLAY_ENV = "EVALKIT_REPLAY_LLM"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
FORMAT = 1  # the cassette format this evalkit writes and reads (a file without a header is format 1)
HEADER_KEY = "evalkit_cassette"


# -- keys ------------------------------------------------------------------------------------------------
def canonical_request(request: Request, model: str) -> dict[str, Any]:
    # A document sent as parts (input pdf / images) adds its mode, render settings and sources' sha256, never
    # the bytes (`Request.input_key`); a text request's key is what it always was.
    input_key = request.input_key()
    return {"system": request.system, "user": request.user, "schema": request.schema, "model": model,
            "max_tokens": request.max_tokens, "temperature": float(request.temperature),
            "call_type": request.call_type} | ({"input": input_key} if input_key else {})


def cassette_key(request: Request, model: str) -> str:
    """SHA-256 hex of the canonical semantic request (sorted keys, compact, UTF-8); for sample i > 0 of it
    (``--samples K``), `sample_key` of that and i: every cassette recorded without samples is sample 0."""
    key = canonical_sha(canonical_request(request, model))
    return sample_key(key, request.sample) if request.sample else key


def sample_key(key: str, sample: int) -> str:
    """The key of sample `sample` > 0 of the request whose (sample 0) key is `key`."""
    return canonical_sha({"key": key, "sample": sample})


def rfc3339_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- records ---------------------------------------------------------------------------------------------
def stored_user_prompt(request: Request) -> str:
    """The user prompt as a cassette stores it: a withheld document replaced by its sha256."""
    if not request.withheld:
        return request.user
    digest = hashlib.sha256(request.withheld.encode("utf-8")).hexdigest()
    return request.user.replace(request.withheld, f"[document withheld: {len(request.withheld)} characters, "
                                                  f"sha256 {digest}; its source is not redistributed here]")


def make_record(request: Request, model: str, provider: str, completion: Completion,
                key: str | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "content": completion.raw,
        "usage": {"input_tokens": completion.input_tokens, "output_tokens": completion.output_tokens},
        "finish_reason": completion.finish_reason, "latency_s": round(completion.latency_s, 6),
        "parse": completion.parse, "truncated": completion.truncated, "calls": completion.calls,
        "usd": completion.usd, "model": completion.model or model,
    }
    for name in ("cache_read_tokens", "cache_write_tokens"):  # where the provider's prompt cache took part
        if getattr(completion, name):
            response["usage"][name] = getattr(completion, name)
    if completion.batch:
        response["batch"] = True
    reparsed = parse_record(completion.raw)[0] if completion.parse in ("clean", "recovered") else None
    if reparsed != completion.record:  # e.g. a python pipeline whose raw text is not its record
        response["record"] = completion.record
    return {
        "key": key or cassette_key(request, model), "call_type": request.call_type, "provider": provider, "model": model,
        "member": request.member, **({"sample": request.sample} if request.sample else {}),
        "timestamp": rfc3339_now(),
        "request": {"system": request.system, "user": stored_user_prompt(request), "schema": request.schema,
                    "settings": {"max_tokens": request.max_tokens, "temperature": float(request.temperature)}}
        | _stored_input(request),
        "response": response,
    }


def _stored_input(request: Request) -> dict[str, Any]:
    """A record's ``input``: the key's part (mode, dpi, sources' sha256) and each part's size and sha256; the
    parts' bytes are never stored (a page image is ~0.5 MB)."""
    input_key = request.input_key()
    return {"input": input_key | {"parts": request.parts_summary()}} if input_key else {}


def completion_from_record(rec: dict[str, Any]) -> Completion:
    """A recorded answer as a `Completion`, through the secret scrubber (a cassette recorded before a
    key was scrubbed, or by another tool, must not carry it further)."""
    r = rec["response"]
    content = r.get("content") or ""
    parse: ParseOutcome = r.get("parse") or "clean"  # `_check_record` allows only these
    if "record" in r:
        record = r["record"]
    elif parse in ("clean", "recovered"):
        record = parse_record(content)[0]
    else:
        record = None
    usage = r.get("usage") or {}
    return scrub_answer(Completion(
        record=record, raw=content, parse=parse, model=r.get("model") or rec.get("model", ""),
        input_tokens=int(usage.get("input_tokens") or 0), output_tokens=int(usage.get("output_tokens") or 0),
        usd=float(r.get("usd") or 0.0), latency_s=float(r.get("latency_s") or 0.0),
        finish_reason=r.get("finish_reason"), truncated=r.get("truncated"), calls=0, replayed=True,
        cache_read_tokens=int(usage.get("cache_read_tokens") or 0),
        cache_write_tokens=int(usage.get("cache_write_tokens") or 0), batch=bool(r.get("batch"))))


def header() -> dict[str, Any]:
    """The first line of a cassette this evalkit writes: its format, when and by what it was begun."""
    return {HEADER_KEY: FORMAT, "created": rfc3339_now(), "evalkit": __version__}


class _NotJSON(ValueError):
    """NaN, Infinity or a number too large for a float: Python's json reads them, JSON has none."""


def _no_constant(name: str) -> Any:
    raise _NotJSON(f"{name} is not JSON (a number must be finite)")


def _finite(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise _NotJSON(f"{text[:40]} is too large for a number")
    return value


def _loads(data: bytes) -> Any:
    """A cassette line parsed as strict JSON: NaN / Infinity / 1e999 raise `_NotJSON`."""
    return json.loads(data.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)


_STR, _NUM, _OBJ, _INT, _BOOL = {str}, {int, float}, {dict}, {int}, {bool}  # exact types: True is no integer
# The JSON types each field may hold (null always allowed), per object: (key path prefix, where it is, fields).
# (where it is shown, its path in the record, the exact types of each field there)
_FIELDS: tuple[tuple[str, tuple[str, ...], dict[str, AbstractSet[type]]], ...] = (
    ("", (), {"provider": _STR, "member": _STR, "timestamp": _STR, "sample": _INT}),
    ("request.", ("request",), {"system": _STR, "user": _STR, "schema": _OBJ, "settings": _OBJ, "input": _OBJ}),
    ("request.settings.", ("request", "settings"), {"max_tokens": _INT, "temperature": _NUM}),
    ("response.", ("response",), {"content": _STR, "usage": _OBJ, "finish_reason": _STR, "latency_s": _NUM,
                                  "parse": _STR, "truncated": _STR, "calls": _INT, "usd": _NUM, "model": _STR,
                                  "batch": _BOOL, "record": _OBJ}),
)
_TYPE_NAMES: dict[type, str] = {str: "a string", int: "an integer", dict: "an object", bool: "true or false"}
_PARSES = ("clean", "recovered", "malformed", "error", "schema_invalid")  # `ParseOutcome`


def _check_record(rec: Any) -> str | None:
    """Why `rec` is not a cassette record (None when it is one), naming the key path at fault."""
    if not isinstance(rec, dict):
        return f"expected a JSON object, got {type(rec).__name__}"
    if not isinstance(rec.get("key"), str) or not _HEX64.match(rec["key"]):
        return "'key' must be a 64-character lowercase SHA-256 hex string"
    for name in ("call_type", "model"):
        if not isinstance(rec.get(name), str):
            return f"'{name}' must be a string"
    for name in ("request", "response"):
        if not isinstance(rec.get(name), dict):
            return f"'{name}' must be an object" + ("" if name in rec else ", and is missing")
    for prefix, where, fields in _FIELDS:
        obj = rec
        for part in where:
            obj = obj.get(part) or {}
        for name, types in fields.items():
            value = obj.get(name)
            if value is not None and type(value) not in types:
                want = "a number" if types is _NUM else _TYPE_NAMES[next(iter(types))]
                return f"'{prefix}{name}' must be {want}, not {json.dumps(value)[:40]}"
    resp = rec["response"]
    for name, value in (resp.get("usage") or {}).items():
        if value is not None and not (type(value) is int and value >= 0):
            return f"'response.usage.{name}' must be a whole number of tokens, not {json.dumps(value)[:40]}"
    if resp.get("parse") is not None and resp["parse"] not in _PARSES:
        return f"'response.parse' must be one of {', '.join(_PARSES)}, not {json.dumps(resp['parse'])[:40]}"
    content = resp.get("content")
    if (content and "record" not in resp and resp.get("parse") in (None, "clean", "recovered")
            and ("NaN" in content or "Infinity" in content) and _lenient_nonfinite(content)):
        return "'response.content': the recorded answer holds NaN or Infinity, which is not JSON"
    return None


def _lenient_nonfinite(text: str) -> bool:
    """Whether Python's lenient parser finds a NaN / Infinity in the JSON object `text` holds."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            return nonfinite_path(decoder.raw_decode(text, start)[0]) is not None
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
    return False


def _check_header(rec: dict[str, Any], where: str) -> None:
    version = rec.get(HEADER_KEY)
    if version != FORMAT or isinstance(version, bool):
        raise CassetteCorrupt(f"{where}: cassette format {json.dumps(version)} is not one this evalkit reads (it reads "
                              f"format {FORMAT}); use the evalkit that wrote it, or re-record")


# -- storage: one line per record, an index of where each one is -------------------------------------------
INDEX_MIN_BYTES = 1 << 20  # below this one pass over the file takes about a millisecond: no sidecar index
_INDEX_FORMAT = "evalkit cassette index 1"
_PROBE_BYTES = 1 << 16  # hashed at each end of the file, so that a rewrite keeping size and mtime still shows
# How every line `encode_record` writes begins (make_record's field order). A line that does not begin so
# is parsed in full; one that does is indexed from this prefix alone.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'  # a JSON string, escapes included
_PREFIX = re.compile(rb'\{"key": "([0-9a-f]{64})", "call_type": ' + _STRING + rb', "provider": ' + _STRING
                     + rb', "model": (' + _STRING + rb')')


def encode_record(rec: dict[str, Any]) -> bytes:
    """One cassette line: the record's fields in their given order, UTF-8, newline-terminated."""
    return (encode(rec, "a cassette record") + "\n").encode("utf-8")


def index_path(cassette: str | Path) -> Path:
    """``dir/x.jsonl`` → ``dir/x.idx``, the cassette's sidecar index."""
    p = Path(cassette)
    return p.with_name(p.name.removesuffix(".jsonl") + ".idx")


def _fast_fields(line: bytes) -> tuple[str, str] | None:
    """(key, model) of a line shaped as `encode_record` writes it, the rest unparsed; None if it is not."""
    m = _PREFIX.match(line)
    if m is None or not line.endswith((b"}\n", b"}", b"}\r\n")):
        return None
    model = m.group(2)
    try:
        return m.group(1).decode("ascii"), (json.loads(model) if b"\\" in model else model[1:-1].decode("utf-8"))
    except ValueError:  # not UTF-8, or a bad escape: the full parse reports it
        return None


def _pack(offsets: array[int]) -> str:
    """Byte offsets as base64 of little-endian int64s: a JSON string, the same on every machine."""
    if sys.byteorder == "big":
        offsets = array("q", offsets)
        offsets.byteswap()
    return base64.b64encode(offsets.tobytes()).decode("ascii")


def _unpack(text: str) -> array[int]:
    offsets = array("q")
    offsets.frombytes(base64.b64decode(text, validate=True))
    if sys.byteorder == "big":
        offsets.byteswap()
    return offsets


def _probes(f: BinaryIO, size: int) -> list[str]:
    """sha256 of the first and of the last _PROBE_BYTES of the file's first `size` bytes."""
    out = []
    for start in (0, max(0, size - _PROBE_BYTES)):
        f.seek(start)
        out.append(hashlib.sha256(f.read(min(_PROBE_BYTES, size))).hexdigest())
    return out


# -- a loaded cassette -----------------------------------------------------------------------------------
class Cassette:
    """One JSONL cassette, indexed: each record's key and byte span; a record is parsed when it is served."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.torn: str | None = None  # the warning, when the last line was torn
        self.torn_offset: int | None = None  # byte offset where the torn line starts
        self._torn_line = 0
        self.needs_newline = False  # the last record lacks its "\n" (a hand-edited file)
        self._keys: list[str] = []  # record i's key; records in file order
        self._starts, self._ends = array("q"), array("q")  # record i's bytes: [start, end)
        self._served = bytearray()  # 1 once record i was replayed (or appended) in this run
        # key → its record, or its records in file order (served first-in first-out). Most keys have one
        # record: an int takes ~90 bytes less than a list, a sixth of the index at 100k records.
        self._by_key: dict[str, int | list[int]] = {}
        self._models: set[str] = set()
        # (size, mtime_ns) of the file as this index describes it; None once it no longer can (another
        # process wrote to the file meanwhile): such an index is never saved.
        self._state: tuple[int, int | None] | None = (0, None)
        self._dirty = False  # the sidecar index on disk is missing or behind this one
        self.duplicates: list[str] = []  # one warning per key recorded twice byte for byte (a doubled file)
        self._by_member: dict[tuple[str, str], int] | None = None  # (member, call type) → its first record

    @classmethod
    def load(cls, path: str | Path, *, missing_ok: bool = False, warn: bool = True) -> Cassette:
        """Index the file: adopt its sidecar index if that matches the file, else one pass over it. Writes
        nothing (a dry run stays read-only); the backends save the index when they close."""
        cassette = cls(path)
        p = cassette.path
        try:
            with open(p, "rb", buffering=1 << 20) as f:  # 8 KiB buffers would double the pass's CPU
                st = os.fstat(f.fileno())
                if not cassette._read_index(f, st):
                    cassette._scan(f, st)
        except FileNotFoundError:
            if missing_ok:
                return cassette
            raise CassetteError(f"cassette {p}: file not found") from None
        except OSError as e:
            raise CassetteError(f"cassette {p}: cannot read it ({e.strerror})") from None
        cassette._find_duplicates()
        if warn:
            for message in ([cassette.torn] if cassette.torn else []) + cassette.duplicates:
                print(f"evalkit: warning: {scrub(message)}", file=sys.stderr)
        return cassette

    def __len__(self) -> int:
        return len(self._keys)

    def models(self) -> list[str]:
        return sorted(self._models)

    def available(self, key: str) -> int:
        return sum(not self._served[i] for i in self._of(key))

    def key_counts(self) -> Counter[str]:
        return Counter({k: self.available(k) for k in self._by_key})

    def take(self, key: str) -> dict[str, Any] | None:
        """The first record of `key` not served yet (parsed now), or None."""
        i = next((i for i in self._of(key) if not self._served[i]), None)
        if i is None:
            return None
        with self._open() as f:
            rec = self._read(f, i)
        self._served[i] = 1
        return rec

    def recorded_count(self, key: str) -> int:
        return len(self._of(key))

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every record, parsed and checked now (for tools and tests)."""
        return list(self._each())

    # -- reading ---------------------------------------------------------------------------------------------
    def _scan(self, f: BinaryIO, st: os.stat_result) -> None:
        """One pass over the file: index every line; parse in full only the last one and those off the fast path."""
        f.seek(0)
        offset = lineno = 0
        line = pending = None  # pending: the last non-blank line so far, checked in full if no line follows
        for line in f:
            lineno += 1
            if not line.isspace():
                if pending:
                    self._index_line(*pending, last=False)
                pending = (line, offset, lineno)
            offset += len(line)
        if pending:
            self._index_line(*pending, last=True)
        now = os.fstat(f.fileno())
        unchanged = (offset, st.st_mtime_ns) == (now.st_size, now.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
        self._state, self._dirty = (offset, st.st_mtime_ns) if unchanged else None, True
        self.needs_newline = line is not None and not line.endswith(b"\n") and self.torn is None

    def _index_line(self, line: bytes, start: int, lineno: int, *, last: bool) -> None:
        fields = None if last else _fast_fields(line)
        if fields is None:
            try:
                rec = _loads(line)
            except (UnicodeDecodeError, ValueError, RecursionError) as e:
                if last and isinstance(e, json.JSONDecodeError):
                    self._mark_torn(start, lineno)
                    return
                reason = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8" if isinstance(
                    e, UnicodeDecodeError) else str(e) or type(e).__name__
                raise CassetteCorrupt(f"{self.path}:{lineno}: corrupt cassette line ({reason}); fix or delete that "
                                      f"line ({len(self)} record(s) come before it)") from None
            if isinstance(rec, dict) and HEADER_KEY in rec:
                _check_header(rec, f"{self.path}:{lineno}")
                return
            why = _check_record(rec)
            if why:
                raise CassetteCorrupt(f"{self.path}:{lineno}: corrupt cassette line: {why}")
            fields = rec["key"], rec["model"]
        self._add(*fields, start, start + len(line))

    def _mark_torn(self, start: int, lineno: int) -> None:
        self.torn_offset, self._torn_line = start, lineno
        self.torn = (f"cassette {self.path}: line {lineno} is torn (incomplete JSON at the end of the file, most likely "
                     f"a run killed mid-write); ignoring it — the {len(self)} record(s) before it replay")

    def _add(self, key: str, model: str, start: int, end: int) -> int:
        i = len(self._keys)
        self._keys.append(key)
        self._starts.append(start)
        self._ends.append(end)
        self._served.append(0)
        self._link(key, i)
        self._models.add(model)
        return i

    def _link(self, key: str, i: int) -> None:
        known = self._by_key.get(key)
        if known is None:
            self._by_key[key] = i
        elif isinstance(known, int):
            self._by_key[key] = [known, i]
        else:
            known.append(i)

    def _of(self, key: str) -> tuple[int, ...] | list[int]:
        """The records of `key`, in file order."""
        known = self._by_key.get(key, ())
        return (known,) if isinstance(known, int) else known

    def _open(self) -> BinaryIO:
        try:
            return open(self.path, "rb")
        except OSError as e:
            raise CassetteError(f"cassette {self.path}: cannot read it ({e.strerror or e})") from None

    def _read(self, f: BinaryIO, i: int) -> dict[str, Any]:
        """Record i, parsed and checked; a damaged line raises CassetteCorrupt with its line number."""
        start = self._starts[i]
        f.seek(start)
        line = f.read(self._ends[i] - start)
        why: str | None
        try:
            rec: dict[str, Any] = _loads(line)  # a dict once `_check_record` passes it
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            why = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8" if isinstance(
                e, UnicodeDecodeError) else str(e) or type(e).__name__
        else:
            why = _check_record(rec)
            if why is None and rec["key"] != self._keys[i]:
                why = (f"it no longer holds record {self._keys[i]}: the file changed after it was opened; run again "
                       f"(and delete {index_path(self.path)} if this persists)")
        if why:
            raise CassetteCorrupt(f"{self.path}:{self._line_number(f, start)}: corrupt cassette line ({why}); "
                                  f"fix or delete that line")
        return rec

    def _each(self) -> Iterator[dict[str, Any]]:
        """Every record in file order, parsed one at a time."""
        with self._open() as f:
            for i in range(len(self)):
                yield self._read(f, i)

    def _find_duplicates(self) -> None:
        """A warning for each key with two byte-identical records (FIFO repeats differ in timestamp and
        latency at least): what concatenating a cassette twice leaves. Reads only keys recorded more than once."""
        repeated = [ids for ids in self._by_key.values() if not isinstance(ids, int)]
        if not repeated:
            return
        pairs = []
        with self._open() as f:
            for ids in repeated:
                first: dict[bytes, int] = {}
                for i in ids:
                    f.seek(self._starts[i])
                    digest = hashlib.sha256(f.read(self._ends[i] - self._starts[i]).rstrip(b"\r\n")).digest()
                    if digest in first:
                        pairs.append((first[digest], i))
                        break  # once per key
                    first[digest] = i
            lines = self._line_numbers(f, sorted({self._starts[i] for pair in pairs for i in pair}))
        self.duplicates = [f"cassette {self.path}: line {lines[self._starts[b]]} repeats line {lines[self._starts[a]]} "
                           f"byte for byte (key {self._keys[a][:12]}…: the same recording twice, e.g. a cassette "
                           f"concatenated twice); replay serves both copies — delete the repeated lines"
                           for a, b in sorted(pairs)]

    @staticmethod
    def _line_numbers(f: BinaryIO, offsets: list[int]) -> dict[int, int]:
        """{offset: its line number} for ascending `offsets`, in one pass over the file."""
        out, f_pos, newlines = {}, 0, 0
        f.seek(0)
        for offset in offsets:
            newlines += f.read(offset - f_pos).count(b"\n")
            f_pos = offset
            out[offset] = newlines + 1
        return out

    def recorded_for(self, member: str, call_type: str) -> dict[str, Any] | None:
        """The first record of `member`'s `call_type` call (any request), or None: what a miss is compared with.
        One pass parses every record the first time it is asked."""
        if self._by_member is None:
            self._by_member = {}
            for i, rec in enumerate(self._each()):
                self._by_member.setdefault((str(rec.get("member")), str(rec.get("call_type"))), i)
        first = self._by_member.get((member, call_type))
        if first is None:
            return None
        with self._open() as f:
            return self._read(f, first)

    @staticmethod
    def _line_number(f: BinaryIO, offset: int) -> int:
        f.seek(0)
        newlines = 0
        while offset > 0:
            chunk = f.read(min(offset, 1 << 20))
            if not chunk:
                break
            newlines += chunk.count(b"\n")
            offset -= len(chunk)
        return newlines + 1

    # -- the sidecar index -----------------------------------------------------------------------------------
    def _read_index(self, f: BinaryIO, st: os.stat_result) -> bool:
        """Adopt the sidecar index if it was written for exactly this file (size, mtime, both ends' bytes)."""
        if st.st_size < INDEX_MIN_BYTES:
            return False
        try:
            index = json.loads(index_path(self.path).read_text(encoding="utf-8"))
            if index["format"] != _INDEX_FORMAT or index["file"] != [st.st_size, st.st_mtime_ns, *_probes(f, st.st_size)]:
                return False
            n, hexed = index["records"], index["keys"]
            keys = [hexed[64 * i:64 * i + 64] for i in range(n)]
            starts, ends = _unpack(index["starts"]), _unpack(index["ends"])
            if not len(hexed) == 64 * n == 64 * len(starts) == 64 * len(ends):
                return False
            models, needs_newline = set(index["models"]), bool(index["needs_newline"])
            torn_offset, torn_line = index["torn"] or (None, 0)
        except (OSError, ValueError, KeyError, TypeError):
            return False
        self._keys, self._starts, self._ends, self._served, self._models = keys, starts, ends, bytearray(n), models
        for i, key in enumerate(keys):
            self._link(key, i)
        if torn_offset is not None:
            self._mark_torn(torn_offset, torn_line)
        self.needs_newline, self._state = needs_newline, (st.st_size, st.st_mtime_ns)
        return True

    def save_index(self) -> None:
        """Write the sidecar index, if it is behind and still describes the file exactly as it is now (and the
        file is big enough for an index to pay). It is a cache: a folder that cannot take it gets none."""
        if not self._dirty or self._state is None or self._state[0] < INDEX_MIN_BYTES:
            return
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                if (st.st_size, st.st_mtime_ns) != self._state:
                    return
                probes = _probes(f, st.st_size)
            index = {"format": _INDEX_FORMAT, "file": [st.st_size, st.st_mtime_ns, *probes], "records": len(self),
                     "models": sorted(self._models), "needs_newline": self.needs_newline,
                     "torn": [self.torn_offset, self._torn_line] if self.torn else None,
                     "keys": "".join(self._keys), "starts": _pack(self._starts), "ends": _pack(self._ends)}
            write_text(index_path(self.path), json.dumps(index))
            self._dirty = False
        except OSError:
            pass

    # -- writing ---------------------------------------------------------------------------------------------
    def append(self, rec: dict[str, Any]) -> None:
        """Append `rec` as one line, flushed and fsynced (a SIGKILL loses at most this record), and index it
        as served (this run made it: FIFO does not serve it again)."""
        line = encode_record(rec)
        data = b"\n" + line if self.needs_newline else line
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size == 0:  # a new cassette: its first line names its format
                data = (json.dumps(header()) + "\n").encode("utf-8") + data
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND: just past what was written
            st = os.fstat(fd)
        finally:
            os.close(fd)
        self.needs_newline = False
        # Still the index of the whole file, unless another process appended since it was made.
        contiguous = self._state is not None and self._state[0] == end - len(data) == st.st_size - len(data)
        self._state, self._dirty = (end, st.st_mtime_ns) if contiguous else None, True
        self._served[self._add(rec["key"], rec["model"], end - len(line), end)] = 1

    def cut_torn(self) -> None:
        """Cut off the torn last line (never a complete record) so that appends stay line-aligned."""
        with open(self.path, "r+b") as f:
            f.truncate(self.torn_offset)
            f.flush()
            os.fsync(f.fileno())
            st = os.fstat(f.fileno())
        self._state = (st.st_size, st.st_mtime_ns) if self._state is not None else None
        self.torn, self.torn_offset, self._dirty = None, None, True

    # -- miss diagnostics --------------------------------------------------------------------------------
    def nearest(self, request: Request, model: str | None) -> tuple[dict[str, Any], float] | None:
        """The recorded request most like `request` (by user prompt), reading the records one at a time."""
        if not len(self):
            return None
        target = stored_user_prompt(request)  # compare like with like: stored prompts withhold documents
        counts = Counter(target)

        def prompt(r: dict[str, Any]) -> str:
            return str((r.get("request") or {}).get("user", ""))

        def quick(r: dict[str, Any]) -> float:
            return _quick_ratio(prompt(r), target, counts) + (0.01 if r.get("member") == request.member else 0)

        shortlist = (heapq.nlargest(8, (r for r in self._each() if r.get("call_type") == request.call_type), key=quick)
                     or heapq.nlargest(8, self._each(), key=quick))
        scored = [(r, difflib.SequenceMatcher(None, prompt(r), target).ratio()) for r in shortlist]
        return max(scored, key=lambda rs: (rs[1], rs[0].get("member") == request.member))


def _quick_ratio(a: str, b: str, b_counts: Counter[str]) -> float:
    """difflib's ``SequenceMatcher(None, a, b).quick_ratio()`` (the characters a and b share, as a ratio),
    counted in C: ~10× faster, which matters when a miss compares against 100k records."""
    return 2.0 * sum((Counter(a) & b_counts).values()) / (len(a) + len(b)) if a or b else 1.0


def _first_difference(old: str, new: str) -> tuple[int, str, str] | None:
    a, b = old.splitlines(), new.splitlines()
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "<no line>"
        y = b[i] if i < len(b) else "<no line>"
        if x != y:
            return i + 1, x, y
    return None


def _clip(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def request_changes(rec: Mapping[str, Any], request: Request, model: str | None) -> list[str]:
    """How `request` differs from the recorded one (`rec`): ``temperature: recorded 0.0, requested 0.5`` per
    setting or model, and the name of each prompt part or schema that differs."""
    req = rec.get("request") or {}
    settings = req.get("settings") or {}
    out = []
    for name, was, now in (("max_tokens", settings.get("max_tokens"), request.max_tokens),
                           ("temperature", settings.get("temperature"), float(request.temperature)),
                           ("model", rec.get("model"), model or rec.get("model"))):
        if was != now:
            out.append(f"{name}: recorded {was}, requested {now}")
    for part, old, new in (("system prompt", req.get("system"), request.system),
                           ("user prompt", req.get("user"), stored_user_prompt(request))):
        if str(old or "") != new:
            out.append(part)
    if req.get("schema") != request.schema:
        out.append("output schema")
    return out


def why_missed(cassette: Cassette, request: Request, model: str | None) -> str:
    """Why a replayed request has no recording, in one line: what changed since the member was recorded."""
    rec = cassette.recorded_for(request.member, request.call_type)
    if rec is None:
        return f"{request.member} ({request.call_type}) was never recorded in it"
    changes = request_changes(rec, request, model)
    return ("the request changed since recording: " + "; ".join(changes) if changes
            else "its recordings were all served already (this run asks for the request more often)")


def rerecord_command(label: str, kind: str, model: str | None, path: Path) -> str:
    try:
        template = provider_of(kind).rerecord
    except UsageError:  # a kind nothing provides here ("?": the cassette holds no record to tell)
        template = None
    spec = template.format(model=model) if template and model else "<live spec>"
    return f"evalkit run ... --backend {label}={spec} --record {label}={path}"


def miss_message(cassette: Cassette, label: str, request: Request, key: str, model: str | None) -> str:
    lines = [f"cassette miss: backend {label}, member {request.member} (call {request.call_type}): "
             f"no recorded response in {cassette.path}",
             f"  key {key} (model {model or '?'}, max_tokens {request.max_tokens}, temperature {request.temperature})"]
    recorded = cassette.recorded_count(key)
    if recorded:
        lines.append(f"  this exact request was recorded {recorded} time(s) and this run asks for it more often")
    near = cassette.nearest(request, model)
    kind = "?"
    if near is None:
        lines.append("  the cassette holds no records to compare with")
    else:
        rec, ratio = near
        kind = rec.get("provider", "?")
        req = rec.get("request") or {}
        lines.append(f"  nearest recorded request: member {rec.get('member', '?')} ({rec.get('call_type')}, model "
                     f"{rec.get('model')}, recorded {rec.get('timestamp', '?')}), user prompt {ratio:.1%} similar")
        for part, old, new in (("system prompt", str(req.get("system", "")), request.system),
                               ("user prompt", str(req.get("user", "")), stored_user_prompt(request))):
            diff = _first_difference(old, new)
            if diff:
                n, x, y = diff
                lines += [f"    first difference in the {part}, line {n}:", f"      recorded: {_clip(x)!r}",
                          f"      now:      {_clip(y)!r}"]
        others = [c for c in request_changes(rec, request, model) if not c.endswith("prompt")]
        if others:
            lines.append(f"    also differs: {', '.join(others)}")
    lines.append("  the prompt, schema, model or settings changed since recording (replay never calls a provider). "
                 "Re-record with:")
    lines.append(f"    {rerecord_command(label, kind, model, cassette.path)}")
    return "\n".join(lines)


# -- backends --------------------------------------------------------------------------------------------
class ReplayBackend:
    """``cassette:path=P[,model=M]``: serves recorded responses, never calls anything."""

    provider = CASSETTE

    def __init__(self, label: str, path: str | Path, model: str | None = None, cassette: Cassette | None = None):
        self.label = label
        self.cassette = cassette if cassette is not None else Cassette.load(path)
        self.path = self.cassette.path
        models = self.cassette.models()
        if model:
            self._models = [model]
        else:
            self._models = models
        self.model = model or (models[0] if len(models) == 1 else "cassette")
        options = {"path": str(path), **({"model": model} if model else {})}
        self.spec = BackendSpec(label, CASSETTE, options).redacted().spec

    def estimate_usd(self, request: Request) -> float:
        return 0.0

    def keys_for(self, request: Request) -> list[str]:
        return [cassette_key(request, m) for m in self._models]

    async def complete(self, request: Request) -> Completion:
        for key in self.keys_for(request):
            rec = self.cassette.take(key)
            if rec is not None:
                return completion_from_record(rec)
        key = cassette_key(request, self._models[0]) if self._models else "(cassette is empty)"
        raise CassetteMiss(miss_message(self.cassette, self.label, request, key, self._models[0] if self._models else None))

    async def aclose(self) -> None:
        self.cassette.save_index()


class RecordingBackend:
    """Wraps a live backend: replays what the cassette holds, calls and appends for the rest.

    ``keep_failed_responses``: a call that came back but is unusable (``malformed``, or
    ``truncated.exhausted``) is the model's real answer; with True (the default) it is
    written to the cassette too (and to the sidecar), so replay reproduces the recording
    run's scores, failures included. With False only fully successful calls are recorded
    and replaying such a member is a miss. Provider errors are never recorded.
    """

    def __init__(self, inner: Any, path: str | Path, *, provider: str | None = None, cassette: Cassette | None = None,
                 keep_failed_responses: bool = True, rotate_bytes: int | None = None):
        self.inner = inner
        self.label, self.spec, self.model = inner.label, inner.spec, inner.model
        self.provider: str = provider if provider else getattr(inner, "provider", "unknown")
        self.path = Path(path)
        self.keep_failed_responses = keep_failed_responses
        self.cassette = cassette if cassette is not None else Cassette.load(self.path, missing_ok=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.cassette.torn_offset is not None:
            self.cassette.cut_torn()
            print(f"evalkit: warning: cassette {self.path}: removed the torn last line before appending", file=sys.stderr)
        if self.cassette.duplicates:  # appending would bury the doubled lines deeper
            raise CassetteCorrupt(f"{self.cassette.duplicates[0]} before recording onto it")
        self.path.touch(exist_ok=True)
        kwargs = {"rotate_bytes": rotate_bytes} if rotate_bytes else {}
        self.failures = FailureLog(self.path, **kwargs)
        if hasattr(inner, "on_failure"):
            inner.on_failure = self._on_failure
        self.recorded = 0
        self.replayed = 0

    def _on_failure(self, failure: Failure) -> None:
        self.failures.write(failure)

    def live(self, request: Request) -> bool:
        """A call the cassette cannot replay goes to the wrapped backend."""
        inner = getattr(self.inner, "live", None)
        return not self.cassette.available(cassette_key(request, self.model)) and bool(inner and inner(request))

    def estimate_usd(self, request: Request) -> float:
        if self.cassette.available(cassette_key(request, self.model)):
            return 0.0
        estimate = getattr(self.inner, "estimate_usd", None)
        return estimate(request) if estimate else 0.0

    async def complete(self, request: Request) -> Completion:
        key = cassette_key(request, self.model)
        rec = self.cassette.take(key)
        if rec is not None:
            self.replayed += 1
            return completion_from_record(rec)
        return self.keep(request, await self.inner.complete(request), key)

    def keep(self, request: Request, completion: Completion, key: str | None = None) -> Completion:
        """Append what a call of `request` gave, as the recording rules say (also a provider batch's answer)."""
        usable = completion.parse in ("clean", "recovered") and completion.truncated != "exhausted"
        if completion.error is None and (usable or self.keep_failed_responses):
            self.cassette.append(make_record(request, self.model, self.provider, completion, key))
            self.recorded += 1
        return completion

    async def aclose(self) -> None:
        self.cassette.save_index()
        await self.inner.aclose()


# -- environment -----------------------------------------------------------------------------------------
def env_cassette(env: Mapping[str, str] | None = None) -> tuple[str, Path] | None:
    """("record" | "replay", path) from EVALKIT_RECORD_LLM / EVALKIT_REPLAY_LLM; both set is an error."""
    env = os.environ if env is None else env
    record, replay = env.get(RECORD_ENV) or None, env.get(REPLAY_ENV) or None
    if record and replay:
        raise UsageError(f"{RECORD_ENV} and {REPLAY_ENV} are both set: choose one (record to a cassette, or replay one)")
    if record:
        return "record", Path(record)
    if replay:
        return "replay", Path(replay)
    return None


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a cassette (for tools and tests)."""
    return Cassette.load(path).records


def concat(paths: Iterable[str | Path], out: str | Path) -> None:
    """Concatenate cassettes (order does not matter for replay), streaming: any size fits."""
    with open(out, "ab") as f:
        for p in paths:
            with open(p, "rb") as src:
                shutil.copyfileobj(src, f)
                if src.tell():
                    src.seek(-1, os.SEEK_END)
                    if src.read(1) != b"\n":
                        f.write(b"\n")


def merge_samples(out: str | Path, inputs: Sequence[str | Path]) -> dict[str, int]:
    """One multi-sample cassette from K cassettes recorded independently of the same requests (each a full pass
    at temperature > 0 on a fresh server, recorded without ``--samples``): input i's records become sample i
    (their keys `sample_key` of the recorded key and i, ``"sample": i`` stored), input 0's stay sample 0 as
    recorded. Returns how many records each sample has. Refused: fewer than two inputs, the same file (or the
    same bytes) twice, an input that already holds samples, `out` among the inputs."""
    paths = [Path(p) for p in inputs]
    if len(paths) < 2:
        raise UsageError("merge_samples: give at least two cassettes (one per sample)")
    if Path(out).resolve() in {p.resolve() for p in paths}:
        raise UsageError(f"merge_samples: {out} is one of the inputs; write the merged cassette elsewhere")
    seen: dict[str, Path] = {}
    for p in paths:
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        if digest in seen:
            raise UsageError(f"merge_samples: {p} is byte-identical to {seen[digest]}: the same recording twice is "
                             "not two samples")
        seen[digest] = p
    lines = [encode_record(header())]
    counts: dict[str, int] = {}
    for i, p in enumerate(paths):
        records = Cassette.load(p).records
        for rec in records:
            if rec.get("sample"):
                raise UsageError(f"merge_samples: {p} already holds samples (record {rec['key'][:12]}… is sample "
                                 f"{rec['sample']}); merge cassettes recorded without --samples")
            if i:
                rec = _as_sample(rec, i)
            lines.append(encode_record(rec))
        counts[f"sample {i}"] = len(records)
    write_text(out, b"".join(lines).decode("utf-8"))
    return counts


def _as_sample(rec: dict[str, Any], sample: int) -> dict[str, Any]:
    """A recorded (sample 0) record as sample `sample`: its key derived, ``sample`` after ``member`` (the field
    order `make_record` writes)."""
    out: dict[str, Any] = {}
    for k, v in rec.items():
        out[k] = sample_key(v, sample) if k == "key" else v
        if k == "member":
            out["sample"] = sample
    out.setdefault("sample", sample)
    return out


# Its backend is opened by `resolve` (a replay: the cassette is loaded and checked before any backend exists).
PROVIDER = Provider(CASSETTE, None, usage="cassette:path=P[,model=M]", inputs=INPUT_MODES, free=True)  # keys cover the mode
