"""Kind `table` of the `fields` scorer (evalkit/scoring/tables.py): rows aligned by optimal assignment, cell
precision/recall/F1, the GriTS-Top structure score, one item row per cell, credit = cell F1 × weight."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evalkit.scoring import ScoreContext
from evalkit.scoring.fields import FieldsOptions, FieldsTruth, score
from evalkit.scoring.tables import align

COLUMNS = {"description": {"kind": "text"}, "quantity": {"kind": "number"},
           "unit_price": {"kind": "number", "tolerance": 0.005}, "amount": {"kind": "number", "tolerance": 0.01}}
TRUTH = [
    {"description": "Oak desk", "quantity": 2, "unit_price": 240.0, "amount": 480.0},
    {"description": "Desk lamp", "quantity": 4, "unit_price": 35.5, "amount": 142.0},
    {"description": "Delivery", "quantity": 1, "unit_price": 60.0, "amount": 60.0},
]


def run(extracted, truth=TRUTH, columns=COLUMNS, weight=2.0, scalar=True):
    fields = {"lines": {"kind": "table", "weight": weight, "columns": columns}}
    if scalar:
        fields["invoice_no"] = {"kind": "id"}
    opts = FieldsOptions.model_validate({"fields": fields})
    t = FieldsTruth(record={"lines": truth, "invoice_no": "INV-7"})
    ctx = ScoreContext(task_id="t", member_id="m", source_text="", options=opts, threshold=0.9)
    return score({"lines": extracted, "invoice_no": "INV-7"}, t, ctx)


def cells(res):
    return {(r["row"], r["column"]): r for r in res.items if "column" in r}


def test_reordered_rows_score_perfect():
    res = run(list(reversed(TRUTH)))
    m = res.metrics
    assert (m["table_cell_precision"], m["table_cell_recall"], m["table_cell_f1"], m["table_structure"]) == (1, 1, 1, 1)
    assert res.score == 1.0 and res.passed
    # each cell row names the truth row it belongs to, whatever the extracted order
    assert cells(res)[("1", "description")]["extracted"] == "Oak desk"
    assert cells(res)[("3", "description")]["extracted"] == "Delivery"


def test_one_item_row_per_cell_with_field_row_column_and_reason():
    res = run(TRUTH)
    table_rows = [r for r in res.items if "column" in r]
    assert len(table_rows) == 12
    row = cells(res)[("2", "unit_price")]
    assert row["field"] == "lines[2].unit_price" and row["kind"] == "number"
    assert {"expected", "extracted", "outcome", "reason"} <= set(row) and row["outcome"] == "match"


def test_missing_row_loses_recall_not_precision():
    res = run(TRUTH[:2])
    m = res.metrics
    assert (m["table_cell_tp"], m["table_cell_fp"], m["table_cell_fn"]) == (8, 0, 4)
    assert m["table_cell_precision"] == 1.0 and m["table_cell_recall"] == pytest.approx(8 / 12)
    assert m["table_structure"] == pytest.approx(2 * 2 * 4 / (3 * 4 + 2 * 4))
    missing = [r for r in res.items if r.get("row") == "3"]
    assert {r["outcome"] for r in missing} == {"missing"} and "no extracted row" in missing[0]["reason"]


def test_extra_row_loses_precision_not_recall():
    res = run([*TRUTH, {"description": "Previous balance", "quantity": 1, "unit_price": 99.0, "amount": 99.0}])
    m = res.metrics
    assert (m["table_cell_tp"], m["table_cell_fp"], m["table_cell_fn"]) == (12, 4, 0)
    assert m["table_cell_recall"] == 1.0 and m["table_cell_precision"] == pytest.approx(12 / 16)
    extra = [r for r in res.items if r.get("row") == "extra 1"]
    assert len(extra) == 4 and {r["outcome"] for r in extra} == {"extra"}
    assert extra[0]["field"] == "lines[extra 1].description"


def test_merged_row_is_two_truth_rows_lost_and_one_extra_and_a_smaller_grid():
    merged = {"description": "Oak desk and desk lamp", "quantity": 6, "unit_price": None, "amount": 622.0}
    res = run([merged, TRUTH[2]])
    m = res.metrics
    # The merged row equals neither truth row in any cell: both truth rows are missing (8 cells), the merged
    # row's 3 filled cells are extra; the delivery row is intact.
    assert (m["table_cell_tp"], m["table_cell_fp"], m["table_cell_fn"]) == (4, 3, 8)
    assert m["table_cell_f1"] == pytest.approx(8 / (8 + 3 + 8))
    assert m["table_structure"] == pytest.approx(2 * 2 * 4 / (3 * 4 + 2 * 4))
    assert m["table_structure"] < 1


def test_transposed_columns_keep_the_structure_but_lose_the_cells():
    swapped = [{**r, "quantity": r["unit_price"], "unit_price": r["quantity"]} for r in TRUTH]
    res = run(swapped)
    m = res.metrics
    assert m["table_structure"] == 1.0  # same shape
    assert (m["table_cell_tp"], m["table_cell_fp"], m["table_cell_fn"]) == (6, 6, 6)  # delivery's 1 vs 60 too
    assert cells(res)[("1", "quantity")]["outcome"] == "mismatch"
    assert "numbers differ" in cells(res)[("1", "quantity")]["reason"]
    assert cells(res)[("1", "amount")]["outcome"] == "match"  # the row is still aligned by its other cells


def test_tolerance_is_per_column():
    near = [dict(r) for r in TRUTH]
    near[0] |= {"unit_price": 240.004, "amount": 480.01}  # within 0.005 and 0.01
    near[1] |= {"quantity": 4.001}  # quantity has no tolerance
    res = run(near)
    c = cells(res)
    assert c[("1", "unit_price")]["outcome"] == "match" and c[("1", "amount")]["outcome"] == "match"
    assert c[("2", "quantity")]["outcome"] == "mismatch"
    near[0]["amount"] = 480.02
    assert cells(run(near))[("1", "amount")]["outcome"] == "mismatch"


def test_cell_kinds_reuse_the_field_kinds_normalization():
    cols = {"item": {"kind": "text"}, "due": {"kind": "date"}, "period": {"kind": "duration"}}
    truth = [{"item": "The Annual licence", "due": "2026-03-01", "period": "12 months"}]
    res = run([{"item": "annual licence.", "due": "1 March 2026", "period": "one (1) year"}], truth, cols)
    assert res.metrics["table_cell_f1"] == 1.0


def test_table_credit_is_cell_f1_times_weight():
    res = run(TRUTH[:2], weight=2.0)
    f1 = res.metrics["table_cell_f1"]
    table = [r for r in res.items if "column" in r]
    assert sum(r["weight"] for r in table) == pytest.approx(2.0)
    assert sum(r["credit"] for r in table) == pytest.approx(2.0 * f1)
    assert res.score == pytest.approx((2.0 * f1 + 1.0) / 3.0)  # plus the invoice number, weight 1


def test_alignment_is_optimal_not_greedy():
    # Equal cells: e0-g0 3, e0-g1 2, e1-g0 2, e1-g1 0. Taking the best pair first (e0-g0) leaves e1-g1 with
    # nothing in common (3 in all); the assignment pairs e0-g1 and e1-g0 (4).
    cols = ["a", "b", "c", "d"]
    e = [{"a": 1, "b": 2, "c": 3, "d": 4}, {"a": 7, "b": 8, "c": 3, "d": 40}]
    g = [{"a": 1, "b": 2, "c": 3, "d": 40}, {"a": 1, "b": 2, "c": 30, "d": 50}]

    def same(_c, x, y):
        return x == y, ""

    pairs, equal = align(e, g, cols, same)
    assert pairs == [(0, 1), (1, 0)] and sum(equal[i, j] for i, j in pairs) == 4


def test_both_empty_is_one_matching_row_and_perfect_figures():
    res = run([], truth=[], scalar=False)
    assert res.score == 1.0 and len(res.items) == 1 and res.items[0]["outcome"] == "match"
    assert res.metrics["table_cell_f1"] == 1.0 and res.metrics["table_structure"] == 1.0


def test_no_extraction_scores_zero_for_the_table():
    res = run(None, scalar=False)
    assert res.score == 0.0 and res.metrics["table_cell_recall"] == 0.0 and res.metrics["table_structure"] == 0.0


def test_a_task_without_a_table_returns_no_table_metrics():
    opts = FieldsOptions.model_validate({"fields": {"x": {"kind": "id"}}})
    ctx = ScoreContext(task_id="t", member_id="m", source_text="", options=opts, threshold=0.9)
    res = score({"x": "A1"}, FieldsTruth(record={"x": "A1"}), ctx)
    assert not any(k.startswith("table_") for k in res.metrics)


@pytest.mark.parametrize("spec, message", [
    ({"kind": "table"}, "needs `columns`"),
    ({"kind": "table", "columns": {"x": {"kind": "terms", "fields": {"y": {"kind": "id"}}}}}, "not a cell kind"),
    ({"kind": "table", "columns": {"x": {"kind": "number", "weight": 3}}}, "cells weigh alike"),
    ({"kind": "number", "columns": {"x": {"kind": "number"}}}, "only allowed for kind table"),
])
def test_table_specs_are_checked_at_load(spec, message):
    with pytest.raises(ValidationError, match=message):
        FieldsOptions.model_validate({"fields": {"t": spec}})
