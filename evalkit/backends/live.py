"""What every live (paid, networked) backend shares.

A provider module implements one coroutine, `_attempt(request, max_tokens)`,
that makes ONE provider call through the official SDK and reports what came
back as an `Attempt` (error messages in full: they are cut to one line only
after the secret scrubber has seen them). `LiveBackend.complete` adds the rest,
identically for every provider: the secret scrubber on every attempt
(`evalkit.backends.redact`, before anything else sees it), timing, the single truncation
retry with double the budget, JSON parsing, token and USD accounting, failure
reporting (to the sidecar when recording), and turning provider errors into a
`Completion` with ``error`` set instead of an exception.

An answer is an answer or an error. A 2xx response whose body is not an answer of the protocol (an
HTML proxy page, an empty or cut-off body, an event stream none was asked for, JSON of another
shape) is a ``not_an_answer`` error, retried like a 5xx (`LiveBackend._call`), never parsed as the
model's output. Each HTTP request of a call is bounded while it is read (`bounded_http_client`): a
deadline for the whole of it, body included (the backend's ``timeout``, at most
`limits.READ_DEADLINE_S`), and `limits.ANSWER_BYTES` for its body, refused from its Content-Length
or once that much has arrived, never held whole. `limits.READ_DEADLINE_S` also bounds the whole
call, the SDK's retries included.

SDK clients are bound to the event loop they were first used in; the client is
created lazily per loop and closed by `aclose`, after which the backend may be
used again (a new client is made on the next call).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import importlib
import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Final

from evalkit.backends.base import Completion, ParseOutcome, Request
from evalkit.backends.failures import Classification, Failure
from evalkit.backends.parse import parse_record
from evalkit.backends.pricing import PriceTable, default_table, parts_tokens, request_chars
from evalkit.backends.providers import declared
from evalkit.backends.redact import scrub_answer
from evalkit.errors import UsageError
from evalkit.limits import ANSWER_BYTES, READ_DEADLINE_S

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 4  # the SDK's own retries of one call (429, 5xx, timeouts)
NOT_AN_ANSWER: Final = "not_an_answer"  # the error (and failure classification) of a 2xx body that is not an answer


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
    error_class: Classification = "http_error"  # "http_error" | "not_an_answer" (a 2xx body that is no answer: retried)
    extra: dict[str, Any] = field(default_factory=dict)


def option_float(options: Mapping[str, str], key: str, default: float) -> float:
    try:
        return float(options.get(key, default))
    except ValueError:
        raise UsageError(f"backend option {key}={options[key]!r}: expected a number") from None


def option_int(options: Mapping[str, str], key: str, default: int) -> int:
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


def not_an_answer(origin: str, what: str, body: str, why: str) -> Attempt:
    """A response whose body is not `what` (``a chat completion``): an error, never the model's output.
    `origin`: where the body came from (``HTTP 200 text/html``, ``batch result``)."""
    return Attempt(error=f"{NOT_AN_ANSWER}: {origin} body is not {what} ({why}): {body[:200]}",
                   error_class=NOT_AN_ANSWER, raw_body=body)


def decode_answer(body: str) -> tuple[Any, str | None]:
    """(the JSON value of a response body, None) or (None, why it is not one). Refused before parsing when
    it is past `limits.ANSWER_BYTES` (a body the transport did not bound: a batch result)."""
    limit = ANSWER_BYTES.int_value()
    if len(body) > limit or len(body.encode("utf-8", "surrogatepass")) > limit:
        return None, f"larger than {ANSWER_BYTES.describe(limit)}"
    if not body.strip():
        return None, "empty body"
    if body.lstrip().startswith(("data:", "event:", ":")):
        return None, "an event stream, and none was asked for"
    try:
        return json.loads(body), None
    except (ValueError, RecursionError) as e:
        return None, f"not JSON: {e}"


def origin_of(http: Any) -> str:
    """``HTTP 200 text/html``: an httpx response's status and content type, for `not_an_answer`."""
    ctype = http.headers.get("content-type", "").split(";")[0].strip()
    return f"HTTP {http.status_code} {ctype or 'with no content type'}"


