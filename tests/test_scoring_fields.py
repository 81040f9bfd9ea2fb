"""The `fields` scorer and its gate: one test per rule of docs/corpus-format.md."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from pydantic import ValidationError

from evalkit.scoring import ScoreContext
from evalkit.scoring.fields import SCORER, FieldsOptions, FieldsTruth, score
from evalkit.scoring.gate import GateOptions, run_gate

SOURCE = "Memo. Account ACC-123, entity SE-77.\nStart  1 March 2024."
ROW_KEYS = {"member", "field", "kind", "weight", "expected", "extracted", "outcome", "credit", "reason"}


def run(fields, expected, extracted, *, gate=None, truth_gate=None, source=SOURCE, threshold=0.9, penalty=2):
    opts = FieldsOptions.model_validate(
        {"fields": fields, "gate": gate or {}, "hallucination_penalty": penalty}
    )
    missing, blocking = truth_gate or ([], False)
    truth = FieldsTruth(record=expected, expected_missing_fields=missing, expected_blocking=blocking)
    ctx = ScoreContext(task_id="t", member_id="m1", source_text=source, options=opts, threshold=threshold)
    return score(extracted, truth, ctx)


def one(kind, expected, extracted, **spec):
    """Outcome of a single field of `kind`."""
    res = run({"f": {"kind": kind, **spec}}, {"f": expected}, {"f": extracted})
    return res.items[0]["outcome"]


# ---------------------------------------------------------------- kinds


def test_id_is_case_folded_and_trimmed():
    assert one("id", "ACC-123", " acc-123 ") == "match"
    assert one("id", "ACC-123", "ACC-124") == "mismatch"


def test_enum_is_case_folded_but_not_normalized():
    assert one("enum", "auto", "AUTO") == "match"
    assert one("enum", "auto_renew", "auto renew") == "mismatch"


def test_text_uses_squad_normalization():
    assert one("text", "The Strategic Alliance Agreement", "strategic alliance  agreement.") == "match"
    assert one("text", "Strategic Alliance Agreement", "Alliance Agreement") == "mismatch"


def test_exact_text_keeps_case_punctuation_and_markup_but_collapses_whitespace():
    name = "Nightjar Records </script><script>alert(1)</script> Distribution Agreement"
    assert one("exact_text", name, "  Nightjar Records </script><script>alert(1)</script>\n Distribution  Agreement ") == "match"
    assert one("exact_text", name, name.lower()) == "mismatch"
    assert one("exact_text", "Orbit Sound, Ltd.", "Orbit Sound Ltd") == "mismatch"
    assert one("text", "Orbit Sound, Ltd.", "Orbit Sound Ltd") == "match"  # the SQuAD kind would let it pass


def test_deal_memos_contract_name_is_exact_and_weighs_like_an_identifier():
    """The source rules: contract_name weighs 2 and is copied exactly, markup included (issue 12.1)."""
    from evalkit.corpus.tasks import DEFAULT_CORPUS, find_task

    task = find_task(DEFAULT_CORPUS, "deal-memos")
    spec = task.options.fields["contract_name"]
    assert (spec.kind, spec.weight) == ("exact_text", 2)
    stated = "Nightjar Sessions </script><script>alert(1)</script> Distribution"
    stripped = "Nightjar Sessions script script alert 1 script Distribution"
    ctx = ScoreContext(task_id="deal-memos", member_id="m", source_text=stated, options=task.options, threshold=0.9)
    truth = FieldsTruth(record={"contract_name": stated}, expected_missing_fields=[], expected_blocking=False)
    row = {r["field"]: r for r in score({"contract_name": stripped}, truth, ctx).items}["contract_name"]
    assert (row["outcome"], row["weight"], row["credit"]) == ("mismatch", 2, 0.0)
    row = {r["field"]: r for r in score({"contract_name": stated}, truth, ctx).items}["contract_name"]
    assert (row["outcome"], row["credit"]) == ("match", 2)


def test_number_tolerance_boundary():
    assert one("number", 0.7, 0.701, tolerance=0.001) == "match"
    assert one("number", 0.7, 0.7011, tolerance=0.001) == "mismatch"


def test_number_default_tolerance_is_zero_and_percent_strings_read():
    assert one("number", 3, 3.0) == "match"
    assert one("number", 3, 3.0001) == "mismatch"
    assert one("number", 0.7, "70%") == "match"


def test_date_formats_compare_as_calendar_dates():
    assert one("date", "2015-09-10", "9/10/15") == "match"
    assert one("date", "2015-09-10", "September 10, 2015") == "match"
    assert one("date", "2000", "[]/[]/2000") == "match"
    assert one("date", "perpetual", "Perpetual") == "match"
    res = run({"d": {"kind": "date"}}, {"d": "2024-03-01"}, {"d": "2024-01-03"})
    assert res.items[0]["reason"] == "dates differ: 2024-03-01 vs 2024-01-03"


def test_unreadable_date_is_a_mismatch_naming_it():
    res = run({"d": {"kind": "date"}}, {"d": "2024-03-01"}, {"d": "soon"})
    assert res.items[0]["outcome"] == "mismatch" and "'soon' is not a date" in res.items[0]["reason"]


def test_duration_forms_compare_in_months_or_days():
    assert one("duration", "successive 1 year", "12 months") == "match"
    assert one("duration", "30 days", "thirty (30) days") == "match"
    assert one("duration", "1 year", "2 years") == "mismatch"
    assert one("duration", "1 month", "30 days") == "mismatch"  # months and days are not converted


def test_set_ignores_order_duplicates_and_case():
    assert one("set", ["US", "CA"], ["ca", "US", "US"]) == "match"
    res = run({"s": {"kind": "set"}}, {"s": ["US", "CA"]}, {"s": ["US", "MX"]})
    assert res.items[0]["outcome"] == "mismatch"
    assert res.items[0]["reason"] == "sets differ: missing ['ca'], unexpected ['mx']"


def test_parties_drop_aliases_and_split_cuad_strings():
    expected = ["Cool Technologies Inc.", "VETERAN TECHNOLOGY GROUP, LLC"]
    cuad = 'Cool Technologies Inc. ("COOL TECH"); VETERAN TECHNOLOGY GROUP, LLC ("VET TECH")'
    assert one("parties", expected, cuad) == "match"
    assert one("parties", expected, ["Veteran Technology Group LLC (the \"Vet\")", "Cool Technologies, Inc"]) == "match"
    assert one("parties", expected, ["Cool Technologies", "Veteran Technology Group LLC"]) == "mismatch"  # suffix kept


# ---------------------------------------------------------------- conditions

C1 = {"priority": 1, "store": "YouTube", "country": None, "rate": 0.6}
C2 = {"priority": 2, "store": None, "country": "JP", "rate": 0.7}


def test_conditions_with_priorities_compare_in_priority_order():
    got = [dict(C2, rate=0.7005), dict(C1, store="youtube")]  # shuffled, within 0.001, case differs
    assert one("conditions", [C1, C2], got) == "match"


def test_conditions_priority_decides_pairing():
    # Same bodies, priorities swapped: ordered comparison must see the swap.
    swapped = [dict(C1, priority=2), dict(C2, priority=1)]
    res = run({"c": {"kind": "conditions"}}, {"c": [C1, C2]}, {"c": swapped})
    assert res.items[0]["outcome"] == "mismatch"
    assert res.items[0]["reason"].startswith("condition #1 by priority (priority 1) differs at 'store'")


def test_conditions_without_priorities_compare_as_multiset():
    a, b = {"store": "Tidal", "rate": 0.85}, {"store": "Deezer", "rate": 0.8}
    assert one("conditions", [a, b], [b, a]) == "match"
    assert one("conditions", [a, a], [a, b]) == "mismatch"  # multiplicity counts


def test_conditions_use_field_tolerance_or_default():
    a = {"store": "Tidal", "rate": 0.85}
    assert one("conditions", [a], [dict(a, rate=0.851)]) == "match"  # default 0.001
    assert one("conditions", [a], [dict(a, rate=0.8511)]) == "mismatch"
    assert one("conditions", [a], [dict(a, rate=0.86)], tolerance=0.01) == "match"


def test_conditions_infer_dates_and_report_first_differing_key():
    a = {"start": "2024-03-01", "stores": ["Spotify", "Tidal"], "note": "The rate"}
    assert one("conditions", [a], [{"start": "March 1, 2024", "stores": ["tidal", "spotify"], "note": "rate"}]) == "match"
    res = run({"c": {"kind": "conditions"}}, {"c": [a]}, {"c": [dict(a, start="2024-01-03")]})
    assert "'start': dates differ: 2024-03-01 vs 2024-01-03" in res.items[0]["reason"]


def test_conditions_count_must_agree():
    assert one("conditions", [C1], [C1, C2]) == "mismatch"


# ---------------------------------------------------------------- outcomes and weights


def test_null_null_is_a_full_credit_match():
    res = run({"f": {"kind": "text", "weight": 3}}, {"f": None}, {"f": ""})
    assert (res.items[0]["outcome"], res.items[0]["credit"], res.score) == ("match", 3, 1.0)


def test_missing_and_extra():
    res = run({"a": {"kind": "text"}, "b": {"kind": "text"}}, {"a": "x", "b": None}, {"a": None, "b": "X"})
    assert [(r["outcome"], r["credit"]) for r in res.items] == [("missing", 0), ("extra", 0)]
    assert res.items[1]["reason"] == "expected null, got 'X'"
    assert res.score == 0.0 and (res.metrics["missing"], res.metrics["extra"]) == (1, 1)


def test_weights_change_the_score_exactly():
    fields = {"a": {"kind": "text", "weight": 2}, "b": {"kind": "text"}, "c": {"kind": "text"}}
    expected = {"a": "x", "b": "y", "c": "z"}
    res = run(fields, expected, {"a": "x", "b": "y", "c": "no"})
    assert Fraction(res.score).limit_denominator(100) == Fraction(3, 4)
    res = run(fields, expected, {"a": "no", "b": "y", "c": "z"})
    assert Fraction(res.score).limit_denominator(100) == Fraction(2, 4)
    assert res.metrics["field_accuracy"] == pytest.approx(2 / 3)  # unweighted


def test_hallucinated_identifier_weighs_penalty_times():
    fields = {"acc": {"kind": "id", "weight": 2, "identifier": True}, "name": {"kind": "text"}}
    res = run(fields, {"acc": "ACC-123", "name": "n"}, {"acc": "ACC-9999", "name": "n"})
    row = res.items[0]
    assert (row["outcome"], row["weight"], row["credit"]) == ("hallucinated", 4, 0)
    assert res.score == pytest.approx(1 / 5)  # 1 credit over 2×2 + 1
    assert res.metrics["hallucinated"] == 1
    assert "acc: HALLUCINATED — 'ACC-9999' is not stated in the source" in res.notes


def test_hallucination_flagged_even_when_expected_is_null():
    res = run({"acc": {"kind": "id", "identifier": True}}, {"acc": None}, {"acc": "ACC-9999"})
    assert res.items[0]["outcome"] == "hallucinated"


def test_identifier_found_with_other_case_and_spacing_is_not_hallucinated():
    res = run({"e": {"kind": "text", "identifier": True}}, {"e": "start 1 march"}, {"e": "START 1\n MARCH"})
    assert res.items[0]["outcome"] == "match"


# The invention rule (docs/corpus-format.md): an id is invented when it breaks the field's declared pattern, is
# not identifier-shaped (a digit and a letter), or its separator- and case-normalized form is not a whole token
# (or run of tokens) of the normalized document.
MEMO = ("Halden Records, 1 March 2025.\nAccount ID: ACC-47003\nSigning entity: SE-0213.\n"
        "Previous account (closed): ACC-40961; renewal one year.")
IDS = {"acc": {"kind": "id", "weight": 2, "identifier": True}, "se": {"kind": "id", "weight": 2, "identifier": True}}


@pytest.mark.parametrize("field, extracted, outcome", [
    ("acc", "1", "hallucinated"),  # a word of the memo (the date's day), but no identifier
    ("acc", "2025", "hallucinated"),  # the memo's year: a number, not an identifier
    ("acc", "Halden", "hallucinated"),  # the memo's town: a word, not an identifier
    ("acc", "47003", "hallucinated"),  # the digits of ACC-47003 are a fragment of its token
    ("acc", "ACC", "hallucinated"),  # the prefix of ACC-47003 is not a token
    ("acc", "ACC-4700", "hallucinated"),  # nor is a truncation of it
    ("se", "SE0213", "mismatch"),  # stated as SE-0213: not invented; the match rule is exact, so a mismatch
    ("acc", "acc-40961", "mismatch"),  # stated (another deal's id, case aside): wrong, not invented
    ("acc", "acc-47003", "match"),
])
def test_invention_rule_is_whole_tokens_separators_and_case_aside(field, extracted, outcome):
    truth = {"acc": "ACC-47003", "se": "SE-0213"}
    res = run(IDS, truth, {**truth, field: extracted}, source=MEMO)
    row = next(r for r in res.items if r["field"] == field)
    assert row["outcome"] == outcome, row["reason"]
    assert res.metrics["hallucinated"] == (outcome == "hallucinated")


def test_a_declared_schema_pattern_decides_the_shape_and_must_match():
    from evalkit.scoring import ScoreContext

    opts = FieldsOptions.model_validate({"fields": {"acc": {"kind": "id", "weight": 2, "identifier": True}}})
    truth = FieldsTruth(record={"acc": "ACC-47003"})

    def outcome(got, pattern):
        schema = {"type": "object", "properties": {"acc": {"type": ["string", "null"], "pattern": pattern}}}
        ctx = ScoreContext(task_id="t", member_id="m", source_text=MEMO + " Ref 2025.", options=opts,
                           threshold=0.9, extra={"schema": schema})
        return score({"acc": got}, truth, ctx).items[0]

    assert outcome("2025", r"^[0-9]{4}$")["outcome"] == "mismatch"  # digits are ids when the schema says so
    row = outcome("acc-47003", "^ACC-[0-9]+$")  # stated, but not in the form the schema declares
    assert row["outcome"] == "hallucinated" and "declared pattern" in row["reason"]
    assert outcome("ACC-47003", "^ACC-[0-9]+$")["outcome"] == "match"


def test_a_terms_field_takes_the_pattern_of_the_list_items():
    from evalkit.scoring import ScoreContext
    from evalkit.scoring.fields import declared_pattern

    schema = {"properties": {"terms": {"type": "array", "items": {"properties": {"acc": {"pattern": "^A"}}}},
                             "acc": {"pattern": "^B"}}}
    ctx = ScoreContext(task_id="t", member_id="m", source_text="", options=None, threshold=0.9,
                       extra={"schema": schema})
    assert [declared_pattern(ctx, n) for n in ("acc", "terms[1].acc", "terms[extra 2].acc", "x", "terms")] \
        == ["^B", "^A", "^A", None, None]


def test_an_id_printed_across_tokens_is_stated():
    from evalkit.scoring.normalize import document_keys, states_id

    keys = document_keys("entity **SE 0213**, account ACC-47003/RC-12.")
    assert all(states_id(keys, v) for v in ("SE-0213", "se0213", "ACC-47003", "RC_12", "acc 47003"))
    assert not any(states_id(keys, v) for v in ("SE-021", "47003/RC", "-", "ACC-47003-RC"))


def test_rows_have_the_documented_keys_and_are_json():
    res = run({"d": {"kind": "date"}, "s": {"kind": "set"}}, {"d": "2024-03-01", "s": ["a"]}, {"d": None, "s": ["a"]})
    assert all(set(r) == ROW_KEYS for r in res.items)
    assert res.items[1]["extracted"] == ["a"] and res.items[0]["member"] == "m1"
    json.dumps(res.to_json())


def test_fields_not_in_the_spec_are_not_scored():
    res = run({"a": {"kind": "text"}}, {"a": "x"}, {"a": "x", "zzz": 1})
    assert [r["field"] for r in res.items] == ["a"] and res.score == 1.0
    assert res.details["unscored_fields"] == ["zzz"]


def test_extraction_none_misses_stated_fields_and_matches_null_ones():
    res = run({"a": {"kind": "text"}, "b": {"kind": "number"}}, {"a": "x", "b": None}, None)
    assert [r["outcome"] for r in res.items] == ["missing", "match"]
    assert res.score == 0.5


# ---------------------------------------------------------------- gate

GATE = {"required": ["a", "b"], "sum_equals": [{"fields": ["r", "c"], "total": 1.0, "tolerance": 0.001}]}


def test_gate_lists_missing_required_fields_in_spec_order():
    res = run_gate({"a": "", "b": [], "r": 0.7, "c": 0.3}, GateOptions.model_validate(GATE))
    assert (res.missing_fields, res.blocking) == (["a", "b"], True)
    assert run_gate(None, GateOptions.model_validate(GATE)).missing_fields == ["a", "b"]


def test_gate_sum_rule():
    gate = GateOptions.model_validate(GATE)
    assert not run_gate({"a": 1, "b": 1, "r": 0.7, "c": 0.3}, gate).blocking
    assert not run_gate({"a": 1, "b": 1, "r": 0.7, "c": 0.301}, gate).blocking  # within ± 0.001
    bad = run_gate({"a": 1, "b": 1, "r": 0.75, "c": 0.3}, gate)
    assert bad.blocking and bad.missing_fields == []
    assert bad.reasons == ["r + c = 1.05, expected 1.0 ± 0.001"]


def test_gate_sum_rule_skipped_when_a_field_is_missing():
    res = run_gate({"a": 1, "b": 1, "r": 0.75, "c": None}, GateOptions.model_validate(GATE))
    assert (res.blocking, res.reasons) == (False, [])


def test_gate_agreement_decides_the_verdict():
    fields = {"a": {"kind": "text"}, "b": {"kind": "text"}}
    rec = {"a": "x", "b": None}
    agree = run(fields, rec, rec, gate={"required": ["b"]}, truth_gate=(["b"], True))
    assert (agree.score, agree.metrics["gate_agrees"], agree.passed) == (1.0, True, True)
    disagree = run(fields, rec, rec, gate={"required": ["b"]}, truth_gate=([], False))
    assert (disagree.score, disagree.metrics["gate_agrees"], disagree.passed) == (1.0, False, False)
    assert disagree.notes == ["gate: expected not blocking with missing [], got blocking with missing [b] (b is missing)"]
    assert disagree.details["gate"] == {"missing_fields": ["b"], "blocking": True, "reasons": ["b is missing"]}


def test_score_below_threshold_fails():
    res = run({"a": {"kind": "text"}, "b": {"kind": "text"}}, {"a": "x", "b": "y"}, {"a": "x", "b": "n"}, threshold=0.5)
    assert res.passed is True
    res = run({"a": {"kind": "text"}, "b": {"kind": "text"}}, {"a": "x", "b": "y"}, {"a": "x", "b": "n"}, threshold=0.51)
    assert res.passed is False


def test_mismatch_note_names_expected_got_and_reason():
    res = run({"term_rate": {"kind": "number", "tolerance": 0.001}}, {"term_rate": 0.7}, {"term_rate": 0.75})
    assert res.notes == ["term_rate: mismatch — expected 0.7, got 0.75 (numbers differ by 0.05 > 0.001)"]


# ---------------------------------------------------------------- options and the Scorer


@pytest.mark.parametrize(
    "bad",
    [
        {"fields": {"a": {"kind": "date", "identifier": True}}},  # identifier only for id/text
        {"fields": {"a": {"kind": "text", "weight": 0}}},
        {"fields": {"a": {"kind": "text", "bogus": 1}}},
        {"fields": {"a": {"kind": "colour"}}},
        {"fields": {"a": {"kind": "text"}}, "gate": {"required": ["b"]}},  # gate names an unknown field
        {"fields": {}},
    ],
)
def test_options_are_strict(bad):
    with pytest.raises(ValidationError):
        FieldsOptions.model_validate(bad)


def test_scorer_echo_of_truth_scores_one():
    truth = FieldsTruth(record={"a": "x", "d": "2024-03-01"})
    assert SCORER.expected_extraction(truth) == {"a": "x", "d": "2024-03-01"}
    assert (SCORER.name, SCORER.truth_model, SCORER.options_model) == ("fields", FieldsTruth, FieldsOptions)


def test_fold_leaves_numbers_and_pronouns_alone():
    from evalkit.scoring.text import fold

    assert fold("the 1950s") == "1950s" and fold("1950") == "1950"
    assert fold("US") == "us"  # inflect would make it "me"
    assert fold("The") == "the"  # only an article: keep the text, never ""
