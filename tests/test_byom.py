"""Private (BYOM) corpora: the seeded source sidecar, and `publish` / `report --byom` leaking nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from corpus_factory import TASK, add_member, cli, write_yaml

from evalkit.board.publish import render_byom_html
from evalkit.board.publish import write_byom_report as report_byom
from evalkit.corpus.sources import SIDECAR
from evalkit.report import chrome
from evalkit.results.scoreboard import Board, load_board

MARKER = "ZQX-MARKER-7731"



def private_member(task_dir: Path, member: str, i: int, *, provenance: dict | None = None) -> Path:
    account = f"{MARKER}-ACC-{i}"
    text = (f"CONFIDENTIAL {MARKER} memo between {MARKER} Holdings and Widgetco.\n"
            f"Account {account} pays a rate of 0.{i + 5}.\n")
    d = add_member(task_dir, member, text, {"account_id": account, "rate": float(f"0.{i + 5}")})
    manifest = yaml.safe_load((d / "manifest.yaml").read_text())
    del manifest["sha256"]  # a private manifest may omit the pin: a sidecar is seeded instead
    manifest["title"] = f"{MARKER} Holdings private deal memo"
    manifest["notes"] = f"from the {MARKER} data room"
    if provenance is not None:
        manifest["truth_provenance"] = provenance
    write_yaml(d / "manifest.yaml", manifest)
    return d


@pytest.fixture
def private(tmp_path):
    corpus = tmp_path / "private"
    write_yaml(corpus / "memos" / "task.yaml", TASK)
    private_member(corpus / "memos", "m0", 0)
    private_member(corpus / "memos", "m1", 1)
    private_member(corpus / "memos", "m2", 2, provenance={"authored_by": "me", "verified_by": "TODO",
                                                          "adversarial_pass": "", "date": "2026-11-30"})
    preds = tmp_path / "preds"
    preds.mkdir()
    for i in range(3):  # the model echoes the private values back
        (preds / f"m{i}.json").write_text(json.dumps({"account_id": f"{MARKER}-ACC-{i}", "rate": float(f"0.{i + 5}"),
                                                      "comment": f"{MARKER} says hi"}))
    # The same echo as a pipeline: `publish` takes no figure from the predictions (or fake) backend.
    (tmp_path / "echo.py").write_text(
        "import re\n"
        "def extract(document, task):\n"
        "    account, rate = re.search(r'Account (\\S+) pays a rate of ([0-9.]+)', document).groups()\n"
        f"    return {{'account_id': account, 'rate': float(rate.rstrip('.')), 'comment': '{MARKER} says hi'}}\n")
    return tmp_path, corpus, preds


def sweep(corpus, preds, out, *extra, backend=None):
    """A sweep of the echo pipeline (`backend`: another spec, e.g. the predictions in `preds`)."""
    return cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 2, "--out", out,
               "--backend", backend or f"local=python:{preds.parent / 'echo.py'}:extract", *extra)


def test_changed_private_source_is_refused_before_any_call(private):
    tmp_path, corpus, preds = private
    res = sweep(corpus, preds, tmp_path / "runs" / "first", "--only", "m0")
    assert res.exit_code == 0, res.output
    sidecar = corpus / "memos" / "m0" / SIDECAR
    assert sidecar.is_file() and "doc.md" in sidecar.read_text()  # seeded on first sight
    doc = corpus / "memos" / "m0" / "doc.md"
    doc.write_text(doc.read_text().replace("0.5", "0.55"))  # a different copy of the document

    res = sweep(corpus, preds, tmp_path / "runs" / "second", "--only", "m0")
    assert res.exit_code == 4, res.output
    assert "REFUSED" in res.output and "when first seen" in res.output and "Traceback" not in res.output
    member_run = tmp_path / "runs" / "second" / "members" / "memos" / "m0"
    assert not list(member_run.rglob("extraction.json"))  # no backend was asked for anything
    # The same sidecar stops a rerun in place (not current: its integrity fails) and publishing.
    res = sweep(corpus, preds, tmp_path / "runs" / "first", "--only", "m0")
    assert res.exit_code == 4, res.output


def test_publish_copies_aggregates_only_and_no_marker_anywhere(private):
    tmp_path, corpus, preds = private
    res = sweep(corpus, preds, tmp_path / "runs" / "s", "--update-scoreboard")
    assert res.exit_code == 0, res.output
    board = tmp_path / "repo" / "byom-scoreboard.json"

    res = cli("publish", "m0", "--corpus", corpus, "--board", board)
    assert res.exit_code == 0, res.output
    assert "published memos/m0 [local]" in res.output
    text = board.read_text()
    assert MARKER not in text and MARKER.lower() not in text.lower()
    entry = load_board(board)["tasks"]["memos"]["m0"]["local"]
    assert set(entry) == {"identity", "run", "truth_sha256", "settings", "metrics", "passed", "published"}
    assert entry["metrics"]["score"] == 1.0 and entry["truth_sha256"]
    assert entry["identity"]["truth_provenance"]["verified_by"] == "test"
    assert entry["identity"]["source"]["files"] == 1 and "doc.md" not in text  # no file names
    assert entry["run"]["backend"] == {"label": "local", "spec": "python:<local>"}
    assert str(tmp_path) not in text  # no local paths

    out = report_byom(board, tmp_path / "report" / "byom.html")
    html = out.read_text()
    assert MARKER not in html and "<table>" in html and "memos" in html
    assert html.count("<script") == 1 and f"<script>{chrome.script()}</script>" in html  # evalkit's own only
    for path in (tmp_path / "report").rglob("*"):  # anything the report wrote, notebooks included
        if path.is_file():
            assert MARKER not in path.read_text(errors="replace"), path


def test_publish_redacts_local_paths_everywhere(private):
    """A python: pipeline's file path is its spec *and* its model id; a provenance note may name a local
    file too: none of them reaches the BYOM board or its HTML."""
    tmp_path, corpus, preds = private
    pipe = tmp_path / "pipelines" / "mine.py"
    pipe.parent.mkdir()
    pipe.write_text("def extract(document, task):\n    return {'account_id': 'ACC', 'rate': 0.5}\n")
    res = cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 1, "--out", tmp_path / "runs" / "py",
              "--backend", f"mine=python:{pipe}:extract", "--only", "m0", "--update-scoreboard")
    assert res.exit_code in (0, 1), res.output
    manifest = corpus / "memos" / "m0" / "manifest.yaml"
    data = yaml.safe_load(manifest.read_text())
    data["truth_provenance"]["authored_by"] = \
        f"{tmp_path}/tools/labeller.py, then ~/qa/check.md (see https://example.org/a/b)"
    write_yaml(manifest, data)
    board = tmp_path / "repo" / "byom-scoreboard.json"
    res = cli("publish", "m0", "--corpus", corpus, "--board", board)
    assert res.exit_code == 0, res.output
    entry = load_board(board)["tasks"]["memos"]["m0"]["mine"]
    assert entry["run"]["backend"]["spec"] == "python:<local>" and entry["run"]["model"] == "python:<local>"
    assert entry["identity"]["truth_provenance"]["authored_by"] == \
        "<local>, then <local> (see https://example.org/a/b)"
    html = report_byom(board, tmp_path / "report" / "byom.html").read_text()
    for text in (board.read_text(), html):
        assert str(tmp_path) not in text and "mine.py" not in text and "pipelines" not in text


def test_publish_refuses_unscored_unprovenanced_and_stale_members(private):
    tmp_path, corpus, preds = private
    board = tmp_path / "byom.json"
    res = cli("publish", "m1", "--corpus", corpus, "--board", board)
    assert res.exit_code == 3 and "no scored entry" in res.output  # nothing scored yet
    assert sweep(corpus, preds, tmp_path / "runs" / "s", "--update-scoreboard").exit_code == 0
    res = cli("publish", "memos/m2", "--corpus", corpus, "--board", board)
    assert res.exit_code == 3 and "truth_provenance" in res.output
    truth = corpus / "memos" / "m1" / "truth.yaml"
    truth.write_text(truth.read_text().replace("0.6", "0.61"))
    res = cli("publish", "m1", "--corpus", corpus, "--board", board)
    assert res.exit_code == 3 and "truth changed" in res.output and "rescore" in res.output
    doc = corpus / "memos" / "m0" / "doc.md"
    doc.write_text(doc.read_text() + "x")
    res = cli("publish", "m0", "--corpus", corpus, "--board", board)
    assert res.exit_code == 4 and "when first seen" in res.output
    assert not board.exists()


@pytest.mark.parametrize("spec", ["fake", "predictions"])
def test_publish_refuses_figures_from_the_fake_and_predictions_backends(private, spec):
    tmp_path, corpus, preds = private
    backend = "local=fake" if spec == "fake" else f"local=predictions:dir={preds}"
    res = sweep(corpus, preds, tmp_path / "runs" / spec, "--update-scoreboard", "--only", "m0", backend=backend)
    assert res.exit_code == 0, res.output
    res = cli("publish", "m0", "--corpus", corpus, "--board", tmp_path / "byom.json")
    assert res.exit_code == 3 and f"the {spec} backend" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "byom.json").exists()


def test_publish_guard_catches_a_truth_value_in_free_text(private):
    tmp_path, corpus, preds = private
    assert sweep(corpus, preds, tmp_path / "runs" / "s", "--update-scoreboard", "--only", "m1").exit_code == 0
    manifest = corpus / "memos" / "m1" / "manifest.yaml"
    data = yaml.safe_load(manifest.read_text())
    data["truth_provenance"]["verified_by"] = f"checked account {MARKER}-ACC-1 by hand"
    write_yaml(manifest, data)
    res = cli("publish", "m1", "--corpus", corpus, "--board", tmp_path / "byom.json")
    assert res.exit_code == 3 and "contains a truth value" in res.output
    assert not (tmp_path / "byom.json").exists()


def test_html_escapes_everything():
    board = {"schema_version": 1, "tasks": {"t<script>": {"m&1": {"b\"x": {
        "run": {"model": "<img src=x onerror=alert(1)>"}, "metrics": {"score<b>": 0.5}, "passed": True,
        "identity": {"license": "CC0"}, "truth_sha256": "ab" * 32}}}}}
    html = render_byom_html(Board.from_json(board, "byom.json"))
    assert html.count("<script>") == 1 and "<img" not in html and "&lt;img src=x" in html and "t&lt;script&gt;" in html


def test_publish_asks_the_provider_record_not_the_kind_name(private):
    """A third-party provider that declares its figures say nothing about a model is refused; the same entry
    under a provider that declares nothing is published: publish reads `Provider.unpublishable`."""
    from unittest import mock

    from evalkit.backends import Provider
    from evalkit.backends.providers import registry

    tmp_path, corpus, preds = private
    assert sweep(corpus, preds, tmp_path / "runs" / "s", "--update-scoreboard", "--only", "m0").exit_code == 0
    board = corpus / "scoreboard.json"
    data = json.loads(board.read_text())
    entry = data["tasks"]["memos"]["m0"]["local"]
    entry["run"]["backend"]["spec"] = "toy-oracle:mode=x"  # as if scored by an installed provider of that kind
    board.write_text(json.dumps(data))
    oracle = Provider("toy-oracle", None, usage="toy-oracle", unpublishable="reads the answers off the truth")
    with mock.patch.dict(registry(), {"toy-oracle": oracle}):
        res = cli("publish", "m0", "--corpus", corpus, "--board", tmp_path / "byom.json")
        assert res.exit_code == 3, res.output
        assert "the toy-oracle backend, which reads the answers off the truth" in res.output
        assert not (tmp_path / "byom.json").exists()
        registry()["toy-oracle"] = Provider("toy-oracle", None, usage="toy-oracle")  # declares nothing: a model
        res = cli("publish", "m0", "--corpus", corpus, "--board", tmp_path / "byom.json")
        assert res.exit_code == 0 and "published memos/m0 [local]" in res.output, res.output
