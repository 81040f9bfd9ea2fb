"""The openai: backend against a local fake chat-completions server, through the real SDK."""

from __future__ import annotations

import json
import time

import pytest
from corpus_factory import specs
from servers.fixtures import PLANTED_OPENAI, SCHEMA, _clean_env, oai, req  # noqa: F401 - fixtures
from servers.openai_fake import OpenAIFake

from evalkit.backends.cassette import load_records
from evalkit.backends.failures import read_failures, read_recovered
from evalkit.backends.resolve import build_backends
from evalkit.execution.pool import Job, run_jobs


def spec(server, extra: str = "") -> str:
    return f"o=openai:url={server.url}/v1,model=gpt-4o-mini,timeout=5,max_retries=2{extra}"


def one(backend_spec: str, request=None, record: str | None = None):
    backends = build_backends(specs(backend_spec), [f"o={record}"] if record else [])
    return run_jobs([Job(backends[0], request or req())])[0]


def test_request_shape_usage_and_cost(oai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI)
    c = one(spec(oai))
    body = oai.completions()[0]
    assert body["temperature"] == 0
    assert body["max_tokens"] == 64
    assert body["model"] == "gpt-4o-mini"
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "extraction", "schema": SCHEMA, "strict": False}}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert oai.requests[0].headers["authorization"] == f"Bearer {PLANTED_OPENAI}"
    assert c.error is None and c.parse == "clean" and c.record == json.loads(c.raw)
    assert c.finish_reason == "stop" and c.truncated is None and c.calls == 1
    prompt_chars = sum(len(m["content"]) for m in body["messages"])
    assert c.input_tokens == prompt_chars // 4 and c.output_tokens == len(c.raw) // 4 + 1
    assert c.usd == pytest.approx((c.input_tokens * 0.15 + c.output_tokens * 0.6) / 1e6)
    assert c.latency_s > 0


def test_automatic_prefix_caching_is_reported_and_priced(oai, monkeypatch):
    """OpenAI caches a shared prefix by itself: the second call's usage.prompt_tokens_details.cached_tokens is
    recorded as cache reads, priced at the cached-input rate (gpt-4o-mini: half of input), nothing else sent."""
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI)
    backends = build_backends(specs(spec(oai)))
    first, second = run_jobs([Job(backends[0], req("demo/m1")), Job(backends[0], req("demo/m2", user="x"))],
                             max_concurrency=1)
    assert first.cache_read_tokens == 0 and first.cache_write_tokens == 0
    assert second.cache_read_tokens == len("You extract structured data.") // 4 > 0
    plain = second.input_tokens - second.cache_read_tokens
    assert second.usd == pytest.approx((plain * 0.15 + second.cache_read_tokens * 0.075 + second.output_tokens * 0.6) / 1e6)
    assert all("cache_control" not in json.dumps(b) for b in oai.completions())


def test_llama_cpp_dialect_fallback_is_remembered(tmp_path):
    with OpenAIFake(reject_json_schema=True) as server:
        backends = build_backends(specs(spec(server)))
        out = run_jobs([Job(backends[0], req("demo/m1")), Job(backends[0], req("demo/m2", user="other"))],
                       max_concurrency=1)
        bodies = server.completions()
    assert all(c.error is None and c.parse == "clean" for c in out)
    # one rejected json_schema try (no SDK retries spent on it), then json_object for both members
    assert [b["response_format"]["type"] for b in bodies] == ["json_schema", "json_object", "json_object"]
    assert bodies[1]["response_format"]["schema"] == SCHEMA
    assert backends[0].schema_mode == "json_object"


def test_schema_mode_none_sends_no_response_format(oai):
    one(spec(oai, ",schema_mode=none"))
    assert "response_format" not in oai.completions()[0]


def test_429_with_retry_after_then_success(oai, tmp_path):
    oai.script.append({"status": 429, "headers": {"retry-after": "1"}})
    c = one(spec(oai), record=str(tmp_path / "c.jsonl"))
    assert c.error is None and c.record is not None
    assert oai.count == 2
    assert c.latency_s >= 0.95  # the SDK waited as told
    assert read_failures(tmp_path / "c.jsonl") == []  # retried inside the SDK: not a failed call
    assert len(load_records(tmp_path / "c.jsonl")) == 1


def test_500_then_success(oai):
    oai.script.append({"status": 500, "message": "upstream hiccup"})
    c = one(spec(oai))
    assert c.error is None and oai.count == 2


def test_timeout_then_success_and_timeout_exhausted(oai, tmp_path):
    oai.script.append({"delay": 1.0})
    c = one(spec(oai).replace("timeout=5", "timeout=0.3"))
    assert c.error is None and oai.count == 2

    oai.script += [{"delay": 1.0}, {"delay": 1.0}]
    cas = tmp_path / "t.jsonl"
    c = one(spec(oai).replace("timeout=5", "timeout=0.2").replace("max_retries=2", "max_retries=1"), record=str(cas))
    assert c.record is None and c.parse == "error" and "Timeout" in c.error
    fails = read_failures(cas)
    assert [f["classification"] for f in fails] == ["http_error"]
    assert load_records(cas) == []  # a failed call never produces a cassette record


