"""Extractions and truth checked against the task's output schema (JSON Schema Draft 2020-12).

An extraction that breaks it is still scored as extracted; its parse outcome is `schema_invalid` and each
violation's JSON path sits on the item row of its field. Truth that breaks it (an enum, a pattern, a type)
is a corpus error naming file:line; the schema itself must be a valid schema."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evalkit.backends import Completion
from evalkit.corpus.outschema import keypath, top_key, violations
from evalkit.corpus.sources import check_integrity, read_document
from evalkit.corpus.tasks import find_task
from evalkit.errors import InvalidCorpus
from evalkit.results.records import ExtractionRecord
from evalkit.stages.pipeline import SCHEMA_INVALID, extraction_record, render_request, score_extraction
from evalkit.stages.validate import validate_corpus

REPO = Path(__file__).resolve().parents[1]
MEMBER = "rates-dont-reconcile"


@pytest.fixture
def corpus(tmp_path):
    """The deal-memos task with one member, writable."""
    task = tmp_path / "corpus" / "deal-memos"
    task.mkdir(parents=True)
    shutil.copy(REPO / "corpus" / "deal-memos" / "task.yaml", task / "task.yaml")
    shutil.copytree(REPO / "corpus" / "deal-memos" / MEMBER, task / MEMBER)
    return tmp_path / "corpus"


class _Backend:
    label, spec, model = "stub", "python:stub:f", "stub"


def _extract(corpus: Path, record: dict, tmp_path: Path):
    member = find_task(corpus, "deal-memos").member(MEMBER)
    document = read_document(check_integrity(member, None))
    request = render_request(member.task, member, document)
    extraction = extraction_record(member, _Backend(), request, Completion(record=record, raw="{}"))
    # what the pipeline scores is the extraction.json it wrote, read back as its record
    return extraction, score_extraction(member, ExtractionRecord.from_json(extraction), tmp_path, document, None)


def _truth_record(corpus: Path) -> dict:
    return dict(find_task(corpus, "deal-memos").member(MEMBER).load_truth().record)


def test_a_date_breaking_the_pattern_is_schema_invalid_but_still_scored_as_extracted(corpus, tmp_path):
    record = _truth_record(corpus) | {"lifecycle_term_start": "April 15, 2025"}  # truth: 2025-04-15
    extraction, result = _extract(corpus, record, tmp_path)
    assert extraction["run"]["parse"] == SCHEMA_INVALID
    broken = extraction["run"]["schema_violations"]
    assert {(v["path"], v["keyword"]) for v in broken} == {("$.lifecycle_term_start", "pattern"),
                                                            ("$.lifecycle_term_start", "maxLength")}
    row = next(r for r in result.items if r["field"] == "lifecycle_term_start")
    assert row["outcome"] == "match"  # the field is scored as extracted: the same date
    assert row["schema"].startswith("$.lifecycle_term_start: ") and "does not match" in row["schema"]
    assert all(r["schema"] is None for r in result.items if r["field"] != "lifecycle_term_start")
    assert result.score == 1.0


def test_every_violation_is_listed_with_its_json_path(corpus, tmp_path):
    record = _truth_record(corpus) | {"renewal_type": "yearly", "conditions": [{"priority": 1, "rate": 7}],
                                      "zzz": 1}
    extraction, result = _extract(corpus, record, tmp_path)
    paths = [v["path"] for v in extraction["run"]["schema_violations"]]
    assert "$.renewal_type" in paths and "$.conditions[0]" in paths and "$.conditions[0].rate" in paths
    assert "$" in paths  # additionalProperties: no field row holds it, so it is a note
    assert any(n.startswith("schema_invalid — $: ") for n in result.notes)
    conditions = next(r for r in result.items if r["field"] == "conditions")["schema"]
    assert "$.conditions[0].rate: 7 is greater than the maximum of 1" in conditions


def test_a_conforming_extraction_keeps_its_parse_outcome_and_rows(corpus, tmp_path):
    extraction, result = _extract(corpus, _truth_record(corpus), tmp_path)
    assert extraction["run"]["parse"] == "clean" and "schema_violations" not in extraction["run"]
    assert all("schema" not in r for r in result.items)


def test_truth_outside_the_schemas_enum_is_a_corpus_error_with_file_and_line(corpus):
    assert validate_corpus(corpus) == []
    truth = corpus / "deal-memos" / MEMBER / "truth.yaml"
    lines = truth.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  renewal_type:"))
    lines[at] = "  renewal_type: yearly"
    truth.write_text("\n".join(lines) + "\n")
    problems = validate_corpus(corpus)
    assert len(problems) == 1
    assert problems[0].startswith(f"{truth}:{at + 1}: $.renewal_type: 'yearly' is not one of")


def test_truth_breaking_a_pattern_is_a_corpus_error(corpus):
    truth = corpus / "deal-memos" / MEMBER / "truth.yaml"
    truth.write_text(truth.read_text().replace("lifecycle_term_start: '2025-04-15'",
                                               "lifecycle_term_start: 'April 15, 2025'"))
    [problem] = validate_corpus(corpus)
    assert "$.lifecycle_term_start: 'April 15, 2025' does not match" in problem


def test_size_caps_bound_the_model_not_the_truth():
    schema = {"type": "object", "properties": {"xs": {"type": "array", "maxItems": 1, "items": {"enum": [1, 2]}}}}
    assert [v["keyword"] for v in violations({"xs": [1, 2]}, schema)] == ["maxItems"]
    assert violations({"xs": [1, 2]}, schema, caps=False) == []
    assert [v["keyword"] for v in violations({"xs": [1, 3]}, schema, caps=False)] == ["enum"]


def test_an_invalid_schema_is_a_corpus_error(corpus):
    task = corpus / "deal-memos" / "task.yaml"
    task.write_text(task.read_text().replace("renewal_years: {type: [integer, \"null\"]",
                                             "renewal_years: {type: [integral, \"null\"]"))
    with pytest.raises(InvalidCorpus, match=r"task.yaml:\d+: schema: not a valid JSON Schema"):
        find_task(corpus, "deal-memos")


def test_paths():
    assert top_key("$.conditions[0].rate") == "conditions" and top_key("$") is None
    assert keypath("$.conditions[0].rate") == ("conditions", 0, "rate")
