"""A `python:` pipeline is contained: whatever it does to its own process is one member's error.

Each case runs a three-member corpus through one pipeline function that misbehaves on member m1 only
(exit, crash, loop, hog memory, return what is not JSON, print a key, move its cwd) and answers m0 and
m2 correctly: m1 must be an ERROR with the right cause and a one-line message, m0 and m2 scored, the
run's exit code 5. Most cases call the library (`runner.run`, no notebooks); those about the command
line itself (exit codes, the console, Ctrl-C, --pipeline-timeout) run `evalkit` as a process.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from corpus_factory import make_corpus, specs

from evalkit._util.jsonio import read_json
from evalkit.stages.runner import RunOptions, run
from evalkit.status import ERROR, PIPELINE_EXCEPTION, PIPELINE_RESULT_INVALID, SCORED, TIMEOUT

PLANTED = "sk-PLANTED-pipeline-0123456789abcdefghij"

PIPE = '''
import asyncio, datetime, os, signal, sys, time
from pathlib import Path


def good(text):
    words = text.split()
    return {"account_id": words[1], "rate": float(words[-1].rstrip("."))}


def on_m1(bad):
    """FUNCTION(text, task): `bad()` for member m1, the right record for the others."""
    def extract(text, task):
        if task["member"].endswith("/m1"):
            return bad()
        return good(text)
    return extract


def endless():
    Path(os.environ["MARK"]).touch()
    while True:
        pass


def circular():
    d = {"account_id": "ACC-001"}
    d["self"] = d
    return d


def hog():
    return bytearray(512 * 1024 * 1024)


def boom():
    raise RuntimeError("pipeline broke")


def chdir():
    os.chdir("/")
    return {"account_id": "ACC-001", "rate": 0.6}


def leaky():
    raise RuntimeError("no answer")


exit0 = on_m1(lambda: sys.exit(0))
exit3 = on_m1(lambda: sys.exit(3))
hard_exit = on_m1(lambda: os._exit(1))
raises = on_m1(boom)
segfault = on_m1(lambda: os.kill(os.getpid(), signal.SIGSEGV))
loops = on_m1(endless)
memory = on_m1(hog)
bytes_ = on_m1(lambda: {"account_id": b"ACC-001"})
set_ = on_m1(lambda: {"account_id": "ACC-001", "tags": {1, 2}})
date = on_m1(lambda: {"account_id": "ACC-001", "on": datetime.date(2026, 1, 1)})
tuple_key = on_m1(lambda: {("account", "id"): "ACC-001"})
cycle = on_m1(circular)
nan = on_m1(lambda: {"account_id": "ACC-001", "rate": float("nan")})
huge = on_m1(lambda: {"account_id": "x" * (64 * 1024 * 1024)})
moves = on_m1(chdir)


def prints_key(text, task):
    key = os.environ["OPENAI_API_KEY"]
    print("my key is", key)
    print("and again", key, file=sys.stderr, flush=True)
    os.write(2, ("raw fd " + key + "\\n").encode())
    if task["member"].endswith("/m1"):
        raise RuntimeError("no answer")
    return good(text)


async def abusy(text, task):
    if task["member"].endswith("/m1"):
        endless()  # a coroutine that never awaits: it holds its event loop
    await asyncio.sleep(0)
    return good(text)


async def acosts(text, task):
    from evalkit.backends import Completion

    await asyncio.sleep(0.01)
    return Completion(record=good(text), raw="{}", model="mine-1", input_tokens=11, output_tokens=7, usd=0.25, calls=2)
'''


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project folder (the cwd) with a three-member corpus and pipe.py."""
    root = tmp_path / "project"
    root.mkdir()
    make_corpus(root, members=3)
    (root / "pipe.py").write_text(PIPE)
    monkeypatch.chdir(root)
    monkeypatch.setenv("MARK", str(tmp_path / "m1-started"))
    return root


