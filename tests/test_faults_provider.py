"""An answer is an answer or an error (issue 23): a provider response that is not an answer of its protocol
— an HTML proxy page, an empty or cut-off body, an event stream none was asked for, JSON of another shape,
a body trickled past the deadline, a body past `limits.ANSWER_BYTES` — is a member ``error`` with its cause,
never a parse outcome, a score or a scoreboard entry; exit 5; and the next sweep, once the server has
recovered, retries and scores it. The real openai and anthropic SDKs against the fake servers (127.0.0.1).
Only a protocol-valid answer whose text is broken stays the model's output: scored, as ``malformed``."""

from __future__ import annotations

import json
import re
import signal
import time

import pytest
from corpus_factory import make_corpus, specs
from servers.anthropic_fake import AnthropicFake
from servers.fixtures import PLANTED_ANTHROPIC, _clean_env  # noqa: F401 - fixture
from servers.openai_fake import OpenAIFake

from evalkit._util.jsonio import read_json
from evalkit.board.sweep import sweep
from evalkit.execution import workers
from evalkit.results.scoreboard import iter_entries, load_board
from evalkit.stages.runner import RunOptions, run
from evalkit.status import ERROR, PROVIDER_ERROR, SCORED, TIMEOUT

PROVIDERS = ("openai", "anthropic")
DEADLINE_S = 2.0  # EVALKIT_LIMIT_READ_DEADLINE_S in the trickle case
ANSWER_LIMIT = 4096  # EVALKIT_LIMIT_ANSWER_BYTES in the oversize cases


def extract(body: dict) -> dict:
    """The fake model: reads the member's account and rate from its prompt (a perfect answer: score 1.0)."""
    user = json.dumps(body.get("messages"))
    return {"account_id": re.search(r"ACC-\d+", user).group(0), "rate": float(re.search(r"rate of (0\.\d+)", user).group(1))}


PERFECT = {"account_id": "ACC-000", "rate": 0.5}  # what m0 of `make_corpus` holds


def answer_body(provider: str, record: dict, **extra) -> str:
    """A well-formed answer of the protocol carrying `record` (plus `extra` top-level fields)."""
    if provider == "openai":
        body = {"id": "chatcmpl-x", "object": "chat.completion", "model": "gpt-4o-mini",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(record)},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10}}
    else:
        body = {"id": "msg_x", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
                "content": [{"type": "tool_use", "id": "toolu_x", "name": "record_extraction", "input": record}],
                "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 10}}
    return json.dumps({**body, **extra})


def wrong_shape(provider: str) -> str:
    """Valid JSON of the right kind, without the answer: a chat completion with no choices, a message with no content."""
    body = json.loads(answer_body(provider, PERFECT))
    body.pop("choices" if provider == "openai" else "content")
    return json.dumps(body)


def event_stream(provider: str) -> str:
    if provider == "openai":
        chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "{}"}}]}
        return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
    return ('event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_x", "content": []}}\n\n'
            'event: message_stop\ndata: {"type": "message_stop"}\n\n')


HTML = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1>nginx</body></html>"

