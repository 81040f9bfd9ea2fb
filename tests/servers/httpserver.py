"""A minimal HTTP/1.1 server on 127.0.0.1 or a Unix domain socket (asyncio, keep-alive), run in a background thread.

Only what the provider SDKs need: one request per message, Content-Length
bodies, JSON in and out. Each fake provider supplies an async handler; every
request is logged (method, path, headers, parsed JSON body) so tests can
assert on request shape and count calls. Faults are scripted per request:
``server.script.append({...})`` is consumed by the next request; ``server.fault = {...}`` answers
every request the script leaves (until it is set back to None: the server "recovers").

How a body is sent (any action, see `body_mode`): ``{"trickle": S}`` one byte every S seconds
(Content-Length announced), ``{"chunked": True}`` chunked transfer encoding, no Content-Length.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests",
           500: "Internal Server Error", 503: "Service Unavailable", 529: "Overloaded"}


@dataclass
class HTTPRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except ValueError:
            return None


@dataclass
class HTTPResponse:
    status: int = 200
    body: bytes | str | dict = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering
    trickle: float = 0.0  # seconds between the body's bytes (0: all at once)
    chunked: bool = False  # chunked transfer encoding, no Content-Length

    def parts(self) -> tuple[bytes, bytes]:
        """(the status line and headers, the body)."""
        body = self.body
        content_type = self.headers.get("content-type", "application/json")
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode("utf-8")
        length = "transfer-encoding: chunked" if self.chunked else f"content-length: {len(body)}"
        head = [f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Status')}", f"content-type: {content_type}", length]
        head += [f"{k}: {v}" for k, v in self.headers.items() if k.lower() != "content-type"]
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1"), body

    def encode(self) -> bytes:
        head, body = self.parts()
        return head + body


def body_mode(action: dict[str, Any]) -> dict[str, Any]:
    """The HTTPResponse arguments an action gives for how its body is sent (``trickle``, ``chunked``)."""
    return {k: action[k] for k in ("trickle", "chunked") if k in action}


async def _send_slowly(writer: asyncio.StreamWriter, resp: HTTPResponse) -> None:
    """Send `resp` trickled or chunked; stops when the client has gone."""
    head, body = resp.parts()
    writer.write(head)
    await writer.drain()
    step = 1 if resp.trickle else 64 * 1024
    for i in range(0, len(body), step):
        if writer.transport.is_closing():
            return
        piece = body[i:i + step]
        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if resp.chunked else piece)
        await writer.drain()
        if resp.trickle:
            await asyncio.sleep(resp.trickle)
    if resp.chunked:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


Handler = Callable[[HTTPRequest, "FakeServer"], Awaitable[HTTPResponse]]


class FakeServer:
    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0, uds: str | None = None):
        self.handler = handler
        self.host, self.port = host, port
        self.uds = uds  # a Unix domain socket path to listen on instead of host:port
        self.requests: list[HTTPRequest] = []
        self.script: list[dict[str, Any]] = []  # per-request faults, consumed in order
        self.fault: dict[str, Any] | None = None  # the action of every request the script leaves
        self.lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._ready = threading.Event()

    # -- lifecycle ------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def next_action(self) -> dict[str, Any]:
        with self.lock:
            return self.script.pop(0) if self.script else dict(self.fault or {})

    def start(self) -> FakeServer:
        self._thread = threading.Thread(target=self._run, name="fake-provider", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake server did not start")
        return self

    def stop(self) -> None:
        if self._loop and self._server:
            async def shutdown() -> None:
                self._server.close()
                for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                    task.cancel()

            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread:
            self._thread.join(5)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        if self.uds:
            self._server = self._loop.run_until_complete(asyncio.start_unix_server(self._conn, self.uds, backlog=1024))
        else:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._conn, self.host, self.port, backlog=1024))
            self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    def serve_forever(self) -> None:
        """Run in the current thread (for a server subprocess)."""
        self._run()

    # -- HTTP -----------------------------------------------------------------------------------------
    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                req = HTTPRequest(method, path, headers, body)
                with self.lock:
                    self.requests.append(req)
                resp = await self.handler(req, self)
                if resp.delay:
                    await asyncio.sleep(resp.delay)
                try:
                    if resp.trickle or resp.chunked:
                        await _send_slowly(writer, resp)
                    else:
                        writer.write(resp.encode())
                        await writer.drain()
                except ConnectionError:
                    return
                if headers.get("connection", "").lower() == "close":
                    return
        except asyncio.CancelledError:
            pass
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass
