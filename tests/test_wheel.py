"""The installed kit is the product: the wheel built from this checkout, installed (not editable) into a fresh
venv outside the repository, runs every command of an `evalkit init` project — each exit code and one key line
asserted — and Jupyter's state goes to the per-user cache, never into site-packages or the project.

The venv gets the wheel alone (``--no-deps``) and finds the dependencies through a ``.pth`` line naming this
interpreter's site-packages, and their Jupyter data files through a link to its ``share/jupyter`` (installing
them afresh takes about 4 minutes, and needs the registry); nested ``.pth`` files there are not processed, so
this checkout's editable install is not on the venv's path. One test, fake
backend, one member: about a minute."""

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import yaml

from evalkit.board.scaffold import EXAMPLE_MEMBER, EXAMPLE_TASK
from evalkit.errors import EXIT_OK
from evalkit.report import pages

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_DOCS = ("tutorial", "authoring", "corpus-format", "pages")  # the pages a project and `evalkit docs` name


def sh(*args, code=EXIT_OK, **kw):
    proc = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == code, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _build(tmp_path) -> tuple[Path, list[str]]:
    build = sh(sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", ROOT, "-w", tmp_path / "dist")
    # No licence-table (or other) warnings from the build backend (-v shows its output).
    assert "licen" not in (build.stdout + build.stderr).lower() and "deprecat" not in build.stderr.lower()
    (wheel,) = (tmp_path / "dist").glob("evalkit-*.whl")
    return wheel, zipfile.ZipFile(wheel).namelist()


def _venv(tmp_path, wheel, env) -> tuple[Path, Path]:
    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", venv, env=env)
    sh(venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", wheel, env=env)
    purelib = Path(sh(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                      cwd=tmp_path, env=env).stdout.strip())
    (purelib / "evalkit-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # The data files the dependencies install beside them (nbconvert's `lab` template, ipykernel's kernel spec).
    (venv / "share").mkdir(exist_ok=True)
    (venv / "share" / "jupyter").symlink_to(Path(sysconfig.get_paths()["data"]) / "share" / "jupyter")
    site = Path(sh(venv / "bin" / "python", "-c", "import evalkit, os; print(os.path.dirname(evalkit.__file__))",
                   cwd=tmp_path, env=env).stdout.strip())
    assert site.is_relative_to(venv)  # the installed copy, not this checkout
    return venv, site


def test_the_wheel_runs_every_command_of_a_fresh_project_outside_the_repository(tmp_path):
    wheel, names = _build(tmp_path)
    # Every report page's template, the docs a project points to and the nbconvert template are in the package;
    # the checkout's own folders are not.
    assert [p.notebook for p in pages.PAGES if f"evalkit/notebooks/{p.notebook}" not in names] == []
    assert all(f"evalkit/docs/{d}.md" in names for d in SHIPPED_DOCS)
    assert "evalkit/templates/evalkit/index.html.j2" in names and "evalkit/templates/evalkit/static/evalkit.css" in names
    assert not [n for n in names if n.startswith(("corpus/", "notebooks/", "docs/", "cassettes/", "tests/"))]
    assert not [n for n in names if n.endswith(".png")]  # the docs' screenshots stay in the repository

    env = {k: v for k, v in os.environ.items()
           if k not in ("EVALKIT_SOURCES", "PYTHONPATH", "EVALKIT_JUPYTER_DIR", "EVALKIT_RECORD_LLM", "EVALKIT_REPLAY_LLM")
           and not k.startswith(("JUPYTER", "IPYTHON"))}
    venv, site = _venv(tmp_path, wheel, env)  # PYTHONPATH (a worktree's) removed: the installed copy runs
    before = {p for p in site.rglob("*") if "__pycache__" not in p.parts}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    work = tmp_path / "work"
    work.mkdir()

    def evalkit(*args, code=EXIT_OK, cwd=None):
        return sh("evalkit", *args, code=code, cwd=cwd or work / "proj", env=env)

    assert "proj: project created" in evalkit("init", "proj", cwd=work).stdout
    proj = work / "proj"
    assert evalkit("validate").stdout.strip().endswith("proj/corpus: ok")
    assert "fields" in evalkit("metrics", EXAMPLE_TASK).stdout
    evalkit("sources")
    for name in SHIPPED_DOCS:
        assert evalkit("docs", name).stdout.strip() == str(site / "docs" / f"{name}.md")

    run = evalkit("run", "--backend", "fake", "--out", "runs/a", "--limit", "1")
    assert f"{EXAMPLE_TASK}/{EXAMPLE_MEMBER} … 100.0% PASS" in run.stdout and "fake: 1/1 passed" in run.stdout, run.stdout
    out = proj / "runs" / "a"
    member = out / EXAMPLE_TASK / EXAMPLE_MEMBER / "fake"
    for page in (member / "extract", member / "score", out / EXAMPLE_TASK / "report"):
        assert page.with_suffix(".ipynb").is_file() and page.with_suffix(".html").stat().st_size > 1000
    assert (out / "index.html").is_file() and (proj / "runs" / "index.jsonl").is_file()  # the history

    truth = yaml.safe_load((proj / "corpus" / EXAMPLE_TASK / EXAMPLE_MEMBER / "truth.yaml").read_text())["record"]
    (proj / "preds").mkdir()
    (proj / "preds" / f"{EXAMPLE_MEMBER}.json").write_text(json.dumps(truth))
    assert "predictions: 1/1 passed" in evalkit("score", "--predictions", "preds", "--out", "runs/s", "--no-html").stdout

    compare = evalkit("compare", "runs/b", "--backend", "fake", "--backend", "twin=fake")
    assert (proj / "runs" / "b" / EXAMPLE_TASK / "compare.html").is_file() and "Comparison:" in compare.stdout
    diff = evalkit("diff", "runs/a", "runs/b")
    assert "Diff:" in diff.stdout and (proj / "runs" / "b" / "diff.html").stat().st_size > 1000

    report = evalkit("report", "runs/a", "--bundle", "a.html")
    assert "Report:" in report.stdout and "Bundle:" in report.stdout and (proj / "a.html").stat().st_size > 1000

    sweep = evalkit("sweep", "--backend", "fake", "--out", "runs/sweep", "--no-notebooks", "--update-scoreboard")
    assert "1 scored" in sweep.stdout, sweep.stdout
    assert "OK: no unjustified regression" in evalkit("check", "runs/sweep").stdout
    assert "Rescore: 1/1 entry re-scored" in evalkit("rescore").stdout
    assert "Report:" in evalkit("report", "--scoreboard", "--out", "board.html").stdout
    assert (proj / "board.html").stat().st_size > 1000

    (work / "second.md").write_text("Invoice INV-7 from Acme Ltd, total 12.00 EUR.\n")
    added = evalkit("new-member", EXAMPLE_TASK, work / "second.md", "--id", "second")
    assert "second: added; fill in" in added.stdout and (proj / "corpus" / EXAMPLE_TASK / "second" / "truth.yaml").is_file()

    # Jupyter's state: in the per-user cache; nothing written into site-packages or the project.
    assert (tmp_path / "cache" / "evalkit" / "jupyter" / "runtime").is_dir()
    assert {p for p in site.rglob("*") if "__pycache__" not in p.parts} == before
    assert not list(proj.rglob(".jupyter")) and not (work / ".jupyter").exists()
