"""notebooks/tutorial.ipynb runs under nbval from top to bottom: init → truth → fake self-test → a local model
(by default its committed recording, notebooks/tutorial-gemma.jsonl, replayed offline) → replay (same scores,
asserted in the notebook) → two backends → scoreboard → band → check. With ``MODEL = "live"`` the notebook
starts the local model server and records afresh (EVALKIT_LLM_PYTHON: `make llm`; `make test` sets it)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "notebooks" / "tutorial.ipynb"
LLM_PYTHON = os.environ.get("EVALKIT_LLM_PYTHON")


def _env(**extra):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", **extra}
    env.pop("EVALKIT_SOURCES", None)  # the tutorial needs none
    return env


def test_the_tutorial_notebook_runs_offline_under_nbval_by_default(tmp_path):
    env = _env()
    env.pop("EVALKIT_LLM_PYTHON", None)  # no model server: the committed recording answers
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                           "--nbval-cell-timeout=600", str(TUTORIAL)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    # (the suite's -q addopts and this -q leave only the progress line: one dot per cell, no summary line)
    assert "[100%]" in proc.stdout and not any(c in proc.stdout.split("[100%]")[0] for c in "FEs"), proc.stdout


@pytest.mark.skipif(not LLM_PYTHON, reason="EVALKIT_LLM_PYTHON is not set (run `make llm`, or `make test`)")
def test_the_tutorial_notebook_runs_live_against_the_local_model(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "papermill", str(TUTORIAL), str(tmp_path / "out.ipynb"),
                           "-p", "MODEL", "live", "--cwd", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
