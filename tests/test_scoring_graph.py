"""The `graph` scorer: normalization and fold rules, direction, counting, null metrics,
summary token F1, the item table — and strict P/R/F1 against scikit-learn as an
independent oracle on every member of the `encyclopedia` corpus.

Needs no sources folder: every member's truth.yaml is in the repo.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from sklearn.metrics import precision_recall_fscore_support

from evalkit.corpus.tasks import load_task
from evalkit.scoring import ScoreContext, load_scorer
from evalkit.scoring.graph import SCORER, GraphOptions, GraphTruth, corpus_metrics, score
from evalkit.scoring.text import fold

REPO = Path(__file__).resolve().parent.parent
TASK_DIR = REPO / "corpus" / "encyclopedia"
COLUMNS = {"member", "axis", "key", "expected", "extracted", "outcome", "reason", "score"}
JUDGED = [f"judged_{a}_{m}" for a in ("entities", "relations") for m in ("precision", "recall", "f1")]


def ctx(options=None, threshold=0.5, member="m"):
    opts = GraphOptions.model_validate(options or {})
    return ScoreContext(task_id="t", member_id=member, source_text="", options=opts, threshold=threshold)


def truth(entities=(), relations=(), summary=None):
    names = {h for h, _, _ in relations} | {t for _, _, t in relations}
    ents = [{"name": n, "type": t} for n, t in entities]
    ents += [{"name": n, "type": "MISC"} for n in sorted(names - {n for n, _ in entities})]
    return GraphTruth.model_validate({
        "entities": ents,
        "relations": [{"head": h, "relation": r, "tail": t} for h, r, t in relations],
        "summary": summary,
    })


def ents(*pairs):
    return [{"name": n, "type": t} for n, t in pairs]


def rels(*triples):
    return [{"head": h, "relation": r, "tail": t} for h, r, t in triples]


def entity_match(a, b, ta="MISC", tb="MISC", **options):
    r = score({"entities": ents((b, tb))}, truth([(a, ta)]), ctx(options))
    return r.metrics["entities_tp"] == 1


# ----------------------------------------------------------------------------- normalization and fold


@pytest.mark.parametrize("truth_name, printed", [
    ("kobold", "kobolds"),                      # singular truth, printed plural
    ("lizard man", "lizard men"),               # irregular plural of the head noun
    ("wolf", "wolves"),
    ("hobgoblin", "Hobgoblins"),
    ("United States", "the United States"),     # article dropped
    ("Sunken Keep", "The Sunken Keep"),
    ("Thousand Plateaus", "A Thousand Plateaus"),
    ("United States", "United States."),        # punctuation
    ("Jean-Nicolas Marrigues", "Jean Nicolas Marrigues"),
    ("Snoopy's Christmas", "Snoopy 's Christmas"),  # DocRED's tokenised form
    ("Orla Fenwick", "  ORLA\tfenwick "),         # case and whitespace
    ("Ciarán Walsh", "CIARÁN WALSH"),           # case folding keeps the accent
    ("Copper Wolves", "the copper wolf"),
    ("4 July 1990", "4 July, 1990"),
])
def test_fold_matches(truth_name, printed):
    assert entity_match(truth_name, printed)


@pytest.mark.parametrize("truth_name, printed", [
    ("hobgoblin", "hobgoblin chief"),           # a token superset is not a match
    ("hobgoblin chief", "hobgoblin"),           # nor a subset
    ("hobgoblin chief", "chief"),
    ("Edmund Harlow", "Edmund Harlow Jr."),
    ("United States", "U.S."),                  # aliases are the judge's business
    ("United States", "US"),
    ("Northern Rail Consortium", "NRC"),
    ("Ingrid Sundby", "Ingrun Sundby"),          # near-duplicate names stay apart
    ("Lancaster", "Lancashire"),
    ("Edmond Harlowe", "Edmund Harlow"),
    ("Karády", "Karady"),                       # accents are kept
    ("Lake Orvel", "Orvel River"),
    ("lizard man", "lizard"),
    ("kobolds", "kobold king"),
])
def test_fold_never_matches_subsets_renames_or_aliases(truth_name, printed):
    assert not entity_match(truth_name, printed)


def test_only_the_last_word_is_folded():
    assert not entity_match("Warrens of the Grey Hill", "Warren of the Grey Hill")
    assert entity_match("Warrens of the Grey Hill", "Warrens of the Grey Hills")


def test_a_decade_is_not_its_year():
    assert not entity_match("1950", "the 1950s", "TIME", "TIME")


def test_a_name_that_folds_to_nothing_keeps_its_text():
    assert entity_match("A", "a") and entity_match("The", " THE ")
    assert not entity_match("A", "The")


def test_fold_is_the_shared_fold():
    # The scorer must use text.fold, not a private variant: the key is fold(name).
    r = score({"entities": ents(("Lizard Men", "misc"))}, truth([("lizard man", "MISC")]), ctx())
    assert r.items[0]["key"] == [fold("Lizard Men"), "MISC"] == ["lizard man", "MISC"]


# ----------------------------------------------------------------------------- entity types


def test_type_is_part_of_the_key_and_case_insensitive():
    assert entity_match("Paris", "Paris", "LOC", " loc ")
    assert not entity_match("Paris", "Paris", "LOC", "PER")
    r = score({"entities": ents(("Paris", "PER"))}, truth([("Paris", "LOC")]), ctx())
    by = {row["outcome"]: row for row in r.items}
    assert "extracted with type 'PER'" in by["missed"]["reason"]
    assert "the truth types this name 'LOC'" in by["spurious"]["reason"]


def test_type_can_be_left_out_of_the_key():
    assert entity_match("Paris", "Paris", "LOC", "PER", entity_type_in_key=False)
    r = score({"entities": [{"name": "Paris"}]}, truth([("Paris", "LOC")]), ctx({"entity_type_in_key": False}))
    assert r.metrics["entities_f1"] == 1.0 and r.items[0]["key"] == fold("Paris")


def test_entity_without_type_keeps_its_name_but_misses_a_typed_key():
    r = score({"entities": [{"name": "Paris"}]}, truth([("Paris", "LOC")]), ctx())
    assert (r.metrics["entities_tp"], r.metrics["entities_fp"], r.metrics["entities_fn"]) == (0, 1, 1)


# ----------------------------------------------------------------------------- relations and direction


def test_relation_label_is_normalized_and_folded():
    t = truth(relations=[("Orla Fenwick", "place of birth", "Cork"),
                         ("Bath", "located in the administrative territorial entity", "Maine"),
                         ("Ingrid", "sibling", "Ingrun"), ("Warrens", "characters", "Grusk")])
    got = rels(("orla fenwick", "Place of Birth", "CORK"),
               ("Bath", "located in administrative territorial entity", "Maine"),
               ("Ingrid", "siblings", "Ingrun"), ("Warrens", "character", "Grusk"))
    r = score({"relations": got}, t, ctx())
    assert r.metrics["relations_f1"] == 1.0


def test_relation_label_renames_do_not_match():
    t = truth(relations=[("A", "place of birth", "B")])
    for label in ("birthplace", "born in", "place of death", "place"):
        r = score({"relations": rels(("A", label, "B"))}, t, ctx())
        assert r.metrics["relations_tp"] == 0, label


def test_relations_are_directed_by_default():
    t = truth(relations=[("Low Tide Lanterns", "follows", "Salt and Stone")])
    r = score({"relations": rels(("Salt and Stone", "follows", "Low Tide Lanterns"))}, t, ctx())
    assert (r.metrics["relations_tp"], r.metrics["relations_fp"], r.metrics["relations_fn"]) == (0, 1, 1)
    by = {row["outcome"]: row for row in r.items}
    assert "head and tail swapped; 'follows' is directed" in by["missed"]["reason"]
    assert "swapped" in by["spurious"]["reason"]


def test_symmetric_relations_are_undirected():
    t = truth(relations=[("Ingrid Sundby", "sibling", "Ingrun Sundby")])
    opts = {"symmetric_relations": ["Sibling"]}  # labels normalized like relations
    r = score({"relations": rels(("Ingrun Sundby", "sibling", "Ingrid Sundby"))}, t, ctx(opts))
    assert r.metrics["relations_f1"] == 1.0
    # both directions extracted: one item, counted once
    r = score({"relations": rels(("Ingrun Sundby", "sibling", "Ingrid Sundby"),
                                 ("Ingrid Sundby", "siblings", "Ingrun Sundby"))}, t, ctx(opts))
    assert (r.metrics["relations_tp"], r.metrics["relations_fp"]) == (1, 0)
    # only the listed relation is undirected
    t2 = truth(relations=[("A", "father", "B")])
    r = score({"relations": rels(("B", "father", "A"))}, t2, ctx(opts))
    assert r.metrics["relations_tp"] == 0


def test_both_directions_of_a_symmetric_truth_are_one_item():
    t = truth(relations=[("A", "spouse", "B"), ("B", "spouse", "A")])
    r = score({"relations": rels(("A", "spouse", "B"))}, t, ctx({"symmetric_relations": ["spouse"]}))
    assert (r.metrics["relations_tp"], r.metrics["relations_fn"], r.metrics["relations_f1"]) == (1, 0, 1.0)
    r = score({"relations": rels(("A", "spouse", "B"))}, t, ctx())  # directed: the reverse is missed
    assert (r.metrics["relations_tp"], r.metrics["relations_fn"]) == (1, 1)


def test_relation_ends_fold_like_entity_names():
    t = truth(relations=[("Copper Wolves", "location of formation", "Galway")])
    r = score({"relations": rels(("The Copper Wolves", "location of formation", "Galway."))}, t, ctx())
    assert r.metrics["relations_f1"] == 1.0
    r = score({"relations": rels(("Copper", "location of formation", "Galway"))}, t, ctx())
    assert r.metrics["relations_f1"] == 0.0


# ----------------------------------------------------------------------------- counting


def test_duplicates_count_once():
    t = truth([("kobold", "MISC"), ("Grusk", "PER")])
    got = ents(("Kobolds", "MISC"), ("kobold", "MISC"), ("the kobolds", "misc"), ("Grusk", "PER"), ("Grusk", "PER"))
    r = score({"entities": got}, t, ctx())
    assert (r.metrics["entities_tp"], r.metrics["entities_fp"], r.metrics["entities_fn"]) == (2, 0, 0)
    assert r.details["entities_duplicates"] == {"expected": 0, "extracted": 3}
    assert any("3 duplicate" in n for n in r.notes)
    # spurious duplicates count once too
    r = score({"entities": got + ents(("Orc", "MISC"), ("orcs", "MISC"))}, t, ctx())
    assert r.metrics["entities_fp"] == 1 and r.metrics["entities_precision"] == 2 / 3


def test_prf_values():
    t = truth([("A", "PER"), ("B", "PER"), ("C", "PER"), ("D", "PER")])
    r = score({"entities": ents(("A", "PER"), ("B", "PER"), ("X", "PER"))}, t, ctx())
    m = r.metrics
    assert (m["entities_tp"], m["entities_fp"], m["entities_fn"]) == (2, 1, 2)
    assert m["entities_precision"] == 2 / 3 and m["entities_recall"] == 0.5 and m["entities_f1"] == 4 / 7


# ----------------------------------------------------------------------------- null, never zero


def test_empty_on_both_sides_is_null():
    r = score({"entities": [], "relations": [], "summary": None}, truth(), ctx())
    for axis in ("entities", "relations"):
        for m in ("precision", "recall", "f1"):
            assert r.metrics[f"{axis}_{m}"] is None
    assert r.metrics["summary_f1"] is None
    assert r.score is None and r.passed is None and r.items == []


def test_nothing_extracted_gives_null_precision_and_zero_recall():
    t = truth(relations=[("A", "father", "B")])
    for extraction in (None, {}, {"entities": [], "relations": []}, "not a record"):
        r = score(extraction, t, ctx())
        assert r.metrics["relations_precision"] is None
        assert r.metrics["relations_recall"] == 0.0 and r.metrics["relations_f1"] == 0.0
        assert r.score == 0.0 and r.passed is False
    assert any("no extraction" in n for n in score(None, t, ctx()).notes)


def test_nothing_true_gives_null_recall_and_zero_precision():
    r = score({"entities": ents(("A", "PER"))}, truth(), ctx())
    assert r.metrics["entities_recall"] is None
    assert r.metrics["entities_precision"] == 0.0 and r.metrics["entities_f1"] == 0.0


def test_judged_metrics_are_null_never_zero():
    r = score({"entities": ents(("A", "PER"))}, truth([("A", "PER")]), ctx())
    for name in JUDGED:
        assert name in r.metrics and r.metrics[name] is None
    c = corpus_metrics([r])
    assert all(name in c and c[name] is None for name in JUDGED)


# ----------------------------------------------------------------------------- summary


def test_summary_token_f1():
    t = truth(summary="Orla Fenwick is a marine biologist.")
    r = score({"summary": "Fenwick is an Irish marine biologist"}, t, ctx())
    # tokens: [fenwick, is, irish, marine, biologist] vs [orla, fenwick, is, marine, biologist]
    assert r.metrics["summary_f1"] == pytest.approx(0.8)
    row = [x for x in r.items if x["axis"] == "summary"][0]
    assert row["outcome"] == "matched" and row["score"] == r.metrics["summary_f1"] and row["key"] is None
    assert score({"summary": "THE Orla Fenwick is a marine biologist"}, t, ctx()).metrics["summary_f1"] == 1.0


def test_missing_summary_scores_zero_against_a_true_one():
    t = truth(summary="A lake in Montana.")
    for extraction in ({}, {"summary": None}, {"summary": "  "}, {"summary": 42}):
        r = score(extraction, t, ctx())
        assert r.metrics["summary_f1"] == 0.0
        assert [x["outcome"] for x in r.items if x["axis"] == "summary"] == ["missed"]


def test_summary_is_null_when_the_truth_has_none():
    r = score({"summary": "Quokkas live on Rottnest Island."}, truth(), ctx())
    assert r.metrics["summary_f1"] is None
    assert not [x for x in r.items if x["axis"] == "summary"]


def test_summary_does_not_change_the_headline():
    t = truth(relations=[("A", "father", "B")], summary="x y z")
    r = score({"relations": rels(("A", "father", "B")), "summary": "nothing alike"}, t, ctx())
    assert r.score == 1.0 and r.metrics["summary_f1"] == 0.0


# ----------------------------------------------------------------------------- headline, table, robustness


def test_headline_is_relation_f1_and_threshold_applies_to_it():
    t = truth([("A", "PER"), ("B", "PER")], [("A", "father", "B"), ("A", "employer", "B")])
    got = {"entities": ents(("A", "PER"), ("B", "PER")), "relations": rels(("A", "father", "B"))}
    r = score(got, t, ctx(threshold=0.5))
    assert r.score == r.metrics["relations_f1"] == 2 / 3 and r.passed is True
    assert r.details["headline"] == "relations_f1"
    assert score(got, t, ctx(threshold=0.7)).passed is False
    assert score(got, t, ctx(threshold=2 / 3)).passed is True  # >= threshold passes


def test_item_table_rows():
    t = truth([("A", "PER"), ("B", "LOC")], [("A", "place of birth", "B")], summary="A was born in B.")
    got = {"entities": ents(("A", "PER"), ("C", "LOC")), "relations": rels(("A", "place of birth", "C")),
           "summary": "A was born in C."}
    r = score(got, t, ctx(member="m1"))
    assert all(set(row) == COLUMNS for row in r.items)
    assert {row["member"] for row in r.items} == {"m1"}
    table = {(row["axis"], row["outcome"], str(row["key"])) for row in r.items}
    assert table == {
        ("entities", "matched", "['a', 'PER']"), ("entities", "missed", "['b', 'LOC']"),
        ("entities", "spurious", "['c', 'LOC']"),
        ("relations", "missed", "['a', 'place of birth', 'b']"),
        ("relations", "spurious", "['a', 'place of birth', 'c']"),
        ("summary", "matched", "None"),
    }
    missed = [row for row in r.items if row["outcome"] == "missed" and row["axis"] == "entities"][0]
    assert missed["expected"] == {"name": "B", "type": "LOC"} and missed["extracted"] is None
    assert all(row["score"] is None for row in r.items if row["axis"] != "summary")


def test_malformed_items_are_noted_and_ignored():
    got = {"entities": ["Paris", {"name": ""}, {"name": 3, "type": "LOC"}, {"name": "Paris", "type": "LOC"}],
           "relations": {"head": "x"}}
    r = score(got, truth([("Paris", "LOC")]), ctx())
    assert r.metrics["entities_f1"] == 1.0
    assert any("entities[0]: not an object" in n for n in r.notes)
    assert any("entities[1]" in n for n in r.notes) and any("entities[2]" in n for n in r.notes)
    assert any("relations: not a list" in n for n in r.notes)
    r = score({"relations": [{"head": "A", "relation": "father"}]}, truth(relations=[("A", "father", "B")]), ctx())
    assert any("relations[0]: tail" in n for n in r.notes) and r.metrics["relations_tp"] == 0


# ----------------------------------------------------------------------------- models


def test_options_model_is_strict():
    assert GraphOptions().symmetric_relations == [] and GraphOptions().entity_type_in_key is True
    with pytest.raises(ValidationError):
        GraphOptions.model_validate({"symetric_relations": ["spouse"]})
    with pytest.raises(ValidationError):
        GraphOptions.model_validate({"symmetric_relations": ["  "]})
    assert GraphOptions.model_validate({"symmetric_relations": ["The Spouse"]}).symmetric == {"spouse"}


def test_truth_model_is_strict():
    ok = {"entities": [{"name": "A", "type": "PER"}], "relations": [], "summary": None}
    GraphTruth.model_validate(ok)
    for bad in (
        {**ok, "extra": 1},
        {**ok, "relations": [{"head": "A", "relation": "father", "tail": "B"}]},  # B is not an entity
        {**ok, "summary": " "},
        {**ok, "entities": [{"name": "", "type": "PER"}]},
        {"entities": [], "relations": []},  # summary must be given (null says: no summary)
    ):
        with pytest.raises(ValidationError):
            GraphTruth.model_validate(bad)


def test_scorer_is_registered_and_echoes_truth_without_notes():
    assert load_scorer("graph", TASK_DIR) is SCORER or load_scorer("graph", TASK_DIR).score is score
    t = GraphTruth.model_validate({"entities": [{"name": "A", "type": "PER"}], "relations": [],
                                   "summary": "s", "notes": "for people"})
    assert SCORER.expected_extraction(t) == {"entities": [{"name": "A", "type": "PER"}], "relations": [], "summary": "s"}
    SCORER.extraction_model.model_validate(SCORER.expected_extraction(t))


# ----------------------------------------------------------------------------- the independent oracle


def _perturb(record: dict) -> dict:
    """A deterministic, imperfect extraction: drops, additions, duplicates, re-typing,
    reversals and re-spellings that must (or must not) still match."""
    ents_in, rels_in = record["entities"], record["relations"]
    out_e = []
    for i, e in enumerate(ents_in):
        if i % 3 == 1:
            continue  # dropped
        e = dict(e)
        if i % 5 == 0:
            e["name"] = "The " + e["name"].upper() + "."  # re-spelled: still matches
        if i % 7 == 3:
            e["type"] = "MISC" if e["type"] != "MISC" else "ORG"  # re-typed: a miss and a spurious item
        out_e.append(e)
    if ents_in:
        out_e.append(dict(ents_in[-1]))  # duplicate (or re-adds a dropped one)
        out_e.append({"name": ents_in[0]["name"] + " chief", "type": ents_in[0]["type"]})  # token superset
    out_e.append({"name": f"Spurious Person {len(ents_in)}", "type": "PER"})
    out_r = []
    for i, r in enumerate(rels_in):
        if i % 4 == 2:
            continue  # dropped
        r = dict(r)
        if i % 6 == 1:
            r["head"], r["tail"] = r["tail"], r["head"]  # reversed
        if i % 5 == 4:
            r["relation"] = r["relation"].title()  # re-cased: still matches
        out_r.append(r)
    if rels_in:
        out_r.append(dict(rels_in[0]))  # duplicate
        out_r.append({"head": rels_in[-1]["head"], "relation": "sponsor", "tail": rels_in[-1]["tail"]})
    return {"entities": out_e, "relations": out_r, "summary": "a summary of the text"}


def _oracle_keys(axis: str, items: list[dict], symmetric: set[str]) -> set:
    # Written out again on purpose (not graph.entity_key): the oracle must not share the scorer's code paths.
    if axis == "entities":
        return {(fold(e["name"]), e["type"].strip().upper()) for e in items}
    keys = set()
    for r in items:
        h, rel, t = fold(r["head"]), fold(r["relation"]), fold(r["tail"])
        keys.add((min(h, t), rel, max(h, t)) if rel in symmetric else (h, rel, t))
    return keys


def _sklearn(true_keys: set, pred_keys: set):
    union = sorted(true_keys | pred_keys)
    if not union:
        return None, None, None, (0, 0, 0)
    y_true = np.array([k in true_keys for k in union])
    y_pred = np.array([k in pred_keys for k in union])
    p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, average="binary", zero_division=np.nan)
    counts = (int((y_true & y_pred).sum()), int((~y_true & y_pred).sum()), int((y_true & ~y_pred).sum()))
    return (*(None if math.isnan(x) else float(x) for x in (p, r, f)), counts)


def _members():
    task = load_task(TASK_DIR)
    out = []
    for m in task.members():
        if m.manifest.truth is not None:
            continue  # truth kept outside the repo (none in this task)
        out.append((task, m, m.load_truth()))
    return out


MEMBERS = _members()


def test_corpus_has_members_for_the_oracle():
    assert len(MEMBERS) >= 28


@pytest.mark.parametrize("task, member, member_truth", MEMBERS, ids=[m.id for _, m, _ in MEMBERS])
def test_strict_prf_agrees_with_sklearn(task, member, member_truth):
    extraction = _perturb(SCORER.expected_extraction(member_truth))
    c = ScoreContext(task_id=task.id, member_id=member.id, source_text="", options=task.options,
                     threshold=task.spec.threshold)
    result = task.scorer.score(extraction, member_truth, c)
    symmetric = {fold(s) for s in task.options.symmetric_relations}
    truth_record = SCORER.expected_extraction(member_truth)
    for axis in ("entities", "relations"):
        t_keys = _oracle_keys(axis, truth_record[axis], symmetric)
        p_keys = _oracle_keys(axis, extraction[axis], symmetric)
        p, r, f, (tp, fp, fn) = _sklearn(t_keys, p_keys)
        m = result.metrics
        assert (m[f"{axis}_tp"], m[f"{axis}_fp"], m[f"{axis}_fn"]) == (tp, fp, fn), axis
        assert (m[f"{axis}_precision"], m[f"{axis}_recall"], m[f"{axis}_f1"]) == (p, r, f), axis  # exactly
        rows = [row for row in result.items if row["axis"] == axis]
        assert {tuple(row["key"]) for row in rows if row["outcome"] == "matched"} == t_keys & p_keys
        assert {tuple(row["key"]) for row in rows if row["outcome"] == "missed"} == t_keys - p_keys
        assert {tuple(row["key"]) for row in rows if row["outcome"] == "spurious"} == p_keys - t_keys
    assert result.score == result.metrics["relations_f1"]


def test_corpus_micro_prf_agrees_with_sklearn():
    results, t_all, p_all = [], {"entities": set(), "relations": set()}, {"entities": set(), "relations": set()}
    for task, member, member_truth in MEMBERS:
        extraction = _perturb(SCORER.expected_extraction(member_truth))
        c = ScoreContext(task_id=task.id, member_id=member.id, source_text="", options=task.options,
                         threshold=task.spec.threshold)
        results.append(task.scorer.score(extraction, member_truth, c))
        symmetric = {fold(s) for s in task.options.symmetric_relations}
        for axis in ("entities", "relations"):
            t_all[axis] |= {(member.id, k) for k in _oracle_keys(axis, SCORER.expected_extraction(member_truth)[axis], symmetric)}
            p_all[axis] |= {(member.id, k) for k in _oracle_keys(axis, extraction[axis], symmetric)}
    c = corpus_metrics(results)
    for axis in ("entities", "relations"):
        p, r, f, counts = _sklearn(t_all[axis], p_all[axis])
        assert (c[f"{axis}_precision"], c[f"{axis}_recall"], c[f"{axis}_f1"]) == (p, r, f)
        assert (c[f"{axis}_tp"], c[f"{axis}_fp"], c[f"{axis}_fn"]) == counts
        f1s = [x.metrics[f"{axis}_f1"] for x in results]
        assert c[f"{axis}_macro_f1"] == pytest.approx(sum(f1s) / len(f1s))
    with_summary = [x.metrics["summary_f1"] for x in results if x.metrics["summary_f1"] is not None]
    assert c["summary_members"] == len(with_summary) >= 8
    assert c["summary_f1"] == pytest.approx(sum(with_summary) / len(with_summary))
