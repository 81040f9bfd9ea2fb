"""Reference mode (`evalkit run --reference LABEL`): every other backend is scored against LABEL's records
instead of the truth — a similarity, never an accuracy, never a scoreboard entry — strict and judged.
A baseline against a second run of itself is the judge's noise floor: judged ≈ 1.0, strict lower."""

from __future__ import annotations

import json

import pytest
from test_judge import TWO, aliased, evalkit, metrics_of, python_judge, run_graph, write_cassette

from evalkit.errors import EXIT_BACKEND, ScoreboardError, UsageError
from evalkit.results.runfolder import member_dir, read_run_json, read_score
from evalkit.results.scoreboard import update_scoreboard
from evalkit.status import REFERENCE_FAILED


def same(rec: dict, member_id: str = "") -> dict:
    return rec


@pytest.fixture
def recorded(tmp_path):
    """The baseline recorded twice: once as the truth reads, once writing some names as aliases."""
    base = write_cassette(tmp_path / "c" / "base.jsonl", "base-model", same)
    again = write_cassette(tmp_path / "c" / "again.jsonl", "base-model", aliased)
    return [("base", f"cassette:path={base}"), ("again", f"cassette:path={again}")]


def test_others_are_scored_against_the_reference_and_it_is_not_scored(tmp_path, recorded):
    res = run_graph(tmp_path / "run", recorded, reference="base")
    assert {o.backend for o in res.outcomes} == {"again"} and res.reference == "base"
    assert res.exit_code != EXIT_BACKEND
    for mid in TWO:
        score = read_score(member_dir(tmp_path / "run", "encyclopedia", mid, "again"))
        assert score.reference == "base"
        assert not (member_dir(tmp_path / "run", "encyclopedia", mid, "base") / "score.json").exists()
    assert read_run_json(tmp_path / "run").reference == "base"
    # Against the truth the aliases are wrong too: the same figures (the reference here echoes the truth).
    truthful = run_graph(tmp_path / "truth", recorded)
    assert metrics_of(res)[("orla-fenwick", "again")] == metrics_of(truthful)[("orla-fenwick", "again")]


def test_the_reference_is_the_truth_even_when_it_is_wrong(tmp_path):
    wrong = write_cassette(tmp_path / "w.jsonl", "m", aliased)
    also = write_cassette(tmp_path / "a.jsonl", "m", aliased)
    res = run_graph(tmp_path / "run", [("ref", f"cassette:path={wrong}"), ("cand", f"cassette:path={also}")],
                    reference="ref")
    # The same wrong answer twice: identical to the reference, so a similarity of 1 (the truth would say less).
    assert all(o.score == 1.0 for o in res.outcomes)
    assert all(o.metrics["entities_f1"] == 1.0 for o in res.outcomes)


def test_baseline_against_itself_is_the_judges_noise_floor(tmp_path, recorded):
    res = run_graph(tmp_path / "run", recorded, reference="base", judge=python_judge(tmp_path))
    for mid in TWO:
        m = metrics_of(res)[(mid, "again")]
        assert m["entities_f1"] < 1.0  # strict: the aliases differ from the baseline's own names
        assert m["judged_entities_f1"] == pytest.approx(1.0)  # judged: the same things, written differently


