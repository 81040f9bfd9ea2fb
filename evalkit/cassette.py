"""Record/replay cassettes: real model output, replayed offline, deterministically, for free.

A cassette is plain JSONL, one record per line::

    {"key": "<sha256 hex>", "call_type": "extract", "provider": "openai", "model": "gemma-3-270m",
     "member": "deal-memos/m01", "timestamp": "2026-01-02T03:04:05.678Z",
     "request": {"system": "...", "user": "...", "schema": {...},
                 "settings": {"max_tokens": 1024, "temperature": 0.0}},
     "response": {"content": "<the model's answer text>", "usage": {"input_tokens": 812, "output_tokens": 95},
                  "finish_reason": "stop", "latency_s": 3.21, "parse": "clean", "truncated": null,
                  "calls": 1, "usd": 0.0, "model": "<model id the provider reported>"}}

``key`` is the SHA-256 of the canonical *semantic* request — system prompt,
user prompt, output schema, model id, max_tokens, temperature, call type —
and nothing else (`cassette_key`). Matching is by key alone, so record order
does not matter and cassettes from several runs can simply be concatenated;
identical keys are served first-in first-out, in file order. Editing one word
of a prompt template, the schema or a setting changes the key.

The seam sits above HTTP: only the semantic request and the response content
and usage are stored — never headers, keys, base URLs or raw HTTP bodies — and
what is stored of the response has passed the secret scrubber
(`evalkit.redact`), as has what is replayed.
(``member`` is stored for people reading the file and for miss messages; it
is not part of the key.)

Recording (`RecordingBackend`) appends one line per successful call and
flushes + fsyncs it, so a SIGKILL loses at most the call in flight. It never
truncates recorded data; when the cassette already holds a request it replays
that instead of calling (resume). A provider error never produces a record;
every failed provider call goes to the failure sidecar (`evalkit.failures`).

Replay (`ReplayBackend`) never calls anything: a request with no record
raises `CassetteMiss` naming the member, the key, the nearest recorded request
and the command that re-records.

Load-time checks: a line that is not a valid record raises `CassetteCorrupt`
with its line number; an unreadable *last* line (a crash mid-append) is
reported on stderr and ignored — everything before it replays. When recording
resumes on such a file, that torn fragment (never a complete record) is cut
off before appending.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import sys
from collections import Counter, deque
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from .backends.base import Completion, Request
from .backends.parse import parse_record
from .errors import CassetteCorrupt, CassetteError, CassetteMiss, UsageError
from .failures import Failure, FailureLog
from .jsonio import canonical_sha
from .redact import scrub_answer

RECORD_ENV = "EVALKIT_RECORD_LLM"
REPLAY_ENV = "EVALKIT_REPLAY_LLM"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


# -- keys ------------------------------------------------------------------------------------------------
def canonical_request(request: Request, model: str) -> dict[str, Any]:
    return {"system": request.system, "user": request.user, "schema": request.schema, "model": model,
            "max_tokens": request.max_tokens, "temperature": float(request.temperature),
            "call_type": request.call_type}


def cassette_key(request: Request, model: str) -> str:
    """SHA-256 hex of the canonical semantic request (sorted keys, compact, UTF-8)."""
    return canonical_sha(canonical_request(request, model))


def rfc3339_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
    reparsed = parse_record(completion.raw)[0] if completion.parse in ("clean", "recovered") else None
    if reparsed != completion.record:  # e.g. a python pipeline whose raw text is not its record
        response["record"] = completion.record
    return {
        "key": key or cassette_key(request, model), "call_type": request.call_type, "provider": provider, "model": model,
        "member": request.member, "timestamp": rfc3339_now(),
        "request": {"system": request.system, "user": stored_user_prompt(request), "schema": request.schema,
                    "settings": {"max_tokens": request.max_tokens, "temperature": float(request.temperature)}},
        "response": response,
    }


def completion_from_record(rec: dict[str, Any]) -> Completion:
    """A recorded answer as a `Completion`, through the secret scrubber (a cassette recorded before a
    key was scrubbed, or by another tool, must not carry it further)."""
    r = rec["response"]
    content = r.get("content") or ""
    parse = r.get("parse") or "clean"
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
        finish_reason=r.get("finish_reason"), truncated=r.get("truncated"), calls=0, replayed=True))


def _check_record(rec: Any) -> str | None:
    """Why `rec` is not a cassette record (None when it is one)."""
    if not isinstance(rec, dict):
        return f"expected a JSON object, got {type(rec).__name__}"
    if not isinstance(rec.get("key"), str) or not _HEX64.match(rec["key"]):
        return "'key' must be a 64-character lowercase SHA-256 hex string"
    for name in ("call_type", "model"):
        if not isinstance(rec.get(name), str):
            return f"'{name}' must be a string"
    resp = rec.get("response")
    if not isinstance(resp, dict):
        return "'response' must be an object"
    if not isinstance(resp.get("content"), (str, type(None))):
        return "'response.content' must be a string"
    if not isinstance(rec.get("request"), dict):
        return "'request' must be an object"
    return None


# -- a loaded cassette -----------------------------------------------------------------------------------
class Cassette:
    """The records of one JSONL file, indexed by key (FIFO per key)."""

    def __init__(self, path: str | Path, records: list[dict[str, Any]], *, torn: str | None = None,
                 torn_offset: int | None = None, needs_newline: bool = False):
        self.path = Path(path)
        self.records = records
        self.torn = torn  # the warning, when the last line was torn
        self.torn_offset = torn_offset  # byte offset where the torn line starts
        self.needs_newline = needs_newline  # last record lacks its "\n" (hand-edited file)
        self._queues: dict[str, deque[dict[str, Any]]] = {}
        for rec in records:
            self._queues.setdefault(rec["key"], deque()).append(rec)

    @classmethod
    def load(cls, path: str | Path, *, missing_ok: bool = False, warn: bool = True) -> "Cassette":
        p = Path(path)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            if missing_ok:
                return cls(p, [])
            raise CassetteError(f"cassette {p}: file not found") from None
        except OSError as e:
            raise CassetteError(f"cassette {p}: cannot read it ({e.strerror})") from None
        lines = data.split(b"\n")
        ends_with_newline = data.endswith(b"\n")
        if ends_with_newline:
            lines.pop()  # the empty piece after the final newline
        last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
        records: list[dict[str, Any]] = []
        offset = 0
        torn = torn_offset = None
        for i, raw in enumerate(lines):
            line_start, offset = offset, offset + len(raw) + 1
            if not raw.strip():
                continue
            lineno = i + 1
            try:
                rec = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                if i == last:
                    torn_offset = line_start
                    torn = (f"cassette {p}: line {lineno} is torn (incomplete JSON at the end of the file, "
                            f"most likely a run killed mid-write); ignoring it — the {len(records)} record(s) "
                            f"before it replay")
                    break
                reason = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8"
                raise CassetteCorrupt(f"{p}:{lineno}: corrupt cassette line ({reason}); fix or delete that line "
                                      f"(the {len(records)} record(s) before it are fine)") from None
            why = _check_record(rec)
            if why:
                raise CassetteCorrupt(f"{p}:{lineno}: corrupt cassette line: {why}")
            records.append(rec)
        if torn and warn:
            print(f"evalkit: warning: {torn}", file=sys.stderr)
        needs_newline = bool(data) and not ends_with_newline and torn is None
        return cls(p, records, torn=torn, torn_offset=torn_offset, needs_newline=needs_newline)

    def __len__(self) -> int:
        return len(self.records)

    def models(self) -> list[str]:
        return sorted({r["model"] for r in self.records})

    def available(self, key: str) -> int:
        return len(self._queues.get(key, ()))

    def key_counts(self) -> Counter:
        return Counter({k: len(q) for k, q in self._queues.items()})

    def take(self, key: str) -> dict[str, Any] | None:
        q = self._queues.get(key)
        return q.popleft() if q else None

    def recorded_count(self, key: str) -> int:
        return sum(1 for r in self.records if r["key"] == key)

    def add(self, rec: dict[str, Any]) -> None:
        """Index a record just appended (it is not served again in this run: FIFO consumed it)."""
        self.records.append(rec)

    # -- miss diagnostics --------------------------------------------------------------------------------
    def nearest(self, request: Request, model: str | None) -> tuple[dict[str, Any], float] | None:
        pool = [r for r in self.records if r.get("call_type") == request.call_type] or self.records
        if not pool:
            return None
        target = stored_user_prompt(request)  # compare like with like: stored prompts withhold documents

        def prompt(r: dict[str, Any]) -> str:
            return str((r.get("request") or {}).get("user", ""))

        def quick(r: dict[str, Any]) -> float:
            return difflib.SequenceMatcher(None, prompt(r), target).quick_ratio() + (0.01 if r.get("member") == request.member else 0)

        shortlist = sorted(pool, key=quick, reverse=True)[:8]
        scored = [(r, difflib.SequenceMatcher(None, prompt(r), target).ratio()) for r in shortlist]
        return max(scored, key=lambda rs: (rs[1], rs[0].get("member") == request.member))


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


def rerecord_command(label: str, provider: str, model: str | None, path: Path) -> str:
    if provider == "openai":
        spec = f"openai:url=<URL>,model={model}"
    elif provider == "anthropic":
        spec = f"anthropic:model={model}"
    elif provider == "python" and model:
        spec = model
    else:
        spec = "<live spec>"
    return f"evalkit run ... --backend {label}={spec} --record {label}={path}"


def miss_message(cassette: Cassette, label: str, request: Request, key: str, model: str | None) -> str:
    lines = [f"cassette miss: backend {label}, member {request.member} (call {request.call_type}): "
             f"no recorded response in {cassette.path}",
             f"  key {key} (model {model or '?'}, max_tokens {request.max_tokens}, temperature {request.temperature})"]
    recorded = cassette.recorded_count(key)
    if recorded:
        lines.append(f"  this exact request was recorded {recorded} time(s) and this run asks for it more often")
    near = cassette.nearest(request, model)
    provider = "?"
    if near is None:
        lines.append("  the cassette holds no records to compare with")
    else:
        rec, ratio = near
        provider = rec.get("provider", "?")
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
        others = []
        if req.get("schema") != request.schema:
            others.append("output schema")
        settings = req.get("settings") or {}
        if settings.get("max_tokens") != request.max_tokens or float(settings.get("temperature", -1)) != float(request.temperature):
            others.append(f"settings (recorded max_tokens {settings.get('max_tokens')}, temperature "
                          f"{settings.get('temperature')})")
        if model and rec.get("model") != model:
            others.append(f"model (recorded {rec.get('model')})")
        if others:
            lines.append(f"    also differs: {', '.join(others)}")
    lines.append("  the prompt, schema, model or settings changed since recording (replay never calls a provider). "
                 "Re-record with:")
    lines.append(f"    {rerecord_command(label, provider, model, cassette.path)}")
    return "\n".join(lines)


# -- backends --------------------------------------------------------------------------------------------
class ReplayBackend:
    """``cassette:path=P[,model=M]``: serves recorded responses, never calls anything."""

    provider = "cassette"

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
        self.spec = f"cassette:path={path}" + (f",model={model}" if model else "")

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
        return None


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
        self.provider = provider or getattr(inner, "provider", "unknown")
        self.path = Path(path)
        self.keep_failed_responses = keep_failed_responses
        self.cassette = cassette if cassette is not None else Cassette.load(self.path, missing_ok=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.cassette.torn_offset is not None:
            # Cut off only the torn fragment (never a complete record) so appends stay line-aligned.
            with open(self.path, "r+b") as f:
                f.truncate(self.cassette.torn_offset)
                f.flush()
                os.fsync(f.fileno())
            print(f"evalkit: warning: cassette {self.path}: removed the torn last line before appending", file=sys.stderr)
            self.cassette.torn_offset = None
        self._needs_newline = self.cassette.needs_newline
        self.path.touch(exist_ok=True)
        kwargs = {"rotate_bytes": rotate_bytes} if rotate_bytes else {}
        self.failures = FailureLog(self.path, **kwargs)
        if hasattr(inner, "on_failure"):
            inner.on_failure = self._on_failure
        self.recorded = 0
        self.replayed = 0

    def _on_failure(self, failure: Failure) -> None:
        self.failures.write(failure)

    def estimate_usd(self, request: Request) -> float:
        if self.cassette.available(cassette_key(request, self.model)):
            return 0.0
        estimate = getattr(self.inner, "estimate_usd", None)
        return estimate(request) if estimate else 0.0

    def _append(self, rec: dict[str, Any]) -> None:
        line = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
        if self._needs_newline:
            line, self._needs_newline = b"\n" + line, False
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        self.cassette.add(rec)

    async def complete(self, request: Request) -> Completion:
        key = cassette_key(request, self.model)
        rec = self.cassette.take(key)
        if rec is not None:
            self.replayed += 1
            return completion_from_record(rec)
        completion = await self.inner.complete(request)
        usable = completion.parse in ("clean", "recovered") and completion.truncated != "exhausted"
        if completion.error is None and (usable or self.keep_failed_responses):
            self._append(make_record(request, self.model, self.provider, completion, key))
            self.recorded += 1
        return completion

    async def aclose(self) -> None:
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
    """Concatenate cassettes (order does not matter for replay)."""
    with open(out, "ab") as f:
        for p in paths:
            data = Path(p).read_bytes()
            f.write(data if data.endswith(b"\n") or not data else data + b"\n")
