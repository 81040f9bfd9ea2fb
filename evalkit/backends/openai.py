"""``openai:url=URL|socket=PATH[,model=M][,schema_mode=json_schema|json_object|none]`` — any OpenAI-compatible server.

Through the official ``openai`` SDK (``AsyncOpenAI``, chat completions). The
task's JSON Schema is sent as ``response_format={"type": "json_schema", ...}``
by default. A server that rejects that (an HTTP 4xx/5xx whose body mentions
``response_format``; llama.cpp's server answers 500) is asked again, once, with
``{"type": "json_object", "schema": {...}}`` — llama.cpp's dialect, which the
typed SDK method would need ``extra_body`` for — and the backend keeps using
that mode. ``schema_mode=none``
sends no response_format and relies on the prompt and the JSON repair.

Options: ``url`` (the server's ``/v1`` base URL; default: the SDK's, i.e.
``OPENAI_BASE_URL`` or api.openai.com), ``socket`` (a server listening on a Unix domain
socket at PATH, such as a local llama.cpp or mlx server: the SDK's own HTTP client is
given an httpx transport on that socket; the base URL is then ``url`` or
``http://localhost/v1``, whose host only fills the Host header), ``model`` (default ``default``),
``schema_mode``, ``timeout`` (seconds per attempt, its whole body included, default 120),
``max_retries`` (the SDK's own retries on 408/409/429/5xx/timeouts, honouring
``retry-after``; default 4), ``strict`` (json_schema strict flag, default false),
``merge_system`` (send the system prompt at the top of the user message, for chat
formats that silently drop system messages, such as llama.cpp's ``gemma``;
default false). None of these options is part of a cassette key.

Input modes (`models.Settings.input`): a document sent as a PDF is a ``file`` content part (its bytes a
``data:application/pdf;base64,`` URL, its file name), as page images one ``image_url`` part per page (a
``data:image/png;base64,`` URL, ``detail: high``, which `evalkit.backends.pricing` prices), before the prompt's text.

Prompt caching is the server's: OpenAI caches a prompt prefix of 1024 tokens or more by itself (the
system message, then the user message, come in that order: what a task's members share comes
first). ``usage.prompt_tokens_details.cached_tokens`` is recorded and priced at the cached rate.

A 400 naming ``max_completion_tokens`` (newer OpenAI models) switches the budget
parameter to it; a 400 naming ``temperature`` (models that only take their
default) drops temperature. Each happens once per backend and is remembered.

The key comes from ``OPENAI_API_KEY``; a local server (a ``url`` or a ``socket`` was
given) gets a dummy key when none is set. Without either the key is required.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any

from evalkit.backends.base import BackendContext, Request
from evalkit.backends.live import (
    Attempt,
    LiveBackend,
    bounded_http_client,
    connection_error,
    decode_answer,
    http_module,
    import_sdk,
    not_an_answer,
    option_float,
    option_int,
    origin_of,
    status_error_body,
)
from evalkit.backends.pricing import PriceTable
from evalkit.backends.providers import Provider
from evalkit.backends.spec import BackendSpec
from evalkit.corpus.parts import PDF_MEDIA_TYPE
from evalkit.corpus.specs import INPUT_MODES
from evalkit.errors import BackendError, UsageError

SCHEMA_MODES = ("json_schema", "json_object", "none")
DEFAULT_MODEL = "default"
KEY_ENV = "OPENAI_API_KEY"
DUMMY_KEY = "sk-no-key-required"
BATCH_ENDED = ("completed", "failed", "expired", "cancelled")
SOCKET_BASE_URL = "http://localhost/v1"  # over a Unix socket the host only names the Host header


class OpenAIBackend(LiveBackend):
    provider = "openai"

    def __init__(self, label: str, url: str | None = None, model: str = DEFAULT_MODEL, schema_mode: str = "json_schema",
                 timeout_s: float = 120.0, max_retries: int = 4, strict: bool = False, merge_system: bool = False,
                 prices: PriceTable | None = None, socket: str | None = None):
        if schema_mode not in SCHEMA_MODES:
            raise UsageError(f"openai backend: schema_mode={schema_mode!r} (choose {', '.join(SCHEMA_MODES)})")
        key = os.environ.get(KEY_ENV)
        if not key and not url and not socket:
            raise BackendError(f"openai backend: {KEY_ENV} is not set (give url=... or socket=... for a local server)")
        self._key = key or DUMMY_KEY
        self.url = url or (SOCKET_BASE_URL if socket else None)
        self.socket = socket
        # What its artefacts record: the options that change the answers (not timeout, retries, strict).
        opts = ({"url": url} if url else {}) | ({"socket": socket} if socket else {}) | {"model": model}
        if schema_mode != "json_schema":
            opts["schema_mode"] = schema_mode
        if merge_system:
            opts["merge_system"] = "true"
        spec = BackendSpec(label, "openai", opts).redacted().spec
        super().__init__(label, spec, model, timeout_s=timeout_s, max_retries=max_retries, prices=prices)
        self.schema_mode = schema_mode
        self.strict = strict
        self.merge_system = merge_system
        self._tokens_param = "max_tokens"  # what local servers take; adapted on a 400 (see _adapt)
        self._send_temperature = True
        self._confirmed = schema_mode != "json_schema"  # json_schema is probed until it first succeeds
        self._no_retry_client: Any = None

    def _make_client(self) -> Any:
        AsyncOpenAI = import_sdk("openai").AsyncOpenAI

        kwargs: dict[str, Any] = {"api_key": self._key, "timeout": self.timeout_s, "max_retries": self.max_retries}
        if self.url:
            kwargs["base_url"] = self.url
        # the SDK's own HTTP client (its defaults, retries, errors), each chat completion bounded in time and
        # size (`live.bounded_http_client`); over a Unix domain socket when one is given
        transport = {"transport": http_module().AsyncHTTPTransport(uds=self.socket)} if self.socket else {}
        kwargs["http_client"] = bounded_http_client(import_sdk("openai"), self.timeout_s, _is_completion, **transport)
        client = AsyncOpenAI(**kwargs)
        self._no_retry_client = client.with_options(max_retries=0)
        return client

    def _body(self, request: Request, max_tokens: int, mode: str) -> dict[str, Any]:
        messages = []
        if request.system and self.merge_system:  # for chat formats that drop system messages (llama.cpp gemma)
            messages.append({"role": "user", "content": user_content(request, f"{request.system}\n\n{request.user}")})
        else:
            if request.system:
                messages.append({"role": "system", "content": request.system})
            messages.append({"role": "user", "content": user_content(request, request.user)})
        body: dict[str, Any] = {"model": self.model, "messages": messages, self._tokens_param: max_tokens}
        if self._send_temperature:
            body["temperature"] = request.temperature
        if mode == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "extraction", "schema": request.schema, "strict": self.strict}}
        elif mode == "json_object":  # llama.cpp's dialect (what the SDK would send through extra_body)
            body["response_format"] = {"type": "json_object", "schema": request.schema}
        return body

    async def _create(self, client: Any, request: Request, max_tokens: int, mode: str) -> Any:
        """POST /chat/completions through the SDK (auth, timeout, retries with retry-after, error types).

        The body is the chat-completions request as the SDK's ``chat.completions.create`` would
        send it; it goes through the SDK's documented raw-request method (``client.post(...,
        cast_to=httpx.Response)``) because the typed method's per-call parameter transform costs
        ~3 ms of CPU per call — a quarter of the client's CPU in the concurrency benchmark — and the
        answer is read from the complete body anyway (to keep it for the failure sidecar).
        """
        return await client.post("/chat/completions", cast_to=_response_class(),
                                  body=self._body(request, max_tokens, mode))

    async def _attempt(self, request: Request, max_tokens: int) -> Attempt:
        openai = import_sdk("openai")

        client = self.client()
        for _ in range(3):  # at most two request adaptations (see _adapt)
            try:
                if self._confirmed:
                    raw = await self._create(client, request, max_tokens, self.schema_mode)
                else:
                    raw = await self._probe(request, max_tokens)
                break
            except openai.APIStatusError as e:
                body = status_error_body(e)
                if self._adapt(e.status_code, body):
                    continue
                return Attempt(error=f"HTTP {e.status_code} from {self.provider} server: {body}", raw_body=body)
            except openai.APIConnectionError as e:  # includes timeouts and the bounds of an answer
                return connection_error(e)
            except openai.OpenAIError as e:
                return Attempt(error=f"{type(e).__name__}: {e}", raw_body=str(e))
        else:
            return Attempt(error=f"{self.provider} server kept rejecting the request", raw_body="")
        self._confirmed = True
        return self._read(raw.text, origin_of(raw))  # an httpx Response, read in full

    def _adapt(self, status: int, body: str) -> bool:
        """Adapt once to a 400 that names a parameter this model does not take (newer OpenAI models
        want ``max_completion_tokens`` and may refuse ``temperature``); remembered for later calls."""
        text = body.lower()
        if status != 400:
            return False
        if "max_completion_tokens" in text and self._tokens_param == "max_tokens":
            self._tokens_param = "max_completion_tokens"
            return True
        if "temperature" in text and self._send_temperature:
            self._send_temperature = False
            return True
        return False

    async def _probe(self, request: Request, max_tokens: int) -> Any:
        """A json_schema call while it is not yet known whether the server accepts json_schema.

        The first try makes no SDK retries, so a server that rejects response_format
        (llama.cpp answers 500) costs no backoff. Any other failure is retried the way the
        SDK would have (honouring retry-after), with the remaining retry budget.
        """
        openai = import_sdk("openai")
        client = self.client()
        try:
            return await self._create(self._no_retry_client, request, max_tokens, "json_schema")
        except openai.APIStatusError as e:
            if "response_format" in status_error_body(e).lower():
                self.schema_mode, self._confirmed = "json_object", True
                return await self._create(client, request, max_tokens, "json_object")
            if self.max_retries < 1 or not _retryable(e.status_code):
                raise
            await asyncio.sleep(_retry_delay(e.response.headers))
        except openai.APIConnectionError:
            if self.max_retries < 1:
                raise
            await asyncio.sleep(0.5)
        return await self._create(client.with_options(max_retries=self.max_retries - 1), request, max_tokens,
                                  self.schema_mode)

    # -- the Batch API (--batch: `evalkit.backends.batch`) -------------------------------------------------
    batch_limit = 50_000  # requests per batch input file (the API's limit; 200 MB is the other)

    async def batch_submit(self, entries: list[tuple[str, Request]]) -> str:
        lines = [json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                             "body": self._body(r, r.max_tokens, self.schema_mode)}) for cid, r in entries]
        client = self.client()
        uploaded = await client.files.create(file=("evalkit-batch.jsonl", "\n".join(lines).encode("utf-8"),
                                                   "application/jsonl"), purpose="batch")
        batch = await client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                            completion_window="24h")
        batch_id: str = batch.id
        return batch_id

    async def batch_status(self, batch_id: str) -> tuple[bool, int, str]:
        """(ended, requests answered so far, status)."""
        batch = await self.client().batches.retrieve(batch_id)
        c = batch.request_counts
        return batch.status in BATCH_ENDED, (c.completed + c.failed) if c else 0, batch.status

    async def batch_results(self, batch_id: str) -> dict[str, Attempt]:
        """custom_id → its answer as an `Attempt` (a non-200 answer or an error-file line: an error)."""
        client = self.client()
        batch = await client.batches.retrieve(batch_id)
        out: dict[str, Attempt] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for line in (await client.files.content(file_id)).text.splitlines():
                if not line.strip():
                    continue
                row = json.loads(line)
                response = row.get("response") or {}
                if row.get("error") or response.get("status_code") != 200:
                    detail = json.dumps(row.get("error") or response.get("body"))
                    out[row["custom_id"]] = Attempt(error=f"HTTP {response.get('status_code')} from {self.provider} "
                                                          f"batch: {detail}", raw_body=detail)
                else:
                    out[row["custom_id"]] = self._read(json.dumps(response.get("body")), "batch result")
        return out

    def _read(self, body: str, origin: str) -> Attempt:
        """The answer in a chat completion's body; a body that is not one (`origin`: where it came from) is an error."""
        data, why = decode_answer(body)
        if why is not None:
            return not_an_answer(origin, "a chat completion", body, why)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)
                and isinstance(choices[0].get("message"), dict)):
            return not_an_answer(origin, "a chat completion", body, "no choices[0].message")
        try:
            choice = choices[0]
            message = choice["message"]
            content = message.get("content")
            if content is None and message.get("refusal"):
                content = message["refusal"]
            finish = choice.get("finish_reason")
            usage = data.get("usage") or {}
            input_tokens = int(usage.get("prompt_tokens") or 0)
            output_tokens = int(usage.get("completion_tokens") or 0)
            # automatic prefix caching: the part of prompt_tokens served from the cache (no write charge)
            cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            return not_an_answer(origin, "a chat completion", body, f"{type(e).__name__}: {e}")
        return Attempt(content=content if isinstance(content, str) else (json.dumps(content) if content else None),
                       finish_reason=finish, truncated=finish == "length", input_tokens=input_tokens,
                       output_tokens=output_tokens, cache_read_tokens=cached, model=data.get("model") or None,
                       raw_body=body)


