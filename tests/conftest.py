"""Shared fixtures: a tiny self-contained corpus with hostile text, and one executed run of it.

* ``mini_corpus(dir)`` writes task ``mini`` (scorer: a plain function in a
  scorer.py beside task.yaml, so it also exercises the plugin path) with two
  members: ``plain`` (the fake backend matches everything: PASS) and
  ``hostile`` (document, truth, a field name and the fake output carry script
  payloads; the fake output gets fields wrong: FAIL).
* ``prepare_run(root)`` writes the corpus under ``root/corpus``, pre-fills
  extraction.json like the runner's pool, and returns the notebook jobs.
* fixtures ``executed_run`` (session: (root, run_dir, results), read-only) and
  ``run_copy`` (a writable copy of that run folder).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
from pathlib import Path

import pytest

# Payloads: if any of these ever executes in a rendered page, document.title becomes PWNED.
HOSTILE_SCRIPT = "</script><script>document.title='PWNED'</script>"
HOSTILE_IMG = "<img src=x onerror=\"document.title='PWNED'\">"
HOSTILE_FIELD = "<img src=x onerror=alert(1)>"
HOSTILES = (HOSTILE_SCRIPT, HOSTILE_IMG, HOSTILE_FIELD)

TASK_ID = "mini"
MEMBERS = ("hostile", "plain")

SCORER = '''
"""Test scorer: a plain function with fields-like rows.

The fake backend echoes the whole truth.yaml; its ``fake`` block overlays
``record`` so a member can make the backend wrong on purpose.
"""
from evalkit.scoring import ScoreResult


def score(extraction, truth, ctx):
    expected = truth["record"]
    got = dict((extraction or {}).get("record") or {})
    got.update((extraction or {}).get("fake") or {})
    rows, credit, weight = [], 0.0, 0.0
    for field in list(expected) + [f for f in got if f not in expected]:
        want, have = expected.get(field), got.get(field)
        if field not in expected:
            outcome, reason = "extra", "not in the truth"
        elif have is None and want is not None:
            outcome, reason = "missing", "no value extracted"
        elif have == want:
            outcome, reason = "match", "equal"
        else:
            outcome, reason = "mismatch", f"expected {want!r}, got {have!r}"
        w = 1.0
        c = w if outcome == "match" else 0.0
        credit, weight = credit + c, weight + w
        rows.append({"member": ctx.member_id, "field": field, "kind": "text", "weight": w, "expected": want,
                     "extracted": have, "outcome": outcome, "credit": c, "reason": reason})
    s = credit / weight if weight else None
    required_ok = all(got.get(f) is not None for f in truth.get("required", []))
    return ScoreResult(
        score=s, passed=(s is not None and s >= ctx.threshold and required_ok),
        metrics={"items": len(rows), "matched": sum(r["outcome"] == "match" for r in rows)},
        items=rows, notes=[f"{r['field']}: {r['reason']}" for r in rows if r["outcome"] != "match"],
        details={"gate": {"required": truth.get("required", []), "blocking": not required_ok}},
    )
'''


def _write_member(task_dir: Path, member: str, document: str, truth: dict) -> None:
    d = task_dir / member
    d.mkdir(parents=True)
    (d / "memo.md").write_text(document, encoding="utf-8")
    sha = hashlib.sha256(document.encode("utf-8")).hexdigest()
    (d / "manifest.yaml").write_text(textwrap.dedent(f"""\
        title: {member} test memo
        source: {{file: memo.md}}
        sha256: {sha}
        license: {{spdx: CC0-1.0, verified: "written for the evalkit tests"}}
        truth_provenance: {{authored_by: test fixture, verified_by: test fixture, adversarial_pass: not done, date: "2026-11-30"}}
        """), encoding="utf-8")
    # JSON is valid YAML, and escapes every payload unambiguously.
    (d / "truth.yaml").write_text(json.dumps(truth, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def mini_corpus(root: Path) -> Path:
    """Write the ``mini`` task under ``root`` (the corpus folder) and return ``root``."""
    task_dir = root / TASK_ID
    task_dir.mkdir(parents=True)
    (task_dir / "task.yaml").write_text(textwrap.dedent("""\
        id: mini
        description: A two-member task for the notebook tests.
        prompt:
          system: Extract the fields as JSON.
          user: "Document:\\n{document}"
        schema: {type: object}
        scorer: scorer.py:score
        threshold: 0.9
        """), encoding="utf-8")
    (task_dir / "scorer.py").write_text(SCORER, encoding="utf-8")
    _write_member(task_dir, "plain", "Deal memo. Account A-1. Rate 70%.\n",
                  {"record": {"account_id": "A-1", "term_rate": 0.7, "title": "Deal memo"},
                   "required": ["account_id"]})
    _write_member(
        task_dir, "hostile",
        f"Deal memo {HOSTILE_SCRIPT}. Account B-2. Title {HOSTILE_IMG}.\n",
        {"record": {"account_id": "B-2", "title": HOSTILE_IMG, "note": HOSTILE_SCRIPT, HOSTILE_FIELD: "x"},
         "fake": {"title": HOSTILE_SCRIPT, "note": None, "account_id": "B-2",
                  HOSTILE_SCRIPT: HOSTILE_IMG},
         "required": ["account_id", "note"]},
    )
    return root


def prepare_run(root: Path) -> list:
    """Write ``root/corpus``, pre-fill extraction.json like the runner's pool does, return the notebook jobs.

    The layout is the same under any `root`, so two runs can be compared byte for byte.
    """
    from evalkit.backends import BackendSpec
    from evalkit.execution.execute import plan_member, plan_report
    from evalkit.stages.pipeline import extract_member

    corpus = mini_corpus(root / "corpus")
    run_dir = root / "run"
    jobs = []
    for m in MEMBERS:
        jobs += plan_member(run_dir, TASK_ID, m, BackendSpec("fake", "fake"), corpus)
        extract_member(TASK_ID, m, BackendSpec("fake", "fake"), corpus, None, run_dir / TASK_ID / m / "fake")
    return jobs + [plan_report(run_dir, TASK_ID, jobs)]


@pytest.fixture(scope="session")
def executed_run(tmp_path_factory):
    """One executed run of the mini task: (root, run_dir, results). Read-only for tests."""
    from evalkit.execution.execute import execute

    root = tmp_path_factory.mktemp("run1")
    results = execute(prepare_run(root), workers=2)
    return root, root / "run", results


@pytest.fixture
def run_copy(executed_run, tmp_path):
    """A private copy of the executed run (for tests that write into it)."""
    root = executed_run[0]
    shutil.copytree(root, tmp_path / "copy")
    return tmp_path / "copy" / "run"
