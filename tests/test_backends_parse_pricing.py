"""JSON repair (clean / recovered / malformed) and the price table."""

from __future__ import annotations

import pytest

from evalkit.backends.parse import parse_record
from evalkit.errors import UsageError
from evalkit.pricing import PriceTable, estimate_tokens


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


def test_price_lookup_prefix_and_override(tmp_path, monkeypatch):
    t = PriceTable()
    assert t.cost("claude-haiku-4-5-20251001", 1_000_000, 1_000_000) == pytest.approx(6.0)  # longest prefix
    assert t.cost("gpt-4o-mini", 1000, 1000) == pytest.approx((1000 * 0.15 + 1000 * 0.6) / 1e6)
    assert not t.priced("some-local-model") and t.cost("some-local-model", 10**6, 10**6) == 0.0
    assert t.estimate("gpt-4o-mini", prompt_chars=400, max_tokens=100) == pytest.approx((100 * 0.15 + 100 * 0.6) / 1e6)
    assert estimate_tokens(5) == 2
    (tmp_path / "p.yaml").write_text("some-local-model: {input: 1, output: 2}\ngpt-4o-mini: {input: 0, output: 0}\n")
    monkeypatch.setenv("EVALKIT_PRICES", str(tmp_path / "p.yaml"))
    t = PriceTable()
    assert t.cost("some-local-model", 10**6, 10**6) == pytest.approx(3.0) and t.cost("gpt-4o-mini", 10**6, 0) == 0
    (tmp_path / "p.json").write_text('{"m": {"input": 1}}')
    with pytest.raises(UsageError, match="exactly input and output"):
        PriceTable(path=tmp_path / "p.json")
