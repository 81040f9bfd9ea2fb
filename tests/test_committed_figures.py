"""The committed figures are reproduced by the current code: the default cassette replays to the standing
scoreboard's metrics; corpus/band.json is re-measured from the committed 5-sample cassette (`make
record-samples`); the two temperature-0 recordings it was once measured from hold byte-identical answers, so
`evalkit band` refuses them (issue 25.2). A change to a scorer, a statistic or the seed that moves any of them
fails here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from corpus_factory import cli

from evalkit.corpus.tasks import DEFAULT_CORPUS
from evalkit.results.runfolder import scan

ROOT = DEFAULT_CORPUS.parent
SOURCES = Path(os.environ.get("EVALKIT_SOURCES", ROOT.parent / "shared" / "data"))
LABEL = "gemma-3-270m"
CASSETTES = [ROOT / "cassettes" / "gemma-3-270m-q4_k_m.jsonl", ROOT / "cassettes" / "gemma-3-270m-q4_k_m.sweep2.jsonl"]
SAMPLES = ROOT / "cassettes" / "gemma-3-270m-t0.8-k5.jsonl"  # 5 passes at temperature 0.8, a seed each

pytestmark = pytest.mark.skipif(not SOURCES.is_dir(), reason=f"sources not found at {SOURCES} (the board and "
                                                             "band cover pointer members)")


def spec(cassette: Path) -> str:
    return f"{LABEL}=cassette:path={os.path.relpath(cassette)},model={LABEL}"


def test_the_default_cassette_replays_to_the_standing_scoreboard(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the specs name the cassettes as the board does, relative to the project
    res = cli("sweep", "--no-notebooks", "--backend", spec(CASSETTES[0]), "--sources", SOURCES,
              "--out", tmp_path / "sweep")
    assert res.exit_code == 0, res.output
    replayed = {(s.task, s.member, s.backend): s.score() for s in scan(tmp_path / "sweep")}
    board = json.loads((DEFAULT_CORPUS / "scoreboard.json").read_text())["tasks"]
    entries = [(t, m, b, e) for t, members in board.items() for m, per in members.items() for b, e in per.items()]
    assert len(entries) == len(replayed) == 59
    for task, member, backend, entry in entries:
        score = replayed[(task, member, backend)]
        assert (score.metrics, score.passed) == (entry["metrics"], entry["passed"]), (task, member)


def test_the_committed_band_is_re_measured_from_the_committed_samples(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    committed = json.loads((DEFAULT_CORPUS / "band.json").read_text())
    assert {s["spec"] for s in committed["sweeps"]} == {spec(SAMPLES).split("=", 1)[1]}
    assert [s["sample"] for s in committed["sweeps"]] == [0, 1, 2, 3, 4]
    tasks = [a for t in committed["tasks"] for a in ("--task", t)]
    res = cli("sweep", "--no-notebooks", "--samples", "5", "--set", "temperature=0.8", "--backend", spec(SAMPLES),
              *tasks, "--sources", SOURCES, "--out", tmp_path / "samples")
    assert res.exit_code == 0, res.output  # a sweep exits non-zero for failures (errors), not verdicts
    res = cli("band", "--from-run", tmp_path / "samples", *tasks, "--out", tmp_path / "band.json")
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "band.json").read_text())["tasks"] == committed["tasks"]
    # real noise: no gated headline band sits on the floor
    assert all(committed["tasks"][t]["metrics"]["score"]["band"] > committed["floor"] for t in committed["tasks"])


def test_the_byte_identical_temperature_0_recordings_cannot_measure_a_band(tmp_path, monkeypatch):
    """The band was once measured from these two recordings, whose answers are byte-identical: a band of
    nothing but the floor. `evalkit band` refuses them (issue 25.2)."""
    monkeypatch.chdir(ROOT)
    args = [a for c in CASSETTES for a in ("--sweep-backend", spec(c))]
    res = cli("band", *args, "--task", "deal-memos", "--no-notebooks",
              "--sources", SOURCES, "--runs", tmp_path / "runs", "--out", tmp_path / "band.json")
    assert res.exit_code == 2, res.output
    assert "hold byte-identical answers: a band needs independent samples" in res.output
    assert not (tmp_path / "band.json").exists()
