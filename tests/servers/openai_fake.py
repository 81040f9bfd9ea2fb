"""A fake OpenAI chat-completions server (POST /v1/chat/completions).

Default answer: a JSON object made from the request (deterministic), with
``finish_reason: "stop"`` and usage counted as characters/4. Scripted actions
(``server.script.append(action)``, one per request, in order):

    {"status": 429, "headers": {"retry-after": "1"}}     an HTTP error (body: OpenAI error JSON)
    {"status": 500, "message": "..."}                    idem, with that message
    {"delay": 2.0}                                       answer late (client timeouts)
    {"raw": "not json at all"}                           a malformed 200 body
    {"content": "...", "finish": "length"}               a chosen answer / finish reason
    {"model": "...", "headers": {...}}                   a chosen reported model id / response headers
    {"trickle": 0.2} / {"chunked": True}                 how the body is sent (`httpserver.body_mode`)

``server.fault = {...}`` answers every request the script leaves, until set back to None.

Automatic prefix caching in miniature: a request whose system message was seen before reports it
(characters/4) as ``usage.prompt_tokens_details.cached_tokens``.

Document parts (input modes ``pdf``, ``images``): a user message's ``file`` / ``image_url`` parts are
checked and decoded (`servers.parts`: data URL, media type, base64, the bytes' signature and size; a 400
otherwise), kept in ``server.decoded`` (one `Decoded` per completion) and counted as image tokens.

``reject_json_schema=True`` mimics llama.cpp's server: a 500 naming
``response_format`` whenever ``response_format.type == "json_schema"``.

Run as a script (``python tests/servers/openai_fake.py --latency 0.2``) it serves
in the foreground and prints ``PORT <n>`` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from servers.httpserver import FakeServer, HTTPRequest, HTTPResponse, body_mode  # type: ignore[import-not-found]
    from servers.parts import BadPart, Decoded, openai_content  # type: ignore[import-not-found]
else:
    from .httpserver import FakeServer, HTTPRequest, HTTPResponse, body_mode
    from .parts import BadPart, Decoded, openai_content


def default_answer(body: dict[str, Any]) -> dict[str, Any]:
    user = next((m.get("content", "") for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
    return {"echo": hashlib.sha256(str(user).encode()).hexdigest()[:12], "chars": len(str(user))}


def _multipart_file(req: HTTPRequest) -> bytes:
    """The ``file`` part of a multipart/form-data upload."""
    boundary = req.headers["content-type"].split("boundary=", 1)[1].strip('"').encode()
    for part in req.body.split(b"--" + boundary):
        head, _, data = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return data.removesuffix(b"\r\n")
    raise ValueError("no file part")


class _BatchAPIMixin:
    """The Batch API over this fake's own chat completions: files in and out, batches that end after polls."""

    async def _batch_api(self: OpenAIFake, req: HTTPRequest) -> HTTPResponse:
        path = req.path.split("?")[0]
        if req.method == "POST" and path.endswith("/v1/files"):
            with self.lock:
                file_id = f"file-fake{len(self.files) + 1}"
                self.files[file_id] = _multipart_file(req)
            return HTTPResponse(200, self._file(file_id))
        if req.method == "GET" and path.endswith("/content") and path.split("/")[-2] in self.files:
            return HTTPResponse(200, self.files[path.split("/")[-2]], headers={"content-type": "application/octet-stream"})
        if req.method == "POST" and path.endswith("/v1/batches"):
            with self.lock:
                batch_id = f"batch_fake{len(self.batches) + 1}"
                self.batches[batch_id] = {"input": req.json["input_file_id"], "polls": self.batch_polls, "output": None}
            return HTTPResponse(200, self._batch_object(batch_id))
        batch_id = path.rsplit("/", 1)[-1]
        if req.method == "GET" and batch_id in self.batches:
            batch = self.batches[batch_id]
            with self.lock:
                batch["polls"] -= 1
            if batch["polls"] < 0 and batch["output"] is None:
                await self._finish_batch(batch)
            return HTTPResponse(200, self._batch_object(batch_id))
        return HTTPResponse(404, {"error": {"message": f"no route {req.method} {path}"}})

    def _file(self: OpenAIFake, file_id: str) -> dict[str, Any]:
        return {"id": file_id, "object": "file", "bytes": len(self.files[file_id]), "created_at": 1700000000,
                "filename": "batch.jsonl", "purpose": "batch", "status": "processed"}

    async def _finish_batch(self: OpenAIFake, batch: dict[str, Any]) -> None:
        """Answer every line as a call would (an error line for a user prompt saying BATCH-ERROR)."""
        out, errors = [], []
        for line in self.files[batch["input"]].decode().splitlines():
            entry = json.loads(line)
            if "BATCH-ERROR" in json.dumps(entry["body"].get("messages")):
                errors.append({"id": "r", "custom_id": entry["custom_id"], "error": None, "response": {
                    "status_code": 400, "request_id": "q", "body": {"error": {"message": "scripted batch error"}}}})
                continue
            answer = await self._handle(HTTPRequest("POST", "/v1/chat/completions", {}, json.dumps(entry["body"]).encode()),
                                        self)
            out.append({"id": "r", "custom_id": entry["custom_id"], "error": None,
                        "response": {"status_code": 200, "request_id": "q", "body": answer.body}})
        with self.lock:
            for name, rows in (("output", out), ("errors", errors)):
                if rows:
                    file_id = f"file-fake{len(self.files) + 1}"
                    self.files[file_id] = ("\n".join(json.dumps(r) for r in rows) + "\n").encode()
                    batch[name] = file_id
            batch.setdefault("errors", None)
            batch["output"] = batch["output"] or ""

    def _batch_object(self: OpenAIFake, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        ended = batch["output"] is not None
        n = len(self.files[batch["input"]].splitlines())
        failed = len(self.files[batch["errors"]].splitlines()) if batch.get("errors") else 0
        return {"id": batch_id, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
                "input_file_id": batch["input"], "completion_window": "24h",
                "status": "completed" if ended else "in_progress", "created_at": 1700000000,
                "output_file_id": batch["output"] or None, "error_file_id": batch.get("errors"),
                "request_counts": {"total": n, "completed": n - failed if ended else 0, "failed": failed}}


class OpenAIFake(_BatchAPIMixin, FakeServer):
    def __init__(self, latency: float = 0.0, reject_json_schema: bool = False,
                 answer: Callable[[dict[str, Any]], Any] = default_answer, model: str | None = None,
                 uds: str | None = None):
        super().__init__(self._handle, uds=uds)
        self.latency = latency
        self.reject_json_schema = reject_json_schema
        self.answer = answer
        self.model = model
        self.seen_prefixes: set[str] = set()  # system messages answered before: the fake's prompt cache
        self.files: dict[str, bytes] = {}  # uploaded and produced files (the Batch API's input and output)
        self.batches: dict[str, dict[str, Any]] = {}  # id → input file, polls left, output file once ended
        self.batch_polls = 1  # status polls a batch stays in progress for (then it has completed)
        self.decoded: list[Decoded] = []  # each completion's user content: text and decoded document parts

    def completions(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r.json for r in self.requests if r.path.endswith("/chat/completions")]

    def batch_creates(self) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r.method == "POST" and r.path.endswith("/v1/batches"))

    async def _handle(self, req: HTTPRequest, server: FakeServer) -> HTTPResponse:
        if "/v1/files" in req.path or "/v1/batches" in req.path:
            return await self._batch_api(req)
        if req.method != "POST" or not req.path.endswith("/chat/completions"):
            # a slow server is slow on every route: a URL the SDK mangled (a query before its path) still hangs
            await asyncio.sleep(self.latency)
            return HTTPResponse(404, {"error": {"message": f"no route {req.method} {req.path}"}})
        action = self.next_action()
        delay = action.get("delay", self.latency)
        body = req.json or {}
        if "status" in action:
            return HTTPResponse(action["status"], {"error": {"message": action.get("message", "scripted error"),
                                                             "type": "server_error"}},
                                headers=action.get("headers", {}), delay=delay)
        if "raw" in action:
            return HTTPResponse(200, action["raw"], headers=action.get("headers", {}), delay=delay, **body_mode(action))
        try:
            decoded = [openai_content(m.get("content", "")) for m in body.get("messages", [])]
        except BadPart as e:
            return HTTPResponse(400, {"error": {"message": str(e), "type": "invalid_request_error"}})
        with self.lock:
            self.decoded.append(next((d for d, m in zip(decoded, body["messages"]) if m.get("role") == "user"),
                                     Decoded()))
        fmt = body.get("response_format") or {}
        if self.reject_json_schema and fmt.get("type") == "json_schema":
            return HTTPResponse(500, {"error": {"message": "1 validation error: ('body', 'response_format', 'type') "
                                                           "Input should be 'text' or 'json_object'",
                                                "type": "internal_server_error"}})
        content = action["content"] if "content" in action else json.dumps(self.answer(body))
        finish = action.get("finish", "stop")
        prompt_tokens = sum(len(d.text) for d in decoded) // 4 + sum(d.part_tokens() for d in decoded)
        system = next((str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "system"), "")
        with self.lock:
            cached = len(system) // 4 if system in self.seen_prefixes else 0
            self.seen_prefixes.add(system)
        return HTTPResponse(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000,
            "model": action.get("model") or self.model or body.get("model", "fake-model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(content) // 4 + 1,
                      "total_tokens": prompt_tokens + len(content) // 4 + 1,
                      "prompt_tokens_details": {"cached_tokens": cached}},
        }, headers=action.get("headers", {}), delay=delay, **body_mode(action))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    server = OpenAIFake(latency=args.latency)
    server.port = args.port
    try:  # the benchmark's server should not be the bottleneck it measures
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()

    async def run() -> None:
        srv = await asyncio.start_server(server._conn, "127.0.0.1", server.port, backlog=1024)
        print(f"PORT {srv.sockets[0].getsockname()[1]}", flush=True)
        await srv.serve_forever()

    try:
        loop.run_until_complete(run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
