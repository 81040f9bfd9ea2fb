"""`evalkit sweep`: members in worker processes, failures isolated, current members skipped."""

from __future__ import annotations

import json
import os

from corpus_factory import cli, make_corpus, specs

from evalkit._util.jsonio import read_json
from evalkit.board.sweep import sweep
from evalkit.results.history import read_history
from evalkit.results.runfolder import SWEEP_JSON
from evalkit.stages.runner import RunOptions


def mtimes(root):
    return {p: p.stat().st_mtime_ns for p in root.rglob("score.json")}


def test_failing_member_never_stops_the_others_and_exit_lists_it(tmp_path):
    corpus = make_corpus(tmp_path, members=3)
    (corpus / "memos" / "m1" / "truth.yaml").write_text("record: [not, a, mapping]\n")  # broken member
    out = tmp_path / "runs" / "sw"
    res = cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 2, "--out", out, "--backend", "fake")
    assert res.exit_code == 5, res.output
    assert "memos/m0 … 100.0% PASS" in res.output and "memos/m2 … 100.0% PASS" in res.output
    assert "memos/m1 … FAILED" in res.output
    failures = res.output.split("Failures:")[1]
    assert "memos/m1:" in failures and "truth.yaml" in failures and "m0" not in failures
    assert "1 failure(s)" in res.output
    data = read_json(out / SWEEP_JSON)
    assert data["members"]["memos/m1"]["status"] == "failed" and data["members"]["memos/m0"]["status"] == "ran"
    assert len(read_history(tmp_path / "runs" / "index.jsonl")) == 2  # the scored ones


def test_rerun_skips_current_members_and_reruns_changed_ones(tmp_path):
    corpus = make_corpus(tmp_path, members=3)
    out = tmp_path / "sw"
    opts = RunOptions(corpus=corpus, backends=specs("fake"), out=out, workers=2, notebooks=False)
    first = sweep(opts)
    assert first.exit_code == 0 and [m.status for m in first.members] == ["ran"] * 3
    stamps = mtimes(out)

    again = sweep(opts)
    assert [m.status for m in again.members] == ["current"] * 3
    assert [o.score for o in again.outcomes] == [1.0] * 3  # outcomes carried over from sweep.json
    assert mtimes(out) == stamps
    # summary.json (what the summary lines print) covers the sweep's selection, current members too
    summary = read_json(out / "summary.json")
    assert again.summary == summary
    assert [(b["backend"], b["members"], b["passed"]) for b in summary["tasks"]["memos"]["backends"]] == [("fake", 3, 3)]

    # The truth of m0 changes: only m0 is stale.
    truth = corpus / "memos" / "m0" / "truth.yaml"
    truth.write_text(truth.read_text().replace("0.5", "0.55"))
    third = sweep(opts)
    assert {m.member: m.status for m in third.members} == {"m0": "ran", "m1": "current", "m2": "current"}

    # A partial sweep keeps the other members' records: the next full sweep still skips them.
    opts.only = ["m1"]
    opts.force = True
    assert [m.status for m in sweep(opts).members] == ["ran"]
    assert read_json(out / "summary.json")["tasks"]["memos"]["members"] == ["m1"]
    opts.only, opts.force = None, False
    assert [m.status for m in sweep(opts).members] == ["current"] * 3

    # A change to task.yaml (scorer options, threshold) makes every member stale; so does --force.
    task_yaml = corpus / "memos" / "task.yaml"
    task_yaml.write_text(task_yaml.read_text().replace("weight: 2", "weight: 3", 1))
    assert [m.status for m in sweep(opts).members] == ["ran"] * 3
    opts.force = True
    assert [m.status for m in sweep(opts).members] == ["ran"] * 3


