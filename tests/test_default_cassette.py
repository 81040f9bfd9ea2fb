"""The committed default cassette: it replays the whole bundled corpus, and it stores no
document whose licence keeps it out of the repo (pointer members' sources)."""

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.backends.base import Completion, Request
from evalkit.backends.cassette import RecordingBackend, load_records
from evalkit.backends.spec import DEFAULT_CASSETTE
from evalkit.corpus.sources import SourceMissing, check_integrity, read_document
from evalkit.corpus.tasks import DEFAULT_CORPUS, load_tasks

ROOT = Path(__file__).resolve().parent.parent
SOURCES = Path(os.environ.get("EVALKIT_SOURCES", ROOT.parent / "shared" / "data"))


# Tasks added after the default cassette was last recorded (`make record-cassette` covers them): the default
# run lists their members as not covered and scores the rest.
NOT_RECORDED = {"invoices"}


def test_default_run_replays_every_member_with_zero_calls():
    proc = subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "--dry-run", "--sources", str(SOURCES)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gemma-3-270m: replay" in proc.stdout and "total: 0 provider calls" in proc.stdout
    tasks = load_tasks(DEFAULT_CORPUS)
    # the default model reads text only: a task whose pages are sent as images (deal-memos-scanned) is not covered
    # by its cassette, nor is a task added since it was recorded; both say so (their members are not scored)
    def recorded(t):
        return t.id not in NOT_RECORDED and t.spec.settings.input == "text"

    members = [m for t in tasks if recorded(t) for m in t.members()]
    unrecorded = sorted(m.key for t in tasks if not recorded(t) for m in t.members())
    n = re.search(r"— (\d+) requests, (\d+) replayed(?:, (\d+) not covered)?", proc.stdout)
    assert n and int(n.group(1)) == int(n.group(2)) + len(unrecorded) and int(n.group(3) or 0) == len(unrecorded)
    if SOURCES.is_dir():
        assert int(n.group(2)) == len(members) == len(load_records(DEFAULT_CASSETTE))


def _windows(text: str, size: int = 120, step: int = 60):
    flat = " ".join(text.split())
    return {flat[i:i + size] for i in range(0, max(1, len(flat) - size), step)}


def test_no_pointer_document_is_stored_in_any_committed_cassette():
    stored = " ".join(" ".join(json.dumps(r["request"], ensure_ascii=False).split()).replace("\\n", " ")
                      for path in sorted(DEFAULT_CASSETTE.parent.glob("*.jsonl")) if ".failures" not in path.name
                      for r in load_records(path))
    stored = " ".join(stored.split())
    checked = 0
    for task in load_tasks(DEFAULT_CORPUS):
        for m in task.members():
            if not m.manifest.source.is_pointer:
                continue
            try:
                text = read_document(check_integrity(m, SOURCES)).text
            except SourceMissing:
                pytest.skip(f"sources not found at {SOURCES}")
            assert not any(w in stored for w in _windows(text)), m.key
            checked += 1
    assert checked >= 30
    assert stored.count("[document withheld:") >= checked


def test_recording_withholds_the_document_but_keys_the_full_prompt(tmp_path):
    class Echo:
        label, spec, model = "echo", "echo", "echo-1"

        async def complete(self, request):
            return Completion(record={"ok": 1}, raw='{"ok": 1}', model="echo-1")

        async def aclose(self):
            return None

    doc = "SECRET-LICENSED-TEXT " * 20
    req = Request(member="t/m", call_type="extract", system="s", user=f"Document:\n{doc}\nGo.", schema={},
                  withheld=doc)
    other = Request(member="t/m", call_type="extract", system="s", user="Document:\nother\nGo.", schema={},
                    withheld="other")
    path = tmp_path / "c.jsonl"
    backend = RecordingBackend(Echo(), path, provider="echo")
    asyncio.run(backend.complete(req))
    asyncio.run(backend.complete(other))
    text = path.read_text()
    assert "SECRET-LICENSED-TEXT" not in text and "[document withheld:" in text
    keys = [r["key"] for r in map(json.loads, text.splitlines()) if "key" in r]  # not the format header
    assert len(set(keys)) == 2  # the key still covers the document itself
