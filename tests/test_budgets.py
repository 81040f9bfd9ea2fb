"""Budgets fail closed: a model with no price stops `--dry-run --strict` and `--max-usd` before any call (unless
`--allow-unpriced`), and what --max-usd reserves for a call covers its truncation retry."""

from __future__ import annotations

import pytest
from corpus_factory import cli, specs
from servers.fixtures import _clean_env, oai, req  # noqa: F401 - fixtures

from evalkit.backends.openai import OpenAIBackend
from evalkit.backends.pricing import Price, PriceTable, request_chars
from evalkit.backends.resolve import plan, resolve_backends
from evalkit.execution.pool import Job, run_pool

ONLY = ["--task", "deal-memos", "--only", "clean-single-term"]


def unpriced(server) -> str:
    return f"local=openai:url={server.url}/v1,model=my-unpriced-model,max_retries=0"


def test_dry_run_with_max_usd_and_an_unpriced_model_exits_non_zero_naming_it(oai):
    res = cli("run", "--backend", unpriced(oai), *ONLY, "--dry-run", "--max-usd", "0.01")
    assert res.exit_code == 0 and "a real run would abort" in res.output, res.output  # the plan, shown (issue 12.7)
    res = cli("run", "--backend", unpriced(oai), *ONLY, "--dry-run", "--strict", "--max-usd", "0.01")
    assert res.exit_code == 2, res.output
    assert "my-unpriced-model" in res.output and "not in the price table" in res.output
    for how in ("--prices FILE", "$EVALKIT_PRICES", "--allow-unpriced"):
        assert how in res.output
    assert "no guard would abort" not in res.output
    res = cli("run", "--backend", unpriced(oai), *ONLY, "--dry-run", "--strict")  # nor a dry run alone
    assert res.exit_code == 2 and "my-unpriced-model" in res.output
    assert oai.count == 0


def test_max_usd_run_with_an_unpriced_model_stops_before_any_call_and_writes_nothing(oai, tmp_path):
    out = tmp_path / "run"
    res = cli("run", "--backend", unpriced(oai), *ONLY, "--max-usd", "1", "--out", out)
    assert res.exit_code == 2, res.output
    assert "my-unpriced-model" in res.output and "--allow-unpriced" in res.output
    assert oai.count == 0 and not out.exists()


def test_allow_unpriced_or_a_price_file_lets_it_run(oai, tmp_path):
    res = cli("run", "--backend", unpriced(oai), *ONLY, "--dry-run", "--max-usd", "0.01", "--allow-unpriced")
    assert res.exit_code == 0 and "no guard would abort" in res.output, res.output
    assert "cost unknown (model my-unpriced-model is not in the price table)" in res.output
    prices = tmp_path / "prices.yaml"
    prices.write_text("my-unpriced-model: {input: 0, output: 0}\n")
    res = cli("run", "--backend", unpriced(oai), *ONLY, "--dry-run", "--max-usd", "0.01", "--prices", prices)
    assert res.exit_code == 0 and "≤ $0.0000" in res.output, res.output
    assert oai.count == 0
    res = cli("run", "--backend", unpriced(oai), *ONLY, "--max-usd", "0.01", "--allow-unpriced", "--no-html",
              "--out", tmp_path / "run")
    assert oai.count == 1 and res.exit_code in (0, 1), res.output  # it ran (the echo answer fails its verdict)


def test_a_replayed_or_free_backend_needs_no_price_and_an_unpriced_judge_does(oai, monkeypatch):
    res = cli("run", "--backend", "fake", *ONLY, "--dry-run", "--max-usd", "0.01")
    assert res.exit_code == 0, res.output
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    judge = resolve_backends(specs(f"judge=openai:url={oai.url}/v1,model=unpriced-judge"), env={})[0]
    p = plan(resolve_backends(specs("fake")), [req()], require_prices=True, judge=judge)
    assert [g.kind for g in p.guards] == ["unpriced_model"] and "unpriced-judge" in p.guards[0].message
    assert not plan(resolve_backends(specs("fake")), [req()], judge=judge).guards  # no budget asked for: no guard


def test_max_usd_reserves_the_truncation_retry(oai):
    backend = OpenAIBackend("o", url=f"{oai.url}/v1", model="m", max_retries=0,
                            prices=PriceTable({"m": Price(1.0, 1.0)}))
    r = req(max_tokens=64)
    prompt = (request_chars(r) + 3) // 4
    one_call = (prompt + 64) / 1e6
    assert backend.estimate_usd(r) == pytest.approx((2 * prompt + 64 + 128) / 1e6)
    # A budget that covers one call at max_tokens but not its retry at twice that: the call is not started,
    # since a cut-off answer would make evalkit spend past the limit.
    result = run_pool([Job(backend, r)], max_usd=1.2 * one_call)
    assert result.skipped == [0] and oai.count == 0
    result = run_pool([Job(backend, r)], max_usd=backend.estimate_usd(r))
    assert result.skipped == [] and oai.count == 1
