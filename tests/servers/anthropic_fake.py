"""A fake Anthropic Messages API server (POST /v1/messages).

Default answer: one ``tool_use`` block calling the forced tool with a JSON
object made from the request, ``stop_reason: "tool_use"``, usage counted as
characters/4. Scripted actions as in `openai_fake` (``status``/``headers``,
``delay``, ``raw``, ``model``), plus ``{"truncate": True}`` (``stop_reason:
"max_tokens"`` with a partial tool input), ``{"text": "..."}`` (a text block
instead of a tool call), ``{"input": {...}}`` (this tool input) and
``{"stop": "..."}`` (this stop reason).

Prompt caching as the API does it, in miniature: a request with a ``cache_control`` breakpoint
(on the system prompt or the tool) caches its prefix (tools + system): the first such request
reports that prefix as ``cache_creation_input_tokens``, every later one with the same prefix as
``cache_read_input_tokens`` (characters/4; ``input_tokens`` is then the rest), whatever its length.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from .httpserver import FakeServer, HTTPRequest, HTTPResponse


def default_answer(body: dict[str, Any]) -> dict[str, Any]:
    user = next((m.get("content", "") for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
    return {"echo": hashlib.sha256(str(user).encode()).hexdigest()[:12], "chars": len(str(user))}


class AnthropicFake(FakeServer):
    def __init__(self, latency: float = 0.0, answer: Callable[[dict[str, Any]], Any] = default_answer):
        super().__init__(self._handle)
        self.latency = latency
        self.answer = answer
        self.cached: set[str] = set()  # prompt prefixes in the fake's prompt cache

    def messages(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r.json for r in self.requests if r.path.endswith("/v1/messages")]

    async def _handle(self, req: HTTPRequest, server: FakeServer) -> HTTPResponse:
        if req.method != "POST" or not req.path.endswith("/v1/messages"):
            return HTTPResponse(404, {"type": "error", "error": {"type": "not_found_error", "message": req.path}})
        action = self.next_action()
        delay = action.get("delay", self.latency)
        if "status" in action:
            return HTTPResponse(action["status"], {"type": "error", "error": {
                "type": "rate_limit_error" if action["status"] == 429 else "api_error",
                "message": action.get("message", "scripted error")}}, headers=action.get("headers", {}), delay=delay)
        if "raw" in action:
            return HTTPResponse(200, action["raw"], headers=action.get("headers", {}), delay=delay)
        body = req.json or {}
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
                            headers=action.get("headers", {}), delay=delay)

    def message(self, body: dict[str, Any], content: list[dict[str, Any]], stop: str, model: str | None = None
                ) -> dict[str, Any]:
        """A Messages API answer with its usage, prompt caching included (see module docstring)."""
        system = body.get("system", "")
        system_text = system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
        prefix = json.dumps(body.get("tools", []), sort_keys=True) + system_text
        prompt_chars = len(system_text) + sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        usage = {"input_tokens": prompt_chars // 4, "output_tokens": len(json.dumps(content)) // 4}
        if "cache_control" in json.dumps([system, body.get("tools", [])]):
            with self.lock:
                hit = prefix in self.cached
                self.cached.add(prefix)
            cached = len(prefix) // 4
            usage["input_tokens"] = max(0, usage["input_tokens"] - len(system_text) // 4)
            usage["cache_read_input_tokens" if hit else "cache_creation_input_tokens"] = cached
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model or body.get("model", "claude-fake"),
                "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}