def test_http_error_lands_in_sidecar_and_the_run_goes_on(oai, tmp_path):
    oai.script.append({"status": 400, "message": "bad things " + "x" * 5000})
    cas = tmp_path / "e.jsonl"
    backends = build_backends(specs(spec(oai)), [f"o={cas}"])
    out = run_jobs([Job(backends[0], req("demo/m1")), Job(backends[0], req("demo/m2", user="two"))], max_concurrency=1)
    assert out[0].error.startswith("HTTP 400") and out[0].record is None
    assert out[1].error is None and out[1].record is not None
    (fail,) = read_failures(cas)
    assert fail["classification"] == "http_error" and fail["member"] == "demo/m1"
    assert fail["raw_body"].endswith("x" * 5000 + '", "type": "server_error"}}')  # complete, never shortened
    assert fail["max_tokens"] == 64 and fail["model"] == "gpt-4o-mini" and fail["call_type"] == "extract"
    assert [r["member"] for r in load_records(cas)] == ["demo/m2"]


def test_a_body_that_is_no_answer_is_an_error_and_malformed_content_is_the_models(oai, tmp_path):
    """A 200 HTML page is retried like a 5xx, then an error (never parsed as the model's output, never recorded);
    a chat completion whose text holds no JSON is the model's real, malformed answer."""
    cas = tmp_path / "m.jsonl"
    oai.script += [{"raw": "<html>502 from a proxy, not JSON", "headers": {"content-type": "text/html"}}] * 3
    oai.script.append({"content": "Sorry, I cannot help with that."})
    backends = build_backends(specs(spec(oai)), [f"o={cas}"])
    a, b = run_jobs([Job(backends[0], req("demo/a")), Job(backends[0], req("demo/b", user="b"))], max_concurrency=1)
    assert a.record is None and a.parse == "error" and a.raw == ""
    assert a.error.startswith("not_an_answer: HTTP 200 text/html body is not a chat completion (not JSON")
    assert oai.count == 4  # the first call and its two retries (max_retries=2), then b
    assert b.record is None and b.parse == "malformed" and b.error is None
    fails = read_failures(cas)
    assert [(f["member"], f["classification"]) for f in fails] == [("demo/a", "not_an_answer"), ("demo/b", "malformed")]
    assert fails[0]["raw_body"] == "<html>502 from a proxy, not JSON"
    assert "Sorry, I cannot help" in fails[1]["raw_body"]
    # the unreadable body is not a model answer: only b (the model's real, malformed answer) is recorded
    assert [r["member"] for r in load_records(cas)] == ["demo/b"]


def test_recovered_from_code_fence_and_prose(oai):
    oai.script.append({"content": 'Here you go:\n```json\n{"echo": "x", "chars": 3}\n```\nAnything else?'})
    c = one(spec(oai))
    assert c.parse == "recovered" and c.record == {"echo": "x", "chars": 3}


def test_truncation_retried_once_with_double_budget(oai, tmp_path):
    cas = tmp_path / "tr.jsonl"
    oai.script.append({"content": '{"echo": "ab', "finish": "length"})
    c = one(spec(oai), record=str(cas))
    assert c.truncated == "retry_succeeded" and c.parse == "clean" and c.calls == 2
    assert [b["max_tokens"] for b in oai.completions()] == [64, 128]
    assert read_failures(cas) == []  # recovered on the retry: not a failure, logged apart
    (fail,) = read_recovered(cas)
    assert fail["classification"] == "truncation" and fail["finish_reason"] == "length"
    assert fail["max_tokens"] == 64 and fail["completion_tokens"] == len('{"echo": "ab') // 4 + 1
    (rec,) = load_records(cas)
    assert rec["response"]["truncated"] == "retry_succeeded" and rec["request"]["settings"]["max_tokens"] == 64


def test_truncation_exhausted(oai, tmp_path):
    cas = tmp_path / "tx.jsonl"
    oai.script += [{"content": '{"echo": "ab', "finish": "length"}, {"content": '{"echo": "abcd', "finish": "length"}]
    c = one(spec(oai), record=str(cas))
    assert c.truncated == "exhausted" and c.record is None and c.parse == "malformed" and c.calls == 2
    assert [f["max_tokens"] for f in read_failures(cas)] == [64, 128]
    assert all(f["classification"] == "truncation" for f in read_failures(cas))


def test_no_key_and_no_url_is_a_configuration_error():
    from evalkit.errors import BackendError

    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        build_backends(specs("o=openai:model=gpt-4o"))


