"""A faulty answer's verdict (task.yaml `verdict:`, docs/corpus-format.md): a record that breaks the output schema
(`schema_invalid`) or an answer cut off at the token budget after its retry (`truncated`) FAILs by default, its
score still computed and shown; the CLI names the cause in a ↳ line, the task table in a column."""

from __future__ import annotations

import copy
import json

import pytest
from corpus_factory import TASK, add_member, cli, write_yaml

from evalkit.backends import Completion
from evalkit.cli.summary import verdict_line
from evalkit.corpus.sources import check_integrity, read_document
from evalkit.corpus.specs import VerdictPolicy
from evalkit.corpus.tasks import load_task
from evalkit.results.records import RunBlock, ScoreRecord
from evalkit.scoring import ScoreResult
from evalkit.stages.pipeline import apply_verdict_policy, extraction_record, render_request, score_home
from evalkit.stages.runner import _outcome

DOC = "Account ACC-0042 starts on 1 March 2025 and pays a rate of 70%.\n"
RECORD = {"account_id": "ACC-0042", "start": "2025-03-01", "rate": 0.7}
BROKEN = {"account_id": "ACC-0042", "start": "1 March 2025", "rate": "70%"}  # right values, wrong forms


def corpus(root, verdict=None):
    task = copy.deepcopy(TASK)
    task["schema"]["properties"] |= {"start": {"type": ["string", "null"], "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                                     "rate": {"type": ["number", "null"]}}
    task["scoring"]["fields"]["start"] = {"kind": "date", "weight": 2}
    if verdict is not None:
        task["verdict"] = verdict
    write_yaml(root / "corpus" / "memos" / "task.yaml", task)
    add_member(root / "corpus" / "memos", "m0", DOC, RECORD)
    return root / "corpus"


class Fixed:
    label, spec, model, provider = "b", "fixed", "fixed", "python"


def scored(root, completion, verdict=None):
    """score.json of one member whose backend answered `completion`, scored as a run scores it."""
    member = load_task(corpus(root, verdict) / "memos").member("m0")
    document = read_document(check_integrity(member, None))
    home = root / "run" / "memos" / "m0" / "b"
    home.mkdir(parents=True)
    request = render_request(member.task, member, document)
    (home / "extraction.json").write_text(json.dumps(extraction_record(member, Fixed(), request, completion)))
    score_home(member, home, None, document=document)
    data = json.loads((home / "score.json").read_text())
    from evalkit.stages.runner import Home

    return data, verdict_line(_outcome(Home(member, "b", home), ScoreRecord(data)), 1, 1, False)


def test_a_schema_invalid_answer_fails_with_its_score_and_each_violation_path(tmp_path):
    data, line = scored(tmp_path, Completion(record=BROKEN))
    assert data["score"] == 1.0 and data["passed"] is False  # every value is right, in forms the schema forbids
    assert line.startswith("[1/1] memos/m0 … 100.0% FAIL")
    note = next(n for n in line.splitlines() if "↳ schema_invalid" in n)
    assert "$.rate" in note and "$.start" in note and "verdict FAIL (task.yaml verdict.schema_invalid: fail)" in note
    assert data["details"]["answer_faults"] == {"schema_invalid": {"fails_verdict": True}}


def test_a_conforming_answer_is_untouched(tmp_path):
    data, line = scored(tmp_path, Completion(record=RECORD))
    assert data["passed"] is True and "answer_faults" not in data["details"] and "↳" not in line


def test_verdict_score_lets_the_score_decide_and_still_notes_the_cause(tmp_path):
    data, line = scored(tmp_path, Completion(record=BROKEN), verdict={"schema_invalid": "score"})
    assert data["passed"] is True and "100.0% PASS" in line
    assert "↳ schema_invalid — the record breaks the task's output schema at $.rate, $.start; the score decides" \
        in line


def test_an_answer_truncated_after_its_retry_fails_and_names_the_budget(tmp_path):
    cut = Completion(record=RECORD, parse="recovered", truncated="exhausted", finish_reason="length", calls=2)
    data, line = scored(tmp_path, cut)
    assert data["score"] == 1.0 and data["passed"] is False
    assert "↳ truncated — the answer was cut off at the 2048-token output budget (the retry after the 1024-token " \
           "call; task.yaml settings.max_tokens); verdict FAIL (task.yaml verdict.truncated: fail)" in line


def test_a_truncation_the_retry_recovered_is_no_fault(tmp_path):
    data, _ = scored(tmp_path, Completion(record=RECORD, truncated="retry_succeeded", calls=2))
    assert data["passed"] is True


@pytest.mark.parametrize("run, policy, passed, faults", [
    ({"parse": "schema_invalid", "schema_violations": [{"path": "$.a", "message": "m"}]}, {}, False, ["schema_invalid"]),
    ({"truncated": "exhausted", "settings": {"max_tokens": 300}}, {}, False, ["truncated"]),
    ({"truncated": "exhausted", "parse": "schema_invalid"}, {"truncated": "score"}, False,
     ["schema_invalid", "truncated"]),
    ({"truncated": "exhausted", "parse": "schema_invalid"}, {"truncated": "score", "schema_invalid": "score"}, True,
     ["schema_invalid", "truncated"]),
    ({"parse": "clean", "truncated": "retry_succeeded"}, {}, True, []),
])
def test_the_policy_fails_exactly_the_faults_it_names(run, policy, passed, faults):
    res = apply_verdict_policy(ScoreResult(score=0.95, passed=True, metrics={}, items=[]), RunBlock(run),
                               VerdictPolicy.model_validate(policy))
    assert res.passed is passed and res.score == 0.95
    assert [n.split(" — ")[0] for n in res.notes] == faults
    if run.get("settings"):
        assert "600-token output budget" in res.notes[0]


def test_a_task_without_a_verdict_keeps_none():
    res = apply_verdict_policy(ScoreResult(score=None, passed=None, metrics={}, items=[]), RunBlock({"truncated": "exhausted"}),
                               VerdictPolicy())
    assert res.passed is None and res.notes[0].startswith("truncated — ") and "FAIL" not in res.notes[0]


def test_an_unknown_verdict_rule_is_a_corpus_error_naming_the_key(tmp_path):
    res = cli("validate", "--corpus", corpus(tmp_path, verdict={"schema_invalid": "ignore"}))
    assert res.exit_code == 3 and "verdict.schema_invalid" in res.output


def test_the_cli_prints_the_cause_and_the_report_table_has_the_column(tmp_path):
    root = corpus(tmp_path)
    (tmp_path / "pipe.py").write_text(f"def extract(document, task):\n    return {BROKEN!r}\n")
    res = cli("sweep", "--corpus", root, "--no-notebooks", "--backend", f"p=python:{tmp_path / 'pipe.py'}:extract",
              "--out", tmp_path / "out")
    assert "memos/m0 … 100.0% FAIL" in res.output, res.output
    assert "↳ schema_invalid — the record breaks the task's output schema at $.rate, $.start" in res.output
    from evalkit.report.frames import load_scores

    members, _ = load_scores(tmp_path / "out" / "members" / "memos" / "m0", "memos")
    assert list(members["faults"]) == ["schema_invalid (FAIL)"]
