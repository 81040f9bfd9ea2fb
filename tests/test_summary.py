"""summary.json (`evalkit.results.summary`): per task and backend, counts, means with bootstrap CIs, held-out
figures apart, calls; written by every run, printed one line per backend; verdict lines as each member
is scored."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from corpus_factory import add_member, cli, make_corpus, specs, write_yaml

from evalkit.results.records import ScoreRecord
from evalkit.results.runfolder import Scored
from evalkit.results.summary import BackendEntry, backend_line, read_summary, summarize
from evalkit.scoring.stats import SEED, mean_ci, sub_seed
from evalkit.stages.runner import RunOptions, run

PIPE = '''
import re

def extract(text, task):
    account = re.search(r"ACC-[0-9]+", text).group(0)
    if account == "ACC-001":
        raise RuntimeError("pipeline crashed")
    return {"account_id": account, "rate": 0.9}
'''


def scored(member, backend, score=None, metrics=None, passed=None, status="scored", run=None, **extra):
    data = {"status": status, "score": score, "passed": passed, "metrics": metrics or {}, "run": run or {}, **extra}
    return Scored("t", member, backend, Path(f"/r/t/{member}/{backend}"), Path("/r"), "r", ScoreRecord(data))


def test_summarize_counts_means_cis_heldout_and_calls():
    results = [
        scored("a", "x", 1.0, {"acc": 1.0, "e_tp": 2, "e_fp": 0, "e_fn": 0}, True, run={"latency_s": 1.0, "usd": 0.5,
                                                                                     "input_tokens": 10}),
        scored("b", "x", 0.5, {"acc": 0.5, "e_tp": 1, "e_fp": 1, "e_fn": 1}, False, run={"latency_s": 3.0}),
        scored("c", "x", 0.0, {"acc": None, "e_tp": 0, "e_fp": 2, "e_fn": 0}, False),
        scored("h", "x", 0.25, {"acc": 0.25}, False),  # held out
        scored("d", "x", status="error", cause="timeout", run={"error": "TimeoutError: slow", "parse": "error"}),
        scored("a", "y", 0.8, {"acc": 0.8}, True),
    ]
    run_json = {"backends": [{"label": "y"}, {"label": "x"}], "members": ["t/a", "t/b", "t/c", "t/d", "t/h"],
                "heldout": ["t/h"], "skipped": [{"member": "t/s", "status": "skipped", "reason": "put it at S"}]}
    s = summarize(results, run_json)
    task = s["tasks"]["t"]
    assert [b["backend"] for b in task["backends"]] == ["y", "x"]  # run order, never pooled
    y, x = task["backends"]
    assert (x["members"], x["scored"], x["passed"], x["failed"], x["errors"]) == (5, 4, 1, 3, 1)
    assert x["causes"] == {"timeout": 1}
    assert x["skipped"] == [{"member": "s", "status": "skipped", "reason": "put it at S"}]
    assert x["not_covered"] == [] and y["not_covered"] == ["b", "c", "d", "h"]
    # means over the scored members that are not held out; a null metric is left out of its own mean
    assert x["score"]["mean"] == pytest.approx(0.5) and x["score"]["n"] == 3
    assert x["metrics"]["acc"]["mean"] == pytest.approx(0.75) and x["metrics"]["acc"]["n"] == 2
    assert x["metrics"]["acc"]["ci"] == list(mean_ci([1.0, 0.5], sub_seed(SEED, "t", "acc")))
    # micro F1 from the summed counts: tp 3, fp 3, fn 1 → 6 / 10
    assert x["metrics"]["micro_e_f1"]["mean"] == pytest.approx(0.6)
    lo, hi = x["metrics"]["micro_e_f1"]["ci"]
    assert 0 <= lo <= 0.6 <= hi <= 1
    assert x["heldout"]["scored"] == 1 and x["heldout"]["score"]["mean"] == 0.25
    assert y["heldout"] is None and y["score"]["ci"] == [0.8, 0.8]
    assert x["calls"]["calls"] == 5 and x["error_rate"] == pytest.approx(0.2) and x["calls"]["usd"] == 0.5
    assert x["parse"] == {"ok": 4, "malformed": 0, "truncated": 0, "schema_invalid": 0}
    assert x["calls"]["latency_p50"] is not None
    line = backend_line(BackendEntry.from_json(x, "summary.json"), "score")
    assert line.startswith("x: 1/5 passed · 1 error · mean score 50.0% [") and "over 3 scored · held out 1: mean 25.0% · 1 skipped" in line


@pytest.fixture
def mixed_run(tmp_path):
    corpus = make_corpus(tmp_path, members=3)
    (tmp_path / "pipe.py").write_text(PIPE)
    pointer = add_member(corpus / "memos", "away", "unused", {"account_id": "ACC-9", "rate": 0.1})
    manifest = yaml.safe_load((pointer / "manifest.yaml").read_text())
    write_yaml(pointer / "manifest.yaml", {**manifest, "source": {"pointer": "memos/away.md"}, "sha256": "0" * 64})
    (pointer / "doc.md").unlink()
    return tmp_path, corpus, specs("fake", f"py=python:{tmp_path / 'pipe.py'}:extract")


def test_a_run_writes_summary_json_and_reports_each_member_as_it_is_scored(mixed_run):
    root, corpus, backends = mixed_run
    seen = []
    result = run(RunOptions(corpus=corpus, backends=backends, out=root / "run", notebooks=False, html=False,
                            sources=root / "nowhere"),
                 on_outcome=lambda o, n, total: seen.append((o.member, o.backend, o.status, n, total)))
    assert [n for *_, n, _ in seen] == list(range(1, 7)) and {t for *_, t in seen} == {6}
    assert ("m1", "py", "error", ) in {s[:3] for s in seen}
    on_disk = read_summary(root / "run").to_json()
    assert on_disk == result.summary
    task = on_disk["tasks"]["memos"]
    fake, py = task["backends"]
    assert (fake["backend"], fake["scored"], fake["passed"], fake["errors"]) == ("fake", 3, 3, 0)
    assert (py["backend"], py["scored"], py["errors"], py["causes"]) == ("py", 2, 1, {"pipeline_exception": 1})
    assert fake["score"]["mean"] == 1.0
    assert [(s["member"], s["status"]) for s in task["skipped"]] == [("away", "skipped")]
    assert task["skipped"][0]["reason"].startswith("source not found: put the file at ")
    assert on_disk["backends"][0]["label"] == "fake"
    from evalkit.report.render import render_index

    index = render_index(root / "run").read_text()
    assert "Skipped members (1)" in index and "<strong>memos/away</strong> skipped:" in index
    assert "pass --sources DIR" in index or "put the file at" in index  # the fix
    assert "<td>memos</td><td>score</td><td>py</td>" in index and "<td>memos</td><td>score</td><td>fake</td>" in index


def test_the_cli_prints_verdict_lines_and_one_summary_line_per_backend(mixed_run):
    root, corpus, backends = mixed_run
    res = cli("run", "--corpus", corpus, "--backend", "fake", "--backend", f"py=python:{root / 'pipe.py'}:extract",
              "--out", root / "run", "--no-html", "--sources", root / "nowhere")
    out = res.output
    assert res.exit_code == 5, out
    # in the order they finish, each with the running count
    assert [int(n) for n in re.findall(r"^\[(\d)/6\] ", out, re.M)] == [1, 2, 3, 4, 5, 6]
    assert re.search(r"^\[\d/6\] memos/m0 \[fake\] … 100.0% PASS$", out, re.M)
    assert re.search(r"^\[\d/6\] memos/m1 \[py\] … ERROR\n      ↳ pipeline_exception:", out, re.M)
    # a member skipped for a missing source: one line for its task, pointing at `evalkit sources`
    assert "  1 member skipped: their files are not under the sources folder" in out and "evalkit sources" in out
    assert "away … SKIPPED" not in out
    assert "  fake: 3/3 passed · mean score 100.0% [100.0%, 100.0%] over 3 scored · 1 skipped" in out
    assert "  py: 0/3 passed · 1 error · mean score 50.0% [50.0%, 50.0%] over 2 scored · 1 skipped" in out
    # the verdict lines come before the summary, one per member × backend
    assert out.index("[6/6]") < out.index("  fake: 3/3 passed")


def test_verdict_lines_reach_a_pipe_while_the_run_is_still_going(tmp_path):
    """`make demo` piped to a file: each verdict line is written (and flushed) when its member is scored,
    not at the end. The first one arrives while the process still runs (the pages are rendered after)."""
    import subprocess
    import sys

    corpus = make_corpus(tmp_path, members=3)
    proc = subprocess.Popen([sys.executable, "-m", "evalkit.cli", "run", "--corpus", str(corpus), "--backend", "fake",
                             "--out", str(tmp_path / "run"), "--workers", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path)
    first = proc.stdout.readline()
    running = proc.poll() is None
    rest = proc.stdout.read()
    assert proc.wait() == 0
    assert re.match(r"\[1/3\] memos/m\d … 100.0% PASS$", first), first
    assert running, "the first verdict line only arrived when the run had ended"
    assert "  fake: 3/3 passed" in rest and "\x1b" not in first + rest and "it/s" not in rest  # no bar in a pipe


def test_the_command_run_json_keeps_has_no_secret(monkeypatch):
    from evalkit.stages.runner import command_line

    key = "sk-live-0123456789abcdefghij"
    monkeypatch.setenv("OPENAI_API_KEY", "env-secret-0123456789")
    line = command_line(["run", "--backend", f"oai=openai:url=http://h/v1,api_key={key},model=m",
                         f"--judge=openai:url=http://h/v1,api_key={key}", "--out", "runs/x", "--note",
                         "env-secret-0123456789"])
    assert key not in line and "env-secret-0123456789" not in line
    assert "oai=openai:url=http://h/v1,api_key=***,model=m" in line and "--out runs/x" in line


def test_the_index_table_shows_held_out_figures_apart_from_the_tuned_mean():
    from evalkit.report.overview import _table
    from evalkit.results.summary import TaskSummary

    entry = {"backend": "a", "metrics": {}, "score": {"mean": 0.5, "ci": [0.4, 0.6], "n": 2}, "passed": 1,
             "members": 3, "scored": 2, "failed": 1, "errors": 0, "skipped": [], "not_covered": [],
             "heldout": {"scored": 1, "score": {"mean": 0.9}, "metrics": {}}}
    task = {"headline": "score", "backends": [entry, {**entry, "backend": "b", "heldout": None}]}
    html = "".join(_table({"memos": TaskSummary.from_json(task, "summary.json")}))
    assert "<th>mean (tuned)</th>" in html and "<th>held-out mean (n)</th>" in html
    rows = html.split("<tr>")[2:]
    assert ">0.500<" in rows[0] and ">0.900 (1)<" in rows[0]  # the held-out member never enters the tuned mean
    assert "<td class=\"num\">—</td>" in rows[1]
