"""Declared metrics (issue 11.6): every metric a bundled scorer returns is declared, by a literal name, with a
one-line definition and the function behind it; `evalkit metrics TASK` prints them and docs/metrics.md is
generated from them."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest
from corpus_factory import cli

from evalkit.corpus import metrics
from evalkit.corpus.tasks import DEFAULT_CORPUS, load_tasks
from evalkit.scoring import ScoreContext

ROOT = DEFAULT_CORPUS.parent
TASKS = load_tasks(DEFAULT_CORPUS)


def returned_metrics(task) -> set[str]:
    """Every metric name the task's scorer returns, over its members' truths (a perfect and an empty
    extraction) and, for the graph scorer, with a judge's verdicts and a strict ontology too."""
    extras = [{}]
    if task.scorer.name == "graph":
        judged = {"axes": {"entities": {"accepted": []}, "relations": {"accepted": []}}}
        ontology = {"mode": "strict", "entity_types": ["PER"], "relation_types": ["sibling"]}
        extras.append({"judgments": judged, "ontology": ontology})
    names: set[str] = set()
    for member in task.members():
        if member.manifest.truth is not None:
            continue  # its truth lives under the sources folder; the in-repo members cover every metric
        truth = member.load_truth()
        for extra in extras:
            ctx = ScoreContext(task_id=task.id, member_id=member.id, source_text="", options=task.options,
                               threshold=task.spec.threshold,
                               extra={"task_dir": str(task.dir), "scope": member.manifest.scope, **extra})
            for record in (task.scorer.expected_extraction(truth), None):
                names |= set(task.scorer.score(record, truth, ctx).metrics)
    return names


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_every_returned_metric_is_declared(task):
    declared = [m.name for m in task.scorer.metrics]
    assert len(declared) == len(set(declared))
    assert returned_metrics(task) <= set(declared)


def test_every_declared_metric_is_returned_by_a_bundled_task_of_its_scorer():
    """A scorer may return a metric only for tasks that use an option (the `fields` scorer's table_* metrics for a
    task with a `table` field, evidence_* for one that asks for evidence): the bundled tasks of each scorer
    together return every metric it declares, and a task without the option returns none of them."""
    by_scorer: dict[str, set[str]] = {}
    for task in TASKS:
        by_scorer.setdefault(task.scorer.name, set()).update(returned_metrics(task))
    for task in TASKS:
        assert by_scorer[task.scorer.name] == {m.name for m in task.scorer.metrics}, task.scorer.name
    memos = next(t for t in TASKS if t.id == "deal-memos")
    assert not {n for n in returned_metrics(memos) if n.startswith(("table_", "evidence_"))}


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_each_name_is_a_literal_in_its_declaration_with_a_one_line_definition(task):
    source = Path(sys.modules[task.scorer.score.__module__].__file__)
    calls = [n for n in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
             if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Metric"]
    literal = [c.args[0].value for c in calls if isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)]
    assert len(literal) == len(calls)  # no name built at run time
    assert literal == [m.name for m in task.scorer.metrics]
    for m in task.scorer.metrics:
        assert m.definition.strip() and "\n" not in m.definition, m.name
        assert callable(m.function), m.name


def test_metrics_adventure_lists_connections_recall_with_its_definition_and_function():
    res = cli("metrics", "adventure")
    assert res.exit_code == 0, res.output
    (line,) = [ln for ln in res.output.splitlines() if ln.startswith("connections_recall ")]
    assert "truth same-level connections between matched areas" in line
    assert line.endswith("corpus/adventure/scorer/families.py:_score_connections")
    where = line.rsplit(" ", 1)[1]
    file, function = where.split(":")
    assert f"def {function}(" in (ROOT / file).read_text(encoding="utf-8")  # the named function is there


def test_metrics_of_every_task_and_refusals():
    res = cli("metrics")
    assert res.exit_code == 0
    for task in TASKS:
        assert f"{task.id}: {len(task.scorer.metrics)} metrics of scorer {task.scorer.name!r}" in res.output
    assert "field_accuracy" in res.output and "evalkit/scoring/fields.py:_row" in res.output
    assert "evalkit/scoring/gate.py:run_gate" in res.output and "evalkit/scoring/ontology.py:compliance" in res.output
    bad = cli("metrics", "nope")
    assert bad.exit_code == 3 and "no task 'nope'" in bad.output and "Traceback" not in bad.output
    assert cli("metrics", "../corpus").exit_code == 3


def test_the_committed_docs_page_is_current():
    page = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert page == metrics.markdown(TASKS), f"docs/metrics.md is stale: regenerate it with `{metrics.REGENERATE}`"
    assert cli("metrics", "--markdown").output == page
    assert "| `connections_recall` |" in page


def test_a_task_scorer_package_declares_its_own_metrics(tmp_path):
    """``scorer: DIR/:ATTR`` loads a package beside task.yaml (its modules import each other relatively);
    its declarations print with files relative to the folder above the corpus. A second corpus with a
    task of the same name gets its own package, not the first one's modules."""
    for n, (name, rule) in enumerate((("hits", "rows that hit"), ("misses", "rows that miss"))):
        task = tmp_path / f"c{n}" / "corpus" / "mini"
        (task / "scorer").mkdir(parents=True)
        (task / "task.yaml").write_text(textwrap.dedent("""\
            id: mini
            description: d
            prompt: {system: s, user: "{document}"}
            schema: {type: object}
            scorer: scorer/:SCORER
            """), encoding="utf-8")
        (task / "scorer" / "rules.py").write_text(f"def {name}(rows):\n    return len(rows)\n")
        (task / "scorer" / "__init__.py").write_text(textwrap.dedent(f"""\
            from evalkit.scoring import Metric, Scorer, ScoreResult
            from .rules import {name}

            def score(extraction, truth, ctx):
                return ScoreResult(score=None, passed=None, metrics={{"{name}": 0}}, items=[])

            SCORER = Scorer(name="mini", score=score, metrics=(Metric("{name}", "{rule}", {name}),))
            """))
        res = cli("metrics", "mini", "--corpus", task.parent)
        assert res.exit_code == 0, res.output
        assert res.output.splitlines()[1].split() == [name, *rule.split(), "corpus/mini/scorer/rules.py:" + name]
    missing = tmp_path / "c0" / "corpus" / "mini" / "scorer" / "__init__.py"
    missing.unlink()
    res = cli("metrics", "mini", "--corpus", missing.parent.parent.parent)
    assert res.exit_code == 3 and "scorer: package 'scorer/' not found beside task.yaml" in res.output
