"""``anthropic[:model=M]`` — Claude through the official ``anthropic`` SDK (Messages API).

The task's JSON Schema is enforced with one forced tool call: a single tool
``record_extraction`` whose ``input_schema`` is the schema, and
``tool_choice={"type": "tool", "name": "record_extraction"}``; the tool input
is the record. Temperature is the task's (0 by default). The installed SDK no
longer lists ``temperature`` among ``messages.create``'s parameters, so it is
sent through ``extra_body``; should the API reject it (a 400 naming
``temperature``) the call is repeated once without it and the backend stops
sending it (``send_temperature=false`` does that from the start).

Prompt caching: what every member of a task shares — the tool (the schema) and the system prompt,
which the API reads in that order before the messages — is sent as one cacheable prefix, a
``cache_control: {"type": "ephemeral"}`` breakpoint on the system prompt (on the tool when there
is none). The API caches a prefix of at least its model's minimum (1024 tokens or more, by model;
shorter ones are sent and billed as usual); the usage it reports (``cache_creation_input_tokens``,
``cache_read_input_tokens``) is recorded and priced apart (`evalkit.backends.pricing`). ``cache=false``
sends no breakpoint. The cassette key is the semantic request, so this changes no key.

Input modes (`models.Settings.input`): a document sent as a PDF is one ``document`` content block
(base64, ``application/pdf``), as page images one ``image`` block per page (base64, ``image/png``),
both before the prompt's text in the user message.

The key comes only from ``ANTHROPIC_API_KEY`` and is handed to the SDK
directly (no profile or credentials-file discovery). The base URL can be
changed only through the SDK's own ``ANTHROPIC_BASE_URL`` (tests point it at a
local server). Options: ``model`` (default ``claude-sonnet-5-5``, the newest Sonnet the installed SDK lists,
priced in `evalkit.backends.pricing.DEFAULT_PRICES`), ``timeout``
(seconds per attempt, its whole body included, default 120), ``max_retries`` (the SDK's retries on
429/5xx/timeouts, honouring ``retry-after``; default 4), ``send_temperature``, ``cache``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from evalkit.backends.base import BackendContext, Request
from evalkit.backends.live import (
    Attempt,
    LiveBackend,
    bounded_http_client,
    connection_error,
    decode_answer,
    import_sdk,
    not_an_answer,
    option_float,
    option_int,
    origin_of,
    response_text,
    status_error_body,
)
from evalkit.backends.pricing import PriceTable
from evalkit.backends.providers import Provider
from evalkit.backends.spec import BackendSpec
from evalkit.corpus.parts import PDF_MEDIA_TYPE
from evalkit.corpus.specs import INPUT_MODES
from evalkit.errors import BackendError, UsageError

DEFAULT_MODEL = "claude-sonnet-5-5"
KEY_ENV = "ANTHROPIC_API_KEY"
TOOL_NAME = "record_extraction"
CACHE_CONTROL = {"type": "ephemeral"}  # the default 5-minute prompt cache


class AnthropicBackend(LiveBackend):
    provider = "anthropic"

    def __init__(self, label: str, model: str = DEFAULT_MODEL, timeout_s: float = 120.0, max_retries: int = 4,
                 send_temperature: bool = True, prices: PriceTable | None = None, cache: bool = True):
        if not os.environ.get(KEY_ENV):
            raise BackendError(f"anthropic backend: {KEY_ENV} is not set (the key is read from the environment only)")
        spec = BackendSpec(label, "anthropic", {"model": model}).redacted().spec
        super().__init__(label, spec, model, timeout_s=timeout_s, max_retries=max_retries, prices=prices)
        self.send_temperature = send_temperature
        self.cache = cache

    def _make_client(self) -> Any:
        anthropic = import_sdk("anthropic")
        # The key is read at client creation, from the environment only; base_url is left to
        # the SDK, which honours ANTHROPIC_BASE_URL. Its own HTTP client, each message bounded in time and size.
        return anthropic.AsyncAnthropic(api_key=os.environ.get(KEY_ENV), timeout=self.timeout_s,
                                        max_retries=self.max_retries,
                                        http_client=bounded_http_client(anthropic, self.timeout_s, _is_message))

    def params(self, request: Request, max_tokens: int) -> dict[str, Any]:
        """The Messages API parameters of one request (a call's, or a batch entry's)."""
        tool: dict[str, Any] = {"name": TOOL_NAME, "input_schema": request.schema,
                                "description": "Record the extracted data. The input must follow the schema exactly."}
        params: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens,
                                  "messages": [{"role": "user", "content": user_content(request)}], "tools": [tool],
                                  "tool_choice": {"type": "tool", "name": TOOL_NAME}}
        if self.send_temperature:
            params["temperature"] = request.temperature
        if request.system:
            params["system"] = ([{"type": "text", "text": request.system, "cache_control": CACHE_CONTROL}]
                                if self.cache else request.system)
        elif self.cache:  # the breakpoint closes the shared prefix: tool, then system
            tool["cache_control"] = CACHE_CONTROL
        return params

    async def _create(self, request: Request, max_tokens: int) -> Any:
        params = self.params(request, max_tokens)
        if "temperature" in params:  # not among this SDK's typed parameters: sent as it is
            params["extra_body"] = {"temperature": params.pop("temperature")}
        return await self.client().messages.with_raw_response.create(**params)

    async def _attempt(self, request: Request, max_tokens: int) -> Attempt:
        anthropic = import_sdk("anthropic")
        try:
            try:
                raw = await self._create(request, max_tokens)
            except anthropic.BadRequestError as e:
                if not (self.send_temperature and "temperature" in status_error_body(e).lower()):
                    raise
                self.send_temperature = False
                raw = await self._create(request, max_tokens)
        except anthropic.APIStatusError as e:
            body = status_error_body(e)
            return Attempt(error=f"HTTP {e.status_code} from anthropic: {body}", raw_body=body)
        except anthropic.APIConnectionError as e:  # includes timeouts and the bounds of an answer
            return connection_error(e)
        except anthropic.AnthropicError as e:
            return Attempt(error=f"{type(e).__name__}: {e}", raw_body=str(e))
        return self._read(await response_text(raw), origin_of(raw.http_response))

    # -- Message Batches (--batch: `evalkit.backends.batch`) ---------------------------------------------
    batch_limit = 100_000  # requests per Message Batch (the API's limit; 256 MB is the other)

    async def batch_submit(self, entries: list[tuple[str, Request]]) -> str:
        batch = await self.client().messages.batches.create(
            requests=[{"custom_id": cid, "params": self.params(r, r.max_tokens)} for cid, r in entries])
        batch_id: str = batch.id
        return batch_id

    async def batch_status(self, batch_id: str) -> tuple[bool, int, str]:
        """(ended, requests answered so far, status)."""
        batch = await self.client().messages.batches.retrieve(batch_id)
        c = batch.request_counts
        return batch.processing_status == "ended", c.succeeded + c.errored + c.canceled + c.expired, \
            batch.processing_status

    async def batch_results(self, batch_id: str) -> dict[str, Attempt]:
        """custom_id → its answer as an `Attempt` (an errored, canceled or expired request: an error)."""
        out: dict[str, Attempt] = {}
        async for line in await self.client().messages.batches.results(batch_id):
            result = line.result
            if result.type == "succeeded":
                out[line.custom_id] = self._read(json.dumps(result.message.model_dump(mode="json")), "batch result")
            else:
                error = getattr(result, "error", None)
                detail = json.dumps(error.model_dump(mode="json")) if error is not None else ""
                out[line.custom_id] = Attempt(error=f"batch request {result.type} at anthropic: {detail}".rstrip(": "),
                                              raw_body=detail)
        return out

    def _read(self, body: str, origin: str) -> Attempt:
        """The answer in a Messages API body; a body that is not a message (`origin`: where it came from) is an error."""
        data, why = decode_answer(body)
        if why is not None:
            return not_an_answer(origin, "a message", body, why)
        blocks = data.get("content") if isinstance(data, dict) else None
        if not (isinstance(blocks, list) and all(isinstance(b, dict) for b in blocks)):
            return not_an_answer(origin, "a message", body, "no content blocks")
        try:
            stop = data.get("stop_reason")
            usage = data.get("usage") or {}
            cache_write = int(usage.get("cache_creation_input_tokens") or 0)
            cache_read = int(usage.get("cache_read_input_tokens") or 0)
            input_tokens = int(usage.get("input_tokens") or 0) + cache_write + cache_read  # all prompt tokens
            output_tokens = int(usage.get("output_tokens") or 0)
            tool_input = next((b.get("input") for b in blocks if b.get("type") == "tool_use"), None)
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            return not_an_answer(origin, "a message", body, f"{type(e).__name__}: {e}")
        common = {"finish_reason": stop, "truncated": stop == "max_tokens", "input_tokens": input_tokens,
                      "output_tokens": output_tokens, "cache_read_tokens": cache_read, "cache_write_tokens": cache_write,
                      "model": data.get("model") or None, "raw_body": body}
        if isinstance(tool_input, dict) and stop != "max_tokens":
            return Attempt(content=json.dumps(tool_input, ensure_ascii=False), record=tool_input, **common)
        if tool_input is not None:  # cut off (or not an object): keep its text for the failure record
            return Attempt(content=json.dumps(tool_input, ensure_ascii=False), **common)
        return Attempt(content=text, **common)


def user_content(request: Request) -> str | list[dict[str, Any]]:
    """The user message: the prompt, after the document's parts when it is sent as a PDF or page images (a
    ``document`` block, or one ``image`` block per page, base64; the API reads them before the question)."""
    if not request.parts:
        return request.user
    blocks = [{"type": "document" if p.media_type == PDF_MEDIA_TYPE else "image",
               "source": {"type": "base64", "media_type": p.media_type, "data": p.base64()}} for p in request.parts]
    return blocks + [{"type": "text", "text": request.user}]


def _is_message(request: Any) -> bool:
    """A Messages API call (bounded as an answer), not a batch's results download."""
    path: str = request.url.path
    return path.endswith("/v1/messages")


def make(spec: BackendSpec, ctx: BackendContext) -> AnthropicBackend:
    label, options = spec.label, spec.options
    known = {"model", "timeout", "max_retries", "send_temperature", "cache"}
    unknown = set(options) - known
    if unknown:
        raise UsageError(f"anthropic backend: unknown option(s) {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(sorted(known))}; the key comes from ANTHROPIC_API_KEY only)")
    return AnthropicBackend(label, model=options.get("model") or DEFAULT_MODEL,
                            timeout_s=option_float(options, "timeout", 120.0),
                            max_retries=option_int(options, "max_retries", 4),
                            send_temperature=options.get("send_temperature", "true").lower() in ("1", "true", "yes"),
                            cache=options.get("cache", "true").lower() in ("1", "true", "yes"))


PROVIDER = Provider("anthropic", make, usage="anthropic[:model=M]", live=True, default_model=DEFAULT_MODEL,
                    key_env=KEY_ENV, rerecord="anthropic:model={model}", prompt_cache_min=1024, batch=True,
                    inputs=INPUT_MODES, page_rule="anthropic")
