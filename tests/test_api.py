"""The Python API: evalkit.run, evalkit.score and evalkit.load_run on a project made by evalkit init."""

import json
import subprocess
import sys

import pytest
import yaml

import evalkit
from evalkit.board.scaffold import EXAMPLE_MEMBER, EXAMPLE_TASK, init_project
from evalkit.errors import EXIT_FAILED, EXIT_OK, CorpusError


@pytest.fixture
def corpus(tmp_path):
    init_project(tmp_path / "proj")
    return tmp_path / "proj" / "corpus"


def test_run_then_load_run_gives_the_member_and_item_tables(corpus, tmp_path):
    result = evalkit.run(corpus, ["fake"], out=tmp_path / "run", notebooks=False)
    assert result.exit_code == EXIT_OK and result.run_dir == tmp_path / "run"
    (outcome,) = result.outcomes
    assert (outcome.task, outcome.member, outcome.score, outcome.passed) == (EXAMPLE_TASK, EXAMPLE_MEMBER, 1.0, True)
    tables = evalkit.load_run(result.run_dir)
    assert tables.members[["task", "member", "backend", "status", "score"]].values.tolist() == [
        [EXAMPLE_TASK, EXAMPLE_MEMBER, "fake", "scored", 1.0]]
    schema = yaml.safe_load((corpus / EXAMPLE_TASK / "task.yaml").read_text())["schema"]
    assert sorted(tables.items["field"]) == sorted(schema["properties"])  # one item row per field
    assert set(tables.items["outcome"]) == {"match"} and tables.items["reason"].notna().all()


def test_score_predictions_made_elsewhere(corpus, tmp_path):
    truth = yaml.safe_load((corpus / EXAMPLE_TASK / EXAMPLE_MEMBER / "truth.yaml").read_text())
    predictions = tmp_path / "preds"
    predictions.mkdir()
    wrong = {**truth["record"], "total": 999.0}
    (predictions / f"{EXAMPLE_MEMBER}.json").write_text(json.dumps(wrong))
    result = evalkit.score(corpus, predictions, out=tmp_path / "scored", notebooks=False)
    assert result.exit_code == EXIT_FAILED  # total weighs 2 of 9: 7/9 < 0.9
    items = evalkit.load_run(result.run_dir).items.set_index("field")
    assert items.loc["total", "outcome"] == "mismatch" and items.loc["supplier", "outcome"] == "match"
    assert evalkit.load_run(result.run_dir).members.loc[0, "score"] == pytest.approx(7 / 9)


def test_load_run_of_a_missing_folder_is_one_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="run folder not found"):
        evalkit.load_run(tmp_path / "nope")


def test_import_evalkit_stays_cheap():
    code = "import sys, evalkit; print('evalkit.api' in sys.modules, 'pandas' in sys.modules, callable(evalkit.run))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", "True"]


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_the_api_and_the_cli_write_the_same_files_history_included(tmp_path):
    """`evalkit.run` and `evalkit run` build their options with one function: same run folder, same history."""
    for name in ("api", "cli"):
        init_project(tmp_path / name)
    evalkit.run(tmp_path / "api" / "corpus", ["fake"], out=tmp_path / "api" / "runs" / "r", html=False, workers=1)
    subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "--backend", "fake", "--corpus", "corpus", "--out", "runs/r",
                    "--no-html", "--workers", "1"], cwd=tmp_path / "cli", capture_output=True, text=True, check=True)
    api, cli = _files(tmp_path / "api" / "runs"), _files(tmp_path / "cli" / "runs")
    assert "index.jsonl" in api and "r/run.json" in api
    assert api == cli
    history = [json.loads(line) for line in (tmp_path / "api" / "runs" / "index.jsonl").read_text().splitlines()]
    assert [(h["task"], h["member"], h["status"]) for h in history] == [(EXAMPLE_TASK, EXAMPLE_MEMBER, "scored")]
