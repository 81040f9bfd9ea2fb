"""`evalkit diff RUN_A RUN_B` (`evalkit.compare.diff`, `evalkit.scoring.delta`): a fake run (every member perfect) against a
run of planted predictions (three planted faults) lists exactly the planted changes, newly hallucinated
first, with both values; per-metric deltas with paired CIs; diff.ipynb renders them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from corpus_factory import cli, specs

from evalkit.compare.diff import diff_runs, text
from evalkit.corpus.tasks import DEFAULT_CORPUS
from evalkit.scoring.delta import metric_deltas, statement
from evalkit.scoring.stats import paired_difference
from evalkit.stages.runner import RunOptions, run

PLANTED = Path(__file__).resolve().parent / "fixtures" / "deal-memos-planted"
# member → (field, outcome before, outcome after, the planted value)
PLANTED_CHANGES = {
    ("distractor-prose", "account_id", "match", "hallucinated"),
    ("clean-single-term", "term_rate", "match", "mismatch"),
    ("multi-condition", "lifecycle_term_start", "match", "missing"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("diff")
    for name, spec in (("fake", "fake"), ("planted", f"predictions=predictions:dir={PLANTED}")):
        run(RunOptions(corpus=DEFAULT_CORPUS, backends=specs(spec), tasks=["deal-memos"], out=root / name,
                       notebooks=False, html=False))
    return root / "fake", root / "planted"


def test_the_diff_lists_exactly_the_planted_changes_newly_hallucinated_first(runs):
    d = diff_runs(*runs)
    pair, = d["tasks"]["deal-memos"]["pairs"]
    assert (pair["a"], pair["b"]) == ("A:fake", "B:predictions")
    changes = pair["changes"]
    assert {(c["member"], c["field"], c["before"], c["after"]) for c in changes} == PLANTED_CHANGES
    assert changes[0]["member"] == "distractor-prose" and changes[0]["newly_wrong"]
    assert not any(c["newly_wrong"] for c in changes[1:])
    by_member = {c["member"]: c for c in changes}
    assert by_member["multi-condition"]["value_before"] == "2025-02-01"
    assert by_member["multi-condition"]["value_after"] is None
    assert by_member["clean-single-term"]["value_before"] == 0.7 != by_member["clean-single-term"]["value_after"]
    assert {f["member"] for f in pair["flips"]} == {"clean-single-term", "distractor-prose", "multi-condition"}
    score = pair["metrics"][0]
    # deal-memos holds one held-out member (percent-words): compared apart, never pooled with the 12 tuned
    assert score["metric"] == "score" and score["n"] == 12 and score["mean"] < 0
    assert score["ci"][0] <= score["mean"] <= score["ci"][1] <= 0
    assert pair["statement"].startswith("B:predictions − A:fake = −0.")
    assert "over 12 tuned members" in pair["statement"]
    held = pair["heldout"]
    assert held["group"] == "held-out" and held["metrics"][0]["n"] == 1
    assert "over 1 held-out member" in held["statement"]
    fields = {f["field"]: f for f in pair["fields"]}
    assert fields["term_rate"]["a"] == 1.0 and fields["term_rate"]["b"] == pytest.approx(11 / 12)
    assert fields["stores"]["mean"] == 0.0 and fields["stores"]["n"] == 12


def test_a_run_against_itself_changes_nothing(runs):
    pair, = diff_runs(runs[0], runs[0])["tasks"]["deal-memos"]["pairs"]
    assert pair["changes"] == [] and pair["flips"] == []
    assert all(m["mean"] == 0 for m in pair["metrics"] if m["n"])


def test_paired_difference_and_statement():
    d = paired_difference([(0.5, 0.7), (0.4, 0.5), (0.9, 1.0)])
    assert d["mean"] == pytest.approx(0.4 / 3) and d["n"] == 3
    assert d["p"] == pytest.approx(0.25)  # 3 positive differences: 1 pattern of 8 as extreme, each side
    line = statement(d, "A", "B", band=0.02)
    assert re.fullmatch(r"B − A = \+0\.133 \[\+0\.\d{3}, \+0\.\d{3}\], p = 0\.250 over 3 members; beyond the band "
                        r"0\.02", line), line
    assert statement(paired_difference([]), "A", "B") == "B − A: no member scored by both: nothing to compare"
    # errors take part in no difference
    a = {"m": {"status": "scored", "score": 1.0}, "e": {"status": "error", "score": None}}
    b = {"m": {"status": "scored", "score": 0.5}, "e": {"status": "scored", "score": 0.0}}
    assert metric_deltas(a, b, "t")[0]["n"] == 1


def test_the_cli_prints_the_diff_and_writes_the_notebook_page(runs):
    a, b = runs
    res = cli("diff", a, b)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    items = [line.strip() for line in lines if " · " in line and " → " in line]
    assert len(items) == 3 and items[0].startswith("NEW distractor-prose · account_id: match → hallucinated")
    assert "multi-condition · lifecycle_term_start: match → missing ('2025-02-01' → None)" in res.output
    page = (b / "diff.html").read_text()
    assert "hallucinated" in page and "B:predictions − A:fake = −0." in page
    assert "<svg" in page  # the paired per-member chart


def test_a_setting_that_moved_nothing_is_named_and_explained(tmp_path, runs):
    """Two runs that differ only by --set temperature=0.5: the diff names A and B, lists the setting first,
    counts the changed requests, and says why a zero delta is zero."""
    hot = tmp_path / "hot"
    run(RunOptions(corpus=DEFAULT_CORPUS, backends=specs("fake"), tasks=["deal-memos"], out=hot, notebooks=False,
                   html=False, settings={"temperature": 0.5}))
    d = diff_runs(runs[0], hot)
    assert {"what": "setting.temperature", "a": None, "b": 0.5} in d["config"]
    pair, = d["tasks"]["deal-memos"]["pairs"]
    assert pair["config"]["requests_changed"] == pair["config"]["requests_compared"] == 13
    assert "requests differ, yet every answer scored the same" in pair["zero_delta"]
    out = text(d)
    assert out.index("setting.temperature: — → 0.5") < out.index("deal-memos")  # configuration first
    assert out.startswith(f"A = {runs[0]}\nB = {hot}\n")
    # a run against itself: identical configuration, and nothing to explain
    same = diff_runs(runs[0], runs[0])
    assert same["config"] == [] and same["tasks"]["deal-memos"]["pairs"][0]["zero_delta"] is None
    assert "Configuration: identical" in text(same)


def test_held_out_members_are_diffed_apart_and_tuned_is_explained(runs):
    out = text(diff_runs(*runs))
    assert "over 12 tuned members" in out and "over 1 held-out member" in out
    assert "held-out: members kept back from tuning" in out


def test_the_cli_computes_the_diff_once_and_the_notebook_shows_that_one(runs, tmp_path, monkeypatch):
    """`evalkit diff` hands its diff to diff.ipynb as RUN_B's diff.json (the kernel does not compute it
    again); the page is the one the notebook computes itself from run_a / run_b alone."""
    import json
    import shutil

    from evalkit.compare import diff as diff_mod
    from evalkit.results import runfolder

    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(runs[0], a), shutil.copytree(runs[1], b)
    (b / runfolder.DIFF_JSON).unlink(missing_ok=True)  # an earlier test's `evalkit diff` wrote one
    standalone = diff_mod.diff_notebook(a, b, workers=1).read_text()  # computed inside the kernel
    assert not (b / runfolder.DIFF_JSON).exists()
    res = cli("diff", a, b, "--workers", "1")
    assert res.exit_code == 0, res.output
    given = runfolder.read_diff(b)
    monkeypatch.chdir(b)  # where the notebook runs: A and B named as it names them
    assert given.to_json() == json.loads(json.dumps(diff_runs("../a", ".")))
    executed = json.loads((b / runfolder.DIFF).read_text())
    assert any('diff_json = "diff.json"' in "".join(c["source"]) for c in executed["cells"])
    assert (b / runfolder.page(runfolder.DIFF)).read_text() == standalone
    # the kernel shows the file it is given: a planted statement in diff.json reaches the page
    pair = given.tasks["deal-memos"]["pairs"][0]
    pair["statement"] = "planted statement from diff.json"
    runfolder.write_diff(b, given)
    from evalkit.execution.execute import NOTEBOOKS_DIR, NotebookJob, execute
    job = NotebookJob(NOTEBOOKS_DIR / runfolder.DIFF, b / runfolder.DIFF,
                      {"run_a": "../a", "run_b": ".", "diff_json": runfolder.DIFF_JSON})
    assert execute([job], workers=1)[0].ok
    assert "planted statement from diff.json" in (b / runfolder.DIFF).read_text()
