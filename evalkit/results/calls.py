"""What a run's calls cost and took (`call_figures`), and their counts (`summarize_calls`): pure over `Completion`s.

The run's pages (`evalkit.results.summary`), the judge (`evalkit.stages.judge`) and `evalkit compare`
(`evalkit.compare.sides`) read their calls' figures here.
"""

from __future__ import annotations

import statistics
from typing import TypedDict

from evalkit.backends import Completion
from evalkit.status import ERROR, SCORED, SKIPPED_PREFIX, count

__all__ = ["CallFigures", "CallSummary", "call_figures", "summarize_calls"]


class CallFigures(TypedDict):
    """`call_figures`: latencies in seconds (None without a call made), tokens and calls as counts, USD."""

    calls: int
    latency_p50: float | None
    latency_p90: float | None
    latency_p99: float | None
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    batched: int
    output_tokens: int
    usd: float
    replayed: int


class CallSummary(CallFigures):
    """`summarize_calls`: the figures and the calls' counts (``parse``: outcome → calls)."""

    errors: int
    error_rate: float
    skipped: int
    parse: dict[str, int]
    recovered: int


def call_figures(completions: list[Completion]) -> CallFigures:
    """What calls cost and took, never a count of outcomes (`evalkit.status.count` is the one counter):
    calls, latency p50/p90/p99 (calls made: a budget stop made none), tokens, USD, batched, replayed.
    Replayed calls report their recorded latency and cost."""
    lat = sorted(c.latency_s for c in completions if c.error is None or not c.error.startswith(SKIPPED_PREFIX))

    # 99 cut points, computed once; with a single call every percentile is that call.
    cuts = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) > 1 else lat * 99

    def pct(p: int) -> float | None:
        return cuts[p - 1] if cuts else None

    return {
        "calls": len(completions),
        "latency_p50": pct(50), "latency_p90": pct(90), "latency_p99": pct(99),
        "input_tokens": sum(c.input_tokens for c in completions),
        "cache_read_tokens": sum(c.cache_read_tokens for c in completions),
        "cache_write_tokens": sum(c.cache_write_tokens for c in completions),
        "batched": sum(1 for c in completions if c.batch),
        "output_tokens": sum(c.output_tokens for c in completions),
        "usd": sum(c.usd for c in completions), "replayed": sum(1 for c in completions if c.replayed),
    }


def summarize_calls(completions: list[Completion]) -> CallSummary:
    """`call_figures` and the calls' counts (`evalkit.status.count`, one row per call): ``errors`` (calls that
    brought no answer, budget stops among them: ``skipped``), ``error_rate``, ``parse`` (the answers'
    parse outcomes: ok / malformed / truncated / schema_invalid) and ``recovered``. For calls that are
    not a run's members (the judge's); a run's pages count its members (`evalkit.results.summary`)."""
    counts = count({"status": ERROR if c.parse == "error" else SCORED, "parse": c.parse, "truncated": c.truncated,
                    "cause": "budget_stop" if (c.error or "").startswith(SKIPPED_PREFIX) else None}
                   for c in completions)
    return {**call_figures(completions), "errors": counts.errors, "error_rate": counts.error_rate or 0.0,
            "skipped": counts.causes.get("budget_stop", 0), "parse": counts.parse, "recovered": counts.recovered}
