"""Notebook execution: reproducible bytes, isolated failures, and nbval re-runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
from conftest import MEMBERS, TASK_ID, mini_corpus, prepare_run

from evalkit.backends import BackendSpec
from evalkit.execution.execute import (
    INJECTED_ID,
    NotebookJob,
    execute,
    jupyter_env,
    normalize,
    plan_member,
    plan_report,
)
from evalkit.report import chrome
from evalkit.report.render import render_notebook


def _files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_run_executes_every_notebook(executed_run):
    _, run_dir, results = executed_run
    assert [r.error for r in results] == [None] * len(results)
    assert all(r.ok for r in results)
    expected = {f"{TASK_ID}/{m}/fake/{n}" for m in MEMBERS for n in
                ("extract.ipynb", "score.ipynb", "extraction.json", "score.json")} | {f"{TASK_ID}/report.ipynb"}
    assert expected <= set(_files(run_dir))
    score = json.loads((run_dir / TASK_ID / "hostile" / "fake" / "score.json").read_text())
    assert score["passed"] is False and score["score"] == 0.4


def test_same_inputs_give_byte_identical_notebooks(executed_run, tmp_path):
    _, run1, _ = executed_run
    results = execute(prepare_run(tmp_path), workers=2)
    assert all(r.ok for r in results), [r.error for r in results]
    first, second = _files(run1), _files(tmp_path / "run")
    assert sorted(first) == sorted(second)
    different = [name for name in first if first[name] != second[name]]
    assert different == []


def test_executed_notebooks_are_normalized(executed_run):
    _, run_dir, _ = executed_run
    for path in sorted(run_dir.rglob("*.ipynb")):
        raw = path.read_text(encoding="utf-8")
        for volatile in ("start_time", "end_time", '"duration"', str(run_dir), "iopub.execute_input"):
            assert volatile not in raw, (path, volatile)
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
        assert [c.id for c in injected] == [INJECTED_ID]
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code)  # kept: nbval needs it
        assert nb.metadata.papermill.input_path == path.name
        # Parameters are relative to the notebook's folder: nothing depends on where the run is.
        assert not any(str(v).startswith("/") for v in nb.metadata.papermill.parameters.values())


def test_normalize_fixes_papermill_fields():
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"start_time": "x", "end_time": "y", "duration": 1.0,
                                "input_path": "/a/b/score.ipynb", "output_path": "/c/score.ipynb"}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata.update(tags=["injected-parameters"], execution={"iopub.status.busy": "t"},
                         papermill={"start_time": "x", "duration": 0.1, "status": "completed"})
    nb.cells.append(cell)
    normalize(nb)
    assert nb.metadata.papermill == {"input_path": "score.ipynb", "output_path": "score.ipynb"}
    assert nb.metadata.language_info.version == "3.11"
    assert cell.id == INJECTED_ID and "execution" not in cell.metadata
    assert cell.metadata.papermill == {"status": "completed"}


def test_normalize_joins_a_print_split_across_stream_messages_and_keeps_the_order():
    # The kernel flushes its stdout buffer on a timer: one print may arrive as "(none)" then "\n".
    out = nbformat.v4.new_output
    split = [out("stream", name="stdout", text="(none)"), out("stream", name="stdout", text="\n"),
             out("stream", name="stderr", text="warn\n"), out("display_data", data={"text/plain": "x"}),
             out("stream", name="stdout", text="after\n")]
    whole = [out("stream", name="stdout", text="(none)\n"), out("stream", name="stderr", text="warn\n"),
             out("display_data", data={"text/plain": "x"}), out("stream", name="stdout", text="after\n")]
    a, b = nbformat.v4.new_notebook(), nbformat.v4.new_notebook()
    a.cells, b.cells = [nbformat.v4.new_code_cell("", outputs=split)], [nbformat.v4.new_code_cell("", outputs=whole)]
    for nb in (a, b):
        nb.cells[0].id = "c"
        normalize(nb)
    assert nbformat.writes(a) == nbformat.writes(b)
    assert [o.get("name", o.output_type) for o in a.cells[0].outputs] == ["stdout", "stderr", "display_data", "stdout"]


def test_a_failing_notebook_reports_its_error_and_the_others_finish(tmp_path):
    corpus = mini_corpus(tmp_path / "corpus")
    run_dir = tmp_path / "run"
    bad = plan_member(run_dir, TASK_ID, "no-such-member", BackendSpec("fake", "fake"), corpus)[0]
    missing_template = NotebookJob(tmp_path / "nope.ipynb", run_dir / "x" / "nope.ipynb")
    good = plan_report(run_dir, TASK_ID)  # no scores yet: an empty report still runs
    seen = []
    results = execute([bad, missing_template, good], workers=2, on_done=lambda job, r: seen.append((job, r)))
    assert [r.ok for r in results] == [False, False, True]
    assert len(seen) == 3 and {id(j) for j, r in seen} == {id(bad), id(missing_template), id(good)}
    assert all(r.job is j for j, r in seen)
    err = results[0]
    assert err.ename == "CorpusError"
    assert "has no member 'no-such-member'" in err.evalue
    assert err.error.startswith("CorpusError: task 'mini' has no member") and "(cell In [" in err.error
    assert "Traceback" not in err.error and "\n" not in err.error
    assert results[1].error and "Traceback" not in results[1].error
    # The failed notebook is still written, normalized, with papermill's error banner.
    nb = nbformat.read(bad.output, as_version=4)
    assert [c.id for c in nb.cells if "papermill-error-cell-tag" in c.metadata.get("tags", [])] == \
        ["papermill-error-1", "papermill-error-2"]
    assert "start_time" not in bad.output.read_text()
    page = render_notebook(bad.output).read_text(encoding="utf-8")  # a failed notebook still renders
    assert "CorpusError" in page and page.count("<script") == 1 and f"<script>{chrome.script()}</script>" in page


def test_nbval_reruns_executed_notebooks_to_the_same_outputs(run_copy):
    notebooks = [run_copy / TASK_ID / "hostile" / "fake" / "extract.ipynb",
                 run_copy / TASK_ID / "hostile" / "fake" / "score.ipynb",
                 run_copy / TASK_ID / "report.ipynb"]
    env = {**os.environ, **jupyter_env()}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", "-q", *map(str, notebooks)],
        cwd=run_copy, env=env, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
