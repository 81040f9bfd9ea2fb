"""Warm kernels (evalkit.execution.kernels): the same bytes as a fresh kernel per notebook, a clean slate between
notebooks, a dead kernel replaced and its notebook run again once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from evalkit.execution.execute import COLD, WARM, NotebookJob, execute, jupyter_env
from evalkit.report.overview import without_run_block

ROOT = Path(__file__).resolve().parent.parent
SOURCES = Path(os.environ.get("EVALKIT_SOURCES", ROOT.parent / "shared" / "data"))


def _files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def _run(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "--limit", "3", "--sources", str(SOURCES),
                           "--out", str(out), *args], capture_output=True, text=True, cwd=ROOT)


def test_warm_kernels_write_the_same_bytes_as_a_kernel_per_notebook_on_every_bundled_task(tmp_path):
    # One warm kernel runs every notebook of every task one after another: whatever one notebook leaves in
    # its kernel would show in the next one's bytes.
    cold, warm = _run(tmp_path / "cold", "--kernels", COLD), _run(tmp_path / "warm", "--workers", "1")
    assert cold.returncode in (0, 1) and warm.returncode == cold.returncode, cold.stderr + warm.stderr
    # the verdict lines come as members finish (an order that depends on the workers): the same lines
    def lines(proc, out):
        return sorted(re.sub(r"^\[\d+/\d+\] ", "", line) for line in proc.stdout.replace(str(out), "").splitlines())

    assert lines(warm, tmp_path / "warm") == lines(cold, tmp_path / "cold")
    a, b = _files(tmp_path / "cold"), _files(tmp_path / "warm")
    assert sorted(a) == sorted(b)
    tasks = {name.split("/")[0] for name in a if name.endswith("report.ipynb")}
    if SOURCES.is_dir():
        # every task the default cassette covers (invoices and deal-memos-scanned came after it was recorded)
        assert tasks == {p.parent.name for p in (ROOT / "corpus").glob("*/task.yaml")} - {"invoices", "deal-memos-scanned"}
    assert sum(name.endswith(".ipynb") for name in a) >= 5 * 3
    # the run block names the command and the time it started: the rest of index.html and run.json must match
    index = "index.html"
    assert without_run_block(a.pop(index)) == without_run_block(b.pop(index))
    run_a, run_b = json.loads(a.pop("run.json")), json.loads(b.pop("run.json"))
    for run in (run_a, run_b):
        run.pop("command"), run.pop("started")
        for backend in run["backends"]:
            backend.pop("started")
    assert run_a == run_b
    assert [name for name in a if a[name] != b[name]] == []


def _notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = None", metadata={"tags": ["parameters"]})]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def _outputs(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    return ["".join(o.get("text", "")) for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def test_each_notebook_starts_from_a_fresh_kernel_state(tmp_path):
    first = _notebook(tmp_path / "first.ipynb", "leak = 1\nimport warnings\nwarnings.simplefilter('ignore')",
                      "import os\nos.chdir('/')", "print(leak)")
    second = _notebook(tmp_path / "second.ipynb", "print('leak' in dir(), 'x' in dir())",
                       "import os\nprint(os.path.basename(os.getcwd()))",
                       "import warnings\nwarnings.warn('shown again')")
    a = NotebookJob(first, tmp_path / "a" / "first.ipynb", {"x": 1})
    b = NotebookJob(second, tmp_path / "b" / "second.ipynb", {"x": 2}, after=(a.output,))
    results = execute([a, b, NotebookJob(second, tmp_path / "c" / "second.ipynb", {"x": 3}, after=(b.output,))],
                      workers=1, kernels=WARM)
    assert [r.error for r in results] == [None] * 3
    assert _outputs(a.output) == ["1\n"]
    nb = nbformat.read(b.output, as_version=4)
    assert [c.execution_count for c in nb.cells if c.cell_type == "code"] == [1, 2, 3, 4, 5]  # from 1 (parameters, injected, 3 cells)
    assert _outputs(b.output)[:2] == ["False True\n", "b\n"]  # only its own parameter; its own folder
    assert "shown again" in _outputs(b.output)[2]  # the first notebook's filter is gone
    assert "shown again" in _outputs(tmp_path / "c" / "second.ipynb")[2]  # and a warning shows in every notebook
    assert (tmp_path / "c" / "second.ipynb").read_bytes() != b""


def test_a_kernel_that_dies_is_replaced_and_its_notebook_run_again_once(tmp_path):
    marker = tmp_path / "died"
    dies_once = _notebook(tmp_path / "once.ipynb", "print('before')",
                          f"import os, pathlib\nif not pathlib.Path({str(marker)!r}).exists():\n"
                          f"    pathlib.Path({str(marker)!r}).write_text('x')\n    os._exit(1)",
                          "print('after')")
    always = _notebook(tmp_path / "always.ipynb", "import os\nos._exit(1)")
    fine = _notebook(tmp_path / "fine.ipynb", "print('fine')")
    jobs = [NotebookJob(dies_once, tmp_path / "1" / "once.ipynb"),
            NotebookJob(always, tmp_path / "2" / "always.ipynb", after=(tmp_path / "1" / "once.ipynb",)),
            NotebookJob(fine, tmp_path / "3" / "fine.ipynb", after=(tmp_path / "2" / "always.ipynb",))]
    results = execute(jobs, workers=1, kernels=WARM)
    assert results[0].ok and marker.exists()
    assert _outputs(jobs[0].output) == ["before\n", "after\n"]  # the retry's outputs only, from the start
    assert not results[1].ok and results[1].ename == "DeadKernelError"  # died twice: a failure, reported
    assert results[2].ok and _outputs(jobs[2].output) == ["fine\n"]  # the next notebook gets a new kernel


def test_papermill_runs_the_engine_by_name(tmp_path):
    nb = _notebook(tmp_path / "in.ipynb", "print(x * 2)")
    proc = subprocess.run([sys.executable, "-m", "papermill", "--engine", "evalkit", "-p", "x", "21",
                           str(nb), str(tmp_path / "out.ipynb")], capture_output=True, text=True,
                          env={**os.environ, **jupyter_env()}, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _outputs(tmp_path / "out.ipynb") == ["42\n"]


@pytest.mark.parametrize("before", [0, 3])
def test_a_chart_has_the_same_bytes_whatever_was_drawn_before_it(before):
    import altair as alt
    import pandas as pd

    from evalkit.report.views.charts import chart_bundle

    frame = pd.DataFrame({"x": ["a", "b"], "y": ["c", "d"], "v": [0.2, 0.9]})
    heat = alt.Chart(frame).mark_rect().encode(x="x", y="y", color="v:Q")  # a gradient legend: a counted id
    first = chart_bundle(heat)
    for _ in range(before):
        chart_bundle(heat.properties(width=50))
    again = chart_bundle(heat)
    assert again == first
    assert "gradient_" not in first[0]["image/svg+xml"] and 'id="gradient-' in first[0]["image/svg+xml"]


def test_warm_kernels_leave_with_their_workers(tmp_path):
    import psutil

    fine = _notebook(tmp_path / "fine.ipynb", "print('fine')")
    state = tmp_path / "jupyter"
    jobs = [NotebookJob(fine, tmp_path / str(i) / "fine.ipynb") for i in range(4)]
    assert all(r.ok for r in execute(jobs, workers=2, kernels=WARM, jupyter_dir=state))
    kernels = [p for p in psutil.process_iter(["cmdline"]) if str(state) in " ".join(p.info["cmdline"] or [])]
    psutil.wait_procs(kernels, timeout=5)
    assert [p for p in kernels if p.is_running()] == []
    assert list((state / "runtime").iterdir()) == []  # no connection file or socket left behind
