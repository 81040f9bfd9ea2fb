"""Evidence per field (evalkit/scoring/evidence.py): planted quotes for each outcome, the metrics beside value
accuracy, and the member page's highlight (escaped)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evalkit.scoring import ScoreContext
from evalkit.scoring.evidence import bears, locate
from evalkit.scoring.fields import FieldsOptions, FieldsTruth, score

DOC = """# Invoice INV-2026-014

Issued: 3 March 2026. Payment due within thirty (30) days.

| Item | Amount |
| Oak desk | 480.00 |
| Delivery | 60.00 |

Subtotal: 540.00
VAT (20%): 108.00
**Total due: 648.00**

Last year's invoice INV-2025-101 totalled 590.00.
"""
FIELDS = {"invoice_no": {"kind": "id"}, "issued": {"kind": "date"}, "terms": {"kind": "duration"},
          "total": {"kind": "number", "tolerance": 0.005}, "vat_rate": {"kind": "number"},
          "note": {"kind": "text", "evidence": False}}
TRUTH = {"invoice_no": "INV-2026-014", "issued": "2026-03-03", "terms": "30 days", "total": 648.0, "vat_rate": 0.2,
         "note": None}


def run(record, evidence, fields=FIELDS, task_evidence=True, doc=DOC):
    opts = FieldsOptions.model_validate({"fields": fields, "evidence": task_evidence})
    ctx = ScoreContext(task_id="t", member_id="m", source_text=doc, options=opts, threshold=0.9)
    return score({**record, "evidence": evidence}, FieldsTruth(record=TRUTH), ctx)


def outcomes(res):
    return {e["field"]: e["outcome"] for e in res.details["evidence"]}


GOOD = {"invoice_no": {"page": 1, "quote": "Invoice INV-2026-014"},
        "issued": {"page": 1, "quote": "Issued: 3 March 2026."},
        "terms": {"page": 1, "quote": "due within thirty (30) days"},
        "total": {"page": 1, "quote": "Total due: 648.00"},
        "vat_rate": {"page": 1, "quote": "VAT (20%): 108.00"}}


def test_quotes_that_bear_the_values_are_grounded_under_each_kind():
    res = run(TRUTH, GOOD)
    assert set(outcomes(res).values()) == {"grounded"} and len(outcomes(res)) == 5
    assert res.metrics["evidence_grounded_rate"] == 1.0 and res.metrics["evidence_grounded"] == 5
    assert res.score == 1.0  # evidence never moves the score
    # the field's item row carries its evidence outcome too
    assert next(r for r in res.items if r["field"] == "total")["evidence"] == "grounded"


def test_whitespace_and_case_are_folded_when_locating_a_quote():
    res = run(TRUTH, GOOD | {"issued": {"page": None, "quote": "issued:\n  3   MARCH 2026"}})
    assert outcomes(res)["issued"] == "grounded"
    span = next(e for e in res.details["evidence"] if e["field"] == "issued")["span"]
    assert DOC[span[0]:span[1]] == "Issued: 3 March 2026"


def test_right_value_wrong_evidence():
    res = run(TRUTH, GOOD | {"total": {"page": 1, "quote": "Subtotal: 540.00"}})
    assert outcomes(res)["total"] == "right_value_wrong_evidence"
    assert res.metrics["evidence_right_value_wrong_evidence"] == 1
    assert res.metrics["evidence_grounded_rate"] == pytest.approx(4 / 5)


def test_evidence_not_found_for_a_quote_the_document_does_not_hold():
    res = run(TRUTH, GOOD | {"invoice_no": {"page": 1, "quote": "Invoice number INV-2026-014"}})
    assert outcomes(res)["invoice_no"] == "evidence_not_found" and res.metrics["evidence_not_found"] == 1


def test_evidence_does_not_support_a_wrong_value():
    res = run(TRUTH | {"total": 590.0}, GOOD)  # the quote says 648.00, the value is wrong
    assert outcomes(res)["total"] == "evidence_does_not_support"
    assert res.metrics["evidence_does_not_support"] == 1


def test_a_wrong_value_its_quote_bears_is_grounded_and_still_a_mismatch():
    res = run(TRUTH | {"invoice_no": "INV-2025-101"}, GOOD | {"invoice_no": {"quote": "invoice INV-2025-101"}})
    assert outcomes(res)["invoice_no"] == "grounded"
    row = next(r for r in res.items if r["field"] == "invoice_no")
    assert row["outcome"] == "mismatch"
    assert "the value itself is wrong" in res.details["evidence"][0]["reason"]


def test_no_quote_is_its_own_outcome_and_null_values_ask_none():
    ev = dict(GOOD)
    del ev["terms"]
    res = run(TRUTH | {"vat_rate": None}, ev)
    got = outcomes(res)
    assert got["terms"] == "no_evidence" and "vat_rate" not in got and "note" not in got
    assert res.metrics["evidence_missing"] == 1


def test_a_fragment_of_an_id_or_a_number_is_not_borne():
    assert not bears("id", "INV-2026", "Invoice INV-2026-014")
    assert not bears("number", 48, "Oak desk 480.00")
    assert bears("number", 0.2, "VAT (20%): 108.00")
    assert bears("text", "oak desk", "| Oak desk | 480.00 |") and not bears("text", "oak", "Oakland")


def test_a_declared_sum_derives_a_total_from_its_addends():
    fields = FIELDS | {"total": {"kind": "number", "tolerance": 0.005, "derive": "sum"}}
    quote = "Subtotal: 540.00\nVAT (20%): 108.00"
    assert outcomes(run(TRUTH, GOOD | {"total": {"quote": quote}}, fields))["total"] == "grounded"
    assert outcomes(run(TRUTH, GOOD | {"total": {"quote": quote}}))["total"] == "right_value_wrong_evidence"


def test_locate_maps_folded_offsets_back_to_the_document():
    assert locate("A  b\n\nC d", "b c") == (3, 7)
    assert locate("abc", "   ") is None


def test_a_task_without_evidence_returns_no_evidence_metrics_and_keeps_evidence_unscored():
    opts = FieldsOptions.model_validate({"fields": {"x": {"kind": "id"}}})
    ctx = ScoreContext(task_id="t", member_id="m", source_text="X1", options=opts, threshold=0.9)
    res = score({"x": "X1", "evidence": {"x": "X1"}}, FieldsTruth(record={"x": "X1"}), ctx)
    assert not any(k.startswith("evidence") for k in res.metrics)
    assert res.details["unscored_fields"] == ["evidence"] and "evidence" not in res.details


def test_per_field_evidence_without_the_task_flag():
    fields = {"invoice_no": {"kind": "id", "evidence": True}, "total": {"kind": "number"}}
    res = run(TRUTH, GOOD, fields, task_evidence=False)
    assert list(outcomes(res)) == ["invoice_no"]


@pytest.mark.parametrize("spec, message", [
    ({"kind": "set", "evidence": True}, "evidence: true is only allowed"),
    ({"kind": "date", "derive": "sum"}, "derive is only allowed for kind number"),
])
def test_evidence_specs_are_checked_at_load(spec, message):
    with pytest.raises(ValidationError, match=message):
        FieldsOptions.model_validate({"fields": {"f": spec}})


# ---------------------------------------------------------------- the member page


def test_member_page_highlights_each_quote_in_place_and_escapes_hostile_text(monkeypatch):
    import IPython.display

    from evalkit.report import views
    from evalkit.report.views.member import quote_html

    doc = 'Supplier: <script>alert("x")</script> Ltd\nTotal due: 648.00 & more'
    fields = {"supplier": {"kind": "exact_text"}, "total": {"kind": "number"}}
    opts = FieldsOptions.model_validate({"fields": fields, "evidence": True})
    ctx = ScoreContext(task_id="t", member_id="m", source_text=doc, options=opts, threshold=0.9)
    truth = FieldsTruth(record={"supplier": '<script>alert("x")</script> Ltd', "total": 648.0})
    record = {**truth.record, "evidence": {"supplier": {"page": 1, "quote": '<script>alert("x")</script> Ltd'},
                                          "total": {"page": 1, "quote": "<img src=x onerror=alert(1)>"}}}
    res = score(record, truth, ctx)
    assert outcomes(res) == {"supplier": "grounded", "total": "evidence_not_found"}
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, **kw: shown.append(data))
    views.document(doc, res.to_json())
    page = "\n".join(d["text/html"] for d in shown)
    assert '<span class="ev-grounded" title="supplier: grounded">&lt;script&gt;alert("x")&lt;/script&gt; Ltd</span>' \
        in page
    assert "Total due: 648.00 &amp; more" in page  # the context after the quote, escaped
    assert '<span class="ev-unlocated">&lt;img src=x onerror=alert(1)&gt;</span>' in page
    assert "<script>" not in page and "<img" not in page
    # the context is cut to EVIDENCE_CONTEXT characters either side, with an ellipsis
    long = "x" * 200 + "QUOTE" + "y" * 200
    html = quote_html(long, {"field": "f", "outcome": "grounded", "span": [200, 205]}, context=10)
    assert html == '…xxxxxxxxxx<span class="ev-grounded" title="f: grounded">QUOTE</span>yyyyyyyyyy…'


def test_member_page_shows_no_evidence_section_when_the_task_asks_none(monkeypatch):
    import IPython.display

    from evalkit.report import views

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, **kw: shown.append(data))
    views.document("A1", {"items": [{"field": "x", "extracted": "A1", "outcome": "match"}], "details": {}})
    assert not any("ev-" in d.get("text/html", "") or "asked for a quote" in d.get("text/html", "") for d in shown)


def test_pasting_the_whole_document_as_the_quote_grounds_nothing():
    long_doc = DOC + "Terms and conditions apply to every order. " * 10  # over 500 characters
    res = run(TRUTH, GOOD | {"total": {"page": 1, "quote": long_doc}}, doc=long_doc)  # in it, and bears 648.00
    assert outcomes(res)["total"] == "no_evidence"
    assert "over 500" in next(e for e in res.details["evidence"] if e["field"] == "total")["reason"]
