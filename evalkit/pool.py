"""Run many extraction calls through one bounded concurrent pool.

All members' calls share one event loop and one semaphore (not one kernel
per call); results come back keyed by job, in job order, whatever the
completion order.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable

from .backends import Backend, Completion, Request


@dataclass(frozen=True)
class Job:
    backend: Backend
    request: Request


async def _run(jobs: list[Job], max_concurrency: int, on_done: Callable[[Job, Completion], None] | None) -> list[Completion]:
    gate = asyncio.Semaphore(max(1, max_concurrency))

    async def one(job: Job) -> Completion:
        async with gate:
            completion = await job.backend.complete(job.request)
        if on_done:
            on_done(job, completion)
        return completion

    return list(await asyncio.gather(*(one(j) for j in jobs)))


def run_jobs(jobs: list[Job], max_concurrency: int = 8,
             on_done: Callable[[Job, Completion], None] | None = None) -> list[Completion]:
    """Complete every job; the i-th result belongs to the i-th job."""
    return asyncio.run(_run(jobs, max_concurrency, on_done))