def test_a_member_the_reference_failed_on_is_an_error_not_a_number(tmp_path, recorded):
    base = write_cassette(tmp_path / "c" / "one.jsonl", "base-model", same, members=TWO[:1])
    backends = [("base", f"cassette:path={base}"), recorded[1]]
    # The reference's cassette lacks the second member: it is not covered for the reference, and the other
    # backend's answer to it has nothing to be compared with — an error with its cause, not a number.
    res = run_graph(tmp_path / "run", backends, reference="base")
    got = {(o.member, o.backend): o for o in res.outcomes}
    assert got[(TWO[1], "base")].status == "not_covered"
    assert got[(TWO[1], "again")].status == "error" and got[(TWO[1], "again")].cause == REFERENCE_FAILED
    assert got[(TWO[0], "again")].status == "scored"
    # A reference record that is not a usable truth: that member errors with its cause, the other is scored.
    broken = tmp_path / "c" / "broken.jsonl"
    lines = (tmp_path / "c" / "base.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["response"]["content"] = json.dumps({"entities": "not a list"})
    rec["response"].pop("record", None)
    broken.write_text("\n".join([lines[0], json.dumps(rec)]) + "\n")
    res = run_graph(tmp_path / "run2", [("base", f"cassette:path={broken}"), recorded[1]], reference="base")
    out = {o.member: o for o in res.outcomes}
    assert out[TWO[0]].status == "scored"
    assert out[TWO[1]].status == "error" and out[TWO[1]].cause == REFERENCE_FAILED and out[TWO[1]].score is None
    assert "base" in out[TWO[1]].message and res.exit_code == EXIT_BACKEND


def test_a_similarity_never_reaches_the_scoreboard_or_the_history(tmp_path, recorded):
    res = run_graph(tmp_path / "run", recorded, reference="base")
    with pytest.raises(ScoreboardError, match="similarity"):
        update_scoreboard(res, tmp_path / "board.json")
    assert not (tmp_path / "board.json").exists()
    with pytest.raises(UsageError, match="never writes the scoreboard"):
        run_graph(tmp_path / "run3", recorded, reference="base", board=tmp_path / "board.json")
    from evalkit.results.history import history_lines

    assert history_lines(res) == []


def test_cli_reference_must_be_one_of_the_backends_and_the_notebooks_score_against_it(tmp_path, recorded):
    bad = evalkit("run", "--task", "encyclopedia", "--only", TWO[0], "--out", tmp_path / "x",
                  *[a for b, s in recorded for a in ("--backend", f"{b}={s}")], "--reference", "nobody")
    assert bad.returncode == 2 and "--reference nobody: not one of this run's backends" in bad.stderr
    ok = evalkit("run", "--task", "encyclopedia", "--only", TWO[0], "--out", tmp_path / "nb", "--no-html",
                 *[a for b, s in recorded for a in ("--backend", f"{b}={s}")], "--reference", "base")
    assert "Reference mode: every figure is a similarity to base's extractions" in ok.stdout, ok.stdout + ok.stderr
    assert ok.returncode == 0 and f"[1/1] encyclopedia/{TWO[0]} …  90.9% PASS" in ok.stdout
    assert "  again: 1/1 passed" in ok.stdout and "base:" not in ok.stdout  # the reference is no result
    home = member_dir(tmp_path / "nb", "encyclopedia", TWO[0], "again")
    assert read_score(home).reference == "base" and (home / "score.ipynb").exists()
    assert not (member_dir(tmp_path / "nb", "encyclopedia", TWO[0], "base") / "score.ipynb").exists()


def test_a_corpus_without_truth_validates_and_is_scored_only_against_a_reference(tmp_path):
    import yaml
    from corpus_factory import TASK, cli, make_corpus

    corpus = make_corpus(tmp_path, members=2)
    task = tmp_path / "corpus" / "memos"
    (task / "task.yaml").write_text(yaml.safe_dump(TASK | {"truth": False}, sort_keys=False))
    for m in ("m0", "m1"):
        (task / m / "truth.yaml").unlink()
        manifest = yaml.safe_load((task / m / "manifest.yaml").read_text())
        del manifest["truth_provenance"]  # no truth: nobody wrote one
        (task / m / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    preds = {}
    for label, rate in (("a", 0.5), ("b", 0.9)):
        d = preds[label] = tmp_path / label
        d.mkdir()
        for i in range(2):
            (d / f"m{i}.json").write_text(json.dumps({"account_id": f"ACC-{i:03d}", "rate": rate if i else 0.5}))
    assert cli("validate", "--corpus", corpus).exit_code == 0
    backends = [a for k, d in preds.items() for a in ("--backend", f"{k}=predictions:dir={d}")]
    refused = cli("run", "--corpus", corpus, "--out", tmp_path / "r0", *backends)
    assert refused.exit_code == 2 and "have no truth (truth: false)" in refused.output and "--reference" in refused.output
    res = cli("run", "--corpus", corpus, "--out", tmp_path / "r1", "--no-html", *backends, "--reference", "a")
    assert "similarity to a's extractions" in res.output, res.output
    m0 = read_score(member_dir(tmp_path / "r1", "memos", "m0", "b"))
    m1 = read_score(member_dir(tmp_path / "r1", "memos", "m1", "b"))
    assert m0.score == 1.0 and m0.reference == "a"  # both said 0.5
    assert m1.score < 1.0 and any(r["field"] == "rate" and r["outcome"] == "mismatch" for r in m1.rows)
    # A task with truth still needs its provenance.
    (task / "task.yaml").write_text(yaml.safe_dump(TASK, sort_keys=False))
    bad = cli("validate", "--corpus", corpus)
    assert bad.exit_code == 3 and "truth_provenance: required" in bad.output


def test_the_task_report_and_the_comparison_leave_the_reference_out(tmp_path, recorded):
    from evalkit.compare.sides import load
    from evalkit.results.runfolder import task_results

    run_graph(tmp_path / "run", recorded, reference="base")
    assert {s.backend for s in task_results(tmp_path / "run", "encyclopedia")} == {"again"}
    cmp = load(tmp_path / "run", "encyclopedia")
    assert set(cmp.members["backend"]) == {"again"} and bool(cmp.members["scored"].all())
