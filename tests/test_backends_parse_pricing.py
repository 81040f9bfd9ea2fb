"""JSON repair (clean / recovered / malformed) and the price table."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from evalkit.backends.live import call_budgets
from evalkit.backends.parse import parse_record
from evalkit.backends.pricing import DEFAULT_PRICES, PriceTable, estimate_tokens
from evalkit.errors import UsageError


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
    with pytest.raises(UsageError, match="give input and output"):
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
    from evalkit.backends import BackendSpec, provider
    from evalkit.backends.anthropic import DEFAULT_MODEL
    from evalkit.backends.resolve import resolve_backends

    judge = resolve_backends([BackendSpec.parse("anthropic", label="judge")], env={})[0].model  # `--judge anthropic`
    defaults = {DEFAULT_MODEL, provider("anthropic").model(BackendSpec.parse("anthropic")), judge, "gemma-3-270m"}
    assert DEFAULT_MODEL in defaults and len(defaults) >= 2
    for model in defaults:
        assert model in DEFAULT_PRICES, f"{model}: a default spec names it; add it to pricing.DEFAULT_PRICES"
    assert provider("fake").free and provider("predictions").free  # offline: no price entry, spend 0
    for model, price in DEFAULT_PRICES.items():
        assert price.source and re.fullmatch(r"\d{4}-\d{2}-\d{2}", price.date), model


def test_cache_and_batch_rates_are_priced_apart():
    t = PriceTable()
    # claude-haiku-4-5: input 1, output 5; writes 1.25x, reads 0.1x input; batch half of everything
    assert t.cost("claude-haiku-4-5", 10**6, 0) == pytest.approx(1.0)
    assert t.cost("claude-haiku-4-5", 10**6, 0, cache_read=600_000) == pytest.approx(0.4 + 0.06)
    assert t.cost("claude-haiku-4-5", 10**6, 0, cache_write=600_000) == pytest.approx(0.4 + 0.75)
    assert t.cost("claude-haiku-4-5", 10**6, 10**6, batch=True) == pytest.approx(3.0)
    assert t.cost("gpt-4o-mini", 10**6, 0, cache_read=10**6) == pytest.approx(0.075)  # OpenAI: writes cost input
    assert t.cost("gpt-4o-mini", 10**6, 0, cache_write=10**6) == pytest.approx(0.15)
    # 3 calls sharing a 2,000-token prefix: one writes (+0.25/M each), two read (-0.9/M each)
    assert t.cache_saving("claude-haiku-4-5", 2000, 3) == pytest.approx(2000 * (2 * 0.9 - 0.25) / 1e6)
    assert all(p.terms and p.batch == 0.5 for m, p in DEFAULT_PRICES.items() if m.startswith(("claude", "gpt")))


def test_price_file_may_give_cache_and_batch_rates_and_never_guesses_them(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("m1: {input: 2, output: 4, cache_read: 0.5, batch: 0.5}\nm2: {input: 2, output: 4}\n")
    t = PriceTable(path=path)
    assert t.cost("m1", 10**6, 0, cache_read=10**6) == pytest.approx(0.5)
    assert t.cost("m1", 10**6, 10**6, batch=True) == pytest.approx(3.0)
    assert t.cost("m2", 10**6, 10**6, cache_read=10**6, batch=True) == pytest.approx(6.0)  # no rate given: none


def test_dry_run_shows_what_prompt_caching_saves():
    from corpus_factory import specs

    from evalkit.backends import Request
    from evalkit.backends.resolve import plan, resolve_backends

    env = {"ANTHROPIC_API_KEY": "x"}
    schema = {"type": "object"}
    long = [Request(f"t/m{i}", "extract", "S" * 8000, f"doc {i}", schema, max_tokens=10) for i in range(3)]
    p = plan(resolve_backends(specs("c=anthropic:model=claude-haiku-4-5"), env=env), long)
    (b,) = p.backends
    prefix = estimate_tokens(8000 + len('{"type":"object"}'))
    assert b.cache_prefix_tokens == prefix
    assert b.cache_saving_usd == pytest.approx(prefix * (2 * 0.9 - 0.25) / 1e6)
    assert f"prompt caching: saves ~${b.cache_saving_usd:.4f}" in p.render()
    short = [Request(f"t/m{i}", "extract", "S" * 400, f"doc {i}", schema, max_tokens=10) for i in range(3)]
    p = plan(resolve_backends(specs("c=anthropic:model=claude-haiku-4-5"), env=env), short)
    assert p.backends[0].cache_saving_usd == 0 and "prompt caching: no saving" in p.render()
    assert "under the 1024-token minimum" in p.render()


def _toy(**declared):
    """A third-party-style live provider (as an ``evalkit.backends`` entry point would give), kind ``toy-local``."""
    from evalkit.backends import Provider

    return Provider("toy-local", lambda spec, ctx: None, usage="toy-local[:model=M]", live=True,
                    default_model="toy-unpriced-model", **declared)


def test_pricing_asks_the_provider_record_free_and_page_rule():
    """`free` lets an unpriced live provider through the price guard; `page_rule` picks the provider's documented
    page-token rule. Neither is a kind name evalkit knows."""
    from unittest import mock

    from servers.fixtures import req

    from evalkit.backends.providers import registry
    from evalkit.backends.resolve import plan, resolve_backends
    from evalkit.backends.spec import BackendSpec
    from evalkit.corpus.parts import PNG_MEDIA_TYPE, Part

    def planned(provider, request):
        with mock.patch.dict(registry(), {"toy-local": provider}):
            resolved = resolve_backends([BackendSpec.parse("mine=toy-local")], env={})
            return plan(resolved, [request], PriceTable({}), require_prices=True)

    guarded = planned(_toy(), req())
    assert [g.kind for g in guarded.guards] == ["unpriced_model"] and "toy-unpriced-model" in guarded.guards[0].message
    assert planned(_toy(free=True), req()).guards == []  # a local model: nothing to bound

    image = replace(req(), parts=(Part(PNG_MEDIA_TYPE, b"", "page-1.png", sizes=((3000.0, 3000.0),)),))
    tokens = {rule: planned(_toy(free=True, page_rule=rule), image).backends[0].est_input_tokens
              for rule in ("anthropic", "openai", None)}
    text = planned(_toy(free=True), req()).backends[0].est_input_tokens
    assert tokens["anthropic"] - text == 3279  # 1568 x 1568 px / 750
    assert tokens["openai"] - text == 85 + 170 * 4  # 768 x 768 px: 2 x 2 tiles
    assert tokens[None] == max(tokens["anthropic"], tokens["openai"])  # no rule declared: the dearer one
