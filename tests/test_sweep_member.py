"""A sweep member's run does only what its sweep does not: no lock, resume marker or fsync of its own."""

from __future__ import annotations

import os
import threading

import pytest
from corpus_factory import make_corpus, specs

from evalkit._util import jsonio
from evalkit.board.sweep import _member_job, _write_sweep_json, sweep
from evalkit.corpus import tasks as corpus_module
from evalkit.corpus.tasks import load_tasks
from evalkit.errors import EvalkitError
from evalkit.results import runfolder
from evalkit.stages.runner import RunOptions


def counted(monkeypatch, module, name: str) -> list:
    """Every call of ``module.name`` from now on (it still does its work)."""
    calls, real = [], getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a: (calls.append(a), real(*a))[1])
    return calls


def test_writes_inside_unsynced_skip_their_fsync_in_this_thread_only(tmp_path, monkeypatch):
    fsyncs = counted(monkeypatch, os, "fsync")
    jsonio.write_json(tmp_path / "a.json", {"a": 1})
    assert len(fsyncs) == 1
    with jsonio.unsynced():
        jsonio.write_json(tmp_path / "b.json", {"b": 1})
        assert len(fsyncs) == 1
        other = threading.Thread(target=jsonio.write_json, args=(tmp_path / "c.json", {"c": 1}))
        other.start()
        other.join()
        assert len(fsyncs) == 2  # another thread (another member on a Dask worker) still syncs its own
    jsonio.write_json(tmp_path / "d.json", {"d": 1})
    assert len(fsyncs) == 3
    assert [jsonio.read_json(tmp_path / f"{n}.json") for n in "abcd"] == [{"a": 1}, {"b": 1}, {"c": 1}, {"d": 1}]
    assert not list(tmp_path.glob(".*"))  # no temp file left behind


def test_a_member_job_writes_no_lock_marker_or_fsync_and_its_sweep_syncs_before_recording(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path, members=1)
    out = runfolder.sweep_member_dir(tmp_path / "sw", "memos", "m0")
    opts = RunOptions(corpus=corpus, backends=specs("fake"), tasks=["memos"], only=["m0"], out=out, workers=1,
                      notebooks=False, in_sweep=True)
    fsyncs, syncs = counted(monkeypatch, os, "fsync"), counted(monkeypatch, os, "sync")
    result = _member_job(opts)
    assert [o["status"] for o in result["outcomes"]] == ["scored"]
    assert fsyncs == [] and syncs == []
    names = {p.name for p in out.rglob("*")}
    assert {"run.json", "extraction.json", "score.json", "summary.json"} <= names
    assert not names & {runfolder.LOCK, runfolder.LOCK_HOLDER, runfolder.UNFINISHED}

    events: list[str] = []
    monkeypatch.setattr(os, "sync", lambda: events.append("sync"))
    monkeypatch.setattr(runfolder, "write_sweep_json", lambda folder, data: events.append("sweep.json"))
    _write_sweep_json(tmp_path / "sw", opts, {})
    assert events == ["sync", "sweep.json"]  # what sweep.json records is on disk first


def test_a_sweep_holds_its_own_folder_but_leaves_no_lock_in_its_members(tmp_path):
    corpus = make_corpus(tmp_path, members=2)
    out = tmp_path / "sw"
    res = sweep(RunOptions(corpus=corpus, backends=specs("fake"), out=out, workers=2, notebooks=False))
    assert [m.status for m in res.members] == ["ran", "ran"]
    left = {p.name for p in (out / runfolder.SWEEP_MEMBERS).rglob(".evalkit*")}
    assert left == set()
    assert (out / runfolder.LOCK).exists()  # the sweep's own lock file (released: a filelock leaves the file)


def test_a_members_truth_is_read_once_until_its_file_changes(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path, members=1)
    member = load_tasks(corpus)[0].member("m0")  # validated its truth: read once
    reads = counted(monkeypatch, corpus_module, "load_truth")
    first = member.load_truth()
    assert member.load_truth() is first and reads == []
    truth = member.dir / "truth.yaml"
    truth.write_text(truth.read_text().replace("0.5", "0.55"))
    changed = member.load_truth()
    assert len(reads) == 1 and changed != first and "0.55" in repr(changed)
    truth.unlink()
    with pytest.raises(EvalkitError, match="truth.yaml"):  # gone: said so, not the cached truth
        member.load_truth()


def test_a_sweep_loads_a_member_without_validating_its_truth_which_its_worker_does(tmp_path):
    corpus = make_corpus(tmp_path, members=1)
    (corpus / "memos" / "m0" / "truth.yaml").write_text("record: [not, a, mapping]\n")
    task = load_tasks(corpus)[0]
    with pytest.raises(EvalkitError, match="truth.yaml"):
        task.member("m0")
    assert task.member("m0", check_truth=False).id == "m0"


def test_the_sweep_summary_covers_the_selection_not_every_member_folder(tmp_path):
    corpus = make_corpus(tmp_path, members=3)
    out = tmp_path / "sw"
    opts = RunOptions(corpus=corpus, backends=specs("fake"), out=out, workers=2, notebooks=False)
    sweep(opts)
    every = jsonio.read_json(out / "summary.json")
    assert every["tasks"]["memos"]["backends"][0]["members"] == 3
    one = sweep(RunOptions(corpus=corpus, backends=specs("fake"), out=out, workers=2, notebooks=False, only=["m1"]))
    assert one.summary["tasks"]["memos"]["backends"][0]["members"] == 1
    assert len(list((out / runfolder.SWEEP_MEMBERS).rglob("score.json"))) == 3
