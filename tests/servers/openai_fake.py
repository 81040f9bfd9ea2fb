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

Automatic prefix caching in miniature: a request whose system message was seen before reports it
(characters/4) as ``usage.prompt_tokens_details.cached_tokens``.

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
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from servers.httpserver import FakeServer, HTTPRequest, HTTPResponse  # type: ignore
else:
    from .httpserver import FakeServer, HTTPRequest, HTTPResponse


def default_answer(body: dict[str, Any]) -> dict[str, Any]:
    user = next((m.get("content", "") for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
    return {"echo": hashlib.sha256(str(user).encode()).hexdigest()[:12], "chars": len(str(user))}


class OpenAIFake(FakeServer):
    def __init__(self, latency: float = 0.0, reject_json_schema: bool = False,
                 answer: Callable[[dict[str, Any]], Any] = default_answer, model: str | None = None,
                 uds: str | None = None):
        super().__init__(self._handle, uds=uds)
        self.latency = latency
        self.reject_json_schema = reject_json_schema
        self.answer = answer
        self.model = model
        self.seen_prefixes: set[str] = set()  # system messages answered before: the fake's prompt cache

    def completions(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r.json for r in self.requests if r.path.endswith("/chat/completions")]

    async def _handle(self, req: HTTPRequest, server: FakeServer) -> HTTPResponse:
        if req.method != "POST" or not req.path.endswith("/chat/completions"):
            return HTTPResponse(404, {"error": {"message": f"no route {req.method} {req.path}"}})
        action = self.next_action()
        delay = action.get("delay", self.latency)
        body = req.json or {}
        if "status" in action:
            return HTTPResponse(action["status"], {"error": {"message": action.get("message", "scripted error"),
                                                             "type": "server_error"}},
                                headers=action.get("headers", {}), delay=delay)
        if "raw" in action:
            return HTTPResponse(200, action["raw"], headers=action.get("headers", {}), delay=delay)
        fmt = body.get("response_format") or {}
        if self.reject_json_schema and fmt.get("type") == "json_schema":
            return HTTPResponse(500, {"error": {"message": "1 validation error: ('body', 'response_format', 'type') "
                                                           "Input should be 'text' or 'json_object'",
                                                "type": "internal_server_error"}})
        content = action["content"] if "content" in action else json.dumps(self.answer(body))
        finish = action.get("finish", "stop")
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        system = next((str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "system"), "")
        with self.lock:
            cached = len(system) // 4 if system in self.seen_prefixes else 0
            self.seen_prefixes.add(system)
        return HTTPResponse(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000,
            "model": action.get("model") or self.model or body.get("model", "fake-model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(content) // 4 + 1,
                      "total_tokens": prompt_chars // 4 + len(content) // 4 + 1,
                      "prompt_tokens_details": {"cached_tokens": cached}},
        }, headers=action.get("headers", {}), delay=delay)


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
