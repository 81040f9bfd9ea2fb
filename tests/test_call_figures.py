"""`results.calls`: the figures' typed shapes (`CallFigures`, `CallSummary`) are the keys the functions build, and
summary.json's `Calls` model reads every figure `call_figures` writes (one list of figures, not two that drift)."""

from evalkit.backends import Completion
from evalkit.results.calls import CallFigures, CallSummary, call_figures, summarize_calls
from evalkit.results.summary import Calls

CALLS = [Completion(record={}, latency_s=1.0, usd=0.5, input_tokens=10, output_tokens=3),
         Completion(record=None, parse="error", error="skipped: budget", latency_s=0.0)]


def test_call_figures_are_their_typed_dict_and_summary_json_reads_each():
    figures = call_figures(CALLS)
    assert set(figures) == CallFigures.__required_keys__ == set(Calls.model_fields)
    assert Calls.from_json(dict(figures), "summary.json").to_json() == figures


def test_summarize_calls_is_its_typed_dict():
    summary = summarize_calls(CALLS)
    assert set(summary) == CallSummary.__required_keys__
    assert (summary["calls"], summary["errors"], summary["skipped"], summary["latency_p50"]) == (2, 1, 1, 1.0)
