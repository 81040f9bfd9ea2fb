"""Per-backend call figures in the task report: summary.json's (`evalkit.results.summary`), computed once there
and shown as they are: an error is a member with no score, a malformed answer is scored, a member not
covered made no call."""

from pathlib import Path

import pytest

from evalkit.report.frames import backend_calls
from evalkit.results.records import ScoreRecord
from evalkit.results.runfolder import Scored
from evalkit.results.summary import Summary, summarize


def _result(member: str, backend: str, status: str = "scored", **run) -> Scored:
    data = {"status": status, "score": 1.0 if status == "scored" else None, "passed": status == "scored",
            "metrics": {}, "run": run, **({"cause": "provider_error"} if status == "error" else {})}
    return Scored("t", member, backend, Path(f"/r/t/{member}/{backend}"), Path("/r"), "r", ScoreRecord(data))


def test_backend_calls_show_the_summary_figures_errors_parse_outcomes_and_latency_percentiles():
    calls = {"input_tokens": 10, "output_tokens": 5, "usd": 0.001}
    results = [_result(f"m{i}", "a", latency_s=float(i + 1), parse="clean", **calls) for i in range(4)]
    results += [_result("m4", "a", latency_s=9.0, parse="clean", truncated="exhausted", **calls),
                _result("m5", "a", latency_s=9.0, parse="malformed", **calls),
                _result("m0", "b", "error", parse="error", error="HTTP 500")]
    run_json = {"backends": [{"label": "a"}, {"label": "b"}], "members": [f"t/m{i}" for i in range(6)]}
    task = Summary.from_json(summarize(results, run_json), "summary.json").tasks["t"]
    rows = backend_calls(task).set_index("backend")
    a, b = rows.loc["a"], rows.loc["b"]
    # a malformed answer (and a truncated one) is scored: counted under its parse outcome, never an error
    assert (a.calls, a.errors, a.ok, a.malformed, a.truncated) == (6, 0, 4, 1, 1)
    assert a.error_rate == 0
    assert a.latency_p50_s == pytest.approx(3.5) and a.latency_p90_s == pytest.approx(9.0)
    assert a.input_tokens == 60 and a.output_tokens == 30 and a.usd == pytest.approx(0.006)
    # b's five members it has no result for are not covered: they made no call; its one call errored
    assert (b.calls, b.errors, b.error_rate) == (1, 1, 1.0)
    entry = task.backend("b")
    assert (b.calls, b.errors, b.error_rate) == (entry.members, entry.errors, entry.error_rate)  # summary.json's own