# -- the bounds of one HTTP request (limits.READ_DEADLINE_S, limits.ANSWER_BYTES) ---------------------------
_DEADLINE = "evalkit_deadline"  # the request extension holding (its deadline in loop time, what set it)


def http_module() -> ModuleType:
    """The HTTP library the SDKs are built on: httpx2 for the generation installed here, httpx for older ones."""
    try:
        return import_sdk("httpx2")
    except ImportError:  # pragma: no cover
        return import_sdk("httpx")


@functools.cache
def _bound_types() -> tuple[type, type, type]:
    """(DeadlinePassed, AnswerTooLarge, BoundedBody), made on first use (they subclass the HTTP library's types).

    Both errors are the library's own (a read timeout, a read error), so each SDK treats them as it treats a
    timeout or a dropped connection: retried, then its APITimeoutError / APIConnectionError with the cause."""
    httpx: Any = http_module()  # httpx2 or httpx, whichever is installed: its classes are Any to mypy

    class DeadlinePassed(httpx.ReadTimeout):  # type: ignore[misc]  # (subclassing Any: the library above)
        pass

    class AnswerTooLarge(httpx.ReadError):  # type: ignore[misc]  # (subclassing Any: the library above)
        pass

    class BoundedBody(httpx.AsyncByteStream):  # type: ignore[misc]  # (subclassing Any: the library above)
        """A response body read only until its deadline and only up to its byte limit."""

        def __init__(self, inner: Any, deadline: float, limit: int, request: Any):
            self.inner, self.deadline, self.limit, self.request = inner, deadline, limit, request

        async def __aiter__(self) -> Any:
            chunks, seen = self.inner.__aiter__(), 0
            while True:
                try:
                    async with asyncio.timeout_at(self.deadline):
                        chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise DeadlinePassed(self.request.extensions[_DEADLINE][1], request=self.request) from None
                seen += len(chunk)
                if seen > self.limit:
                    raise AnswerTooLarge(too_large_message(self.limit), request=self.request)
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    return DeadlinePassed, AnswerTooLarge, BoundedBody


def too_large_message(limit: int) -> str:
    return f"answer too large: the response body is larger than {ANSWER_BYTES.describe(limit)}"


def bounded_http_client(sdk: ModuleType, deadline_s: float, bounded: Callable[[Any], bool], **kwargs: Any) -> Any:
    """The SDK's own default HTTP client (`sdk.DefaultAsyncHttpxClient`), each request for which `bounded(request)`
    holds (the answer endpoints; not batch file downloads) bounded: done within `deadline_s` of being sent (at
    most `limits.READ_DEADLINE_S`) and a body of at most `limits.ANSWER_BYTES`."""

    async def sent(request: Any) -> None:
        if bounded(request):
            limit = READ_DEADLINE_S.value()
            why = (f"the backend's timeout={deadline_s:g}" if deadline_s < limit else READ_DEADLINE_S.describe(limit))
            seconds = min(deadline_s, limit)
            request.extensions[_DEADLINE] = (asyncio.get_running_loop().time() + seconds,
                                             f"no complete answer within {seconds:g} s of the request, body included "
                                             f"({why})")

    async def answered(response: Any) -> None:
        request = response.request
        if _DEADLINE not in request.extensions:
            return
        deadline = request.extensions[_DEADLINE][0]
        _, too_large, body = _bound_types()
        limit = ANSWER_BYTES.int_value()
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:  # refused before a byte of it is read
            raise too_large(too_large_message(limit), request=request)
        response.stream = body(response.stream, deadline, limit, request)

    return sdk.DefaultAsyncHttpxClient(event_hooks={"request": [sent], "response": [answered]}, **kwargs)


