"""A failure is a status, not a score (`evalkit.status`).

2 of 5 members fail — HTTP 500 after retries from the local fake OpenAI server, or a raising
``python:`` pipeline — and are ERROR everywhere: the CLI line, extraction.json, score.json, the
notebooks, the index, the task report, runs/index.jsonl. They are out of every mean, band and
comparison, never on the scoreboard, never current for a sweep; the exit code is 5.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from corpus_factory import cli, make_corpus, specs
from servers.httpserver import HTTPResponse
from servers.openai_fake import OpenAIFake

from evalkit._util.jsonio import read_json
from evalkit.backends import Completion, Provider, provider
from evalkit.backends.providers import registry
from evalkit.results.history import read_history
from evalkit.stages.runner import RunOptions, run
from evalkit.status import (
    BUDGET_STOP,
    ERROR,
    MISSING_PREDICTION,
    PIPELINE_EXCEPTION,
    PROVIDER_ERROR,
    SCORED,
    SCORING_CRASH,
    TIMEOUT,
    classify,
)

FAILING = ("m1", "m3")  # of m0..m4: their documents name ACC-001 and ACC-003
PIPE = '''
import re
from pathlib import Path

FAIL = Path(__file__).with_name("fail.txt")  # accounts to crash on, one per line
NUDGE = Path(__file__).with_name("nudge.txt")  # accounts whose rate is off by 0.0001 (inside the tolerance)


def extract(text, task):
    account = re.search(r"ACC-[0-9]+", text).group(0)
    if FAIL.is_file() and account in FAIL.read_text().split():
        raise RuntimeError(f"pipeline crashed on {account}")
    nudge = 0.0001 if NUDGE.is_file() and account in NUDGE.read_text().split() else 0.0
    return {"account_id": account, "rate": float(re.search(r"rate of ([0-9]+[.][0-9]+)", text).group(1)) + nudge}
'''


def answer(body: dict) -> dict:
    """The right record, read from the document in the prompt."""
    user = str(body["messages"][-1]["content"])
    account = re.search(r"ACC-[0-9]+", user).group(0)
    return {"account_id": account, "rate": float(re.search(r"rate of ([0-9]+[.][0-9]+)", user).group(1))}


class Outage(OpenAIFake):
    """Answers right, except HTTP 500 for documents naming an account in `failing` (every attempt)."""

    def __init__(self, failing: set[str]):
        super().__init__(answer=answer)
        self.failing = failing
        self.per_account: dict[str, int] = {}

    async def _handle(self, req, server):
        account = re.search(r"ACC-[0-9]+", json.dumps(req.json or {})).group(0)
        self.per_account[account] = self.per_account.get(account, 0) + 1
        if account in self.failing:
            return HTTPResponse(500, {"error": {"message": "scripted outage", "type": "server_error"}})
        return await super()._handle(req, server)


def accounts(members=FAILING) -> set[str]:
    return {f"ACC-{int(m[1:]):03d}" for m in members}


@pytest.fixture
def pipeline(tmp_path):
    """(spec, fail(members)): a python: pipeline that raises for the members given to fail()."""
    (tmp_path / "pipe.py").write_text(PIPE)

    def fail(members=FAILING):
        (tmp_path / "fail.txt").write_text("\n".join(sorted(accounts(members))))

    fail()
    return f"py=python:{tmp_path / 'pipe.py'}:extract", fail


def evalkit(*args, cwd):
    return subprocess.run([sys.executable, "-m", "evalkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def member_lines(stdout: str) -> dict[str, str]:
    """member → what its verdict line says (``[n/N] task/member … 100.0% PASS``, or a skipped member's line)."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^(?:\[\d+/\d+\] [^/\s]+/|  )(\S+) … (.*)$", stdout, re.M)}


def outputs(notebook: Path) -> str:
    """The text a notebook's cells printed or displayed (tags stripped)."""
    nb = json.loads(notebook.read_text())
    parts = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            parts.append("".join(o.get("text", "")) + "".join((o.get("data") or {}).get("text/html", "")))
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", "".join(parts)))


def assert_error_files(home: Path, cause: str) -> None:
    ext, score = read_json(home / "extraction.json"), read_json(home / "score.json")
    assert ext["status"] == ERROR and ext["cause"] == cause and ext["record"] is None
    assert score["status"] == ERROR and score["cause"] == cause and score["message"] == ext["message"]
    assert score["score"] is None and score["passed"] is None and score["metrics"] == {} and score["items"] == []


# --------------------------------------------------------------------------- classification


def test_only_a_completion_without_output_is_a_failure_and_its_cause_is_classified():
    def c(error, parse="error", **kw):
        return Completion(record=None, parse=parse, error=error, **kw)

    def failure(kind):  # what its provider declares an empty completion to be
        return provider(kind).failure

    assert classify(c("HTTP 500 from openai server: boom"), failure("openai")).cause == PROVIDER_ERROR
    assert classify(c("APITimeoutError: Request timed out."), failure("anthropic")).cause == TIMEOUT
    assert classify(c("python:p.py:f raised ValueError: x"), failure("python")).cause == PIPELINE_EXCEPTION
    assert classify(c("timeout: python:p.py:f did not answer"), failure("python")).cause == TIMEOUT
    assert classify(c("no prediction file /p/m0.json"), failure("predictions")).cause == MISSING_PREDICTION
    budget = classify(c("skipped: --max-usd 1 reached (spent $1.0000 so far)"), failure("openai"))
    assert budget.cause == BUDGET_STOP and budget.message.startswith("--max-usd 1 reached")
    # The model's real output, however bad, is scored: malformed (even with an error noted), truncated.
    assert classify(c("unreadable response body from openai server: <html>", parse="malformed"), None) is None
    assert classify(Completion(record=None, raw="not json", parse="malformed"), None) is None
    assert classify(Completion(record={"a": 1}, parse="recovered", truncated="exhausted"), None) is None


def test_a_third_party_provider_declares_what_its_empty_completion_is():
    from evalkit.stages.pipeline import failure_declared

    toy = Provider("toy-files", None, usage="toy-files", failure=MISSING_PREDICTION)
    backend = type("ToyBackend", (), {"provider": "toy-files"})()
    with mock.patch.dict(registry(), {"toy-files": toy}):
        assert failure_declared(backend) == MISSING_PREDICTION  # asked of its record, not its name
        assert classify(Completion(record=None, parse="error", error="no file m0"),
                        failure_declared(backend)).cause == MISSING_PREDICTION
    assert failure_declared(backend) is None  # an unknown provider: a provider error


def test_a_timeout_from_the_fake_server_is_classified_timeout():
    from servers.fixtures import req

    from evalkit.backends.openai import OpenAIBackend
    from evalkit.execution.pool import Job, run_jobs

    with OpenAIFake(latency=1.0) as server:
        backend = OpenAIBackend("x", url=f"{server.url}/v1", model="m", timeout_s=0.2, max_retries=0)
        completion = run_jobs([Job(backend, req())])[0]
    assert classify(completion, provider(backend.provider).failure).cause == TIMEOUT


# --------------------------------------------------------------------------- evalkit run


def test_http_500_after_retries_is_error_out_of_the_means_and_exit_5(tmp_path):
    corpus = make_corpus(tmp_path, members=5)
    with Outage(accounts()) as server:
        proc = evalkit("run", "--corpus", corpus, "--backend", f"oai=openai:url={server.url}/v1,max_retries=1",
                       "--out", tmp_path / "run", "--no-html", cwd=tmp_path)
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert all(server.per_account[a] == 2 for a in accounts())  # the call was retried, then gave up
    lines = member_lines(proc.stdout)
    assert {m: lines[m] for m in FAILING} == {"m1": "ERROR", "m3": "ERROR"}
    assert all(lines[m] == "100.0% PASS" for m in ("m0", "m2", "m4"))
    assert re.search(r"m1 … ERROR\n\s+↳ provider_error: HTTP 500 .*scripted outage", proc.stdout)
    assert "  oai: 3/5 passed · 2 errors · mean score 100.0% [100.0%, 100.0%] over 3 scored" in proc.stdout
    for m in FAILING:
        home = tmp_path / "run" / "memos" / m / "oai"
        assert_error_files(home, PROVIDER_ERROR)
        assert "ERROR (provider_error)" in outputs(home / "score.ipynb")
        assert "ERROR (provider_error)" in outputs(home / "extract.ipynb")
    report = outputs(tmp_path / "run" / "memos" / "report.ipynb")
    assert "5 member run(s) · 3 PASS · 0 FAIL · 2 ERROR (error rate 40%) · mean score 1.000 over 3 scored" in report
    history = {line.member: line.to_json() for line in read_history(tmp_path / "index.jsonl")}
    assert history["m1"]["status"] == ERROR and history["m1"]["cause"] == PROVIDER_ERROR
    assert "score" not in history["m1"] and "metrics" not in history["m1"]
    assert history["m0"]["status"] == SCORED and history["m0"]["score"] == 1.0


def test_a_raising_pipeline_is_error_in_the_index_report_and_both_scoring_paths_agree(tmp_path, pipeline):
    spec, _ = pipeline
    corpus = make_corpus(tmp_path, members=5)
    proc = evalkit("run", "--corpus", corpus, "--backend", spec, "--out", tmp_path / "run", cwd=tmp_path)
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert re.search(r"m3 … ERROR\n\s+↳ pipeline_exception: python:.* raised RuntimeError: pipeline crashed on "
                     r"ACC-003", proc.stdout)
    assert "  py: 3/5 passed · 2 errors" in proc.stdout
    index = (tmp_path / "run" / "index.html").read_text()
    rows = {m: re.search(rf'score.html">{m}</a>.*?</tr>', index).group(0) for m in ("m0", "m1", "m3")}
    assert "1.000" in rows["m0"] and "PASS" in rows["m0"]
    for m in FAILING:
        assert "ERROR" in rows[m] and "pipeline_exception" in rows[m] and "0.000" not in rows[m], rows[m]
        assert_error_files(tmp_path / "run" / "memos" / m / "py", PIPELINE_EXCEPTION)
    report = outputs(tmp_path / "run" / "memos" / "report.ipynb")
    assert "2 ERROR (error rate 40%)" in report and "pipeline_exception" in report

    # --no-notebooks (what `sweep --no-notebooks` runs) writes the same score.json
    direct = run(RunOptions(corpus=corpus, backends=specs(spec), out=tmp_path / "direct",
                            notebooks=False, html=False))
    assert direct.exit_code == 5
    assert {(o.member, o.status, o.cause) for o in direct.outcomes if o.status == ERROR} == \
        {(m, ERROR, PIPELINE_EXCEPTION) for m in FAILING}
    for m in ("m0", "m1", "m3"):
        a, b = (read_json(r / "memos" / m / "py" / "score.json") for r in (tmp_path / "run", tmp_path / "direct"))
        a.pop("run"), b.pop("run")  # latencies differ
        assert a == b


def test_a_crashing_scorer_is_a_scoring_crash_in_both_scoring_paths(tmp_path):
    corpus = make_corpus(tmp_path, members=2)
    task = corpus / "memos" / "task.yaml"
    (corpus / "memos" / "scorer.py").write_text(
        "from evalkit.scoring import ScoreResult\n"
        "def score(extraction, truth, ctx):\n"
        "    if ctx.member_id == 'm1':\n"
        "        raise ZeroDivisionError('scorer bug')\n"
        "    return ScoreResult(score=1.0, passed=True, metrics={'score': 1.0}, items=[])\n")
    task.write_text(re.sub(r"scorer: fields\n", "scorer: scorer.py:score\n", task.read_text()))
    results = {nb: run(RunOptions(corpus=corpus, backends=specs("fake"), out=tmp_path / str(nb), notebooks=nb,
                                  html=False, report=False)) for nb in (True, False)}
    for nb, result in results.items():
        assert result.exit_code == 5
        assert [(o.member, o.status, o.cause) for o in result.outcomes] == [("m0", SCORED, ""),
                                                                            ("m1", ERROR, SCORING_CRASH)]
        score = read_json(tmp_path / str(nb) / "memos" / "m1" / "fake" / "score.json")
        assert score["message"] == "ZeroDivisionError: scorer bug" and score["score"] is None


def test_a_budget_stop_is_an_error_with_no_call(tmp_path):
    corpus = make_corpus(tmp_path, members=2)
    with OpenAIFake() as server:
        result = run(RunOptions(corpus=corpus, backends=specs(f"oai=openai:url={server.url}/v1,model=gpt-4o-mini"),
                                out=tmp_path / "run", notebooks=False, html=False, max_usd=0.0))
        assert server.count == 0
    assert result.exit_code == 5
    assert {(o.status, o.cause) for o in result.outcomes} == {(ERROR, BUDGET_STOP)}
    assert "--max-usd 0 reached" in result.outcomes[0].message


def test_a_missing_prediction_is_an_error_a_malformed_one_is_scored(tmp_path):
    corpus = make_corpus(tmp_path, members=3)
    preds = tmp_path / "preds"
    preds.mkdir()
    (preds / "m0.json").write_text(json.dumps({"account_id": "ACC-000", "rate": 0.5}))
    (preds / "m1.json").write_text("{not json")
    result = run(RunOptions(corpus=corpus, backends=specs(f"p=predictions:dir={preds}"), out=tmp_path / "run",
                            notebooks=False, html=False))
    assert [(o.member, o.status, o.cause, o.passed) for o in result.outcomes] == [
        ("m0", SCORED, "", True), ("m1", SCORED, "", False), ("m2", ERROR, MISSING_PREDICTION, None)]
    assert result.exit_code == 5


# --------------------------------------------------------------------------- sweep, scoreboard, check


@pytest.mark.parametrize("kind", ["openai", "python"])
def test_sweep_boards_the_scored_exits_5_and_retries_exactly_the_errors(tmp_path, kind, pipeline):
    corpus = make_corpus(tmp_path, members=5)
    board, out = tmp_path / "board.json", tmp_path / "sw"
    server = Outage(accounts()).start()
    try:
        spec, fail = (f"oai=openai:url={server.url}/v1,max_retries=1", None) if kind == "openai" else pipeline
        label = spec.split("=", 1)[0]

        def sweep(*extra):
            return cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 2, "--out", out,
                       "--backend", spec, *extra)

        first = sweep("--update-scoreboard", "--board", board)
        assert first.exit_code == 5, first.output
        assert "memos/m1 … ERROR" in first.output and "memos/m3 … ERROR" in first.output
        assert "3 scored, 2 error(s)" in first.output and "2 failure(s)" in first.output
        assert "Scoreboard: 3 entries written" in first.output
        assert sorted(json.loads(board.read_text())["tasks"]["memos"]) == ["m0", "m2", "m4"]

        calls = server.count
        again = sweep()  # still failing: exactly the two errored members run again
        assert again.exit_code == 5, again.output
        assert "2 run, 3 current" in again.output
        assert all(f"memos/{m} … 100.0% PASS (current, skipped)" in again.output for m in ("m0", "m2", "m4"))
        if kind == "openai":
            assert server.count - calls == 4  # 2 members × (1 call + 1 retry)

        server.failing.clear()
        if fail:
            fail(())
        fixed = sweep("--update-scoreboard", "--board", board)
        assert fixed.exit_code == 0, fixed.output
        assert "2 run, 3 current" in fixed.output and "0 failure(s)" in fixed.output
        entries = json.loads(board.read_text())["tasks"]["memos"]
        assert sorted(entries) == [f"m{i}" for i in range(5)]
        assert all(entries[m][label]["metrics"]["score"] == 1.0 for m in entries)
    finally:
        server.stop()


