"""Value normalizers of the `fields` scorer: one test per accepted form or rule."""

from __future__ import annotations

import datetime as dt

import pytest

from evalkit.scoring.normalize import (
    PERPETUAL,
    DateValue,
    Duration,
    normalize_id,
    normalize_party,
    numbers_close,
    parse_date,
    parse_duration,
    parse_number,
)

SEP_10_2015 = DateValue(2015, 9, 10)

# ---------------------------------------------------------------- dates


@pytest.mark.parametrize(
    "text",
    [
        "2015-09-10",  # ISO
        "2015-09-10T00:00:00",  # ISO timestamp
        "9/10/15",  # CUAD M/D/YY, US month first
        "09/10/2015",  # M/D/YYYY
        "September 10, 2015",
        "Sept. 10, 2015",
        "Sep 10 2015",
        "10 September 2015",
        "10 Sep 2015",
        "10th day of September, 2015",
        "the 10th day of September, 2015",
    ],
)
def test_date_forms_are_one_date(text):
    assert parse_date(text) == SEP_10_2015


def test_date_objects_from_yaml():
    assert parse_date(dt.date(2015, 9, 10)) == SEP_10_2015
    assert parse_date(dt.datetime(2015, 9, 10, 12, 0)) == SEP_10_2015


def test_slashes_are_month_first():
    assert parse_date("1/2/2020") == DateValue(2020, 1, 2)


@pytest.mark.parametrize("text, year", [("1/1/98", 1998), ("1/1/51", 1951), ("1/1/50", 2050), ("1/1/03", 2003)])
def test_two_digit_years_pivot_at_50(text, year):
    assert parse_date(text) == DateValue(year, 1, 1)


def test_cuad_blank_parts_stay_unknown_and_equal_a_bare_year():
    assert parse_date("[]/[]/2000") == DateValue(2000, None, None)
    assert parse_date("[]/[]/2000") == parse_date("2000") == parse_date(2000)
    assert parse_date("[]/[]/2000") != parse_date("2000-01-01")  # unknown is not January 1st


def test_month_and_year():
    assert parse_date("September 2015") == DateValue(2015, 9, None)


def test_perpetual_is_its_own_value():
    assert parse_date("perpetual") is PERPETUAL
    assert parse_date(" Perpetual ") == PERPETUAL
    assert parse_date("perpetual") != parse_date("2015")
    assert str(PERPETUAL) == "perpetual"


@pytest.mark.parametrize("bad", ["2/30/15", "13/1/15", "nonsense", "", None, True, 3.5, ["2015"], "September"])
def test_unreadable_dates_give_none(bad):
    assert parse_date(bad) is None


def test_date_display():
    assert (str(SEP_10_2015), str(DateValue(2000)), str(DateValue(2015, 9))) == ("2015-09-10", "2000", "2015-09")


# ---------------------------------------------------------------- durations


@pytest.mark.parametrize("text", ["successive 1 year", "one (1) year", "12 months", "1 yr", "a year", "12-month"])
def test_one_year_forms_are_twelve_months(text):
    assert parse_duration(text) == Duration(12, "months")


@pytest.mark.parametrize("text", ["thirty (30) days", "30 days", "30-day"])
def test_day_forms(text):
    assert parse_duration(text) == Duration(30, "days")


def test_word_numbers():
    assert parse_duration("two years") == Duration(24, "months")
    assert parse_duration("forty-five days") == Duration(45, "days")


def test_parenthesised_digits_win_over_words():
    assert parse_duration("thirty (60) days") == Duration(60, "days")


def test_weeks_are_days():
    assert parse_duration("2 weeks") == Duration(14, "days")


def test_lengths_in_one_unit_add_up_and_mixed_units_are_ambiguous():
    assert parse_duration("1 year and 6 months") == Duration(18, "months")
    assert parse_duration("1 year renewal, 30 days notice") is None


@pytest.mark.parametrize("bad", ["successive years", "renewal", "", None, 12])
def test_unreadable_durations_give_none(bad):
    assert parse_duration(bad) is None


