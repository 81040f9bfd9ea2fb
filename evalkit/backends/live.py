"""What every live (paid, networked) backend shares.

A provider module implements one coroutine, `_attempt(request, max_tokens)`,
that makes ONE provider call through the official SDK and reports what came
back as an `Attempt` (error messages in full: they are cut to one line only
after the secret scrubber has seen them). `LiveBackend.complete` adds the rest,
identically for every provider: the secret scrubber on every attempt
(`evalkit.redact`, before anything else sees it), timing, the single truncation
retry with double the budget, JSON parsing, token and USD accounting, failure
reporting (to the sidecar when recording), and turning provider errors into a
`Completion` with ``error`` set instead of an exception.

SDK clients are bound to the event loop they were first used in; the client is
created lazily per loop and closed by `aclose`, after which the backend may be
used again (a new client is made on the next call).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import sys
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Mapping

from ..pricing import PriceTable, default_table, request_chars
from ..redact import scrub_answer
from .base import Completion, Request
from .failures import Failure
from .parse import parse_record

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 4  # the SDK's own retries of one call (429, 5xx, timeouts)


def call_budgets(max_tokens: int) -> tuple[int, int]:
    """The output budgets one request may be sent with: the call, then its one truncation retry at twice that."""
    return max_tokens, 2 * max_tokens


@dataclass
class Attempt:
    """One provider call, as the provider module saw it."""

    content: str | None = None  # the model's answer as text (a forced tool's input, as JSON)
    record: dict[str, Any] | None = None  # a structured answer the SDK already decoded (tool input)
    finish_reason: str | None = None
    truncated: bool = False  # stopped at max_tokens
    input_tokens: int = 0  # every prompt token, cached ones included
    output_tokens: int = 0
    cache_read_tokens: int = 0  # of input_tokens: served from the provider's prompt cache
    cache_write_tokens: int = 0  # of input_tokens: written to it
    model: str | None = None  # the model id the provider reports
    raw_body: str = ""  # the complete HTTP response body (or error text)
    error: str | None = None  # set when the call failed
    error_class: str = "http_error"  # "http_error" | "malformed" (unreadable response body)
    extra: dict[str, Any] = field(default_factory=dict)


def option_float(options: Mapping[str, str], key: str, default: float) -> float:
    from ..errors import UsageError

    try:
        return float(options.get(key, default))
    except ValueError:
        raise UsageError(f"backend option {key}={options[key]!r}: expected a number") from None


def option_int(options: Mapping[str, str], key: str, default: int) -> int:
    from ..errors import UsageError

    try:
        return int(options.get(key, default))
    except ValueError:
        raise UsageError(f"backend option {key}={options[key]!r}: expected an integer") from None


def import_sdk(name: str) -> ModuleType:
    """Import a provider SDK with the cyclic GC paused, then freeze what the process holds.

    Importing ``openai`` builds ~10^5 long-lived objects (a pydantic model per API type); left
    tracked, the GC triggers repeatedly during the import and scans them all again at interpreter
    exit — ~0.1 s of a 3 s run in benchmarks/bench_concurrency.py. `gc.freeze` moves every object
    alive now (modules, classes, the loaded corpus) to the permanent generation: never scanned
    again, and any of them that later becomes part of a reference cycle is not reclaimed. Done
    once, on the SDK's first import.
    """
    module = sys.modules.get(name)
    if module is not None:
        return module
    enabled = gc.isenabled()
    gc.disable()
    try:
        module = importlib.import_module(name)
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    return module


async def response_text(raw: Any) -> str:
    """The body of an SDK raw response, read in full."""
    http = raw.http_response
    try:
        return http.text
    except Exception:  # noqa: BLE001 - body not read yet
        await http.aread()
        return http.text


def status_error_body(err: Any) -> str:
    """The complete body of a 4xx/5xx response, or the error's own message."""
    response = getattr(err, "response", None)
    if response is not None:
        try:
            return response.text
        except Exception:  # noqa: BLE001
            pass
    body = getattr(err, "body", None)
    if body is not None:
        return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return str(err)


