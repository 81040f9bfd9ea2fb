"""Multi-term records (kind `terms`, issue 12.10): extracted terms are aligned to truth terms by catalogue
and start, ties by rates, before their fields are scored; unaligned terms are missing or extra rows."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evalkit.scoring import ScoreContext
from evalkit.scoring.fields import FieldsOptions, FieldsTruth, score
from evalkit.scoring.terms import align, as_terms

SOURCE = "Account ACC-1. Archive from 1 April 2026 at 65%; Frontline from 1 January 2026 at 75%."
TERM_FIELDS = {
    "catalogue": {"kind": "text"},
    "lifecycle_term_start": {"kind": "date", "weight": 2},
    "term_rate": {"kind": "number", "weight": 2, "tolerance": 0.001},
    "commission": {"kind": "number", "weight": 2, "tolerance": 0.001},
    "conditions": {"kind": "conditions", "weight": 2, "tolerance": 0.001},
}
TERMS = {"account_id": {"kind": "id", "weight": 2, "identifier": True},
         "terms": {"kind": "terms", "fields": TERM_FIELDS, "align_by": ["catalogue", "lifecycle_term_start"],
                   "tie_by": ["term_rate", "commission"]}}
FRONT = {"catalogue": "Frontline", "lifecycle_term_start": "2026-01-01", "term_rate": 0.75, "commission": 0.25,
         "conditions": []}
ARCHIVE = {"catalogue": "Archive", "lifecycle_term_start": "2026-04-01", "term_rate": 0.65, "commission": 0.35,
           "conditions": [{"priority": 1, "transaction_type": "stream", "store": "YouTube", "country": "DE",
                           "rate": 0.6}]}


def run(fields, expected, extracted):
    opts = FieldsOptions.model_validate({"fields": fields})
    truth = FieldsTruth(record=expected)
    return score(extracted, truth, ScoreContext(task_id="t", member_id="m", source_text=SOURCE, options=opts,
                                                threshold=0.9))


def outcomes(res):
    return {r["field"]: r["outcome"] for r in res.items}


def test_terms_in_another_order_align_by_catalogue_and_start():
    res = run(TERMS, {"account_id": "ACC-1", "terms": [FRONT, ARCHIVE]},
              {"account_id": "ACC-1", "terms": [ARCHIVE, FRONT]})
    assert res.score == 1.0 and set(outcomes(res).values()) == {"match"}
    assert "terms[2].conditions" in outcomes(res)  # rows are numbered by the truth term


def test_ties_on_catalogue_and_start_are_broken_by_rates():
    a = FRONT | {"catalogue": "Catalogue", "lifecycle_term_start": None}
    b = a | {"term_rate": 0.6, "commission": 0.4}
    res = run(TERMS, {"terms": [a, b]}, {"terms": [b, a]})
    assert res.score == 1.0
    # Positional pairing would have compared a with b: the rates would mismatch.
    assert all(r["outcome"] == "match" for r in res.items if r["field"].startswith("terms"))


def test_a_truth_term_nothing_aligns_with_is_missing_field_by_field():
    res = run(TERMS, {"terms": [FRONT, ARCHIVE]}, {"terms": [ARCHIVE]})
    got = outcomes(res)
    assert all(got[f"terms[2].{f}"] == "match" for f in TERM_FIELDS)
    assert all(got[f"terms[1].{f}"] == "missing" for f in TERM_FIELDS)  # even its empty conditions
    row = next(r for r in res.items if r["field"] == "terms[1].term_rate")
    assert (row["credit"], row["weight"]) == (0.0, 2) and "no extracted term" in row["reason"]
    assert res.metrics["missing"] == len(TERM_FIELDS)


def test_an_extracted_term_aligned_with_nothing_is_extra_and_costs_its_weight():
    bogus = FRONT | {"catalogue": "Sister label", "lifecycle_term_start": "2024-01-01", "term_rate": 0.9}
    res = run(TERMS, {"terms": [FRONT]}, {"terms": [bogus, FRONT]})
    got = outcomes(res)
    assert all(got[f"terms[1].{f}"] == "match" for f in TERM_FIELDS)  # FRONT found although listed second
    extra = [r for r in res.items if r["field"].startswith("terms[extra 1].")]
    assert {r["outcome"] for r in extra} == {"extra"} and len(extra) == len(TERM_FIELDS)
    total = sum(s.get("weight", 1) for s in TERM_FIELDS.values())
    assert res.score == pytest.approx((2 + total) / (2 + 2 * total))  # account_id: both null, weight 2


def test_a_condition_under_the_wrong_term_is_charged_to_both_terms():
    moved = [FRONT | {"conditions": ARCHIVE["conditions"]}, ARCHIVE | {"conditions": []}]
    got = outcomes(run(TERMS, {"terms": [FRONT, ARCHIVE]}, {"terms": moved}))
    assert got["terms[1].conditions"] == "extra" and got["terms[2].conditions"] == "missing"
    assert got["terms[1].term_rate"] == got["terms[2].term_rate"] == "match"


def test_no_terms_on_either_side_is_one_matching_row():
    res = run(TERMS, {"account_id": "ACC-1", "terms": []}, {"account_id": "ACC-1", "terms": None})
    assert outcomes(res) == {"account_id": "match", "terms": "match"}


def test_a_single_object_or_junk_items_are_read_as_terms():
    assert as_terms(FRONT) == [FRONT] and as_terms("x") == [] and as_terms([FRONT, 3]) == [FRONT, {}]


@pytest.mark.parametrize("extracted", [
    FRONT,
    FRONT | {"term_rate": 0.7},
    FRONT | {"lifecycle_term_start": None, "catalogue": "Other"},
    FRONT | {"conditions": ARCHIVE["conditions"]},
    {"catalogue": None, "lifecycle_term_start": None, "term_rate": None, "commission": None, "conditions": []},
])
@pytest.mark.parametrize("account", ["ACC-1", "ACC-9", None])
def test_a_single_term_scores_exactly_as_the_same_fields_flat(extracted, account):
    """Single-term members are unchanged in score: one term, whatever it holds, is paired and its rows are
    the flat record's rows under other names."""
    flat = run({"account_id": TERMS["account_id"], **TERM_FIELDS}, {"account_id": "ACC-1", **FRONT},
               {"account_id": account, **extracted})
    nested = run(TERMS, {"account_id": "ACC-1", "terms": [FRONT]}, {"account_id": account, "terms": [extracted]})
    assert nested.score == flat.score and nested.metrics == flat.metrics
    assert [(r["outcome"], r["weight"], r["credit"]) for r in nested.items] == \
        [(r["outcome"], r["weight"], r["credit"]) for r in flat.items]
    assert [r["field"] for r in nested.items][1:] == [f"terms[1].{f}" for f in TERM_FIELDS]


