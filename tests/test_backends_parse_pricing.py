"""JSON repair (clean / recovered / malformed) and the price table."""

from __future__ import annotations

import re

import pytest

from evalkit.backends.parse import parse_record
from evalkit.errors import UsageError
from evalkit.backends.live import call_budgets
from evalkit.pricing import DEFAULT_PRICES, PriceTable, estimate_tokens


@pytest.mark.parametrize("text, record, outcome", [
    ('{"a": 1}', {"a": 1}, "clean"),
    ('  \n{"a": 1}\n', {"a": 1}, "clean"),
    ('```json\n{"a": 1}\n```', {"a": 1}, "recovered"),
    ('```\n{"a": 1}\n```', {"a": 1}, "recovered"),
    ('Here is the record: {"a": {"b": 2}}', {"a": {"b": 2}}, "recovered"),
    ('{"a": 1}\n\nLet me know if you need more.', {"a": 1}, "recovered"),
    ('Sure.\n```json\n{"a": 1}\n```\nDone.', {"a": 1}, "recovered"),
    ('use {placeholder} then {"a": 2}', {"a": 2}, "recovered"),
    ('{"a": {"b": 1}, "c": "cut off', None, "malformed"),  # never a nested fragment of a cut-off answer
    ('{"items": [{"x": 1}, {"y": 2', None, "malformed"),
    ("[1, 2]", None, "malformed"),
    ("no json", None, "malformed"),
    ("", None, "malformed"),
])
def test_parse_record(text, record, outcome):
    assert parse_record(text) == (record, outcome)


def test_price_lookup_exact_or_dated_never_a_guess(tmp_path, monkeypatch):
    t = PriceTable()
    assert t.cost("claude-haiku-4-5-20251001", 1_000_000, 1_000_000) == pytest.approx(6.0)  # a dated snapshot
    assert t.lookup("gpt-4o-2024-08-06") == t.lookup("gpt-4o") and t.priced("claude-3-7-sonnet-latest")
    assert t.cost("gpt-4o-mini", 1000, 1000) == pytest.approx((1000 * 0.15 + 1000 * 0.6) / 1e6)
    # A mere prefix is not a price: claude-opus-4 ($15/$75) must not price a newer claude-opus-4-8, nor
    # `fake` a server's "fake-model" ($0): both are unknown, and a budgeted run refuses them.
    for unknown in ("claude-opus-4-8", "fake-model", "gemma-3-270m-it", "some-local-model"):
        assert not t.priced(unknown) and t.cost(unknown, 10**6, 10**6) == 0.0, unknown
    assert estimate_tokens(5) == 2
    (tmp_path / "p.yaml").write_text("some-local-model: {input: 1, output: 2}\ngpt-4o-mini: {input: 0, output: 0}\n")
    monkeypatch.setenv("EVALKIT_PRICES", str(tmp_path / "p.yaml"))
    t = PriceTable()
    assert t.cost("some-local-model", 10**6, 10**6) == pytest.approx(3.0) and t.cost("gpt-4o-mini", 10**6, 0) == 0
    assert t.lookup("some-local-model").source == str(tmp_path / "p.yaml")
    (tmp_path / "p.json").write_text('{"m": {"input": 1}}')
    with pytest.raises(UsageError, match="exactly input and output"):
        PriceTable(path=tmp_path / "p.json")


def test_bound_counts_every_budget_and_every_send():
    t = PriceTable()
    one = (100 * 0.15 + 100 * 0.6) / 1e6  # 400 chars = 100 prompt tokens, 100 output tokens, gpt-4o-mini
    retry = (100 * 0.15 + 200 * 0.6) / 1e6  # the truncation retry: the prompt again, twice the output budget
    assert t.bound("gpt-4o-mini", 400, [100]) == pytest.approx(one)
    assert t.bound("gpt-4o-mini", 400, call_budgets(100)) == pytest.approx(one + retry)
    assert t.bound("gpt-4o-mini", 400, call_budgets(100), sends=5) == pytest.approx(5 * (one + retry))
    assert t.bound("unknown-model", 400, call_budgets(100), sends=5) == 0.0


def test_every_model_a_default_spec_names_is_priced_with_its_source_and_date():
    from evalkit.backends.anthropic import DEFAULT_MODEL
    from evalkit.backends import BackendSpec, provider
    from evalkit.backends.resolve import resolve_backends

    judge = resolve_backends([BackendSpec.parse("anthropic", label="judge")], env={})[0].model  # `--judge anthropic`
    defaults = {DEFAULT_MODEL, provider("anthropic").model(BackendSpec.parse("anthropic")), judge, "gemma-3-270m",
                "fake", "predictions"}
    assert DEFAULT_MODEL in defaults and len(defaults) >= 4
    for model in defaults:
        assert model in DEFAULT_PRICES, f"{model}: a default spec names it; add it to pricing.DEFAULT_PRICES"
    for model, price in DEFAULT_PRICES.items():
        assert price.source and re.fullmatch(r"\d{4}-\d{2}-\d{2}", price.date), model
