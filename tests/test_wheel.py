"""The wheel works anywhere: built from this checkout, installed (not editable) into a fresh venv outside
the repository, `evalkit init proj && cd proj && evalkit run --backend fake` scores 100% with notebooks and
HTML, and Jupyter's state goes to the per-user cache, never into site-packages or the project.

Slow (a venv with every dependency: pip's cache, or the package registry): one test."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ("extract.ipynb", "score.ipynb", "report.ipynb", "compare.ipynb")


def sh(*args, **kw):
    proc = subprocess.run(list(map(str, args)), capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{args}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_the_wheel_runs_a_fresh_project_outside_the_repository(tmp_path):
    build = sh(sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", ROOT, "-w", tmp_path / "dist")
    # No licence-table (or other) warnings from the build backend (-v shows its output).
    assert "licen" not in (build.stdout + build.stderr).lower() and "deprecat" not in build.stderr.lower()
    (wheel,) = (tmp_path / "dist").glob("evalkit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    # The notebook templates and the nbconvert template are in the package; the checkout's own folders are not.
    assert all(f"evalkit/notebooks/{nb}" in names for nb in NOTEBOOKS)
    assert "evalkit/templates/evalkit/index.html.j2" in names and "evalkit/templates/evalkit/static/evalkit.css" in names
    assert not [n for n in names if n.startswith(("corpus/", "notebooks/", "cassettes/", "tests/"))]

    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", venv)
    sh(venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel)
    site = Path(sh(venv / "bin" / "python", "-c", "import evalkit, os; print(os.path.dirname(evalkit.__file__))",
                   cwd=tmp_path).stdout.strip())
    assert site.is_relative_to(venv)  # the installed copy, not this checkout
    before = {p for p in site.rglob("*") if "__pycache__" not in p.parts}

    env = {k: v for k, v in os.environ.items()
           if k not in ("EVALKIT_SOURCES", "PYTHONPATH", "EVALKIT_JUPYTER_DIR") and not k.startswith(("JUPYTER", "IPYTHON"))}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    work = tmp_path / "work"
    work.mkdir()
    sh("evalkit", "init", "proj", cwd=work, env=env)
    proj = work / "proj"
    run = sh("evalkit", "run", "--backend", "fake", "--out", "runs/first", cwd=proj, env=env)
    assert "invoices/example-invoice … 100.0% PASS" in run.stdout and "fake: 1/1 passed · mean score 100.0%" in run.stdout, run.stdout

    out = proj / "runs" / "first"
    member = out / "invoices" / "example-invoice" / "fake"
    for page in (member / "extract", member / "score", out / "invoices" / "report"):
        assert page.with_suffix(".ipynb").is_file() and page.with_suffix(".html").stat().st_size > 1000
    assert (out / "index.html").is_file()
    # Jupyter's state: in the per-user cache; nothing written into site-packages or the project.
    assert (tmp_path / "cache" / "evalkit" / "jupyter" / "runtime").is_dir()
    assert {p for p in site.rglob("*") if "__pycache__" not in p.parts} == before
    assert not list(proj.rglob(".jupyter")) and not (work / ".jupyter").exists()