def user_content(request: Request, text: str) -> str | list[dict[str, Any]]:
    """The user message's content: `text`, after the document's parts when it is sent as a PDF (a ``file``
    part, its bytes a data URL) or as page images (one ``image_url`` part per page, a data URL, detail high)."""
    if not request.parts:
        return text
    parts: list[dict[str, Any]] = [
        {"type": "file", "file": {"filename": p.name, "file_data": p.data_uri()}} if p.media_type == PDF_MEDIA_TYPE
        else {"type": "image_url", "image_url": {"url": p.data_uri(), "detail": "high"}} for p in request.parts]
    return parts + [{"type": "text", "text": text}]


def _response_class() -> type:
    response: type = http_module().Response  # httpx2 or httpx, whichever is installed
    return response


def _is_completion(request: Any) -> bool:
    """A chat completion (bounded as an answer), not a batch file upload or download."""
    path: str = request.url.path
    return path.endswith("/chat/completions")


def _retryable(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def _retry_delay(headers: Any) -> float:
    """What the SDK would wait: retry-after-ms / retry-after (≤ 120 s), else 0.5 s."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name)) / divisor
        except (TypeError, ValueError):
            continue
        if 0 < value <= 120:
            return value
    return 0.5


def make(spec: BackendSpec, ctx: BackendContext) -> OpenAIBackend:
    label, options = spec.label, spec.options
    known = {"url", "socket", "model", "schema_mode", "timeout", "max_retries", "strict", "merge_system"}
    unknown = set(options) - known
    if unknown:
        raise UsageError(f"openai backend: unknown option(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")
    return OpenAIBackend(
        label, url=options.get("url") or None, model=options.get("model") or DEFAULT_MODEL,
        schema_mode=options.get("schema_mode", "json_schema"), timeout_s=option_float(options, "timeout", 120.0),
        max_retries=option_int(options, "max_retries", 4),
        strict=_flag(options, "strict"), merge_system=_flag(options, "merge_system"),
        socket=options.get("socket") or None)


def _flag(options: Mapping[str, str], key: str) -> bool:
    value = options.get(key, "false").lower()
    if value not in ("1", "true", "yes", "0", "false", "no"):
        raise UsageError(f"openai backend: {key}={options[key]!r}: expected true or false")
    return value in ("1", "true", "yes")


PROVIDER = Provider("openai", make, usage="openai:url=U|socket=PATH[,model=M]", live=True, default_model=DEFAULT_MODEL,
                    key_env=KEY_ENV, key_unless=("url", "socket"), rerecord="openai:url=<URL>,model={model}",
                    prompt_cache_min=1024, batch=True, inputs=INPUT_MODES, page_rule="openai")
