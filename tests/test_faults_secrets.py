"""Secrets in every form and from every door stay out: a credential typed into a backend URL (userinfo or a
query token) reaches neither the lock note — even of a run killed with SIGKILL — nor the next run's refusal,
the SIGINT resume line, run.json, the reports or the scoreboard; a key a provider echoes JSON- or
URL-escaped, and a key a task's own scorer raises or prints, reaches no file and neither stdout nor stderr.
The scrubber reads the environment once, and again when it changes.

Each fault drives a real `evalkit` process against the fake OpenAI server (tests/servers/)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import mini_corpus
from corpus_factory import make_corpus
from servers.fixtures import PLANTED_OPENAI, _clean_env  # noqa: F401 - fixture
from servers.openai_fake import OpenAIFake

from evalkit.backends import redact
from evalkit.backends.spec import redacted_command
from evalkit.results.runfolder import LOCK_HOLDER

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "pw-PLANTED-7c1e9a2b4d"  # typed into the URL's userinfo
TOKEN = "tok-PLANTED-5f3d8e1a0b"  # typed into the URL's query


def url(server: OpenAIFake, form: str) -> str:
    host = server.url.split("://", 1)[1]
    return {"userinfo": f"http://user:{PASSWORD}@{host}/v1",
            "query": f"http://{host}/v1?api_key={TOKEN}"}[form]


def decoded(text: str) -> str:
    """`text` with every JSON and URL escape undone, as often as it was applied."""
    for _ in range(4):
        text = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text).replace("\\/", "/")
        text = unquote(text)
    return text


def leaks(root: Path, *streams: str, secrets=(PASSWORD, TOKEN, PLANTED_OPENAI)) -> list[str]:
    """Every file under `root` and every stream holding one of `secrets`, in any escaped form."""
    found = [str(p) for p in root.rglob("*") if p.is_file()
             and any(s in decoded(p.read_text(errors="replace")) for s in secrets)]
    return found + [f"stream {i}" for i, text in enumerate(streams) if any(s in decoded(text) for s in secrets)]


def evalkit(*args, env=None, **kwargs):
    return [sys.executable, "-m", "evalkit.cli", *map(str, args)], dict(cwd=ROOT, env={**os.environ, **(env or {})},
                                                                       text=True, **kwargs)


def run(*args, env=None) -> subprocess.CompletedProcess:
    cmd, kw = evalkit(*args, env=env)
    return subprocess.run(cmd, capture_output=True, timeout=300, **kw)


@contextmanager
def live(*args):
    """`evalkit ARGS` in a session of its own, always reaped (SIGKILL to its group)."""
    cmd, kw = evalkit(*args)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kw)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)


def wait_for(condition, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def slow():
    with OpenAIFake(latency=60) as server:  # every call hangs: the run is caught mid-extraction
        yield server


# -- a credential typed into a backend URL ------------------------------------------------------------------
@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_url_credentials_stay_out_of_the_lock_note_the_refusal_and_survive_no_sigkill(form, slow, tmp_path):
    corpus, out = make_corpus(tmp_path, members=1), tmp_path / "run"
    backend = f"x=openai:url={url(slow, form)},model=m,max_retries=0"
    note = out / LOCK_HOLDER
    with live("run", "--corpus", corpus, "--backend", backend, "--out", out) as proc:
        wait_for(lambda: slow.count >= 1, proc)  # the call is in flight: the run holds the folder
        held = json.loads(note.read_text())
        assert "127.0.0.1" in held["command"] and "x=openai:url=http://127.0.0.1" in held["command"]
        refused = run("run", "--corpus", corpus, "--backend", "fake", "--out", out)
        assert refused.returncode == 2 and "is being written by a live run (pid" in refused.stderr, refused.stderr
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert note.is_file()  # SIGKILL leaves the note behind: it must hold nothing worth stealing
    assert leaks(tmp_path, refused.stdout, refused.stderr) == []


def test_the_sigint_resume_line_hides_url_credentials_and_says_so(slow, tmp_path):
    corpus, out = make_corpus(tmp_path, members=1), tmp_path / "run"
    backend = f"x=openai:url={url(slow, 'userinfo')}?token={TOKEN},model=m,max_retries=0"
    with live("run", "--corpus", corpus, "--backend", backend, "--out", out) as proc:
        wait_for(lambda: slow.count >= 1, proc)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    resume = [line for line in stderr.splitlines() if "to finish the rest" in line]
    assert resume and f"--out {out}" in resume[0] and "url=http://127.0.0.1" in resume[0], stderr
    assert "credentials in the command are hidden" in stderr
    assert leaks(tmp_path, stdout, stderr) == []


def test_a_finished_run_keeps_url_credentials_out_of_run_json_reports_and_the_scoreboard(tmp_path):
    corpus, out, board = make_corpus(tmp_path, members=2), tmp_path / "runs" / "r1", tmp_path / "board.json"
    with OpenAIFake() as server:
        backend = f"x=openai:url={url(server, 'userinfo')},model=m,max_retries=0"
        # a proxy's error that echoes the URL it was called with: the typed credentials are secrets too
        server.script.append({"status": 502, "message": f"proxy refused {url(server, 'userinfo')}"})
        proc = run("run", "--corpus", corpus, "--backend", backend, "--record", f"x={tmp_path / 'x.jsonl'}",
                   "--max-concurrency", "1", "--out", out, "--update-scoreboard", "--board", board)
        assert server.count == 2, proc.stderr  # the real URL was called
    assert proc.returncode == 5, proc.stderr  # the member the proxy refused is an error
    assert "[backend URL credential redacted]" in (tmp_path / "x.failures.jsonl").read_text()
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["backends"][0]["spec"].startswith(f"openai:url={server.url}/v1"), run_json["backends"]
    names = {p.name for p in tmp_path.rglob("*")}
    assert {"index.html", "report.html", "board.json", "index.jsonl", "x.jsonl", "run.json"} <= names, names
    assert leaks(tmp_path, proc.stdout, proc.stderr) == []


# -- a key a provider echoes escaped -------------------------------------------------------------------------
def escaped_forms(key: str) -> list[str]:
    return [key.replace("-", "\\u002d"),  # JSON-escaped (as the body's text, once decoded, still holds it)
            key.replace("-", "\\u002D", 1),  # partly, upper-case hex
            key.replace("-", "%2D"),  # URL-escaped
            key.replace("-", "%252D"),  # URL-escaped twice
            json.dumps(key.replace("-", "\\u002d"))[1:-1]]  # JSON-escaped twice


def test_a_key_echoed_json_or_url_escaped_in_an_error_body_reaches_no_file_or_stream(tmp_path):
    corpus, out = make_corpus(tmp_path, members=2), tmp_path / "runs" / "r1"
    with OpenAIFake() as server:
        server.script += [
            {"status": 500, "message": "rejected key " + " / ".join(escaped_forms(PLANTED_OPENAI))},
            {"raw": "<html>bad gateway for " + " ".join(escaped_forms(PLANTED_OPENAI)) + "</html>"},
        ]
        proc = run("run", "--corpus", corpus, "--backend", f"x=openai:url={server.url}/v1,model=m,max_retries=0",
                   "--record", f"x={tmp_path / 'x.jsonl'}", "--max-concurrency", "1", "--out", out,
                   "--update-scoreboard", "--board", tmp_path / "board.json",
                   env={"OPENAI_API_KEY": PLANTED_OPENAI})
        assert server.count == 2 and not server.script, proc.stderr
    assert proc.returncode == 5, proc.stderr  # both members errored
    sidecar = [json.loads(line) for line in (tmp_path / "x.failures.jsonl").read_text().splitlines()]
    assert len(sidecar) == 2 and all("[OPENAI_API_KEY redacted]" in json.dumps(f) for f in sidecar), sidecar
    assert leaks(tmp_path, proc.stdout, proc.stderr) == []


def test_the_scrubber_finds_a_secret_in_every_escaped_form_and_nothing_else():
    env = {"OPENAI_API_KEY": PLANTED_OPENAI}
    for form in escaped_forms(PLANTED_OPENAI) + [PLANTED_OPENAI.replace("/", "\\/")]:
        assert redact.scrub(f"said {form}.", env=env) == "said [OPENAI_API_KEY redacted].", form
    near = PLANTED_OPENAI.replace("-", "\\u002e")  # another character escaped: not the key
    assert redact.scrub(f"said {near} at 50%", env=env) == f"said {near} at 50%"


# -- a key a task's scorer raises or prints ------------------------------------------------------------------
RAISING = '''
def score(extraction, truth, ctx):
    import os
    raise RuntimeError("the scorer saw " + os.environ["OPENAI_API_KEY"])
'''
PRINTING = '''
_score = score


def score(extraction, truth, ctx):
    import os, sys
    key = os.environ["OPENAI_API_KEY"]
    print("the scorer saw", key)
    print(f"escaped {key.replace('-', '%2D')}", file=sys.stderr)
    return _score(extraction, truth, ctx)
'''


@pytest.mark.parametrize("notebooks", [True, False], ids=["notebooks", "in-process"])
@pytest.mark.parametrize("scorer", ["raises", "prints"])
def test_a_key_a_scorer_raises_or_prints_reaches_no_file_or_stream(scorer, notebooks, tmp_path):
    corpus = mini_corpus(tmp_path / "corpus")
    path = corpus / "mini" / "scorer.py"
    path.write_text(path.read_text() + (RAISING if scorer == "raises" else PRINTING))
    out = tmp_path / "runs" / "r1"
    # score.ipynb scores in a kernel; a sweep without notebooks scores in its member's worker process
    how = ["run", "--workers", "1"] if notebooks else ["sweep", "--no-notebooks", "--workers", "1"]
    proc = run(*how, "--corpus", corpus, "--backend", "fake", "--only", "plain", "--out", out,
               "--update-scoreboard", "--board", tmp_path / "board.json", env={"OPENAI_API_KEY": PLANTED_OPENAI})
    home = next(out.rglob("plain/fake"))
    score = json.loads((home / "score.json").read_text())
    if scorer == "raises":
        assert proc.returncode == 5 and score["cause"] == "scoring_crash", (proc.stderr, score)
        assert "the scorer saw [OPENAI_API_KEY redacted]" in json.dumps(score)
    else:
        assert score["status"] == "scored", (proc.stderr, score)
        shown = (home / "score.ipynb").read_text() if notebooks else proc.stdout
        assert "the scorer saw [OPENAI_API_KEY redacted]" in shown  # it printed, and was scrubbed
    assert leaks(tmp_path, proc.stdout, proc.stderr) == []


# -- the environment, read once ------------------------------------------------------------------------------
def test_secrets_are_collected_once_and_again_when_the_environment_changes(monkeypatch):
    calls = []
    collect = redact._collect
    monkeypatch.setattr(redact, "_collect", lambda items: calls.append(1) or collect(items))
    monkeypatch.setattr(redact, "_cache", None)
    text = "a new-secret-0123456789abcdef b"
    assert redact.scrub(text) == text
    assert redact.scrub(text) == text and redact.secrets() == redact.secrets()
    assert len(calls) == 1  # unchanged environment: read once
    monkeypatch.setenv("NEW_SERVICE_TOKEN", "new-secret-0123456789abcdef")
    assert redact.scrub(text) == "a [NEW_SERVICE_TOKEN redacted] b"
    monkeypatch.setenv("NEW_SERVICE_TOKEN", "new-secret-0123456789abcdef-rotated")
    assert redact.scrub(text) == text  # a changed value is seen too
    monkeypatch.delenv("NEW_SERVICE_TOKEN")
    assert redact.secrets() == [s for s in redact.secrets() if s[0] != "NEW_SERVICE_TOKEN"]
    assert len(calls) == 4


def test_a_backend_spec_s_url_credentials_are_secrets_wherever_echoed():
    from evalkit.backends import BackendSpec

    spec = BackendSpec.parse(f"x=openai:url=https://user:{PASSWORD}@h/v1?api_key={TOKEN}")
    assert spec.options["url"].endswith(TOKEN)  # the call still gets the real URL
    assert str(spec.redacted()) == "x=openai:url=https://h/v1"
    echoed = f"Connection refused: https://user:{PASSWORD}@h/v1?api_key={TOKEN.replace('-', '%2D')}"
    assert redact.scrub(echoed) == ("Connection refused: https://user:[backend URL credential redacted]@h/v1"
                                    "?api_key=[backend URL api_key redacted]")
    assert redacted_command(["run", "--backend", str(spec)]) == "evalkit run --backend x=openai:url=https://h/v1"