def test_alignment_is_greedy_on_the_best_pairs_and_keeps_truth_order():
    same = lambda f, e, g: e == g  # noqa: E731
    found = align([{"c": "a"}, {"c": "b"}], [{"c": "b"}, {"c": "z"}, {"c": "a"}], same, ["c"], [])
    assert (found.pairs, found.missing, found.extra) == ([(0, 2), (1, 0)], [], [1])


@pytest.mark.parametrize("spec, message", [
    ({"kind": "terms"}, "needs `fields`"),
    ({"kind": "terms", "fields": {"a": {"kind": "text"}}, "align_by": ["b"]}, "not in the term's `fields`"),
    ({"kind": "terms", "fields": {"a": {"kind": "terms", "fields": {"x": {"kind": "id"}}}}}, "cannot nest"),
    ({"kind": "text", "fields": {"a": {"kind": "text"}}}, "only allowed for kind terms"),
])
def test_terms_options_are_checked(spec, message):
    with pytest.raises(ValidationError, match=message):
        FieldsOptions.model_validate({"fields": {"t": spec}})


def test_the_bundled_multi_term_members_hold_what_they_test():
    """deal-memos-terms: two catalogues starting the same day with different rates (only the catalogue aligns
    them), and a condition that belongs to the second term; moving it to the first fails the member."""
    from evalkit.corpus.tasks import DEFAULT_CORPUS, find_task

    task = find_task(DEFAULT_CORPUS, "deal-memos-terms")

    def result(member_id, edit):
        member = task.member(member_id)
        truth = member.load_truth()
        record = edit(json_copy(truth.record))
        ctx = ScoreContext(task_id=task.id, member_id=member_id, options=task.options, threshold=task.spec.threshold,
                           source_text=(member.dir / "memo.md").read_text())
        return score(record, truth, ctx)

    two = task.member("two-catalogues-two-rates").load_truth().record["terms"]
    assert len({t["lifecycle_term_start"] for t in two}) == 1 and len({t["term_rate"] for t in two}) == 2
    swapped = result("two-catalogues-two-rates", lambda r: r | {"terms": r["terms"][::-1]})
    assert swapped.score == 1.0  # order is not a mistake
    copied = result("two-catalogues-two-rates",
                    lambda r: r | {"terms": [r["terms"][0], r["terms"][1] | {"term_rate": 0.8, "commission": 0.2}]})
    assert {r["field"]: r["outcome"] for r in copied.items}["terms[2].term_rate"] == "mismatch"
    assert not copied.passed

    terms = task.member("condition-on-second-term").load_truth().record["terms"]
    assert terms[0]["conditions"] == [] and len(terms[1]["conditions"]) == 1
    moved = result("condition-on-second-term", lambda r: r | {"terms": [
        r["terms"][0] | {"conditions": r["terms"][1]["conditions"]}, r["terms"][1] | {"conditions": []}]})
    assert not moved.passed and moved.metrics["extra"] == moved.metrics["missing"] == 1


def json_copy(value):
    import json

    return json.loads(json.dumps(value, default=str))
