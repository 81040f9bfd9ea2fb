"""Provider batch APIs (``evalkit run --batch``): a run's uncached calls as batches, at the batch rate.

For each backend whose provider has a batch API (`Provider.batch`: ``anthropic``'s Message Batches,
``openai``'s Batch API) every request of the run that its cassette cannot replay is submitted in
batches (one, split at the provider's limit, `batch_limit`), each request once, its cassette key as
its ``custom_id``. The batches are polled with backoff (`POLL_FIRST_S` growing to `POLL_MAX_S`,
``EVALKIT_BATCH_POLL_S`` sets the first), a progress line on stderr each time. When a batch ends its
answers go through the backend's one policy (`LiveBackend.finish`: the secret scrubber, parsing,
the one truncation retry — a live call, at the standard rate —, failure reports) priced at the batch
rate (`pricing`), and are recorded into the cassette at once when the backend records. A request
the batch errored, canceled, expired or left without an answer is an error `Completion` like any
failed call (`evalkit.status` classifies it).

Resuming: each batch's id and keys are written to the run folder (the runner passes
`runfolder.read_batches` / `write_batches`: this module names no file) the moment it is submitted. A run into that folder again (after a crash or SIGKILL) polls those batches
instead of submitting their requests again; only requests no batch holds are submitted. (The one
window left: a kill after the provider accepted a batch and before its id is on disk — one small
file write — would submit those requests again on resume.)

`prefill` runs the phase and returns each batched backend wrapped in `Batched`, which answers from
the batch (or passes on: cassette replay, the calls a budget held back); the runner hands those to the pool.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from evalkit.backends.base import Completion, Request
from evalkit.backends.cassette import RecordingBackend, cassette_key
from evalkit.backends.live import Attempt
from evalkit.backends.providers import provider
from evalkit.backends.redact import scrub_answer
from evalkit.errors import UsageError

POLL_ENV = "EVALKIT_BATCH_POLL_S"
POLL_FIRST_S = 2.0
POLL_MAX_S = 60.0
POLL_GROWTH = 1.5


class Batched:
    """A backend whose answers came from a provider batch; any other request goes to the backend itself."""

    def __init__(self, backend: Any, answers: dict[str, Completion]):
        self.backend, self.answers = backend, answers
        self.served: set[str] = set()
        self.label, self.spec, self.model = backend.label, backend.spec, backend.model
        self.provider = getattr(backend, "provider", None)

    def live(self, request: Request) -> bool:
        inner = getattr(self.backend, "live", None)
        return cassette_key(request, self.model) not in self.answers and bool(inner and inner(request))

    def estimate_usd(self, request: Request) -> float:
        if cassette_key(request, self.model) in self.answers:
            return 0.0  # already paid for in the batch
        estimate = getattr(self.backend, "estimate_usd", None)
        return estimate(request) if estimate else 0.0

    async def complete(self, request: Request) -> Completion:
        key = cassette_key(request, self.model)
        answer = self.answers.get(key)
        if answer is None:
            completion: Completion = await self.backend.complete(request)
            return completion
        if key in self.served:  # an identical request: the batch answered (and billed) it once
            return again(answer)
        self.served.add(key)
        return replace(answer)

    async def aclose(self) -> None:
        await self.backend.aclose()


def again(answer: Completion) -> Completion:
    """The batch's answer to an identical request served once more: no call made, nothing billed."""
    return replace(answer, usd=0.0, calls=0)


def batchable(backend: Any) -> bool:
    """A live backend (recording or not) whose provider has a batch API (`Provider.batch`)."""
    try:
        return provider(getattr(backend, "provider", None) or "").batch
    except UsageError:
        return False