# fault → (the server's action for every request, the cause, a fragment of the message, the body was no answer)
FAULTS = {
    "html_200": (lambda p: {"raw": HTML, "headers": {"content-type": "text/html"}},
                 PROVIDER_ERROR, "not_an_answer: HTTP 200 text/html body is not a"),
    "empty_200": (lambda p: {"raw": ""}, PROVIDER_ERROR, "(empty body)"),
    "half_json_200": (lambda p: {"raw": answer_body(p, PERFECT)[:60]}, PROVIDER_ERROR, "(not JSON"),
    "sse_200": (lambda p: {"raw": event_stream(p), "headers": {"content-type": "text/event-stream"}},
                PROVIDER_ERROR, "text/event-stream body is not a"),
    "wrong_shape_200": (lambda p: {"raw": wrong_shape(p)}, PROVIDER_ERROR, "not_an_answer: HTTP 200 application/json"),
    # a perfect answer, one byte every 0.1 s: > 30 s in all, past the 2 s deadline
    "trickled_body": (lambda p: {"raw": answer_body(p, PERFECT), "trickle": 0.1}, TIMEOUT, "2 s"),
    # a perfect answer padded past the limit: refused from its Content-Length, or while it arrives (chunked)
    "oversize_body": (lambda p: {"raw": answer_body(p, PERFECT, pad="x" * 100_000)},
                      PROVIDER_ERROR, "answer_bytes = 4096 bytes (raise it with EVALKIT_LIMIT_ANSWER_BYTES)"),
    "oversize_chunked": (lambda p: {"raw": answer_body(p, PERFECT, pad="x" * 100_000), "chunked": True},
                         PROVIDER_ERROR, "answer_bytes = 4096 bytes (raise it with EVALKIT_LIMIT_ANSWER_BYTES)"),
}
NOT_AN_ANSWER = ("html_200", "empty_200", "half_json_200", "sse_200", "wrong_shape_200")


@pytest.fixture(params=PROVIDERS)
def provider(request, monkeypatch, fault):
    """(provider, its fake server, the --backend spec): one member's call retried once by every policy."""
    name = request.param
    if fault == "trickled_body":  # only there: a loaded machine may take seconds to answer anything
        monkeypatch.setenv("EVALKIT_LIMIT_READ_DEADLINE_S", str(DEADLINE_S))
    server = (OpenAIFake(answer=extract) if name == "openai" else AnthropicFake(answer=extract)).start()
    if name == "openai":
        spec = f"live=openai:url={server.url}/v1,model=gpt-4o-mini,timeout=30,max_retries=1"
    else:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_ANTHROPIC)
        spec = "live=anthropic:timeout=30,max_retries=1"
    monkeypatch.setenv("EVALKIT_LIMIT_ANSWER_BYTES", str(ANSWER_LIMIT))
    try:
        yield name, server, spec
    finally:
        server.stop()


