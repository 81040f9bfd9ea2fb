"""Blind pairwise judging: slots, both orders, aggregation, calibration control, guards, blindness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from servers.fixtures import *  # noqa: F401,F403
from servers.openai_fake import OpenAIFake
from test_judge import (
    TASK,
    TWO,
    aliased,
    anthropic_answer,
    dropped,
    python_judge,
    run_graph,
    truth,
    two_cassettes,
    write_cassette,
)

from evalkit.errors import CassetteError
from evalkit.results.runfolder import PAIRWISE
from evalkit.stages import pairwise

FOUR = ("brannock-lighthouse", "copper-wolves", "lake-orvel", "orla-fenwick")


def pairwise_json(out: Path) -> dict:
    return json.loads((out / "encyclopedia" / PAIRWISE).read_text(encoding="utf-8"))


def rows_by_axis(data: dict) -> dict:
    return {r["axis"]: r for r in data["pairs"]}


# -- pure parts ----------------------------------------------------------------------------------------

def test_first_order_is_a_hash_of_member_and_names_not_of_argument_order():
    assert pairwise.first_order("t/m1", "x", "y") == pairwise.first_order("t/m1", "y", "x")
    assert pairwise.first_order("t/m1", "x", "y") == pairwise.first_order("t/m1", "x", "y")
    firsts = {pairwise.first_order(f"t/m{i}", "x", "y")[0] for i in range(40)}
    assert firsts == {"x", "y"}  # both assignments occur across members


def test_combine_both_orders():
    assert pairwise.combine("x", "x") == ("x", False)
    assert pairwise.combine("tie", "tie") == ("tie", False)
    assert pairwise.combine("x", "y") == ("tie", True)  # disagreeing verdicts: a tie, order-inconsistent
    assert pairwise.combine("x", "tie") == ("tie", True)
    assert pairwise.winner("A", "x", "y") == "x" and pairwise.winner("B", "x", "y") == "y"
    assert pairwise.parse_verdict({"verdict": " b ", "reason": "r"}) == ("B", "r")
    assert pairwise.parse_verdict({"verdict": "maybe"})[0] is None


def test_aggregate_counts_ties_apart_and_never_counts_a_skip_as_a_loss():
    def item(outcome, status="judged", inconsistent=False):
        return {"a": "x", "b": "y", "axis": "entities", "status": status, "outcome": outcome,
                "inconsistent": inconsistent}

    items = [item("x"), item("x"), item("y"), item("tie", inconsistent=True), item("tie", "identical"),
             item(None, "skipped"), item(None, "error")]
    (row,) = pairwise.aggregate(items, [("x", "y")], ["entities"])
    assert (row["wins"], row["losses"], row["ties"]) == (2, 1, 2)
    assert row["win_rate"] == pytest.approx(2 / 3)  # ties excluded
    assert row["inconsistent"] == 1 and row["judged"] == 4 and row["order_inconsistency_rate"] == 0.25
    assert (row["compared"], row["identical"], row["skipped"], row["errors"]) == (5, 1, 1, 1)
    notes = pairwise.notes([row])
    assert any(n.startswith("note:") and "66.7%" in n for n in notes)
    assert any(n.startswith("warning:") and "25.0%" in n for n in notes)
    assert pairwise.notes([{**row, "win_rate": 0.5, "order_inconsistency_rate": 0.2}]) == []


def test_axis_content_keeps_only_schema_fields():
    rec = {"entities": [{"name": "A", "type": "PER", "model": "leaky-model", "backend": "b1"}, "junk"],
           "relations": [{"head": "A", "relation": "r", "tail": "B", "confidence": 0.9}],
           "summary": "  Text.  ", "by": "leaky"}
    assert pairwise.axis_content(rec, "entities") == [{"name": "A", "type": "PER"}]
    assert pairwise.axis_content(rec, "relations") == [{"head": "A", "relation": "r", "tail": "B"}]
    assert pairwise.axis_content(rec, "summary") == "Text."
    assert pairwise.axis_content(None, "entities") == []


# -- in a run ------------------------------------------------------------------------------------------

def test_both_orders_slots_from_the_hash_and_a_rerun_reproduces_exactly(tmp_path):
    backends = two_cassettes(tmp_path)
    judge = python_judge(tmp_path)
    run_graph(tmp_path / "runs" / "one", backends, judge=judge, judge_mode="pairwise")
    run_graph(tmp_path / "runs" / "two", backends, judge=judge, judge_mode="pairwise",
              judge_cache=tmp_path / "fresh-cache.jsonl")  # called afresh, not replayed
    one = (tmp_path / "runs" / "one" / "encyclopedia" / PAIRWISE).read_bytes()
    assert one == (tmp_path / "runs" / "two" / "encyclopedia" / PAIRWISE).read_bytes()
    data = json.loads(one)
    assert len(data["items"]) == len(TWO) * 3
    for item in data["items"]:
        first = pairwise.first_order(f"encyclopedia/{item['member']}", "alpha", "beta")
        orders = [(o["slot_a"], o["slot_b"]) for o in item["orders"]]
        assert orders == [first, first[::-1]], item
    rows = rows_by_axis(data)
    # alpha keeps every item (renamed), beta drops some: the content judge prefers alpha in both orders
    assert rows["relations"]["wins"] == len(TWO) and rows["relations"]["losses"] == 0
    assert rows["relations"]["win_rate"] == 1.0 and rows["relations"]["order_inconsistency_rate"] == 0.0
    assert not list((tmp_path / "runs" / "one").rglob("judgments.json"))  # pairwise only: no reference verdicts


def _one_model_recorded_twice(tmp_path: Path, members=FOUR):
    """Two recordings of one model: the same answers, except that on every other member one
    recording lost its last relation (sampling noise), alternating between the two recordings."""
    def noisy(recording: int):
        def variant(rec, member_id):
            if members.index(member_id) % 2 == recording:
                rec = {**rec, "relations": rec["relations"][:-1]}
            return rec
        return variant

    a = write_cassette(tmp_path / "cassettes" / "take1.jsonl", "same-model", noisy(0), members)
    b = write_cassette(tmp_path / "cassettes" / "take2.jsonl", "same-model", noisy(1), members)
    return [("take1", f"cassette:path={a}"), ("take2", f"cassette:path={b}")]


def test_calibration_control_one_model_under_two_names_splits_evenly(tmp_path, capsys):
    backends = _one_model_recorded_twice(tmp_path)
    out = tmp_path / "runs" / "fair"
    run_graph(out, backends, members=FOUR, judge=python_judge(tmp_path), judge_mode="pairwise")
    rows = rows_by_axis(pairwise_json(out))
    rel = rows["relations"]
    assert rel["wins"] == rel["losses"] == len(FOUR) // 2 and rel["win_rate"] == 0.5
    assert rel["order_inconsistency_rate"] == 0.0
    for axis in ("entities", "summary"):  # the same answers: ties without a judge call
        assert rows[axis]["identical"] == rows[axis]["ties"] == len(FOUR) and rows[axis]["win_rate"] is None
    err = capsys.readouterr().err
    assert "outside 45%–55%" not in err and "warning" not in err

    # A judge with total position bias on the same recordings: every verdict flips with the order,
    # so every item is a tie — wins and losses still split evenly — and the warning fires.
    out = tmp_path / "runs" / "biased"
    run_graph(out, backends, members=FOUR, judge=python_judge(tmp_path, "biased"), judge_mode="pairwise")
    rel = rows_by_axis(pairwise_json(out))["relations"]
    assert rel["wins"] == rel["losses"] == 0 and rel["ties"] == len(FOUR)
    assert rel["order_inconsistency_rate"] == 1.0 and rel["win_rate"] is None
    err = capsys.readouterr().err
    assert "warning: pairwise take1 vs take2 (relations)" in err and "position bias" in err


def test_a_member_one_backend_failed_on_is_skipped_not_lost(tmp_path):
    backends = two_cassettes(tmp_path)
    # beta's answer for orla-fenwick is unreadable (no record)
    path = Path(backends[1][1].split("=", 1)[1])
    lines = path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["response"].update(content="I cannot do that.", parse="malformed")
    lines[1] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "runs" / "skip"
    run_graph(out, backends, judge=python_judge(tmp_path), judge_mode="pairwise")
    for row in pairwise_json(out)["pairs"]:
        assert row["skipped"] == 1 and row["compared"] == 1 and row["wins"] + row["losses"] + row["ties"] == 1


def test_two_backends_on_one_cassette_are_rejected_before_any_judge_call(tmp_path, ant):
    ant.answer = anthropic_answer
    a = write_cassette(tmp_path / "c" / "a.jsonl", "m", aliased)
    copy = tmp_path / "c" / "copy.jsonl"
    copy.write_bytes(a.read_bytes())
    for other in (a, copy):  # the same file, and a byte-identical copy
        with pytest.raises(CassetteError, match="resolve to"):
            run_graph(tmp_path / "runs" / "dup", [("x", f"cassette:path={a}"), ("y", f"cassette:path={other}")],
                      judge="anthropic:model=claude-judge", judge_mode="pairwise")
    assert ant.count == 0
    assert not (tmp_path / "runs" / "dup").exists()


def _graph_answer(body: dict) -> dict:
    """The fake OpenAI server as an extraction model: the truth of the member whose text it was sent."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    for mid in TWO:
        if TASK.member(mid).dir.joinpath("text.md").read_text(encoding="utf-8").strip()[:200] in user:
            return (aliased if body.get("model") == "m-alpha" else dropped)(truth(mid))
    raise AssertionError("unknown document")


