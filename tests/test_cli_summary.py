"""The one outcome printer (`evalkit.cli.summary`): a run's and a sweep's outcomes, counted per task and
backend from their summary.json, never pooled across backends; means over scored members only."""

from __future__ import annotations

from pathlib import Path

from evalkit.board.sweep import MemberResult, SweepResult
from evalkit.cli.summary import print_summary
from evalkit.results.records import ScoreRecord
from evalkit.results.runfolder import Scored
from evalkit.results.summary import summarize
from evalkit.stages.runner import Outcome, Recorded, RunResult
from evalkit.status import Failed


def scored(member, backend, score, passed, acc):
    return Outcome("memos", member, backend, "scored", score, passed, {"field_accuracy": acc})


def summary_of(outcomes, tmp_path):
    """summary.json for these outcomes, as `summary.write_summary` makes it from their score.json files."""
    results = []
    for o in outcomes:
        data = ({"score": o.score, "passed": o.passed, "metrics": o.metrics} if o.status == "scored"
                else Failed(o.cause, o.message).to_json())
        results.append(Scored(o.task, o.member, o.backend, tmp_path, tmp_path, "run", ScoreRecord(data)))
    return summarize(results, {"backends": [{"label": b} for b in sorted({o.backend for o in outcomes})]})


def printed(result) -> list[str]:
    lines: list[str] = []
    print_summary(result, lines.append)
    return lines


def test_a_two_backend_run_gets_one_line_per_backend(tmp_path):
    outcomes = [scored("m0", "a", 1.0, True, 1.0), scored("m1", "a", 0.5, False, 0.5),
                scored("m0", "b", 0.2, False, 0.2),
                Outcome("memos", "m1", "b", "error", message="HTTP 500", cause="provider_error")]
    lines = printed(RunResult(tmp_path, outcomes, recorded=Recorded(board=tmp_path / "sb.json", entries=3),
                              summary=summary_of(outcomes, tmp_path)))
    assert lines[0] == "memos"
    assert lines[1].startswith("  a: 1/2 passed · mean score 75.0% [") and lines[1].endswith(" over 2 scored")
    assert lines[2].startswith("  b: 0/2 passed · 1 error · mean score 20.0% [") and lines[2].endswith(" over 1 scored")
    assert not any("56.7" in line for line in lines)  # (1 + .5 + .2) / 3 pooled across backends: never printed
    assert lines[-2:] == [f"Report: {tmp_path}", f"Scoreboard: 3 entries written to {tmp_path / 'sb.json'}"]


def test_a_sweep_prints_keys_current_members_crashes_and_its_summary(tmp_path):
    members = [MemberResult("memos", "m0", "current", [scored("m0", "a", 1.0, True, 1.0)]),
               MemberResult("memos", "m1", "failed", message="worker died"),
               MemberResult("memos", "m2", "ran", [scored("m2", "a", 0.0, False, 0.0)])]
    outcomes = [o for m in members for o in m.outcomes]
    lines = printed(SweepResult(Path(tmp_path), members, summary=summary_of(outcomes, tmp_path)))
    assert lines[:4] == ["  memos/m0 … 100.0% PASS (current, skipped)", "  memos/m1 … FAILED", "      ↳ worker died",
                         "  memos/m2 …   0.0% FAIL"]
    assert lines[4].startswith("  memos a: 1/2 passed · mean score 50.0% [") and lines[4].endswith(" over 2 scored")
    assert any(line.startswith("Sweep: 3 member(s): 1 run, 1 current (skipped), 2 scored") for line in lines)
    assert lines[-1] == f"Sweep folder: {tmp_path}"
