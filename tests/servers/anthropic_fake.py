"""A fake Anthropic Messages API server (POST /v1/messages).

Default answer: one ``tool_use`` block calling the forced tool with a JSON
object made from the request, ``stop_reason: "tool_use"``, usage counted as
characters/4. Scripted actions as in `openai_fake` (``status``/``headers``,
``delay``, ``raw``, ``model``, ``trickle``, ``chunked``; ``server.fault``), plus ``{"truncate": True}`` (``stop_reason:
"max_tokens"`` with a partial tool input), ``{"text": "..."}`` (a text block
instead of a tool call), ``{"input": {...}}`` (this tool input) and
``{"stop": "..."}`` (this stop reason).

Prompt caching as the API does it, in miniature: a request with a ``cache_control`` breakpoint
(on the system prompt or the tool) caches its prefix (tools + system): the first such request
reports that prefix as ``cache_creation_input_tokens``, every later one with the same prefix as
``cache_read_input_tokens`` (characters/4; ``input_tokens`` is then the rest), whatever its length.

Document parts (input modes ``pdf``, ``images``): a user message's ``document`` / ``image`` blocks are checked
and decoded (`servers.parts`: media type, base64, the bytes' signature and size; a 400 otherwise), kept
in ``server.decoded`` (one `Decoded` per message), and counted as image tokens, not base64 characters.

Message Batches (``/v1/messages/batches``): a created batch stays ``in_progress`` for
``batch_polls`` status polls, then has ended; its results answer each request as a call would
(an ``errored`` result for one whose user prompt says ``BATCH-ERROR``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from .httpserver import FakeServer, HTTPRequest, HTTPResponse, body_mode
from .parts import BadPart, Decoded, anthropic_content


def default_answer(body: dict[str, Any]) -> dict[str, Any]:
    user = next((m.get("content", "") for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
    return {"echo": hashlib.sha256(str(user).encode()).hexdigest()[:12], "chars": len(str(user))}


class AnthropicFake(FakeServer):
    def __init__(self, latency: float = 0.0, answer: Callable[[dict[str, Any]], Any] = default_answer):
        super().__init__(self._handle)
        self.latency = latency
        self.answer = answer
        self.cached: set[str] = set()  # prompt prefixes in the fake's prompt cache
        self.batches: dict[str, dict[str, Any]] = {}  # Message Batches: id → its requests and polls left
        self.batch_polls = 1  # status polls a batch stays in progress for (then it has ended)
        self.decoded: list[Decoded] = []  # each message's user content: text and decoded document parts

    def messages(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r.json for r in self.requests if r.path.endswith("/v1/messages")]

    def batch_creates(self) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r.method == "POST" and r.path.endswith("/v1/messages/batches"))

    async def _handle(self, req: HTTPRequest, server: FakeServer) -> HTTPResponse:
        if "/v1/messages/batches" in req.path:
            return self._batch(req)
        if req.method != "POST" or not req.path.endswith("/v1/messages"):
            return HTTPResponse(404, {"type": "error", "error": {"type": "not_found_error", "message": req.path}})
        action = self.next_action()
        delay = action.get("delay", self.latency)
        if "status" in action:
            return HTTPResponse(action["status"], {"type": "error", "error": {
                "type": "rate_limit_error" if action["status"] == 429 else "api_error",
                "message": action.get("message", "scripted error")}}, headers=action.get("headers", {}), delay=delay)
        if "raw" in action:
            return HTTPResponse(200, action["raw"], headers=action.get("headers", {}), delay=delay, **body_mode(action))
        body = req.json or {}
        try:
            user = anthropic_content(next((m.get("content") for m in reversed(body.get("messages", []))
                                           if m.get("role") == "user"), ""))
        except BadPart as e:
            return HTTPResponse(400, {"type": "error", "error": {"type": "invalid_request_error", "message": str(e)}})
        with self.lock:
            self.decoded.append(user)
        tool = (body.get("tool_choice") or {}).get("name", "tool")
        if "text" in action:
            content = [{"type": "text", "text": action["text"]}]
            stop = "end_turn"
        elif action.get("truncate"):
            content = [{"type": "tool_use", "id": "toolu_fake", "name": tool, "input": action.get("input", {})}]
            stop = "max_tokens"
        else:
            content = [{"type": "tool_use", "id": "toolu_fake", "name": tool,
                        "input": action.get("input") or self.answer(body)}]
            stop = action.get("stop", "tool_use")
        return HTTPResponse(200, self.message(body, content, stop, action.get("model")),
                            headers=action.get("headers", {}), delay=delay, **body_mode(action))

    # -- Message Batches: create, retrieve (polls), results (JSONL) -----------------------------------------
    def _batch(self, req: HTTPRequest) -> HTTPResponse:
        path = req.path.split("?")[0]
        if req.method == "POST" and path.endswith("/v1/messages/batches"):
            with self.lock:
                batch_id = f"msgbatch_fake{len(self.batches) + 1}"
                self.batches[batch_id] = {"requests": req.json["requests"], "polls": self.batch_polls}
            return HTTPResponse(200, self._batch_object(batch_id, ended=False))
        parts = path.split("/")
        if req.method != "GET" or parts[-1 if parts[-1] != "results" else -2] not in self.batches:
            return HTTPResponse(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
        if parts[-1] == "results":
            lines = [json.dumps(self._batch_result(r)) for r in self.batches[parts[-2]]["requests"]]
            return HTTPResponse(200, "\n".join(lines) + "\n", headers={"content-type": "application/binary"})
        batch = self.batches[parts[-1]]
        with self.lock:
            batch["polls"] -= 1
            ended = batch["polls"] < 0
        return HTTPResponse(200, self._batch_object(parts[-1], ended))

    def _batch_object(self, batch_id: str, ended: bool) -> dict[str, Any]:
        n = len(self.batches[batch_id]["requests"])
        return {"id": batch_id, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
                "request_counts": {"processing": 0 if ended else n, "succeeded": n if ended else 0, "errored": 0,
                                   "canceled": 0, "expired": 0},
                "created_at": "2026-12-01T00:00:00Z", "expires_at": "2026-12-02T00:00:00Z",
                "ended_at": "2026-12-01T00:01:00Z" if ended else None, "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{batch_id}/results" if ended else None}

    def _batch_result(self, entry: dict[str, Any]) -> dict[str, Any]:
        """One request's result: the answer a call would get, or an error when its user prompt says
        ``BATCH-ERROR``."""
        body = entry["params"]
        if "BATCH-ERROR" in json.dumps(body.get("messages")):
            return {"custom_id": entry["custom_id"], "result": {"type": "errored", "error": {
                "type": "error", "error": {"type": "invalid_request_error", "message": "scripted batch error"}}}}
        tool = (body.get("tool_choice") or {}).get("name", "tool")
        content = [{"type": "tool_use", "id": "toolu_fake", "name": tool, "input": self.answer(body)}]
        return {"custom_id": entry["custom_id"],
                "result": {"type": "succeeded", "message": self.message(body, content, "tool_use")}}

    def message(self, body: dict[str, Any], content: list[dict[str, Any]], stop: str, model: str | None = None
                ) -> dict[str, Any]:
        """A Messages API answer with its usage, prompt caching included (see module docstring)."""
        system = body.get("system", "")
        system_text = system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
        prefix = json.dumps(body.get("tools", []), sort_keys=True) + system_text
        users = [anthropic_content(m.get("content", "")) for m in body.get("messages", [])]
        prompt_tokens = (len(system_text) + sum(len(u.text) for u in users)) // 4 + sum(u.part_tokens() for u in users)
        usage = {"input_tokens": prompt_tokens, "output_tokens": len(json.dumps(content)) // 4}
        if "cache_control" in json.dumps([system, body.get("tools", [])]):
            with self.lock:
                hit = prefix in self.cached
                self.cached.add(prefix)
            cached = len(prefix) // 4
            usage["input_tokens"] = max(0, usage["input_tokens"] - len(system_text) // 4)
            usage["cache_read_input_tokens" if hit else "cache_creation_input_tokens"] = cached
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model or body.get("model", "claude-fake"),
                "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}
