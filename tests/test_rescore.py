"""`evalkit rescore`: a scorer change re-scores standing entries offline, run blocks untouched."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from corpus_factory import cli, make_corpus

import evalkit.backends
import evalkit.backends.resolve
from evalkit.backends.providers import registry
from evalkit.board.rescore import rescore
from evalkit.results.scoreboard import load_board


def run_blocks(text: str) -> list[str]:
    """The exact text of every entry's `"run": {…}` block in a board file."""
    lines, out = text.splitlines(keepends=True), []
    for i, line in enumerate(lines):
        if line.strip() == '"run": {':
            indent = line[: len(line) - len(line.lstrip())]
            j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith(indent + "}"))
            out.append("".join(lines[i: j + 1]))
    return out


@pytest.fixture
def scored(tmp_path):
    corpus = make_corpus(tmp_path, members=2)  # rate tolerance 0.001
    preds = tmp_path / "preds"
    preds.mkdir()
    (preds / "m0.json").write_text(json.dumps({"account_id": "ACC-000", "rate": 0.505}))  # truth 0.5: off by 0.005
    (preds / "m1.json").write_text(json.dumps({"account_id": "ACC-001", "rate": 0.6}))
    res = cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 2, "--out", tmp_path / "runs" / "s",
              "--backend", f"gemma=predictions:dir={preds}", "--update-scoreboard")
    assert res.exit_code == 0, res.output
    return tmp_path, corpus, preds


def no_backends(monkeypatch):
    calls = []

    def boom(*a, **k):
        calls.append(a)
        raise AssertionError("rescore constructed a backend")

    monkeypatch.setattr(evalkit.backends.resolve, "open_backends", boom)
    monkeypatch.setattr(evalkit.backends.resolve, "build_backends", boom)
    for record in evalkit.backends.providers():
        monkeypatch.setitem(registry(), record.kind, replace(record, factory=boom))
    return calls


def test_scorer_change_rewrites_metrics_with_zero_calls_and_identical_run_blocks(scored, monkeypatch):
    tmp_path, corpus, preds = scored
    board_file = corpus / "scoreboard.json"
    before_text = board_file.read_text()
    before = load_board(board_file)
    assert before["tasks"]["memos"]["m0"]["gemma"]["metrics"]["score"] == 0.5  # the rate missed its 0.001 tolerance

    # The scorer's semantics change: a looser tolerance. The recorded outputs are gone too.
    task_yaml = corpus / "memos" / "task.yaml"
    task_yaml.write_text(task_yaml.read_text().replace("tolerance: 0.001", "tolerance: 0.01"))
    shutil.rmtree(preds)
    calls = no_backends(monkeypatch)

    res = cli("rescore", "--corpus", corpus)
    assert res.exit_code == 0, res.output
    assert "memos/m0 [gemma] … re-scored: " in res.output and "score 0.5 → 1.0" in res.output
    assert "memos/m1 [gemma] … re-scored: unchanged" in res.output and "(0 backend calls)" in res.output
    assert calls == []
    after_text = board_file.read_text()
    after = load_board(board_file)
    assert after["tasks"]["memos"]["m0"]["gemma"]["metrics"]["score"] == 1.0
    assert after["tasks"]["memos"]["m0"]["gemma"]["passed"] is True
    assert after["tasks"]["memos"]["m0"]["gemma"]["rescored"]["evalkit_version"]
    blocks = run_blocks(before_text)
    assert len(blocks) == 2 and blocks == run_blocks(after_text)  # byte-identical run blocks
    for m in ("m0", "m1"):
        assert after["tasks"]["memos"][m]["gemma"]["run"] == before["tasks"]["memos"][m]["gemma"]["run"]


def test_truth_change_is_picked_up_and_hash_updated(scored, monkeypatch):
    tmp_path, corpus, _ = scored
    no_backends(monkeypatch)
    truth = corpus / "memos" / "m1" / "truth.yaml"
    old_hash = load_board(corpus / "scoreboard.json")["tasks"]["memos"]["m1"]["gemma"]["truth_sha256"]
    truth.write_text(truth.read_text().replace("0.6", "0.65"))
    result = rescore(corpus / "scoreboard.json", only=["m1"])
    (entry,) = result.entries
    assert entry.status == "rescored" and entry.before["score"] == 1.0 and entry.after["score"] == 0.5
    new = load_board(corpus / "scoreboard.json")["tasks"]["memos"]["m1"]["gemma"]
    assert new["truth_sha256"] != old_hash