def run_api(root: Path, fn: str, **opts):
    return run(RunOptions(corpus=root / "corpus", backends=specs(f"py=python:pipe.py:{fn}"),
                          out=opts.pop("out", root / "run"), notebooks=False, html=False, **opts))


def assert_contained(result, cause: str, *says: str) -> str:
    """m1 an ERROR of `cause` whose one-line message says each of `says`; m0 and m2 scored; exit 5."""
    outcomes = {o.member: o for o in result.outcomes}
    assert {m: outcomes[m].status for m in ("m0", "m1", "m2")} == {"m0": SCORED, "m1": ERROR, "m2": SCORED}
    assert outcomes["m0"].score == outcomes["m2"].score == 1.0
    data = read_json(result.run_dir / "memos" / "m1" / "py" / "score.json")
    assert data["cause"] == cause, data
    message = data["message"]
    assert "\n" not in message and len(message) <= 300 and "memos/m1" in message, message
    for part in says:
        assert part in message, message
    assert result.exit_code == 5
    return message


def evalkit(root: Path, *args, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=root, env={**os.environ, **(env or {})}, timeout=240, **kw)


def sweep_args(fn: str, *extra) -> list:
    return ["sweep", "--corpus", "corpus", "--backend", f"py=python:pipe.py:{fn}", "--no-notebooks",
            "--workers", "1", "--out", "sweep", *extra]


# --------------------------------------------------------------------------- exits and crashes


def test_sys_exit_0_is_the_member_s_error_not_a_clean_exit_of_evalkit(project):
    proc = evalkit(project, *sweep_args("exit0"))
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "memos/m0 … 100.0% PASS" in proc.stdout and "memos/m2 … 100.0% PASS" in proc.stdout
    assert "pipeline_exception: python:pipe.py:exit0 on memos/m1 called sys.exit(0)" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_sys_exit_3(project):
    assert_contained(run_api(project, "exit3"), PIPELINE_EXCEPTION, "called sys.exit(3)")


def test_os_exit_1_is_the_member_s_error_with_a_message(project):
    proc = evalkit(project, *sweep_args("hard_exit"))
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "memos/m0 … 100.0% PASS" in proc.stdout and "memos/m2 … 100.0% PASS" in proc.stdout
    assert "pipeline_exception: python:pipe.py:hard_exit on memos/m1: the pipeline's process exited with code 1 " \
           "during the call" in proc.stdout


def test_a_raise(project):
    assert_contained(run_api(project, "raises"), PIPELINE_EXCEPTION, "raised RuntimeError: pipeline broke")


def test_a_segfault(project):
    assert_contained(run_api(project, "segfault"), PIPELINE_EXCEPTION, "was killed by SIGSEGV during the call")


def test_a_memory_hog_stops_at_the_memory_cap(project, monkeypatch):
    monkeypatch.setenv("EVALKIT_LIMIT_PIPELINE_MEMORY_BYTES", str(256 * 1024 * 1024))
    assert_contained(run_api(project, "memory"), PIPELINE_EXCEPTION, "ran out of memory",
                     "EVALKIT_LIMIT_PIPELINE_MEMORY_BYTES")


# --------------------------------------------------------------------------- time


def test_an_endless_loop_times_out_under_pipeline_timeout(project):
    started = time.monotonic()
    proc = evalkit(project, *sweep_args("loops", "--pipeline-timeout", "1"))
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "memos/m0 … 100.0% PASS" in proc.stdout and "memos/m2 … 100.0% PASS" in proc.stdout
    assert "timeout: python:pipe.py:loops on memos/m1 did not answer within 1 s" in proc.stdout
    assert time.monotonic() - started < 60


def test_a_busy_coroutine_times_out(project, monkeypatch):
    monkeypatch.setenv("EVALKIT_LIMIT_PIPELINE_TIMEOUT_S", "1")
    started = time.monotonic()
    assert_contained(run_api(project, "abusy"), TIMEOUT, "did not answer within 1 s")
    assert time.monotonic() - started < 20