@pytest.fixture
def in_process(monkeypatch):
    """A sweep's members run in this process (as inside a worker: `workers.run_all`), not in spawned workers, which
    would start Python and import the SDKs again for each sweep; the signal handlers a worker sets are restored."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(workers, "_in_worker", True)
    yield
    for s, handler in handlers.items():
        signal.signal(s, handler)


def options(tmp_path, spec: str) -> RunOptions:
    return RunOptions(corpus=make_corpus(tmp_path, members=1), backends=specs(spec), out=tmp_path / "sweep",
                      workers=1, notebooks=False, board=tmp_path / "board.json")


def board_entries(tmp_path) -> list:
    return list(iter_entries(load_board(tmp_path / "board.json")))


def no_number(row: dict) -> bool:
    """Whether a summary.json backend row holds no score of any kind (no metric mean, nothing passed or failed)."""
    return not any(m.get("n") for m in row["metrics"].values()) and not row.get("passed") and not row.get("failed")


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_response_that_is_no_answer_is_an_error_then_a_sweep_retries_it(fault, provider, tmp_path, in_process):
    name, server, spec = provider
    action, cause, fragment = FAULTS[fault]
    server.fault = action(name)
    opts = options(tmp_path, spec)

    started = time.perf_counter()
    failed = sweep(opts)
    elapsed = time.perf_counter() - started
    (outcome,) = failed.outcomes
    assert (outcome.status, outcome.cause) == (ERROR, cause), outcome
    assert fragment in outcome.message, outcome.message
    assert outcome.score is None and outcome.passed is None
    assert failed.exit_code == 5
    assert board_entries(tmp_path) == []  # --update-scoreboard: an error is never an entry
    extraction = read_json(opts.out / "members" / "memos" / "m0" / "memos" / "m0" / "live" / "extraction.json")
    assert extraction["status"] == ERROR and extraction["run"]["parse"] == "error"  # never a parse outcome
    assert extraction["record"] is None and extraction["raw"] == ""
    (row,) = read_json(opts.out / "summary.json")["tasks"]["memos"]["backends"]
    assert (row["errors"], row["causes"]) == (1, {cause: 1})
    assert no_number(row), row  # no mean, band or pass count for it
    if fault in NOT_AN_ANSWER:
        assert server.count == 2  # retried once (max_retries=1), like a 5xx
    if fault == "trickled_body":
        assert elapsed < DEADLINE_S + 8, elapsed  # within the deadline (plus the sweep's own start-up)

    server.fault = None  # the server recovers: the next sweep retries the member and scores it
    recovered = sweep(opts)
    assert [m.status for m in recovered.members] == ["ran"]
    (outcome,) = recovered.outcomes
    assert (outcome.status, outcome.score) == (SCORED, 1.0)
    assert recovered.exit_code == 0
    assert [(task, member) for task, member, _label, _entry in board_entries(tmp_path)] == [("memos", "m0")]


@pytest.mark.parametrize("fault", ["html_200", "trickled_body", "oversize_body"])
def test_evalkit_run_exits_5_with_no_score_and_no_board_entry(fault, provider, tmp_path):
    name, server, spec = provider
    server.fault = FAULTS[fault][0](name)
    opts = options(tmp_path, spec)
    opts.out = tmp_path / "run"
    result = run(opts)
    (outcome,) = result.outcomes
    assert (outcome.status, outcome.cause, outcome.score) == (ERROR, FAULTS[fault][1], None)
    assert result.exit_code == 5
    assert board_entries(tmp_path) == []
    extraction = read_json(opts.out / "memos" / "m0" / "live" / "extraction.json")
    assert extraction["status"] == ERROR and extraction["record"] is None and extraction["run"]["parse"] == "error"
    assert extraction["raw"] == ""  # the body was no answer: nothing of it is the model's output


@pytest.mark.parametrize("fault", ["none"])
def test_broken_json_text_in_a_valid_answer_is_still_the_models_malformed_output(fault, provider, tmp_path):
    name, server, spec = provider
    broken = '{"account_id": "ACC-000", "rate": '  # the model wrote broken JSON, in a well-formed answer
    server.fault = ({"content": broken} if name == "openai" else {"text": broken})
    opts = options(tmp_path, spec)
    opts.out = tmp_path / "run"
    result = run(opts)
    (outcome,) = result.outcomes
    assert outcome.status == SCORED and outcome.score == 0.0
    assert server.count == 1  # an answer: not retried
    extraction = read_json(opts.out / "memos" / "m0" / "live" / "extraction.json")
    assert extraction["run"]["parse"] == "malformed" and extraction["raw"] == broken


def call_once(spec: str):
    """One extraction call of `spec`'s backend, through the pool, as a run makes it."""
    from servers.fixtures import req

    from evalkit.backends.resolve import build_backends
    from evalkit.execution.pool import Job, run_jobs

    return run_jobs([Job(build_backends(specs(spec))[0], req(user="Account ACC-000 pays a rate of 0.5."))])[0]


@pytest.mark.parametrize("fault", ["html_200"])
def test_a_body_that_is_no_answer_is_retried_and_the_retry_s_answer_is_taken(fault, provider):
    name, server, spec = provider
    server.script.append(FAULTS[fault][0](name))  # once: the retry gets an answer
    c = call_once(spec)
    assert c.error is None and c.parse == "clean" and server.count == 2


@pytest.mark.parametrize("fault", ["none"])
def test_the_backend_timeout_bounds_the_whole_response_not_only_idle_time(fault, provider):
    """`timeout=1`, bytes arriving every 0.1 s (never idle for 1 s): the request ends at 1 s, body included."""
    name, server, spec = provider
    server.fault = {"raw": answer_body(name, PERFECT), "trickle": 0.1}
    started = time.perf_counter()
    c = call_once(spec.replace("timeout=30,max_retries=1", "timeout=1,max_retries=0"))
    elapsed = time.perf_counter() - started
    assert c.parse == "error" and c.error.startswith("APITimeoutError"), c.error
    assert "within 1 s of the request, body included (the backend's timeout=1)" in c.error
    assert elapsed < 3, elapsed
