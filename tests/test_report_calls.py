"""Per-backend call figures in the task report: error rate and latency percentiles."""

import pandas as pd
import pytest

from evalkit.report import backend_calls


def test_backend_calls_counts_errors_and_latency_percentiles():
    members = pd.DataFrame([
        {"backend": "a", "parse": "clean", "error": None, "truncated": None, "latency_s": s,
         "input_tokens": 10, "output_tokens": 5, "usd": 0.001} for s in (1.0, 2.0, 3.0, 4.0)
    ] + [
        {"backend": "a", "parse": "malformed", "error": None, "truncated": "exhausted", "latency_s": 9.0,
         "input_tokens": 10, "output_tokens": 50, "usd": 0.002},
        {"backend": "b", "parse": None, "error": "HTTP 500", "truncated": None, "latency_s": None,
         "input_tokens": None, "output_tokens": None, "usd": None},
    ])
    rows = backend_calls(members).set_index("backend")
    a, b = rows.loc["a"], rows.loc["b"]
    assert (a.calls, a.errors, a.malformed, a.clean, a.truncated) == (5, 1, 1, 4, 1)
    assert a.error_rate == pytest.approx(0.2)
    assert a.latency_p50_s == pytest.approx(3.0) and a.latency_p90_s == pytest.approx(7.0)
    assert a.input_tokens == 50 and a.output_tokens == 70 and a.usd == pytest.approx(0.006)
    assert (b.calls, b.errors, b.error_rate) == (1, 1, 1.0) and pd.isna(b.latency_p50_s)