class LiveBackend:
    provider = "live"

    def __init__(self, label: str, spec: str, model: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_retries: int = DEFAULT_MAX_RETRIES, prices: PriceTable | None = None):
        self.label, self.spec, self.model = label, spec, model
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.prices = prices
        self.on_failure: Callable[[Failure], None] | None = None  # set by RecordingBackend
        self._client_obj: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    # -- SDK client lifecycle -------------------------------------------------------------
    def _make_client(self) -> Any:  # pragma: no cover - each provider overrides
        raise NotImplementedError

    def client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client_obj is None or self._client_loop is not loop:
            self._client_obj, self._client_loop = self._make_client(), loop
        return self._client_obj

    async def aclose(self) -> None:
        client, self._client_obj, self._client_loop = self._client_obj, None, None
        if client is not None:
            try:
                await client.close()
            except Exception:  # noqa: BLE001 - closing must never fail a run
                pass

    # -- one provider call ----------------------------------------------------------------
    async def _attempt(self, request: Request, max_tokens: int) -> Attempt:  # pragma: no cover
        raise NotImplementedError

    # -- the shared policy ----------------------------------------------------------------
    def _price_table(self) -> PriceTable:
        return self.prices or default_table()

    def live(self, request: Request) -> bool:
        """Every call reaches the provider (what holds a lease of ``--scheduler``'s call limit: `evalkit.pool`)."""
        return True

    def estimate_usd(self, request: Request) -> float:
        """What --max-usd reserves for a call: its bound with the truncation retry. The SDK's retries are
        not counted here: a provider does not bill an attempt that failed (a timed-out one aside)."""
        return self._price_table().bound(self.model, request_chars(request), call_budgets(request.max_tokens))

    async def _call(self, request: Request, max_tokens: int) -> Attempt:
        """One provider call, scrubbed where it enters evalkit: nothing after this sees a secret."""
        return scrub_answer(await self._attempt(request, max_tokens))

    def _report(self, request: Request, attempt: Attempt, classification: str, max_tokens: int,
                recovered: bool = False) -> None:
        if self.on_failure is None:
            return
        self.on_failure(Failure(
            classification=classification,  # type: ignore[arg-type]
            raw_body=attempt.raw_body or attempt.error or "",
            model=attempt.model or self.model, call_type=request.call_type, member=request.member,
            finish_reason=attempt.finish_reason, completion_tokens=attempt.output_tokens if not attempt.error else None,
            max_tokens=max_tokens, ts_ms=int(time.time() * 1000), recovered=recovered,
        ))

    async def complete(self, request: Request) -> Completion:
        started = time.perf_counter()
        return await self.finish(request, await self._call(request, call_budgets(request.max_tokens)[0]), started)

    async def finish(self, request: Request, attempt: Attempt, started: float, batch: bool = False) -> Completion:
        """The shared policy after the first call (`attempt`): the one truncation retry (a live call, at the
        standard rate, also when the first came from a batch), parsing, accounting, failure reports."""
        budget, retry_budget = call_budgets(request.max_tokens)
        first = attempt
        truncated: str | None = None
        calls = 1
        if attempt.error is None and attempt.truncated:
            first_budget, budget = budget, retry_budget
            attempt = await self._call(request, budget)
            calls += 1
            truncated = "exhausted" if (attempt.error or attempt.truncated) else "retry_succeeded"
            # reported once the retry has told whether it was a failure or a recovered attempt (`failures`)
            self._report(request, first, "truncation", first_budget, recovered=truncated == "retry_succeeded")
        tried = (first, attempt) if calls == 2 else (first,)
        latency = time.perf_counter() - started
        model = attempt.model or self.model
        table = self._price_table()
        usd = sum(table.cost(self.model, a.input_tokens, a.output_tokens, cache_read=a.cache_read_tokens,
                             cache_write=a.cache_write_tokens, batch=batch and a is first) for a in tried)
        common = dict(model=model, input_tokens=sum(a.input_tokens for a in tried),
                      output_tokens=sum(a.output_tokens for a in tried), usd=usd, latency_s=latency,
                      finish_reason=attempt.finish_reason, truncated=truncated, calls=calls,
                      cache_read_tokens=sum(a.cache_read_tokens for a in tried),
                      cache_write_tokens=sum(a.cache_write_tokens for a in tried), batch=batch)
        if attempt.error is not None:
            self._report(request, attempt, attempt.error_class, budget)
            parse = "malformed" if attempt.error_class == "malformed" else "error"
            return Completion(record=None, raw=attempt.raw_body if attempt.error_class == "malformed" else "",
                              parse=parse, error=attempt.error, **common)  # type: ignore[arg-type]
        if attempt.truncated:  # exhausted: the doubled budget was cut off too
            self._report(request, attempt, "truncation", budget)
        if attempt.record is not None:
            record, outcome = attempt.record, "clean"
            raw = attempt.content if attempt.content is not None else json.dumps(record, ensure_ascii=False)
        else:
            raw = attempt.content or ""
            record, outcome = parse_record(raw)
        if attempt.truncated and outcome == "clean":
            outcome = "recovered"  # a cut-off answer that still decodes is partial at best
        if outcome == "malformed" and not attempt.truncated:
            self._report(request, attempt, "malformed", budget)
        return Completion(record=record, raw=raw, parse=outcome, **common)  # type: ignore[arg-type]
