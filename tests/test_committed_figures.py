"""The committed figures are reproduced by the current code: the default cassette replays to the standing
scoreboard's metrics; the two recorded sweeps behind corpus/band.json hold byte-identical answers, so
`evalkit band` refuses to re-measure it from them (issue 25.2). A change to a scorer, a statistic or the seed that moves any of them fails here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from corpus_factory import cli
from evalkit.corpus import DEFAULT_CORPUS
from evalkit.runfolder import scan

ROOT = DEFAULT_CORPUS.parent
SOURCES = Path(os.environ.get("EVALKIT_SOURCES", ROOT.parent / "shared" / "data"))
LABEL = "gemma-3-270m"
CASSETTES = [ROOT / "cassettes" / "gemma-3-270m-q4_k_m.jsonl", ROOT / "cassettes" / "gemma-3-270m-q4_k_m.sweep2.jsonl"]

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
        assert (score["metrics"], score["passed"]) == (entry["metrics"], entry["passed"]), (task, member)


def test_the_recorded_sweeps_cannot_remeasure_the_committed_band(tmp_path, monkeypatch):
    """The committed band.json was measured from two recordings whose answers are byte-identical: a band of
    nothing but the floor. `evalkit band` now refuses them (issue 25.2) — the band is to be re-measured from
    independent samples; until then this says so rather than reproducing the old file."""
    monkeypatch.chdir(ROOT)
    committed = json.loads((DEFAULT_CORPUS / "band.json").read_text())
    assert [f"{LABEL}={s['spec']}" for s in committed["sweeps"]] == [spec(c) for c in CASSETTES]
    args = [a for c in CASSETTES for a in ("--sweep-backend", spec(c))]
    res = cli("band", *args, *(a for t in committed["tasks"] for a in ("--task", t)), "--no-notebooks",
              "--sources", SOURCES, "--runs", tmp_path / "runs", "--out", tmp_path / "band.json")
    assert res.exit_code == 2, res.output
    assert "hold byte-identical answers: a band needs independent samples" in res.output
    assert not (tmp_path / "band.json").exists()