def test_pairwise_is_blind_and_makes_no_extra_extraction_calls(tmp_path, ant):
    ant.answer = anthropic_answer
    with OpenAIFake(answer=_graph_answer) as oai_server:
        url = oai_server.url + "/v1"
        backends = [("zeta-secret-label", f"openai:url={url},model=m-alpha"),
                    ("omega-hidden-name", f"openai:url={url},model=m-beta")]
        run_graph(tmp_path / "runs" / "plain", backends)
        extraction_calls = oai_server.count
        assert extraction_calls == 2 * len(TWO)
        run_graph(tmp_path / "runs" / "pw", backends, judge="anthropic:model=claude-judge", judge_mode="both")
        assert oai_server.count == 2 * extraction_calls  # the judged run extracted exactly as often
    bodies = [json.dumps(m) for m in ant.messages()]
    pairwise_bodies = [b for b in bodies if "Extraction A" in b]
    assert pairwise_bodies and len(bodies) == ant.count
    for body in bodies:
        for secret in ("zeta-secret-label", "omega-hidden-name", "m-alpha", "m-beta", "openai", oai_server.url,
                       "127.0.0.1"):
            assert secret not in body, secret
    rows = rows_by_axis(pairwise_json(tmp_path / "runs" / "pw"))
    assert rows["relations"]["a"] == "zeta-secret-label" and rows["relations"]["wins"] == len(TWO)
