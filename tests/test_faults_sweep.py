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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
from corpus_factory import make_corpus
from servers.openai_fake import OpenAIFake

from evalkit.results import runfolder

ROOT = Path(__file__).resolve().parent.parent
TRIALS = int(os.environ.get("EVALKIT_TEST_KILL_TRIALS", "20"))
MEMBERS = 4
LATENCY_S = 0.15  # the server's answer delay: long enough for kills to land on calls in flight
# A worker leaves within ~2 s of its parent (`interrupt.ORPHAN_GRACE_S` at most; measured: 1.1 s at most over 20
# trials), but one still starting (importing the command's module, before its initializer) only once it gets
# there: seconds on a loaded two-core machine.
GONE_WITHIN_S = 6.0


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
            f"live=openai:url={server.url}/v1,model=tiny,max_retries=0,timeout=10",
            # one call in flight: the calls follow each other, so kills land between answers too (with more, all
            # four are in flight at once and each kill lands while they are)
            "--max-concurrency", "1"]


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


def kill_and_resume(corpus: Path, out: Path, env: dict[str, str], seed: int) -> dict[str, object]:
    """One trial with a server of its own: SIGKILL the sweep `seed`'s moment after its first request arrives,
    wait for its session to empty, run it again; what was paid, how fast the orphans left, the scores."""
    rng = random.Random(seed)
    with OpenAIFake(latency=LATENCY_S, answer=answer) as server:
        proc = subprocess.Popen(sweep_cmd(corpus, server, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, cwd=out.parent, env=env, start_new_session=True)
        begun = time.monotonic()
        try:  # a moment from just before the first request reaches the server to after the last answer
            while not server.count and proc.poll() is None and time.monotonic() - begun < 60:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, LATENCY_S * (MEMBERS / 2 + 1)))
            proc.send_signal(signal.SIGKILL)  # the sweep alone: its workers are not told
            proc.wait(10)
            killed = time.monotonic()
            left = wait_gone(proc.pid, GONE_WITHIN_S)
            gone_s = time.monotonic() - killed
        finally:
            if session(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
        paid = sum(answered(server).values())
        resumed = subprocess.run(sweep_cmd(corpus, server, out), capture_output=True, text=True, cwd=out.parent,
                                 env=env, timeout=120)
        return {"left": left, "gone_s": gone_s, "paid_before": paid, "resumed": resumed, "answered": answered(server)}


def test_a_sigkilled_sweep_leaves_no_worker_and_its_resumption_pays_for_no_answer_twice(tmp_path):
    corpus = make_corpus(tmp_path, members=MEMBERS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    once = {f"ACC-{i:03d}": 1 for i in range(MEMBERS)}
    with OpenAIFake(latency=LATENCY_S, answer=answer) as server:  # the uninterrupted sweep: its scores
        whole = subprocess.run(sweep_cmd(corpus, server, tmp_path / "whole"), capture_output=True, text=True,
                               cwd=tmp_path, env=env, timeout=120)
        assert whole.returncode == 0, whole.stderr
        assert answered(server) == once
    expected = scores(tmp_path / "whole")
    assert len(expected) == MEMBERS and len({s[0][2] for s in expected.values()}) == 2

    with ThreadPoolExecutor(2) as pool:  # two trials at a time: each is mostly process start-up, on one core
        trials = list(pool.map(lambda k: kill_and_resume(corpus, tmp_path / f"trial{k}", env, seed=23 + k),
                               range(TRIALS)))
    for k, t in enumerate(trials):
        assert not t["left"], f"trial {k}: {t['gone_s']:.1f} s after the SIGKILL these still run: {t['left']}"
        assert t["resumed"].returncode == 0, f"trial {k}: {t['resumed'].stderr}"
        assert t["answered"] == once, f"trial {k}: answers per member {t['answered']}"
        assert scores(tmp_path / f"trial{k}") == expected, f"trial {k}"
    paid = [t["paid_before"] for t in trials]
    print(json.dumps({"paid_before_resume": paid, "gone_s_max": round(max(t["gone_s"] for t in trials), 2)}))
    assert any(0 < n < MEMBERS for n in paid)  # kills did land between answers, where paying twice could happen


def test_a_member_run_again_reuses_its_paid_answer_and_nothing_else(tmp_path):
    """What a resumed sweep's worker does (`sweep._member_job`): the live backend's extraction.json is kept and
    reused (no second call); a free backend's (fake: it answers from the truth, which may have changed) and every
    other file of the earlier run are not; without `reuse` (a recorded member under --force) the call is made."""
    from corpus_factory import specs

    from evalkit.board.sweep import _member_job
    from evalkit.stages.runner import RunOptions

    corpus = make_corpus(tmp_path, members=1)
    out = runfolder.sweep_member_dir(tmp_path / "sw", "memos", "m0")
    with OpenAIFake(answer=answer) as server:
        opts = RunOptions(corpus=corpus, backends=specs(f"live=openai:url={server.url}/v1,model=tiny,max_retries=0",
                                                        "free=fake"),
                          tasks=["memos"], only=["m0"], out=out, workers=1, notebooks=False, in_sweep=True)
        first = _member_job(opts, True)
        live, free = (runfolder.member_dir(out, "memos", "m0", label) for label in ("live", "free"))
        stale = out / "memos" / "m0" / "live" / ".extraction.json.partial"
        stale.write_text("left by a killed writer")
        for home in (live, free):  # marked, to tell a kept file from a new one
            json_file = home / runfolder.EXTRACTION
            json_file.write_text(json.dumps({**json.loads(json_file.read_text()), "kept": True}))
        again = _member_job(opts, True)
        assert server.count == 1  # the answer on disk was reused, not bought again
        assert [json.loads((home / runfolder.EXTRACTION).read_text()).get("kept") for home in (live, free)] == \
            [True, None]
        assert not stale.exists()
        assert again == first and [o["status"] for o in first["outcomes"]] == ["scored", "scored"]
        _member_job(opts, False)
        assert server.count == 2
