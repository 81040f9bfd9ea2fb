"""The child side of a ``python:`` pipeline: one process serving one call at a time (`evalkit.backends.pyfunc`).

``python -m evalkit.backends.pyworker TARGET PROJECT_DIR MEMORY_BYTES ANSWER_BYTES`` runs in a temporary
working directory of its own, its address space capped (``RLIMIT_AS``), SIGINT ignored (the parent
decides) and leaving by itself once its parent is gone. Requests arrive on fd 0 and answers leave on
fd 1 (both moved aside at start); the pipeline's own stdout and stderr go to fd 2, which the parent
reads, scrubs and keeps only as the tail of an error message.

Every frame both ways is an 8-byte big-endian length and that many bytes of JSON. The first answer
says whether the module imported; each later one is one call's outcome:
``{"kind": "dict"|"str"|"completion"|"other", "value": ..., "latency_s": ...}``, or
``{"cause": "pipeline_exception"|"pipeline_result_invalid", "message": ...}``. What cannot be JSON
(bytes, a set, a date, a tuple key, a cycle, NaN) or is over ANSWER_BYTES never leaves the child.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import importlib.util
import inspect
import json
import os
import resource
import shutil
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from evalkit.backends.base import Completion
from evalkit.errors import UsageError

HEADER = struct.Struct(">Q")
PARENT_POLL_S = 0.2
MESSAGE_CHARS = 65536  # an exception's text kept; the parent scrubs it before cutting it to one line


def load_function(target: str) -> Callable[..., Any]:
    """FUNCTION of MODULE (a dotted name importable from the project folder, or a ``.py`` file's path)."""
    module_name, sep, func_name = target.rpartition(":")
    if not sep or not module_name or not func_name:
        raise UsageError(f"python backend: expected python:MODULE:FUNCTION, got python:{target}")
    try:
        if module_name.endswith(".py") or "/" in module_name:
            path = Path(module_name)
            if not path.is_file():
                raise UsageError(f"python backend: {path}: no such file")
            spec = importlib.util.spec_from_file_location(f"evalkit_pipeline_{path.stem}", path)
            # spec is None for a file Python cannot import: the failure below names it (a UsageError)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            module = importlib.import_module(module_name)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - any import failure is a configuration error
        raise UsageError(f"python backend: cannot import {module_name}: {type(e).__name__}: {e}") from None
    fn: object = getattr(module, func_name, None)
    if not callable(fn):
        raise UsageError(f"python backend: {module_name} has no function {func_name!r}")
    return fn


def read_frame(stream: BinaryIO) -> Any:
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None  # the parent closed the pipe: leave
    (size,) = HEADER.unpack(head)
    return json.loads(stream.read(size))


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def encode(message: dict[str, Any], limit: int) -> bytes:
    """`message` as strict JSON within `limit` bytes, or the refusal saying why it is not."""
    try:
        payload = json.dumps(message, ensure_ascii=False, allow_nan=False).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError, RecursionError) as e:
        return _invalid(_why_not_json(e, message))
    if len(payload) > limit:
        return _invalid(f"returned an answer of {len(payload)} bytes, over the answer_bytes limit of {limit} bytes "
                        "(raise it with EVALKIT_LIMIT_ANSWER_BYTES)")
    return payload


def _why_not_json(e: BaseException, message: dict[str, Any]) -> str:
    text = str(e)
    if isinstance(e, RecursionError):
        text = "it nests too deep (or holds itself)"
    elif "Circular reference" in text:
        text = "it holds itself (a circular reference)"
    elif "Out of range float" in text:
        from evalkit._util.jsonio import nonfinite_path  # only on this path: the child starts light

        at = nonfinite_path(message.get("value"))
        text = f"it holds NaN or infinity{f' at {at}' if at else ''} (use None for an unknown value)"
    return f"returned a value that is not JSON: {text}"


def _invalid(message: str) -> bytes:
    return json.dumps({"cause": "pipeline_result_invalid", "message": message}).encode()


def outcome(result: Any, latency: float) -> dict[str, Any]:
    if isinstance(result, Completion):
        value: Any = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
        kind = "completion"
    elif isinstance(result, (dict, str)):
        kind, value = ("dict" if isinstance(result, dict) else "str"), result
    else:
        kind, value = "other", f"{type(result).__name__}: {repr(result)[:200]}"
    return {"kind": kind, "value": value, "latency_s": latency}


def failure(e: BaseException, memory: int) -> dict[str, Any]:
    if isinstance(e, SystemExit):
        what = f"called sys.exit({e.code!r})"
    elif isinstance(e, MemoryError):
        what = (f"ran out of memory (the pipeline_memory_bytes limit is {memory} bytes; raise it with "
                "EVALKIT_LIMIT_PIPELINE_MEMORY_BYTES)")
    else:
        what = f"raised {type(e).__name__}: {e}"
    return {"cause": "pipeline_exception", "message": what[:MESSAGE_CHARS]}


def call(fn: Any, runner: Any, request: dict[str, Any]) -> Any:
    result = fn(request["document"], request["task"])
    if inspect.isawaitable(result):
        result = runner.run(_awaited(result))
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def watch_parent(parent: int, home: str) -> None:
    """Leave at once when the parent is gone (killed outright), even in the middle of a call, taking the
    working folder it made for this process along (no one else is left to remove it)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)

    shutil.rmtree(home, ignore_errors=True)
    os._exit(1)


def main(argv: list[str]) -> None:
    target, project, memory, limit = argv[0], argv[1], int(argv[2]), int(argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=watch_parent, args=(os.getppid(), os.getcwd()), daemon=True).start()
    requests, answers = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the pipeline reading stdin must not read the requests
    os.dup2(2, 1)  # nor print into the answers
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (ImportError, ValueError, OSError):
        pass  # no such limit here (or a lower hard one already): the timeout still bounds the call
    sys.path.insert(0, project)

    try:
        fn = load_function(target)
    except UsageError as e:
        write_frame(answers, json.dumps({"cause": "usage", "message": str(e)}).encode())
        return
    except BaseException as e:  # noqa: BLE001 - an import that exits or runs out of memory: the parent reports it
        write_frame(answers, json.dumps(failure(e, memory)).encode())
        return
    write_frame(answers, b'{"ready": true}')

    runner = asyncio.Runner()  # one loop for the child's life: a pipeline's async clients stay usable
    while (request := read_frame(requests)) is not None:
        started = time.perf_counter()
        try:
            message = outcome(call(fn, runner, request), time.perf_counter() - started)
        except BaseException as e:  # noqa: BLE001 - sys.exit, MemoryError, anything: this call's failure
            message = failure(e, memory)
        sys.stdout.flush()
        sys.stderr.flush()
        write_frame(answers, encode(message, limit))


if __name__ == "__main__":
    main(sys.argv[1:])