def connection_error(e: BaseException) -> Attempt:
    """The `Attempt` of an SDK's connection or timeout error, naming the bound that ended it, if one did."""
    cause = e.__cause__
    deadline, too_large, _ = _bound_types()
    if isinstance(cause, too_large):
        return Attempt(error=str(cause), raw_body=str(cause))
    # the bound first: the one-line error keeps it (the SDK's own message can be long)
    detail = f"{type(e).__name__}: {cause} ({e})" if isinstance(cause, deadline) else f"{type(e).__name__}: {e}"
    return Attempt(error=detail, raw_body=detail)


def retry_delay(retry: int) -> float:
    """The wait before retry `retry` (0, 1, ...) of a call that got no answer: the SDKs' backoff, 0.5 s doubling to 8 s."""
    return min(8.0, 0.5 * 2.0 ** retry)


async def response_text(raw: Any) -> str:
    """The body of an SDK raw response, read in full."""
    http = raw.http_response
    text: str
    try:
        text = http.text
    except Exception:  # noqa: BLE001 - body not read yet
        await http.aread()
        text = http.text
    return text


def status_error_body(err: Any) -> str:
    """The complete body of a 4xx/5xx response, or the error's own message."""
    response = getattr(err, "response", None)
    if response is not None:
        try:
            text: str = response.text
            return text
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
        """Every call reaches the provider (what holds a lease of ``--scheduler``'s call limit: `evalkit.execution.pool`)."""
        return True

    def estimate_usd(self, request: Request) -> float:
        """What --max-usd reserves for a call: its bound with the truncation retry. The SDK's retries are
        not counted here: a provider does not bill an attempt that failed (a timed-out one aside)."""
        rule = getattr(declared(self.provider), "page_rule", None)  # its provider's (`Provider.page_rule`)
        return self._price_table().bound(self.model, request_chars(request), call_budgets(request.max_tokens),
                                         page_tokens=parts_tokens(request, rule))

    async def _call(self, request: Request, max_tokens: int) -> Attempt:
        """One provider call, scrubbed where it enters evalkit: nothing after this sees a secret.

        A body that is not an answer is retried like a 5xx (`max_retries`, the SDKs' backoff); the whole call,
        retries included, ends at `limits.READ_DEADLINE_S`."""
        seconds = READ_DEADLINE_S.value()
        self.client()  # made (the SDK imported) before the deadline starts
        try:
            async with asyncio.timeout(seconds):
                for retry in range(self.max_retries + 1):
                    attempt = await self._attempt(request, max_tokens)
                    if attempt.error_class != NOT_AN_ANSWER or retry == self.max_retries:
                        break
                    await asyncio.sleep(retry_delay(retry))
        except TimeoutError:
            detail = f"TimeoutError: no complete answer within {READ_DEADLINE_S.describe(seconds)}"
            attempt = Attempt(error=detail, raw_body=detail)
        return scrub_answer(attempt)

    def _report(self, request: Request, attempt: Attempt, classification: Classification, max_tokens: int,
                recovered: bool = False) -> None:
        if self.on_failure is None:
            return
        self.on_failure(Failure(
            classification=classification,
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
        common = Completion(record=None, model=model, input_tokens=sum(a.input_tokens for a in tried),
                            output_tokens=sum(a.output_tokens for a in tried), usd=usd, latency_s=latency,
                            finish_reason=attempt.finish_reason, truncated=truncated, calls=calls,
                            cache_read_tokens=sum(a.cache_read_tokens for a in tried),
                            cache_write_tokens=sum(a.cache_write_tokens for a in tried), batch=batch)
        if attempt.error is not None:  # no answer: a status with its cause (`evalkit.status`), never a score
            self._report(request, attempt, attempt.error_class, budget)
            return replace(common, record=None, raw="", parse="error", error=attempt.error)
        if attempt.truncated:  # exhausted: the doubled budget was cut off too
            self._report(request, attempt, "truncation", budget)
        record: dict[str, Any] | None
        outcome: ParseOutcome
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
        return replace(common, record=record, raw=raw, parse=outcome)
