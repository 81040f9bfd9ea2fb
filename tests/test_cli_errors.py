"""Bad input on the command line: one clear line, exit 2, no traceback, nothing run."""

import os
import subprocess
import sys

import pytest

from evalkit.board.scaffold import init_project
from evalkit.errors import EXIT_USAGE


@pytest.fixture(scope="module")
def proj(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-errors")
    init_project(root / "proj")
    return root / "proj"


def evalkit(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "evalkit.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


@pytest.mark.parametrize("out", ["afile", "afile/run"])
def test_out_naming_a_file_is_one_line_exit_2(proj, out):
    (proj / "afile").write_text("not a folder")
    proc = evalkit("run", "--backend", "fake", "--no-html", "--out", out, cwd=proj)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"evalkit: --out {out}: afile is a file, not a folder: name a run folder (new, or one to add to)"]
    assert "Traceback" not in proc.stderr + proc.stdout and (proj / "afile").read_text() == "not a folder"


@pytest.mark.parametrize("command", [["run", "--no-html"], ["sweep", "--no-notebooks"]])
def test_a_live_backend_without_its_key_stops_before_any_member_naming_the_variable(proj, command, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "EVALKIT_REPLAY_LLM", "EVALKIT_RECORD_LLM")}
    out = tmp_path / "run"
    proc = evalkit(*command, "--backend", "anthropic", "--out", str(out), cwd=proj, env=env)
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("evalkit: backend anthropic: ANTHROPIC_API_KEY is not set: export it") and "cassette" in line
    assert "Traceback" not in proc.stderr and proc.stdout == ""  # no member printed: none ran
    assert not out.exists()


def test_a_dry_run_shows_the_missing_key_among_its_guards_instead(proj):
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = evalkit("run", "--dry-run", "--backend", "anthropic", cwd=proj, env=env)
    assert proc.returncode == 0 and "ANTHROPIC_API_KEY is not set" in proc.stdout, proc.stdout + proc.stderr