def test_check_names_an_errored_member_as_not_comparable_and_exits_5(tmp_path, pipeline):
    spec, fail = pipeline
    corpus = make_corpus(tmp_path, members=5)
    board = tmp_path / "board.json"
    fail(())
    base = cli("sweep", "--corpus", corpus, "--no-notebooks", "--out", tmp_path / "base", "--backend", spec,
               "--update-scoreboard", "--board", board)
    assert base.exit_code == 0, base.output
    fail()
    new = cli("sweep", "--corpus", corpus, "--no-notebooks", "--out", tmp_path / "new", "--backend", spec)
    assert new.exit_code == 5

    res = cli("check", tmp_path / "new", "--corpus", corpus, "--board", board)
    assert res.exit_code == 5, res.output  # not 1: an outage is not a quality regression
    assert "Regressions (0):" in res.output
    for m in FAILING:
        assert re.search(rf"note: memos/{m} \[py\]: ERROR in the new sweep \(pipeline_exception: .*\): not comparable",
                         res.output), res.output
    assert "not in the new sweep" not in res.output


def test_every_reader_leaves_errors_out(tmp_path, pipeline):
    from evalkit.compare.sides import load
    from evalkit.report.frames import load_scores, member_metrics
    from evalkit.results.band import compute_band
    from evalkit.results.history import history_lines
    from evalkit.results.runfolder import scan
    from evalkit.results.scoreboard import update_scoreboard

    spec, _ = pipeline
    corpus = make_corpus(tmp_path, members=5)
    runs = [tmp_path / "a", tmp_path / "b"]
    for out in runs:
        run(RunOptions(corpus=corpus, backends=specs(spec), out=out, notebooks=False, html=False))
        (tmp_path / "nudge.txt").write_text("ACC-000")  # the second run answers m0 a little differently: a sample

    assert [s.member for s in scan(runs[0])] == ["m0", "m2", "m4"]
    assert [s.member for s in scan(runs[0], status=ERROR)] == list(FAILING)
    band = compute_band(runs)
    assert band["tasks"]["memos"]["members"] == 3 and band["tasks"]["memos"]["metrics"]["score"]["mean"] == 1.0

    board = tmp_path / "board.json"
    board.write_text(json.dumps({"schema_version": 1, "tasks": {"memos": {"m1": {"py": {"metrics": {"score": 0.9}}}}}}))
    written = update_scoreboard(runs[0], board, corpus=corpus)  # a run folder: every score.json under it
    assert sorted(m for _, m, _ in written) == ["m0", "m2", "m4"]
    assert json.loads(board.read_text())["tasks"]["memos"]["m1"]["py"]["metrics"] == {"score": 0.9}  # kept as it was

    lines = {line.member: line.to_json() for line in history_lines(runs[0])}
    assert lines["m1"]["status"] == ERROR and "score" not in lines["m1"] and lines["m0"]["status"] == SCORED

    members, items = load_scores(runs[0], "memos")
    assert list(members.verdict) == ["PASS", "ERROR", "PASS", "ERROR", "PASS"]
    assert set(members[members.status == ERROR].cause) == {PIPELINE_EXCEPTION}
    assert [r["member"] for r in member_metrics(members)] == ["m0", "m2", "m4"]
    assert set(items.member) == {"m0", "m2", "m4"}
    c = load(runs[0], "memos")
    assert list(c.members.sort_values("member").scored) == [True, False, True, False, True]