def test_planted_key_never_reaches_artefacts(oai, tmp_path, monkeypatch, caplog, capfd):
    import logging

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI)
    cas = tmp_path / "k.jsonl"
    oai.script += [{"status": 401, "message": f"Incorrect API key provided: {PLANTED_OPENAI}"},
                   {"content": "prose only"}, {"status": 403, "message": "key sk-proj-PLANTED-other12345678 blocked"}]
    backends = build_backends(specs(spec(oai)), [f"o={cas}"])
    out = run_jobs([Job(backends[0], req(f"demo/m{i}", user=f"u{i}")) for i in range(4)], max_concurrency=1)
    assert oai.requests[0].headers["authorization"].endswith(PLANTED_OPENAI)  # it was used...
    texts = [p.read_text() for p in tmp_path.iterdir()] + [caplog.text, *capfd.readouterr()]
    texts += [json.dumps(c.to_json()) for c in out] + [backends[0].spec]
    assert any("prose only" in t for t in texts) and len(read_failures(cas)) == 3
    assert "Incorrect API key provided: [OPENAI_API_KEY redacted]" in read_failures(cas)[0]["raw_body"]
    assert not any(PLANTED_OPENAI in t or "PLANTED" in t for t in texts)  # ...and written nowhere


def test_spec_hides_url_credentials():
    from evalkit.backends import BackendContext, provider

    (o,) = specs("o=openai:url=http://user:secret@127.0.0.1:9/v1?token=abc,model=m")
    b = provider("openai").factory(o, BackendContext())
    assert "secret" not in b.spec and "token" not in b.spec and "127.0.0.1:9/v1" in b.spec


def test_many_concurrent_calls_share_one_pool():
    with OpenAIFake(latency=0.2) as server:
        backends = build_backends(specs(spec(server)))
        t0 = time.perf_counter()
        out = run_jobs([Job(backends[0], req(f"demo/m{i}", user=f"doc {i}")) for i in range(32)], max_concurrency=16)
        wall = time.perf_counter() - t0
    assert all(c.error is None for c in out)
    assert [c.record["chars"] for c in out] == [len(f"doc {i}") for i in range(32)]  # job order kept
    assert wall < 1.0  # two waves of 0.2 s, not 32


def test_newer_models_parameter_adaptation_is_remembered(oai):
    oai.script += [{"status": 400, "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                              "Use 'max_completion_tokens' instead."},
                   {"status": 400, "message": "Unsupported value: 'temperature' does not support 0 with this model."}]
    backends = build_backends(specs(spec(oai)))
    out = run_jobs([Job(backends[0], req("d/a")), Job(backends[0], req("d/b", user="b"))], max_concurrency=1)
    assert all(c.error is None for c in out)
    last = oai.completions()[-1]
    assert last["max_completion_tokens"] == 64 and "max_tokens" not in last and "temperature" not in last
    assert oai.count == 4  # two rejected, then one call per member


def test_sdk_import_pauses_gc_and_freezes_what_it_built():
    # In a fresh interpreter: the freeze is process-wide, so keep it out of pytest's process.
    import subprocess
    import sys

    code = """
import gc, sys
from evalkit.backends.live import import_sdk
assert "openai" not in sys.modules and gc.get_freeze_count() == 0
module = import_sdk("openai")
assert module is sys.modules["openai"] and hasattr(module, "AsyncOpenAI")
assert gc.isenabled(), "the GC must be switched back on"
frozen = gc.get_freeze_count()
assert frozen > 10_000, frozen
assert import_sdk("openai") is module and gc.get_freeze_count() == frozen  # once only
gc.disable()
import_sdk("anthropic")
assert not gc.isenabled(), "a GC the caller had disabled stays disabled"
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_unix_socket_server_through_the_sdk_client(tmp_path):
    """openai:socket=PATH reaches a server listening on a Unix domain socket only (no TCP port at all),
    with no key in the environment (a local server); a published spec shows the socket as local."""
    import tempfile

    from evalkit.backends.resolve import plan, resolve_backends

    sock = tempfile.mkdtemp(prefix="evk-", dir="/tmp") + "/llm.sock"  # short: AF_UNIX paths are ≤ 107 bytes
    with OpenAIFake(uds=sock) as server:
        text = f"o=openai:socket={sock},model=gpt-4o-mini,timeout=5,max_retries=0"
        assert plan(resolve_backends(specs(text)), [req()]).guards == []  # no OPENAI_API_KEY needed
        backends = build_backends(specs(text))
        c = run_jobs([Job(backends[0], req())])[0]
        (body,) = server.completions()
    assert c.error is None and c.parse == "clean" and c.record == json.loads(c.raw)
    assert body["model"] == "gpt-4o-mini" and server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].headers["host"] == "localhost"
    assert backends[0].spec == f"openai:socket={sock},model=gpt-4o-mini"
    assert specs(text)[0].public().spec.startswith("openai:socket=<local>,")


def test_unix_socket_nobody_listening_is_a_connection_error(tmp_path):
    c = one(f"o=openai:socket={tmp_path}/none.sock,model=m,timeout=2,max_retries=0")
    assert c.record is None and c.parse == "error" and "APIConnectionError" in c.error
