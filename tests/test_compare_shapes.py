"""`evalkit compare` for every shape (issue 13.5): a two-backend deal-memos run (fake, and planted
predictions with three faults) shows per-field accuracy per backend, the paired difference with its CI and
the one-line statement, the verdict flips; summary.json holds the same figures; a task with one backend
says there is nothing to compare."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from corpus_factory import specs

from evalkit.compare import sides
from evalkit.corpus.tasks import DEFAULT_CORPUS
from evalkit.results import runfolder
from evalkit.results.summary import read_summary
from evalkit.stages.runner import RunOptions, run

PLANTED = Path(__file__).resolve().parent / "fixtures" / "deal-memos-planted"


@pytest.fixture(scope="module")
def two_backends(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cmp") / "run"
    for spec in ("fake", f"predictions=predictions:dir={PLANTED}"):  # two runs into one folder add up
        run(RunOptions(corpus=DEFAULT_CORPUS, backends=specs(spec), tasks=["deal-memos"], out=run_dir,
                       notebooks=False, html=False))
    return run_dir


def test_flat_fields_compare_figures_agree_with_summary_json(two_backends):
    c = sides.load(two_backends, "deal-memos")
    assert c.backends == ["fake", "predictions"] and sides.shape(c) == "fields"
    assert sides.nothing_comparable(c) is None
    p, = sides.paired(c)
    assert p["statement"].startswith("predictions − fake = −0.0") and "over 12 tuned members" in p["statement"]
    assert "over 1 held-out member" in p["heldout"]["statement"]
    fields = {f["field"]: f for f in p["fields"]}
    assert fields["account_id"]["a"] == 1.0 and fields["account_id"]["b"] == pytest.approx(11 / 12)
    assert fields["account_id"]["ci"][0] < 0 <= fields["account_id"]["ci"][1]
    assert {f["member"] for f in p["flips"]} == {"clean-single-term", "distractor-prose", "multi-condition"}
    summary = read_summary(two_backends).to_json()["tasks"]["deal-memos"]
    fake, planted = summary["backends"]
    assert (fake["backend"], planted["backend"]) == ("fake", "predictions")
    # summary.json reports the held-out member (percent-words) apart, and so do the paired figures
    for side, entry in (("a", fake), ("b", planted)):
        main, held = entry["score"], entry["heldout"]["score"]
        assert (main["n"], held["n"]) == (12, 1)
        assert p["metrics"][0][side] == pytest.approx(main["mean"])
        assert p["heldout"]["metrics"][0][side] == pytest.approx(held["mean"])
    table = sides.summary_table(c)
    assert list(table["passed"]) == ["13/13", "10/13"]


def test_one_backend_says_nothing_is_comparable(two_backends):
    c = sides.load(two_backends, "deal-memos", backends=["fake"])
    assert "only one backend (fake)" in sides.nothing_comparable(c) and sides.paired(c) == []


def test_compare_html_shows_per_field_accuracy_and_the_paired_difference(two_backends):
    page, = sides.compare_run(two_backends, workers=1)
    html = page.read_text()
    nb = json.loads((two_backends / "deal-memos" / runfolder.COMPARE).read_text())
    errors = [o for cell in nb["cells"] for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    for text in ("Per-field accuracy", "accuracy A", "accuracy B", "predictions − fake = −0.0",
                 "Verdict flips", "PASS → FAIL", "match → hallucinated", "lifecycle_term_start", "10/13", "<svg"):
        assert text in html, text
    assert "F1 per backend" not in html  # no graph tables for a flat-fields task


def test_graph_and_tree_tasks_add_relation_type_f1_and_family_scores(tmp_path):
    cassette = Path(__file__).resolve().parent.parent / "cassettes" / "gemma-3-270m-q4_k_m.jsonl"
    run(RunOptions(corpus=DEFAULT_CORPUS, backends=specs("fake", f"g=cassette:path={cassette}"),
                   tasks=["adventure", "encyclopedia"], only=["drowned-bell-tower", "copper-wolves", "orla-fenwick"],
                   out=tmp_path / "run", notebooks=False, html=False))
    tree = sides.load(tmp_path / "run", "adventure")
    assert sides.shape(tree) == "tree"
    families = sides.family_table(tree).set_index("family")
    assert "areas" in families.index and families.loc["areas", "fake"] == "1.000 [1.000, 1.000]"
    graph = sides.load(tmp_path / "run", "encyclopedia")
    assert sides.shape(graph) == "graph"
    per_type = sides.relation_type_f1(graph)
    fake = per_type[per_type["backend"] == "fake"]
    assert len(fake) and (fake["micro F1"] == "1.000").all() and (fake["fp"] == 0).all()  # fake echoes the truth
    # every relation type of the truth appears under the fake backend; the counts add up to its relation items
    scores = list(graph.scores["fake"].values())
    truth_relations = sum(1 for d in scores for i in d.rows if i.get("axis") == "relations")
    assert fake["tp"].sum() == truth_relations
    p, = sides.paired(graph)
    assert p["statement"].startswith("g − fake = ") and p["metrics"][0]["n"] == 2


def test_the_index_opens_with_the_task_by_backend_table(two_backends):
    from evalkit.report.render import render_index

    html = render_index(two_backends).read_text()
    table = html[html.index("Results per task and backend"):html.index("</table>")]
    assert "<th>headline metric</th>" in table
    rows = re.findall(r"<tr><td>deal-memos</td><td>score</td><td>(\w+)</td><td[^>]*>([\d.]+)</td>"
                      r"<td[^>]*>(\[[\d., ]+\])</td><td[^>]*>([\d.]+ \(\d+\))</td><td[^>]*>(\d+/\d+)</td>"
                      r"<td[^>]*>(\d+)</td>", table)
    summary = read_summary(two_backends).to_json()["tasks"]["deal-memos"]["backends"]
    assert rows == [(b["backend"], f"{b['score']['mean']:.3f}", f"[{b['score']['ci'][0]:.3f}, {b['score']['ci'][1]:.3f}]",
                     f"{b['heldout']['score']['mean']:.3f} ({b['heldout']['scored']})",
                     f"{b['passed']}/{b['members']}", str(b["errors"])) for b in summary]
    assert rows[1][4] == "10/13"  # deal-memos/percent-words is held out: its figure has its own column
    run_block = html[html.index("<!-- run:start -->"):html.index("<!-- run:end -->")]
    for text in ("date", "command", "corpus", "evalkit", "backend predictions"):
        assert f"<dt>{text}</dt>" in run_block, text