async def prefill(work: Sequence[tuple[Any, Request]], state: dict[str, Any], save: Callable[[dict[str, Any]], None],
                  max_usd: float | None = None, say: Callable[[str], None] | None = None) -> dict[int, Batched]:
    """Send the requests of every batchable backend among `work` ((backend, request) pairs) as provider batches;
    return each such backend wrapped in `Batched`, by ``id(backend)``. `state` is what the run folder keeps of
    its batches (by label) and `save` writes it back: both the caller's (`runfolder.read_batches` /
    `write_batches`). The pool counts a batch answer's cost against --max-usd as it serves it."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    by_backend: dict[int, tuple[Any, list[Request]]] = {}
    for backend, request in work:
        if batchable(backend):
            by_backend.setdefault(id(backend), (backend, []))[1].append(request)
    if not by_backend:
        say("evalkit: note: --batch: no backend here has a batch API (anthropic, openai); calls are made one by one")
        return {}
    try:
        answers = await asyncio.gather(*(_collect(b, reqs, state, save, max_usd, say) for b, reqs in by_backend.values()))
    finally:
        for b, _ in by_backend.values():  # its SDK client belongs to this event loop
            await (b.inner if isinstance(b, RecordingBackend) else b).aclose()
    return {key: Batched(b, found) for (key, (b, _)), found in zip(by_backend.items(), answers)}


async def _collect(backend: Any, requests: list[Request], state: dict[str, Any], save: Callable[[dict[str, Any]], None],
                   max_usd: float | None, say: Callable[[str], None]) -> dict[str, Completion]:
    recorder = backend if isinstance(backend, RecordingBackend) else None
    live = recorder.inner if recorder else backend
    wanted: dict[str, list[Request]] = {}  # key → its requests (identical requests share one batch entry)
    for request in requests:
        key = cassette_key(request, live.model)
        if recorder is None or not recorder.cassette.available(key):  # the cassette answers the rest
            wanted.setdefault(key, []).append(request)
    mine: list[dict[str, Any]] = state.setdefault(backend.label, [])
    submitted = {k for batch in mine for k in batch["keys"]}
    fresh, budget = [], max_usd
    for key in wanted:
        if key in submitted:
            continue
        if budget is not None:  # what --max-usd leaves room for; the rest go to the pool, which holds them back
            cost = live.estimate_usd(wanted[key][0])
            if cost > budget:
                break
            budget -= cost
        fresh.append(key)
    for start in range(0, len(fresh), live.batch_limit):
        chunk = fresh[start:start + live.batch_limit]
        batch_id = await live.batch_submit([(key, wanted[key][0]) for key in chunk])
        mine.append({"id": batch_id, "keys": chunk})
        save(state)  # before anything else: a kill from here on resumes it
    pending = [b for b in mine if any(k in wanted for k in b["keys"])]
    total = sum(1 for b in pending for k in b["keys"] if k in wanted)
    answers: dict[str, Completion] = {}
    started, delay = time.perf_counter(), float(os.environ.get(POLL_ENV) or POLL_FIRST_S)
    progress: dict[str, int] = {}
    while pending:
        for batch in list(pending):
            ended, progress[batch["id"]], status = await live.batch_status(batch["id"])
            if not ended:
                continue
            attempts = await live.batch_results(batch["id"])
            for key in batch["keys"]:
                if key not in wanted or key in answers:
                    continue
                attempt = attempts.get(key) or Attempt(
                    error=f"batch {batch['id']} ended ({status}) without an answer for this request")
                request = wanted[key][0]
                answer = await live.finish(request, scrub_answer(attempt), started, batch=True)
                if recorder is not None:
                    for i, same in enumerate(wanted[key]):  # one record each: replay serves each
                        recorder.keep(same, answer if i == 0 else again(answer), key)
                answers[key] = answer
            pending.remove(batch)
        ids = ", ".join(b["id"] for b in mine if any(k in wanted for k in b["keys"]))
        done = sum(progress.values())
        say(f"evalkit: batch {backend.label}: {len(answers)}/{total} answered ({done} done at the provider) in {ids}"
            + (f"; next poll in {delay:.3g} s" if pending else ""))
        if pending:
            await asyncio.sleep(delay)
            delay = min(delay * POLL_GROWTH, POLL_MAX_S)
    return answers