# --------------------------------------------------------------------------- answers that cannot cross


@pytest.mark.parametrize("fn, says", [
    ("bytes_", "Object of type bytes is not JSON serializable"),
    ("set_", "Object of type set is not JSON serializable"),
    ("date", "Object of type date is not JSON serializable"),
    ("tuple_key", "keys must be str, int, float, bool or None, not tuple"),
    ("cycle", "circular reference"),
    ("nan", "NaN or infinity"),
])
def test_an_answer_that_is_not_json_is_invalid(project, fn, says):
    assert_contained(run_api(project, fn), PIPELINE_RESULT_INVALID, "returned a value that is not JSON", says)


def test_an_oversize_answer_is_refused_without_building_it_in_evalkit(project, monkeypatch):
    monkeypatch.setenv("EVALKIT_LIMIT_ANSWER_BYTES", "100000")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    result = run_api(project, "huge")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert_contained(result, PIPELINE_RESULT_INVALID, "over the answer_bytes limit of 100000 bytes")
    assert grown_mib < 32, f"evalkit grew by {grown_mib:.0f} MiB for a 64 MiB answer it refused"


# --------------------------------------------------------------------------- the pipeline's surroundings


def test_os_chdir_in_a_pipeline_leaves_evalkit_s_cwd_and_run_folder_alone(project):
    result = run_api(project, "moves", out=None)
    assert Path.cwd() == project
    assert result.run_dir.resolve().parent == project / "runs"
    assert {o.member: o.status for o in result.outcomes} == {"m0": SCORED, "m1": SCORED, "m2": SCORED}
    assert result.exit_code == 0


def test_a_key_the_pipeline_prints_reaches_no_console_and_no_file(project, tmp_path):
    proc = evalkit(project, *sweep_args("prints_key"), env={"OPENAI_API_KEY": PLANTED})
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "PLANTED" not in proc.stdout + proc.stderr
    # The output is kept only as the scrubbed end of the error message.
    assert "no answer; its output ended: " in proc.stdout and "[OPENAI_API_KEY redacted]" in proc.stdout
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and b"PLANTED" in p.read_bytes()]
    assert not leaks, leaks


def test_a_coroutine_s_completion_crosses_the_process_with_its_cost(project):
    result = run_api(project, "acosts")
    assert result.exit_code == 0 and {o.status for o in result.outcomes} == {SCORED}
    ran = read_json(result.run_dir / "memos" / "m0" / "py" / "extraction.json")["run"]
    assert (ran["model"], ran["input_tokens"], ran["output_tokens"], ran["usd"], ran["calls"]) == \
        ("mine-1", 11, 7, 0.25, 2)
    assert ran["latency_s"] > 0  # measured in the child when the pipeline gives none
    totals = read_json(result.run_dir / "summary.json")["tasks"]["memos"]["backends"][0]["calls"]
    assert totals["usd"] == 0.75 and totals["input_tokens"] == 33


# --------------------------------------------------------------------------- Ctrl-C


@pytest.mark.parametrize("fn", ["loops", "abusy"])
def test_ctrl_c_stops_a_busy_pipeline_within_2_s(project, tmp_path, fn):
    mark = tmp_path / "m1-started"
    proc = subprocess.Popen([sys.executable, "-m", "evalkit.cli", "run", "--corpus", "corpus", "--backend",
                             f"py=python:pipe.py:{fn}", "--no-html", "--out", "run"], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not mark.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        top = psutil.Process(proc.pid)
        tree = [top, *top.children(recursive=True)]
        assert any("pyworker" in " ".join(p.cmdline()) for p in tree)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert took <= 2.0, f"{took:.1f} s"
    assert "stopped by SIGINT" in stderr and "Traceback" not in stderr
    assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