def test_predictions_edit_and_backend_change_make_members_stale(tmp_path):
    corpus = make_corpus(tmp_path, members=2)
    preds = tmp_path / "p"
    preds.mkdir()
    for i in range(2):
        (preds / f"m{i}.json").write_text(json.dumps({"account_id": f"ACC-{i:03d}", "rate": float(f"0.{i + 5}")}))
    opts = RunOptions(corpus=corpus, backends=specs(f"p=predictions:dir={preds}"), out=tmp_path / "sw",
                        workers=2, notebooks=False)
    assert [m.status for m in sweep(opts).members] == ["ran", "ran"]
    assert [m.status for m in sweep(opts).members] == ["current", "current"]
    f = preds / "m1.json"
    f.write_text(json.dumps({"account_id": "ACC-001", "rate": 0.9}))
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10_000_000))
    (preds / "unrelated.json").write_text("{}")  # a file no member reads changes no member's key
    result = sweep(opts)
    # the edited member's recorded output changed: it alone is not current
    assert [m.status for m in result.members] == ["current", "ran"]
    assert [o.score for o in result.outcomes] == [1.0, 0.5]
    opts.backends = specs(f"p=predictions:dir={preds}", "fake")
    result = sweep(opts)
    assert all(m.status == "ran" for m in result.members) and len(result.outcomes) == 4


CRASHY = '''
import os
import re
import signal
import time


def extract(document, task):
    if "ACC-001" in document:
        # A hard crash of the sweep's worker process (the pipeline's own process is contained: it is that
        # worker's child): no exception, no cleanup, the worker is gone.
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)
    account = re.search(r"ACC-\\d+", document).group(0)
    rate = float(re.search(r"rate of ([0-9.]+)", document).group(1).rstrip("."))
    return {"account_id": account, "rate": rate}
'''


def test_a_worker_process_dying_fails_only_its_member(tmp_path):
    corpus = make_corpus(tmp_path, members=3)
    (tmp_path / "crashy.py").write_text(CRASHY)
    opts = RunOptions(corpus=corpus, backends=specs(f"mine=python:{tmp_path / 'crashy.py'}:extract"),
                        out=tmp_path / "sw", workers=2, notebooks=False)
    result = sweep(opts)
    status = {m.member: m.status for m in result.members}
    assert status == {"m0": "ran", "m1": "failed", "m2": "ran"}, result.failures
    assert "worker process died" in result.members[1].message
    assert [o.score for o in result.outcomes] == [1.0, 1.0] and result.exit_code == 5


def test_a_cassette_miss_is_not_covered_and_fails_that_member_with_exit_6_under_strict_replay(tmp_path):
    from evalkit.backends import Completion
    from evalkit.backends.cassette import make_record
    from evalkit.corpus.sources import check_integrity, read_document
    from evalkit.corpus.tasks import load_task
    from evalkit.stages.pipeline import render_request

    corpus = make_corpus(tmp_path, members=2)
    task = load_task(corpus / "memos")
    m0 = task.member("m0")  # only m0 was recorded
    request = render_request(task, m0, read_document(check_integrity(m0, None)))
    record = {"account_id": "ACC-000", "rate": 0.5}
    line = make_record(request, "tiny", "openai", Completion(record=record, raw=json.dumps(record), model="tiny"))
    (tmp_path / "c.jsonl").write_text(json.dumps(line) + "\n")
    res = cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 2, "--out", tmp_path / "sw",
              "--backend", f"tiny=cassette:path={tmp_path / 'c.jsonl'}")
    assert res.exit_code == 0, res.output  # issue 12.7: what the cassette covers is scored, the rest listed
    assert "memos/m0 … 100.0% PASS" in res.output and "memos/m1 … NOT COVERED" in res.output
    assert "1 not covered (no recording)" in res.output and "0 failure(s)" in res.output
    res = cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 2, "--out", tmp_path / "st",
              "--backend", f"tiny=cassette:path={tmp_path / 'c.jsonl'}", "--strict-replay")
    assert res.exit_code == 6, res.output
    assert "memos/m0 … 100.0% PASS" in res.output and "memos/m1 … FAILED" in res.output


def test_a_sweep_refuses_the_run_only_options_and_writes_nothing(tmp_path):
    import pytest

    from evalkit.errors import UsageError

    corpus = make_corpus(tmp_path, members=1)
    out = tmp_path / "sw"
    for run_only in ({"judge": "fake"}, {"record": ["fake=c.jsonl"]}):
        with pytest.raises(UsageError, match="apply to `evalkit run` only"):
            sweep(RunOptions(corpus=corpus, backends=specs("fake"), out=out, notebooks=False, **run_only))
    with pytest.raises(UsageError, match="--max-usd needs one budget .* add --scheduler local:N"):  # shared through Dask
        sweep(RunOptions(corpus=corpus, backends=specs("fake"), out=out, notebooks=False, max_usd=1.0))
    assert not out.exists()
