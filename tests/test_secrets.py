"""Secrets never leave: a key that a provider echoes back — in its error body, an unreadable body, the
answer text, the decoded record (values and names), the reported model id, the finish reason, a response
header, a cut-off answer and its retry — reaches no artefact of a real `evalkit run` (cassette, failure
sidecar, run folder with notebooks and HTML, scoreboard, runs/index.jsonl) and neither stdout nor stderr.
The same holds for a `python:` pipeline and for a replayed cassette that holds a key."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from servers.anthropic_fake import AnthropicFake
from servers.fixtures import PLANTED_ANTHROPIC, PLANTED_OPENAI, _clean_env, req  # noqa: F401 - fixtures
from servers.openai_fake import OpenAIFake

from evalkit.backends.base import Completion
from evalkit.backends.cassette import ReplayBackend, make_record
from evalkit.backends.pyfunc import PythonBackend
from evalkit.backends.redact import scrub

ROOT = Path(__file__).resolve().parent.parent
MEMBERS = ("clean-single-term", "distractor-prose", "fixed-period-renewal", "foreign-id")  # one script step each


def plants(provider: str, key: str) -> list[dict]:
    """One scripted answer per member (in member order), the key in every field the server controls."""
    echo = {"x-echo": key, "x-request-id": f"req-{key}"}
    if provider == "openai":
        answer = {"content": json.dumps({"comment": f"the key is {key}", key: "a field name"}), "model": key,
                  "finish": key, "headers": echo}
        truncated = {"content": f'{{"comment": "cut off at {key}', "finish": "length", "model": key, "headers": echo}
    else:
        answer = {"input": {"comment": f"the key is {key}", key: "a field name"}, "model": key, "stop": key,
                  "headers": echo}
        truncated = {"truncate": True, "input": {"comment": key}, "model": key, "headers": echo}
    return [
        {"status": 500, "message": f"upstream rejected key {key}", "headers": echo},  # an error body
        {"raw": f"<html>502 bad gateway for {key}</html>", "headers": echo},  # an unreadable body
        answer,  # the answer, its record, model id and finish reason
        truncated, {**answer, "finish": "stop", "stop": "tool_use"},  # a cut-off answer, then its retry
    ]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_key_echoed_in_every_field_reaches_no_artefact(provider, tmp_path):
    key = PLANTED_OPENAI if provider == "openai" else PLANTED_ANTHROPIC
    server = (OpenAIFake() if provider == "openai" else AnthropicFake()).start()
    try:
        server.script += plants(provider, key)
        env = {**os.environ}
        if provider == "openai":
            env["OPENAI_API_KEY"] = key
            spec = f"live=openai:url={server.url}/v1,model=gpt-4o-mini,max_retries=0"
        else:
            env.update(ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL=server.url)
            spec = "live=anthropic:max_retries=0"
        cassette, board, run = tmp_path / "live.jsonl", tmp_path / "board.json", tmp_path / "runs" / "r1"
        only = [a for m in MEMBERS for a in ("--only", m)]
        proc = subprocess.run(
            [sys.executable, "-m", "evalkit.cli", "run", "--backend", spec, "--record", f"live={cassette}",
             "--task", "deal-memos", *only, "--max-concurrency", "1", "--workers", "2", "--out", run,
             "--update-scoreboard", "--board", board],
            capture_output=True, text=True, cwd=ROOT, env=env)
        assert server.count == 5 and not server.script, proc.stdout + proc.stderr  # every plant was served
    finally:
        server.stop()

    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"live.jsonl", "live.failures.jsonl", "board.json", "index.jsonl", "extraction.json", "score.json",
            "extract.ipynb", "extract.html", "index.html"} <= names, sorted(names)
    leaks = [str(p) for p in files if key in p.read_text(errors="replace")]
    leaks += [name for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr)) if key in text]
    assert leaks == [], leaks
    # The key did reach evalkit, in each field, and was scrubbed there (not merely never sent).
    marker = f"[{'OPENAI' if provider == 'openai' else 'ANTHROPIC'}_API_KEY redacted]"
    answered = json.loads((run / "deal-memos" / MEMBERS[2] / "live" / "extraction.json").read_text())
    assert answered["run"]["model"] == marker and answered["run"]["finish_reason"] == marker
    assert answered["record"] == {"comment": f"the key is {marker}", marker: "a field name"}
    sidecar = [json.loads(line) for line in (tmp_path / "live.failures.jsonl").read_text().splitlines()]
    assert {f["classification"] for f in sidecar} == {"http_error", "not_an_answer"}
    # the truncation recovered on its retry: kept apart from the failures, scrubbed the same
    recovered = [json.loads(line) for line in (tmp_path / "live.recovered.jsonl").read_text().splitlines()]
    assert {f["classification"] for f in recovered} == {"truncation"}
    assert all(marker in f["raw_body"] for f in sidecar + recovered)
    assert marker in (run / "deal-memos" / MEMBERS[0] / "live" / "extraction.json").read_text()  # the error


def test_a_python_pipeline_s_answer_and_exception_are_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI)
    pipe = tmp_path / "pipe.py"
    pipe.write_text(
        "import os\n"
        "from evalkit.backends import Completion\n"
        "def fails(doc, task):\n"
        "    pad = 'x' * int(os.environ['PAD'])\n"
        "    raise RuntimeError('provider said: ' + pad + ' ' + os.environ['OPENAI_API_KEY'])\n"
        "def answers(doc, task):\n"
        "    key = os.environ['OPENAI_API_KEY']\n"
        "    return Completion(record={'comment': key}, raw='{\"comment\": \"' + key + '\"}', model=key)\n")
    # The error message is cut to one line of 300 characters: the key starts just before the cut.
    monkeypatch.setenv("PAD", str(285 - len(f"python:{pipe}:fails on demo/m1 raised RuntimeError: provider said: ")))
    failed = asyncio.run(PythonBackend("p", f"{pipe}:fails").complete(req()))
    assert failed.error and len(failed.error) <= 300 and "PLANTED" not in failed.error, failed.error
    answered = asyncio.run(PythonBackend("p", f"{pipe}:answers").complete(req()))
    text = json.dumps(answered.to_json())
    assert "PLANTED" not in text and answered.model == "[OPENAI_API_KEY redacted]", text


def test_replaying_a_cassette_that_holds_a_key_scrubs_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_ANTHROPIC)
    leaked = Completion(record={"comment": PLANTED_ANTHROPIC}, raw=json.dumps({"comment": PLANTED_ANTHROPIC}),
                        model=PLANTED_ANTHROPIC, finish_reason=PLANTED_ANTHROPIC)
    cassette = tmp_path / "old.jsonl"  # as recorded by a version (or a tool) that did not scrub
    cassette.write_text(json.dumps(make_record(req(), "claude-x", "anthropic", leaked)) + "\n")
    c = asyncio.run(ReplayBackend("old", cassette).complete(req()))
    assert PLANTED_ANTHROPIC not in json.dumps(c.to_json())
    assert c.record == {"comment": "[ANTHROPIC_API_KEY redacted]"} and c.model == "[ANTHROPIC_API_KEY redacted]"


def test_the_scrubber_s_rules():
    env = {"OPENAI_API_KEY": "sk-proj-abcdefgh1234", "MISTRAL_API_KEY": "mk-abcdEFGH12345678",
           "SORT_KEY": "timestamp", "NOTE_TOKEN": "two words, not a credential"}
    text = "used sk-proj-abcdefgh1234 and mk-abcdEFGH12345678 at the timestamp; two words, not a credential"
    assert scrub(text, env=env) == ("used [OPENAI_API_KEY redacted] and [MISTRAL_API_KEY redacted] at the "
                                    "timestamp; two words, not a credential")
    assert scrub({"k sk-proj-abcdefgh1234": ["sk-proj-abcdefgh1234"]}, env=env) == \
        {"k [OPENAI_API_KEY redacted]": ["[OPENAI_API_KEY redacted]"]}
    other = "blocked key sk-live-0123456789abcdef"  # a key-shaped string that is not ours
    assert scrub(other, env={}) == other  # left alone in an answer...
    assert scrub(other, key_shaped=True, env={}) == "blocked key sk-live-0…[redacted]"  # ...cut anywhere else
