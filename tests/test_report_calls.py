"""Per-backend call figures in the task report: error rate and latency percentiles, counted by the one
counter (`evalkit.status.count`): an error is a member with no score, a malformed answer is scored."""

import pandas as pd
import pytest

from evalkit.report.frames import backend_calls


def test_backend_calls_counts_errors_and_latency_percentiles():
    members = pd.DataFrame([
        {"backend": "a", "status": "scored", "parse": "clean", "error": None, "truncated": None, "latency_s": s,
         "input_tokens": 10, "output_tokens": 5, "usd": 0.001} for s in (1.0, 2.0, 3.0, 4.0)
    ] + [
        {"backend": "a", "status": "scored", "parse": "malformed", "error": None, "truncated": "exhausted",
         "latency_s": 9.0, "input_tokens": 10, "output_tokens": 50, "usd": 0.002},
        {"backend": "a", "status": "scored", "parse": "malformed", "error": "no JSON", "truncated": None,
         "latency_s": 9.0, "input_tokens": 10, "output_tokens": 50, "usd": 0.0},
        {"backend": "b", "status": "error", "cause": "provider_error", "parse": "error", "error": "HTTP 500",
         "truncated": None, "latency_s": None, "input_tokens": None, "output_tokens": None, "usd": None},
        {"backend": "b", "status": "not_covered", "parse": None, "error": None, "truncated": None,
         "latency_s": None, "input_tokens": None, "output_tokens": None, "usd": None},
    ])
    rows = backend_calls(members).set_index("backend")
    a, b = rows.loc["a"], rows.loc["b"]
    # a malformed answer (and a truncated one) is scored: counted under its parse outcome, never an error
    assert (a.calls, a.errors, a.ok, a.malformed, a.truncated) == (6, 0, 4, 1, 1)
    assert a.error_rate == 0
    assert a.latency_p50_s == pytest.approx(3.5) and a.latency_p90_s == pytest.approx(9.0)
    assert a.input_tokens == 60 and a.output_tokens == 120 and a.usd == pytest.approx(0.006)
    # a not-covered member made no call
    assert (b.calls, b.errors, b.error_rate) == (1, 1, 1.0) and pd.isna(b.latency_p50_s)