def test_missing_run_folder_and_changed_source_are_reported(scored, monkeypatch):
    tmp_path, corpus, _ = scored
    no_backends(monkeypatch)
    doc = corpus / "memos" / "m0" / "doc.md"
    doc.write_text(doc.read_text() + "tampered\n")
    shutil.rmtree(tmp_path / "runs" / "s" / "members" / "memos" / "m1")
    (corpus / "memos" / "records" / "gemma" / "m1.json").unlink()  # and its archived record
    res = cli("rescore", "--corpus", corpus)
    assert res.exit_code == 4, res.output  # the changed source wins: refused, entry kept
    assert "m0 [gemma] … REFUSED" in res.output and "m1 [gemma] … FAILED" in res.output
    res = cli("rescore", "--corpus", corpus, "--only", "m1")
    assert res.exit_code == 3 and "file not found" in res.output


def test_a_fresh_clone_rescores_every_entry_from_the_committed_archive(scored, monkeypatch):
    """Issue 12.4: the records behind the entries are committed beside the board; without runs/ (a fresh
    clone) every entry re-scores, with zero calls."""
    tmp_path, corpus, preds = scored
    board = load_board(corpus / "scoreboard.json")
    for m in ("m0", "m1"):
        entry = board["tasks"]["memos"][m]["gemma"]
        archived = json.loads((corpus / entry["archive"]).read_text())
        assert entry["archive"] == f"memos/records/gemma/{m}.json"
        assert archived["record"] == json.loads((preds / f"{m}.json").read_text())
        assert "raw" not in archived and "run" not in archived  # the record, not the run's text or accounting
    clone = tmp_path / "clone"
    shutil.copytree(corpus, clone / "corpus")  # the repository: corpus, board and archive; no runs/, no preds
    shutil.rmtree(tmp_path / "runs")
    shutil.rmtree(preds)
    task_yaml = clone / "corpus" / "memos" / "task.yaml"
    task_yaml.write_text(task_yaml.read_text().replace("tolerance: 0.001", "tolerance: 0.01"))
    calls = no_backends(monkeypatch)
    result = rescore(clone / "corpus" / "scoreboard.json")
    assert [e.status for e in result.entries] == ["rescored", "rescored"] and result.exit_code == 0
    assert [e.after["score"] for e in result.entries] == [1.0, 1.0] and calls == []  # m0 re-scored under the new rule


def test_the_committed_board_rescores_on_a_fresh_clone_without_copying_pointer_documents(tmp_path, monkeypatch):
    """Every standing entry of the bundled board re-scores from what is committed (no runs/, zero calls). A
    pointer member's archive names the committed cassette instead of copying its record, which may quote a
    document that is not redistributed here; the request is rendered again and replayed from it."""
    import os

    from evalkit.corpus.tasks import DEFAULT_CORPUS

    sources = Path(os.environ.get("EVALKIT_SOURCES", DEFAULT_CORPUS.parent.parent / "shared" / "data"))
    if not sources.is_dir():
        pytest.skip(f"sources not found at {sources} (the board covers pointer members)")
    root = DEFAULT_CORPUS.parent
    clone = tmp_path / "clone"
    shutil.copytree(root / "corpus", clone / "corpus")
    shutil.copytree(root / "cassettes", clone / "cassettes")
    monkeypatch.chdir(clone)
    board = json.loads((clone / "corpus" / "scoreboard.json").read_text())["tasks"]
    pointer = [e["archive"] for t, per in board.items() for m, b in per.items() for e in b.values()
               if "pointer:" in (clone / "corpus" / t / m / "manifest.yaml").read_text()]
    assert pointer and all(json.loads((clone / "corpus" / a).read_text()).get("replay") is True
                           and "record" not in json.loads((clone / "corpus" / a).read_text()) for a in pointer)
    res = cli("rescore", "--corpus", clone / "corpus", "--sources", sources)
    n = sum(len(b) for per in board.values() for b in per.values())
    assert res.exit_code == 0 and f"Rescore: {n}/{n} entries re-scored" in res.output, res.output
    assert "re-scored: unchanged" in res.output and " … FAILED" not in res.output
