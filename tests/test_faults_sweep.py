"""A sweep SIGKILLed at a random point leaves no worker behind, and its resumption pays for no answer twice.

A fake OpenAI-compatible server (in this process) answers each member's request after a short delay and
counts the requests it answered. `evalkit sweep` (a live ``openai:`` backend, as a user runs it) runs in a
session of its own; the test SIGKILLs the sweep process alone, at a seeded random moment, as an OOM killer
or a closed laptop would. Within a few seconds no process of that session may be left (workers, their
children, the resource tracker); the same command then finishes the sweep. Over both runs each member's
request must have been answered exactly once, and the scores must be an uninterrupted sweep's.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from corpus_factory import make_corpus
from evalkit import runfolder
from servers.openai_fake import OpenAIFake

ROOT = Path(__file__).resolve().parent.parent
TRIALS = int(os.environ.get("EVALKIT_TEST_KILL_TRIALS", "20"))
MEMBERS = 4
LATENCY_S = 0.15  # the server's answer delay: long enough for kills to land on calls in flight
GONE_WITHIN_S = 3.0  # the brief: workers leave within ~2 s of their parent (plus a loaded machine's slack)


def answer(body: dict) -> dict:
    """Right for every member but m1, whose rate is off: the scores are not all equal."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    account, rate = re.search(r"(ACC-\d+) pays a rate of ([\d.]+?)\.?\n", user).groups()
    return {"account_id": account, "rate": float(rate) + (0.25 if account == "ACC-001" else 0.0)}


def answered(server: OpenAIFake) -> dict[str, int]:
    """How many times each member's request was answered (the member by its account id)."""
    counts: dict[str, int] = {}
    for body in server.completions():
        account = answer(body)["account_id"]
        counts[account] = counts.get(account, 0) + 1
    return counts


def sweep_cmd(corpus: Path, server: OpenAIFake, out: Path) -> list[str]:
    return [sys.executable, "-m", "evalkit.cli", "sweep", "--corpus", str(corpus), "--no-notebooks",
            "--workers", "2", "--out", str(out), "--backend",
            f"live=openai:url={server.url}/v1,model=tiny,max_retries=0,timeout=10"]


def scores(out: Path) -> dict[str, list]:
    members = runfolder.read_sweep_json(out)["members"]
    return {k: sorted((o["backend"], o["status"], o["score"]) for o in m["outcomes"]) for k, m in members.items()}


def session(sid: int) -> list[str]:
    """The live processes of session `sid` (a killed sweep's workers keep its session, whoever adopts them)."""
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if os.getsid(p.pid) == sid and p.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {' '.join(p.info['cmdline'] or [])[:120]}")
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return left


def wait_gone(sid: int, seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := session(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.fixture
def server():
    with OpenAIFake(latency=LATENCY_S, answer=answer) as s:
        yield s


def test_a_sigkilled_sweep_leaves_no_worker_and_its_resumption_pays_for_no_answer_twice(tmp_path, server):
    corpus = make_corpus(tmp_path, members=MEMBERS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def sweep(out: Path) -> subprocess.CompletedProcess:
        return subprocess.run(sweep_cmd(corpus, server, out), capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=60)

    started = time.monotonic()
    whole = sweep(tmp_path / "whole")  # the uninterrupted sweep: its scores
    span = time.monotonic() - started
    assert whole.returncode == 0, whole.stderr
    assert answered(server) == {f"ACC-{i:03d}": 1 for i in range(MEMBERS)}
    expected = scores(tmp_path / "whole")
    assert len(expected) == MEMBERS and len({s[0][2] for s in expected.values()}) == 2

    rng = random.Random(23)
    landed = {"before any answer": 0, "after some": 0, "after all": 0}
    for trial in range(TRIALS):
        with server.lock:
            server.requests.clear()
        out = tmp_path / f"trial{trial}"
        proc = subprocess.Popen(sweep_cmd(corpus, server, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, cwd=tmp_path, env=env, start_new_session=True)
        begun = time.monotonic()
        try:  # a moment from just before the first request reaches the server to after the last answer
            while not server.count and proc.poll() is None and time.monotonic() - begun < 60:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, LATENCY_S * (MEMBERS / 2 + 1)))
            proc.send_signal(signal.SIGKILL)  # the sweep alone: its workers are not told
            proc.wait(10)
            left = wait_gone(proc.pid, GONE_WITHIN_S)
            assert not left, f"trial {trial}: {GONE_WITHIN_S} s after the SIGKILL these still run: {left}"
        finally:
            with_group = session(proc.pid)
            if with_group:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
        paid = sum(answered(server).values())
        landed["before any answer" if paid == 0 else "after all" if paid == MEMBERS else "after some"] += 1

        resumed = sweep(out)
        assert resumed.returncode == 0, f"trial {trial}: {resumed.stderr}"
        counts = answered(server)
        assert counts == {f"ACC-{i:03d}": 1 for i in range(MEMBERS)}, f"trial {trial}: answers per member {counts}"
        assert scores(out) == expected, f"trial {trial}"
    print(json.dumps({"span_s": round(span, 2), "kills": landed}))
    assert landed["after some"] > 0  # the kills did land between answers, where paying twice could happen
