"""`evalkit run` against a local OpenAI-compatible server, end to end: a planted API
key reaches no artefact (cassette, sidecar, notebooks, HTML, logs); replay and
--dry-run make zero calls; a one-word prompt edit is a CassetteMiss naming the member."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from servers.fixtures import PLANTED_OPENAI, _clean_env, oai  # noqa: F401 - fixtures

from evalkit.corpus.tasks import DEFAULT_CORPUS

ROOT = Path(__file__).resolve().parent.parent
ONLY = ["--task", "deal-memos", "--only", "clean-single-term", "--only", "hostile-markup"]


def evalkit(*args, env=None):
    return subprocess.run([sys.executable, "-m", "evalkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env)


def test_live_record_replay_and_no_secret_anywhere(oai, tmp_path, monkeypatch):
    import os

    env = {**os.environ, "OPENAI_API_KEY": PLANTED_OPENAI}
    # The first call is refused with the key echoed back (as real providers do): it must not leak either.
    oai.script += [{"status": 401, "message": f"Incorrect API key provided: {PLANTED_OPENAI}"}]
    cassette = tmp_path / "live.jsonl"
    spec = f"live=openai:url={oai.url}/v1,model=fake-model,max_retries=0"
    rec = evalkit("run", "--backend", spec, "--record", f"live={cassette}", "--max-concurrency", "1", *ONLY,
                  "--out", tmp_path / "rec", env=env)
    assert rec.returncode in (1, 5), rec.stdout + rec.stderr  # the echo answer fails its verdicts
    calls = oai.count
    assert calls == 2  # one refused, one answered
    assert len(cassette.read_text().splitlines()) == 2  # the format header and one record: the HTTP error made none
    failures = [json.loads(line) for line in cassette.with_name("live.failures.jsonl").read_text().splitlines()]
    assert [f["classification"] for f in failures] == ["http_error"]

    artefacts = [cassette, cassette.with_name("live.failures.jsonl"), *(tmp_path / "rec").rglob("*")]
    texts = [rec.stdout, rec.stderr] + [p.read_text(errors="replace") for p in artefacts if p.is_file()]
    assert any(p.suffix == ".html" for p in artefacts) and any(p.suffix == ".ipynb" for p in artefacts)
    assert not any(PLANTED_OPENAI in t or "PLANTED" in t for t in texts)

    # Resume: the answered member replays; only the refused one is called again.
    rec2 = evalkit("run", "--backend", spec, "--record", f"live={cassette}", *ONLY, "--out", tmp_path / "rec2",
                   "--no-html", env=env)
    assert rec2.returncode == 1, rec2.stdout + rec2.stderr
    assert oai.count == calls + 1
    calls = oai.count

    replay_spec = f"live=cassette:path={cassette}"
    dry = evalkit("run", "--backend", replay_spec, *ONLY, "--dry-run")
    assert dry.returncode == 0 and "0 provider calls" in dry.stdout, dry.stdout + dry.stderr
    replay = evalkit("run", "--backend", replay_spec, *ONLY, "--out", tmp_path / "replay", "--no-html")
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert oai.count == calls  # replay and dry-run: zero calls
    recorded = json.loads((tmp_path / "rec2/deal-memos/hostile-markup/live/score.json").read_text())
    replayed = json.loads((tmp_path / "replay/deal-memos/hostile-markup/live/score.json").read_text())
    assert recorded["metrics"] == replayed["metrics"] and recorded["items"] == replayed["items"]

    # One word of the prompt template edited: the replay stops at once, naming the member.
    corpus = tmp_path / "corpus"
    shutil.copytree(DEFAULT_CORPUS / "deal-memos", corpus / "deal-memos")
    task = corpus / "deal-memos" / "task.yaml"
    text = task.read_text()
    word = next(w for w in ("Extract", "extract", "Return", "fields") if w in text)
    task.write_text(text.replace(word, word + "s", 1))
    miss = evalkit("run", "--backend", replay_spec, "--corpus", corpus, *ONLY, "--out", tmp_path / "miss",
                   "--strict-replay")  # without it: every member `not covered`, exit 6 too (test_guards.py)
    assert miss.returncode == 6, miss.stdout + miss.stderr
    assert "deal-memos/clean-single-term" in miss.stderr or "deal-memos/hostile-markup" in miss.stderr
    assert "Traceback" not in miss.stderr
    assert oai.count == calls
