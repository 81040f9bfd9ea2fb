"""SIGINT/SIGTERM stop a run at once and a re-run finishes it; a live run holds its folder; runs add up.

Each test drives real `evalkit` processes. A run is held mid-phase by a gate file the test owns: a
`python:` pipeline (extraction phase) or a task scorer (inside a notebook kernel) waits while the gate
exists, so the signal always lands in the phase under test; a stopped run must not wait for that work.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import psutil
import pytest
from conftest import mini_corpus
from corpus_factory import make_corpus

from evalkit.errors import EvalkitError
from evalkit.results.runfolder import UNFINISHED, read_sweep_json

ROOT = Path(__file__).resolve().parent.parent
GATE_ENV = "EVALKIT_TEST_GATE"  # read by the test pipeline and scorer below, never by evalkit

# m0 answers at once; m1 waits while the gate exists. A fixed latency keeps the files byte-identical.
PIPELINE = f'''
import os, time
from pathlib import Path
from evalkit.backends import Completion

def extract(text, task):
    gate = Path(os.environ["{GATE_ENV}"])
    with open(gate.with_name("calls.log"), "a") as log:
        log.write(task["member"] + "\\n")
    if task["member"].endswith("/m1"):
        while gate.exists():
            time.sleep(0.02)
    return Completion(record={{"account_id": text.split()[1], "rate": 0.5}}, raw="", model="pipe", latency_s=0.5)
'''

# Appended to the mini task's scorer.py: member "plain" is scored only once the gate is gone.
GATED_SCORER = f'''
_score = score


def score(extraction, truth, ctx):
    import os, time
    from pathlib import Path

    gate = Path(os.environ.get("{GATE_ENV}", "/nonexistent"))
    if ctx.member_id == "plain" and gate.exists():
        gate.with_name("scoring").touch()
        while gate.exists():
            time.sleep(0.02)
    return _score(extraction, truth, ctx)
'''


def evalkit_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "evalkit.cli", *map(str, args)]


def env_with(gate: Path) -> dict[str, str]:
    return {**os.environ, GATE_ENV: str(gate)}


def run(gate: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run(evalkit_cmd(*args), capture_output=True, text=True, cwd=ROOT, env=env_with(gate),
                          timeout=600)


def wait_for(condition, what: str, proc: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if proc.poll() is not None:
            stderr = proc.communicate(timeout=60)[1]
            raise AssertionError(f"evalkit exited ({proc.returncode}) before {what}:\n{stderr}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@contextmanager
def live(gate: Path, *args):
    """`evalkit ARGS` in a session of its own (as a terminal runs it), gate closed; always reaped."""
    gate.write_text("closed")
    proc = subprocess.Popen(evalkit_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env_with(gate), start_new_session=True)
    try:
        yield proc
    finally:
        gate.unlink(missing_ok=True)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)


def stop(proc: subprocess.Popen, sig: int, group: bool) -> tuple[int, str, dict[psutil.Process, str]]:
    """Send `sig` (to the process group, as Ctrl-C in a terminal does, or to evalkit only); return the
    exit code, stderr and the process tree as it was at the signal (each with its command line)."""
    top = psutil.Process(proc.pid)
    tree = {p: " ".join(p.cmdline()) for p in [top, *top.children(recursive=True)]}
    os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
    try:  # the gate is still closed: a run (or an orphan holding its output) that waits for the work never ends
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"60 s after {signal.Signals(sig).name}: evalkit or a process it started runs on") from None
    return proc.returncode, stderr, tree


def survivors(tree: dict[psutil.Process, str], seconds: float = 5.0) -> list[str]:
    def alive(p):
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    deadline = time.monotonic() + seconds
    while any(alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [f"{p.pid} {cmd[:120]}" for p, cmd in tree.items() if alive(p)]


def assert_clean_stop(code: int, stderr: str, sig: int, tree: dict[psutil.Process, str]) -> None:
    assert code == 128 + sig, stderr
    lines = stderr.splitlines()
    assert lines and all(line.startswith("evalkit: ") for line in lines), stderr  # no traceback, no warning
    assert f"stopped by {signal.Signals(sig).name}" in lines[0]
    assert not survivors(tree), "processes outlived the run"


def kernels(tree: dict[psutil.Process, str]) -> int:
    return sum("ipykernel" in cmd for cmd in tree.values())


def assert_no_partial_files(folder: Path) -> None:
    leftovers = [p for p in folder.rglob(".*") if p.name not in (".evalkit.lock", UNFINISHED)]
    assert not leftovers, leftovers
    for p in folder.rglob("*.json"):
        json.loads(p.read_text(encoding="utf-8"))
    for p in folder.rglob("*.ipynb"):
        nb = nbformat.read(p, as_version=4)
        nbformat.validate(nb)
        states = {c.metadata.get("papermill", {}).get("status") for c in nb.cells if c.cell_type == "code"}
        assert states == {"completed"}, (p, states)


def same_files(a: Path, b: Path) -> None:
    """Every notebook, page and JSON file byte-identical (run.json holds times)."""
    def listing(root):
        return sorted(p.relative_to(root) for p in root.rglob("*")
                      if p.suffix in (".ipynb", ".html", ".json") and p.name != "run.json")
    assert listing(a) == listing(b)
    for rel in listing(a):
        assert comparable(a / rel) == comparable(b / rel), rel


def comparable(path: Path) -> bytes:
    """A file's bytes; an index page's without its run block (its date and command, `evalkit.report.overview`)."""
    from evalkit.report.overview import without_run_block

    data = path.read_bytes()
    return without_run_block(data) if path.name == "index.html" else data


@pytest.fixture
def pipeline(tmp_path) -> tuple[Path, str, Path]:
    """(corpus of m0 and m1, backend NAME=SPEC, gate path)."""
    path = tmp_path / "pipe.py"
    path.write_text(PIPELINE)
    return make_corpus(tmp_path, members=2), f"pipe=python:{path}:extract", tmp_path / "gate"


@pytest.fixture
def gated_mini(tmp_path) -> tuple[Path, Path]:
    """(the mini corpus whose scorer waits for the gate on member "plain", gate path)."""
    corpus = mini_corpus(tmp_path / "corpus")
    scorer = corpus / "mini" / "scorer.py"
    scorer.write_text(scorer.read_text() + GATED_SCORER)
    return corpus, tmp_path / "gate"


def test_sigterm_during_extraction_exits_143_at_once_and_a_rerun_calls_only_the_rest(pipeline, tmp_path):
    corpus, backend, gate = pipeline
    out, args = tmp_path / "run", ("run", "--corpus", corpus, "--backend", backend, "--max-concurrency", "2")
    m0, calls = out / "memos" / "m0" / "pipe" / "extraction.json", tmp_path / "calls.log"
    with live(gate, *args, "--out", out) as proc:  # m1's call starts once its pipeline process has started
        wait_for(lambda: m0.is_file() and calls.is_file() and "memos/m1" in calls.read_text(),
                 "m0's extraction and m1's call", proc)
        code, stderr, tree = stop(proc, signal.SIGTERM, group=False)
    assert_clean_stop(code, stderr, signal.SIGTERM, tree)
    assert "extracting 1/2" in stderr and f"--out {out}" in stderr.splitlines()[-1]
    assert_no_partial_files(out)
    assert not (out / "memos" / "m1" / "pipe" / "extraction.json").exists() and (out / UNFINISHED).is_file()

    again = run(gate, *args, "--out", out)  # gate gone: m1 answers now
    assert again.returncode == 1, again.stderr  # m1's rate is wrong: a verdict, not an error
    assert calls.read_text().split() == ["memos/m0", "memos/m1", "memos/m1"]  # m0's extraction was reused
    assert "Resumed: 1 extraction(s) reused" in again.stdout and not (out / UNFINISHED).exists()
    fresh = run(gate, *args, "--out", tmp_path / "fresh")
    assert fresh.returncode == 1, fresh.stderr
    same_files(out, tmp_path / "fresh")

    calls.unlink()
    finished = run(gate, *args, "--out", out)  # a finished folder is not resumed: every call is made again
    assert finished.returncode == 1, finished.stderr
    assert sorted(calls.read_text().split()) == ["memos/m0", "memos/m1"] and "Resumed" not in finished.stdout


def test_ctrl_c_during_notebooks_kills_kernels_keeps_finished_notebooks_and_a_rerun_completes(gated_mini, tmp_path):
    corpus, gate = gated_mini
    out = tmp_path / "run"
    args = ("run", "--corpus", corpus, "--backend", "fake", "--workers", "2", "--out", out)
    first = run(gate, *args)  # no gate: an uninterrupted run
    assert first.returncode == 1, first.stderr  # "hostile" fails its verdict by design
    finished = {p.relative_to(out): comparable(p) for p in out.rglob("*") if p.is_file() and p.name != "run.json"}

    with live(gate, *args) as proc:  # the same run again; "plain" is held inside its score notebook's kernel
        wait_for(gate.with_name("scoring").is_file, "the kernel scoring plain", proc)
        code, stderr, tree = stop(proc, signal.SIGINT, group=True)
    assert kernels(tree) >= 1
    assert_clean_stop(code, stderr, signal.SIGINT, tree)
    assert_no_partial_files(out)
    assert "notebooks" in stderr.splitlines()[0]
    plain = Path("mini/plain/fake/score.ipynb")
    assert (out / plain).read_bytes() == finished[plain]  # the finished notebook, not a half one

    again = run(gate, *args)
    assert again.returncode == 1, again.stderr
    assert not (out / UNFINISHED).exists()
    for rel, data in finished.items():
        assert comparable(out / rel) == data, rel


def test_a_stopped_sweep_keeps_finished_members_and_the_same_command_runs_the_rest(gated_mini, tmp_path):
    corpus, gate = gated_mini
    out = tmp_path / "sweep"
    args = ("sweep", "--corpus", corpus, "--backend", "fake", "--workers", "2", "--out", out)

    def hostile_recorded() -> bool:
        try:
            return "mini/hostile" in read_sweep_json(out)["members"]  # sweep.json and the members' sidecar
        except (OSError, ValueError, KeyError, EvalkitError):
            return False

    with live(gate, *args) as proc:  # member "plain" is held in a kernel two worker processes down
        wait_for(lambda: gate.with_name("scoring").is_file() and hostile_recorded(), "hostile done, plain scoring",
                 proc)
        code, stderr, tree = stop(proc, signal.SIGINT, group=True)
    assert kernels(tree) >= 1
    assert_clean_stop(code, stderr, signal.SIGINT, tree)
    assert "1/2 member(s) run" in stderr
    assert_no_partial_files(out)

    again = run(gate, *args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "mini/hostile" in again.stdout and "(current, skipped)" in again.stdout
    assert "Sweep: 2 member(s): 1 run, 1 current" in again.stdout


def test_a_second_run_into_a_live_runs_folder_is_refused_naming_the_holder(pipeline, tmp_path):
    corpus, backend, gate = pipeline
    out = tmp_path / "run"
    with live(gate, "run", "--corpus", corpus, "--backend", backend, "--out", out) as proc:
        wait_for((out / "memos" / "m0" / "pipe" / "extraction.json").is_file, "the first run to start", proc)
        second = run(gate, "run", "--corpus", corpus, "--backend", "other=fake", "--out", out)
        assert second.returncode == 2, second.stderr
        assert "being written by a live run" in second.stderr and f"pid {proc.pid}" in second.stderr
        assert "Traceback" not in second.stderr
        gate.unlink()
        assert proc.wait(timeout=300) == 1
    assert not (out / "memos" / "m0" / "other").exists()  # the refused run wrote nothing
    assert [b["label"] for b in json.loads((out / "run.json").read_text())["backends"]] == ["pipe"]
    assert not (out / ".evalkit.lock.json").exists()


def test_runs_with_other_backends_into_one_folder_add_up(pipeline, tmp_path):
    corpus, backend, gate = pipeline
    out = tmp_path / "run"
    a = run(gate, "run", "--corpus", corpus, "--backend", "a=fake", "--only", "m0", "--out", out)
    assert a.returncode == 0, a.stderr
    b = run(gate, "run", "--corpus", corpus, "--backend", backend.replace("pipe=", "b="), "--out", out)
    assert b.returncode == 1, b.stderr
    run_json = json.loads((out / "run.json").read_text())
    assert [x["label"] for x in run_json["backends"]] == ["a", "b"]
    assert all(x["started"] for x in run_json["backends"])
    assert run_json["members"] == ["memos/m0", "memos/m1"]
    index = (out / "index.html").read_text()
    assert "<dt>backend a</dt><dd>fake (model fake)</dd>" in index and "<dt>backend b</dt><dd>python:" in index
    assert "<td>memos</td><td>score</td><td>a</td>" in index and "<td>memos</td><td>score</td><td>b</td>" in index
    report = nbformat.read(out / "memos" / "report.ipynb", as_version=4)
    shown = "".join(str(o.get("data", {}).get("text/html", "")) + str(o.get("text", ""))
                    for c in report.cells for o in c.get("outputs", []))
    assert "backend a · 1 member run(s)" in shown and "backend b · 2 member run(s)" in shown


def test_merge_run_json_replaces_a_rerun_label_in_place_and_keeps_the_others():
    from evalkit.results.runfolder import merge_run_json

    previous = {"started": "t1", "backends": [{"label": "a", "spec": "fake", "started": "t1"},
                                              {"label": "b", "spec": "x", "started": "t1"}], "members": ["t/m0"]}
    current = {"started": "t2", "backends": [{"label": "c", "spec": "y", "started": "t2"},
                                             {"label": "a", "spec": "z", "started": "t2"}], "members": ["t/m1", "t/m0"]}
    merged = merge_run_json(previous, current).to_json()
    assert [(b["label"], b["spec"]) for b in merged["backends"]] == [("a", "z"), ("b", "x"), ("c", "y")]
    assert merged["members"] == ["t/m0", "t/m1"] and merged["started"] == "t2"
    assert merge_run_json({}, current).to_json() == current
