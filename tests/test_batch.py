"""--batch: provider batch APIs (Anthropic Message Batches, OpenAI Batch API) against local fake servers
that implement the batch endpoints, driven by the real SDKs: priced at the batch rate, recorded into the
cassette, per-request errors as failures, and a run SIGKILLed mid-poll resumes its batch without
submitting again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from corpus_factory import specs
from servers.anthropic_fake import AnthropicFake
from servers.fixtures import PLANTED_ANTHROPIC, _clean_env, req  # noqa: F401 - fixtures
from servers.openai_fake import OpenAIFake

from evalkit.backends import provider
from evalkit.backends.batch import prefill
from evalkit.backends.cassette import load_records
from evalkit.backends.failures import read_failures
from evalkit.backends.resolve import build_backends
from evalkit.corpus.tasks import DEFAULT_CORPUS
from evalkit.execution.pool import Job, run_async, run_jobs
from evalkit.results import runfolder
from evalkit.stages.runner import RunOptions, run
from evalkit.status import extraction_status

ROOT = Path(__file__).resolve().parent.parent
HAIKU = "c=anthropic:model=claude-haiku-4-5,max_retries=0"


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch):
    monkeypatch.setenv("EVALKIT_BATCH_POLL_S", "0.05")


def _anthropic(monkeypatch, server):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_ANTHROPIC)


def _memos(out: Path, batch: bool, **kw):
    return run(RunOptions(corpus=DEFAULT_CORPUS, backends=specs(HAIKU), tasks=["deal-memos"], out=out,
                          notebooks=False, html=False, workers=1, batch=batch, **kw))


def _runs(run_dir: Path) -> list[dict]:
    return [runfolder.read_extraction(p.parent).run.to_json() for p in sorted(run_dir.rglob(runfolder.EXTRACTION))]


def test_deal_memos_through_message_batches_cost_half_the_per_call_rate(tmp_path, monkeypatch):
    with AnthropicFake() as live_server:
        _anthropic(monkeypatch, live_server)
        live = _memos(tmp_path / "live", batch=False)
        assert live_server.batch_creates() == 0
    with AnthropicFake() as batch_server:
        _anthropic(monkeypatch, batch_server)
        batched = _memos(tmp_path / "batch", batch=True)
        paths = [r.path for r in batch_server.requests]
    assert batch_server.batch_creates() == 1 and not any(p.endswith("/v1/messages") for p in paths)
    n = len(live.outcomes)
    assert n == 13 and [(o.member, o.score) for o in batched.outcomes] == [(o.member, o.score) for o in live.outcomes]
    live_runs, batch_runs = _runs(tmp_path / "live"), _runs(tmp_path / "batch")
    assert all(r["batch"] for r in batch_runs) and not any("batch" in r for r in live_runs)
    # the same tokens (cache writes and reads included), at half the price
    for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        assert sum(r.get(key, 0) for r in batch_runs) == sum(r.get(key, 0) for r in live_runs) > 0, key
    live_usd, batch_usd = sum(r["usd"] for r in live_runs), sum(r["usd"] for r in batch_runs)
    assert batch_usd == pytest.approx(live_usd / 2) and live_usd > 0
    assert not (tmp_path / "batch" / runfolder.BATCHES).exists()  # a finished run's batches are collected


def test_openai_batch_records_into_the_cassette_and_errors_are_failures(tmp_path):
    cas = tmp_path / "o.jsonl"
    with OpenAIFake() as server:
        spec = f"o=openai:url={server.url}/v1,model=gpt-4o-mini,max_retries=0"
        backend = build_backends(specs(spec), [f"o={cas}"])[0]
        requests = [req("d/m1", user="doc one"), req("d/m2", user="doc two BATCH-ERROR"), req("d/m3", user="doc three"),
                    req("d/m1b", user="doc one")]  # an identical request: one batch entry, answered twice
        saved = []
        (wrapped,) = run_async(prefill([(backend, r) for r in requests], {}, lambda s: saved.append(json.dumps(s)))).values()
        out = run_jobs([Job(wrapped, r) for r in requests])
        assert server.batch_creates() == 1 and not server.completions()  # no call made one by one
        (line,) = [json.loads(x) for x in server.files["file-fake1"].decode().splitlines() if "doc one" in x]
        assert line["body"]["model"] == "gpt-4o-mini" and line["url"] == "/v1/chat/completions"
    ok = [out[0], out[2], out[3]]
    assert all(c.error is None and c.parse == "clean" and c.batch for c in ok)
    assert out[0].calls == out[2].calls == 1 and out[0].usd > 0
    assert out[3].record == out[0].record and out[3].calls == 0 and out[3].usd == 0  # one entry, billed once
    assert out[1].record is None and out[1].error.startswith("HTTP 400 from openai batch")
    status = extraction_status(out[1], provider("openai").failure)
    assert status["status"] == "error" and status["cause"] == "provider_error"
    assert [f["member"] for f in read_failures(cas)] == ["d/m2"]
    records = load_records(cas)
    assert sorted(r["member"] for r in records) == ["d/m1", "d/m1b", "d/m3"]
    assert all(r["response"]["batch"] for r in records)
    (saved_state,) = saved  # written once, when the batch was submitted: its id and the keys it holds
    assert [len(b["keys"]) for b in json.loads(saved_state)["o"]] == [3]
    # the cassette replays the batch's answers: no provider at all
    replay = build_backends(specs(f"o=cassette:path={cas}"))[0]
    again = run_jobs([Job(replay, r) for r in (requests[0], requests[2])])
    assert [c.record for c in again] == [out[0].record, out[2].record] and all(c.replayed for c in again)


def test_a_batch_run_killed_mid_poll_resumes_its_batch_without_submitting_again(tmp_path):
    """SIGKILL while polling; the next run into the folder polls the same batch by its id (kept in the run
    folder) and submits nothing: one batch create across both runs, no call made one by one."""
    out = tmp_path / "run"
    driver = (f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
              "from corpus_factory import specs\n"
              "from evalkit.corpus.tasks import DEFAULT_CORPUS\n"
              "from evalkit.stages.runner import RunOptions, run\n"
              f"r = run(RunOptions(corpus=DEFAULT_CORPUS, backends=specs({HAIKU!r}), tasks=['deal-memos'], "
              f"only=['clean-single-term', 'foreign-id', 'percent-words'], out={str(out)!r}, notebooks=False, "
              "html=False, workers=1, batch=True))\n"
              "sys.exit(r.exit_code)\n")
    with AnthropicFake() as server:
        server.batch_polls = 10**6  # the batch never ends while the first run polls
        env = {**os.environ, "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": PLANTED_ANTHROPIC,
               "EVALKIT_BATCH_POLL_S": "0.05", "PYTHONPATH": str(ROOT)}
        first = subprocess.Popen([sys.executable, "-c", driver], env=env, cwd=tmp_path, stderr=subprocess.PIPE,
                                 text=True)
        deadline = time.monotonic() + 60
        while sum(1 for r in server.requests if r.method == "GET") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert first.returncode == -signal.SIGKILL, first.stderr.read()
        (batch_id,) = server.batches
        assert [b["id"] for b in runfolder.read_batches(out).by_label["c"]] == [batch_id]
        assert not list(out.rglob(runfolder.EXTRACTION))
        server.batches[batch_id]["polls"] = 1  # the provider finishes the batch meanwhile
        second = subprocess.run([sys.executable, "-c", driver], env=env, cwd=tmp_path, capture_output=True, text=True,
                                timeout=120)
        assert second.returncode in (0, 1), second.stderr
        assert server.batch_creates() == 1  # zero duplicate submissions
        assert not any(r.path.endswith("/v1/messages") for r in server.requests)
        assert f"3/3 answered (3 done at the provider) in {batch_id}" in second.stderr
    runs = _runs(out)
    assert len(runs) == 3 and all(r["batch"] and r["error"] is None for r in runs)


def test_dry_run_with_batch_prices_first_calls_at_the_batch_rate(monkeypatch):
    from corpus_factory import cli

    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_ANTHROPIC)
    args = ["run", "--backend", HAIKU, "--task", "deal-memos", "--dry-run"]
    plain, batched = cli(*args), cli(*args, "--batch")
    assert plain.exit_code == batched.exit_code == 0
    one_pass = [float(o.split("(one pass ~$")[1].split(")")[0]) for o in (plain.output, batched.output)]
    assert one_pass[1] == pytest.approx(one_pass[0] / 2, abs=1e-4) and one_pass[0] > 0
    assert "--batch: 13 request(s) in provider batches, priced at the batch rate" in batched.output
    assert "--batch" not in plain.output
