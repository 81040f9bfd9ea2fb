"""notebooks/tutorial.ipynb runs under nbval from top to bottom: init → truth → fake self-test → a real local model
through openai:url= with recording → replay (same scores, asserted in the notebook) → two backends → scoreboard →
band → check. Needs the local model server (EVALKIT_LLM_PYTHON: `make llm`; `make test` sets it)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LLM_PYTHON = os.environ.get("EVALKIT_LLM_PYTHON")


@pytest.mark.skipif(not LLM_PYTHON, reason="EVALKIT_LLM_PYTHON is not set (run `make llm`, or `make test`)")
def test_the_tutorial_notebook_runs_under_nbval(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("EVALKIT_SOURCES", None)  # the tutorial needs none
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                           "--nbval-cell-timeout=1800", str(ROOT / "notebooks" / "tutorial.ipynb")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    # (the suite's -q addopts and this -q leave only the progress line: one dot per cell, no summary line)
    assert "[100%]" in proc.stdout and not any(c in proc.stdout.split("[100%]")[0] for c in "FEs"), proc.stdout
