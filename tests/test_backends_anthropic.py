"""The anthropic backend against a local fake Messages API server, through the real SDK."""

from __future__ import annotations

import json
import logging

import pytest
from corpus_factory import specs
from servers.fixtures import PLANTED_ANTHROPIC, SCHEMA, _clean_env, ant, req  # noqa: F401 - fixtures

from evalkit.backends.cassette import load_records
from evalkit.backends.failures import read_failures, read_recovered
from evalkit.backends.resolve import build_backends, plan, resolve_backends
from evalkit.errors import BackendError
from evalkit.execution.pool import Job, run_jobs

SPEC = "c=anthropic:model=claude-haiku-4-5,timeout=5,max_retries=2"


def one(request=None, record: str | None = None, spec: str = SPEC):
    backends = build_backends(specs(spec), [f"c={record}"] if record else [])
    return run_jobs([Job(backends[0], request or req())])[0]


def test_forced_tool_call_shape_usage_and_cost(ant):
    c = one()
    (body,) = ant.messages()
    assert body["tools"] == [{"name": "record_extraction", "description": body["tools"][0]["description"],
                              "input_schema": SCHEMA}]
    assert body["tool_choice"] == {"type": "tool", "name": "record_extraction"}
    assert body["temperature"] == 0
    assert body["max_tokens"] == 64 and body["model"] == "claude-haiku-4-5"
    # the shared prefix (tool, then system) ends at a cache breakpoint on the system prompt
    assert body["system"] == [{"type": "text", "text": "You extract structured data.",
                               "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [{"role": "user", "content": req().user}]
    headers = ant.requests[0].headers
    # this SDK generation sends the key as a bearer token; older ones used x-api-key
    assert PLANTED_ANTHROPIC in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    assert "anthropic-version" in headers
    assert c.error is None and c.parse == "clean" and c.record == json.loads(c.raw)
    assert c.finish_reason == "tool_use" and c.calls == 1
    assert c.input_tokens > 0 and c.output_tokens > 0
    # the first call writes the shared prefix to the prompt cache: those tokens at the write rate (1.25x input)
    assert c.cache_write_tokens > 0 and c.cache_read_tokens == 0
    plain = c.input_tokens - c.cache_write_tokens
    assert c.usd == pytest.approx((plain * 1 + c.cache_write_tokens * 1.25 + c.output_tokens * 5) / 1e6)


def test_prompt_cache_reads_are_recorded_and_priced_apart(ant, tmp_path):
    """Two members sharing the system prompt and schema: the second reads the prefix the first wrote; the
    cassette keeps both counts; replay gives them back; cache=false sends no breakpoint and is billed plainly."""
    cas = tmp_path / "c.jsonl"
    backends = build_backends(specs(SPEC), [f"c={cas}"])
    first, second = run_jobs([Job(backends[0], req("demo/m1")), Job(backends[0], req("demo/m2", user="Other doc."))],
                             max_concurrency=1)
    assert first.cache_write_tokens > 0 and first.cache_read_tokens == 0
    assert second.cache_read_tokens == first.cache_write_tokens and second.cache_write_tokens == 0
    plain = second.input_tokens - second.cache_read_tokens
    assert second.usd == pytest.approx((plain * 1 + second.cache_read_tokens * 0.1 + second.output_tokens * 5) / 1e6)
    usage = [r["response"]["usage"] for r in load_records(cas)]
    assert usage[0]["cache_write_tokens"] == first.cache_write_tokens
    assert usage[1]["cache_read_tokens"] == second.cache_read_tokens
    replayed = run_jobs([Job(build_backends(specs(f"c=cassette:path={cas}"))[0], req("demo/m2", user="Other doc."))])[0]
    assert replayed.replayed and replayed.cache_read_tokens == second.cache_read_tokens and replayed.usd == second.usd
    plain_call = one(req("demo/m3"), spec=SPEC + ",cache=false")
    body = ant.messages()[-1]
    assert body["system"] == "You extract structured data." and "cache_control" not in json.dumps(body["tools"])
    assert plain_call.cache_read_tokens == plain_call.cache_write_tokens == 0
    assert "cache_read_tokens" not in plain_call.to_json()  # a call without caching stores what it did


def test_missing_key_is_a_configuration_error_before_any_call(ant, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    resolved = resolve_backends(specs(SPEC))
    p = plan(resolved, [req()])  # a dry run names the guard...
    assert [g.kind for g in p.guards] == ["missing_api_key"] and ant.count == 0
    with pytest.raises(BackendError, match="ANTHROPIC_API_KEY"):  # ...and a real run stops before calling
        build_backends(specs(SPEC))
    assert ant.count == 0


def test_429_retry_after_then_overloaded_then_success(ant, tmp_path):
    ant.script += [{"status": 429, "headers": {"retry-after": "1"}}, {"status": 529}]
    c = one(record=str(tmp_path / "a.jsonl"))
    assert c.error is None and ant.count == 3 and c.latency_s >= 0.95
    assert read_failures(tmp_path / "a.jsonl") == []


def test_persistent_errors_become_error_completions(ant, tmp_path):
    ant.script += [{"status": 500, "headers": {"retry-after-ms": "10"}}] * 3
    cas = tmp_path / "e.jsonl"
    c = one(record=str(cas))
    assert c.record is None and c.error.startswith("HTTP 500") and ant.count == 3  # 1 + max_retries
    assert [f["classification"] for f in read_failures(cas)] == ["http_error"]
    assert load_records(cas) == []


def test_max_tokens_stop_is_retried_with_double_budget(ant, tmp_path):
    cas = tmp_path / "t.jsonl"
    ant.script.append({"truncate": True})
    c = one(record=str(cas))
    assert c.truncated == "retry_succeeded" and c.parse == "clean"
    assert [m["max_tokens"] for m in ant.messages()] == [64, 128]
    assert read_failures(cas) == []  # recovered on the retry: not a failure, logged apart
    (fail,) = read_recovered(cas)
    assert fail["classification"] == "truncation" and fail["finish_reason"] == "max_tokens"


def test_text_instead_of_tool_call_is_repaired_or_malformed(ant, tmp_path):
    cas = tmp_path / "x.jsonl"
    ant.script += [{"text": 'Sure! {"echo": "e", "chars": 1} Hope that helps.'}, {"text": "I would rather not."}]
    backends = build_backends(specs(SPEC), [f"c={cas}"])
    a, b = run_jobs([Job(backends[0], req("d/a")), Job(backends[0], req("d/b", user="b"))], max_concurrency=1)
    assert a.parse == "recovered" and a.record == {"echo": "e", "chars": 1}
    assert b.parse == "malformed" and b.record is None
    assert [(f["member"], f["classification"]) for f in read_failures(cas)] == [("d/b", "malformed")]


def test_temperature_rejection_falls_back_once(ant):
    ant.script.append({"status": 400, "message": "temperature: unknown parameter for this model"})
    backends = build_backends(specs(SPEC))
    out = run_jobs([Job(backends[0], req("d/a")), Job(backends[0], req("d/b", user="b"))], max_concurrency=1)
    assert all(c.error is None for c in out)
    assert ["temperature" in m for m in ant.messages()] == [True, False, False]


def test_planted_key_never_reaches_artefacts(ant, tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    cas = tmp_path / "k.jsonl"
    ant.script += [{"status": 401, "message": f"invalid x-api-key: {PLANTED_ANTHROPIC}"}, {"text": "no json here"},
                   {"truncate": True}]
    backends = build_backends(specs(SPEC), [f"c={cas}"])
    out = run_jobs([Job(backends[0], req(f"d/m{i}", user=f"u{i}")) for i in range(4)], max_concurrency=1)
    assert PLANTED_ANTHROPIC in json.dumps(ant.requests[0].headers)  # the key was sent...
    assert len(read_failures(cas)) == 2 and len(read_recovered(cas)) == 1 and len(load_records(cas)) == 3
    texts = [p.read_text() for p in tmp_path.iterdir()] + [caplog.text, *capfd.readouterr()]
    texts += [json.dumps(c.to_json()) for c in out] + [b.spec for b in backends]
    assert not any("PLANTED" in t for t in texts)  # ...and written nowhere