# ---------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    "value, number",
    [(0.7, 0.7), (3, 3.0), ("0.7", 0.7), ("70%", 0.7), ("70 %", 0.7), ("33.3%", 0.333), ("1,000", 1000.0), ("-3", -3.0)],
)
def test_numbers_and_percent(value, number):
    assert parse_number(value) == number


@pytest.mark.parametrize("bad", ["abc", "", None, True, float("nan"), "7O%", [1]])
def test_unreadable_numbers_give_none(bad):
    assert parse_number(bad) is None


def test_tolerance_is_decimal_exact():
    # binary floats make 0.301 - 0.3 = 0.0010000000000000009; decimal keeps it 0.001
    assert numbers_close(0.3, 0.301, 0.001)
    assert not numbers_close(0.3, 0.3011, 0.001)


# ---------------------------------------------------------------- ids and parties


def test_id_trims_and_casefolds():
    assert normalize_id("  acc-123 ") == normalize_id("ACC-123")
    assert normalize_id("ACC-123") != normalize_id("ACC 123")


@pytest.mark.parametrize(
    "name",
    [
        'American International Group, Inc. ("AIG")',
        'American International Group, Inc. (the "Company")',
        "American International Group, Inc. (hereinafter “AIG”).",
        "American International Group Inc",
    ],
)
def test_party_aliases_dropped_and_suffix_kept(name):
    assert normalize_party(name) == "american international group inc"


def test_party_parenthetical_without_quotes_is_kept():
    assert normalize_party("Foo (USA) Inc.") == "foo usa inc"


def test_every_fold_example_in_the_graph_docs_is_what_fold_does():
    """docs/scoring-graph.md states `X` → `Y` (X folds to Y) and `X` ~ `Y` (they fold alike): each is checked,
    so the page cannot claim a fold the code does not do (it once said `US` → `me`, `the 1950s` ~ `1950`)."""
    import re
    from pathlib import Path

    from evalkit.scoring.text import fold

    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "scoring-graph.md").read_text().split())
    arrows = re.findall(r"`([^`]+)` → `([^`]+)`", text)
    alike = re.findall(r"`([^`]+)` ~ `([^`]+)`", text)
    assert len(arrows) >= 5 and len(alike) >= 7
    assert [(a, b) for a, b in arrows if fold(a) != b] == []
    assert [(a, b) for a, b in alike if fold(a) != fold(b)] == []


# ---------------------------------------------------------------- the invention rule (docs/corpus-format.md)

HALDEN = "Halden Records, 1 March 2025. Account ACC-47003, entity SE-0213, code 4711."


@pytest.mark.parametrize("value, shaped", [
    ("ACC-47003", True), ("se 0213", True), ("a1", True),
    ("1", False), ("2025", False), ("Halden", False), ("-", False), ("", False),
])
def test_identifier_shaped_needs_a_digit_and_a_letter(value, shaped):
    from evalkit.scoring.normalize import identifier_shaped

    assert identifier_shaped(value) is shaped


def test_a_declared_pattern_makes_a_value_identifier_shaped_and_must_match():
    from evalkit.scoring.normalize import document_keys, identifier_shaped, states_id, unstated

    keys = document_keys(HALDEN)
    assert identifier_shaped("4711", r"^\d{4}$") and states_id(keys, "4711", r"^\d{4}$")
    assert not states_id(keys, "4711")  # digits alone: a number, unless the schema says ids look like that
    assert "pattern" in unstated(keys, "ACC-47003", r"^ACC\d+$")  # stated, but not in the declared form
    assert states_id(keys, "ACC-47003", "^ACC-[0-9]+$")
    assert states_id(keys, "ACC-47003", "([")  # a pattern Python cannot read declares nothing


@pytest.mark.parametrize("value, why", [
    ("1", "identifier-shaped"), ("2025", "identifier-shaped"), ("Halden", "identifier-shaped"),
    ("ACC-4700", "whole token"), ("ACC", "identifier-shaped"),
    ("SE0213", None), ("acc-47003", None), ("ACC 47003", None),
])
def test_unstated_names_why_an_id_is_not_stated(value, why):
    from evalkit.scoring.normalize import document_keys, unstated

    got = unstated(document_keys(HALDEN), value)
    assert got is None if why is None else why in got
