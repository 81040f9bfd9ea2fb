"""Build small throw-away corpora for tests (a `fields` task with members); and the helpers tests share:
`cli` (the command group, in-process) and `specs` (``--backend`` arguments, parsed as the CLI parses them)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

TASK = {
    "id": "memos",
    "description": "tiny test task",
    "prompt": {"system": "Extract the fields.", "user": "Document:\n{document}"},
    "schema": {"type": "object", "properties": {"account_id": {"type": ["string", "null"]},
                                                "rate": {"type": ["number", "null"]}}},
    "scorer": "fields",
    "scoring": {"fields": {"account_id": {"kind": "id", "weight": 2, "identifier": True},
                           "rate": {"kind": "number", "weight": 2, "tolerance": 0.001}},
                "gate": {"required": ["account_id"]}},
}


def write_yaml(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def add_member(task_dir: Path, member: str, text: str, record: dict, *, sha256: str | None = None,
               missing: list[str] | None = None, blocking: bool = False) -> Path:
    d = task_dir / member
    d.mkdir(parents=True, exist_ok=True)
    (d / "doc.md").write_text(text)
    write_yaml(d / "manifest.yaml", {
        "title": member,
        "source": {"file": "doc.md"},
        "sha256": sha256 or hashlib.sha256(text.encode()).hexdigest(),
        "license": {"spdx": "CC0-1.0", "verified": "test"},
        "truth_provenance": {"authored_by": "test", "verified_by": "test", "adversarial_pass": "not done",
                             "date": "2026-11-30"},
    })
    write_yaml(d / "truth.yaml", {"record": record, "expected_missing_fields": missing or [],
                                  "expected_blocking": blocking})
    return d


def make_corpus(root: Path, members: int = 2) -> Path:
    corpus = root / "corpus"
    task_dir = corpus / "memos"
    write_yaml(task_dir / "task.yaml", TASK)
    for i in range(members):
        add_member(task_dir, f"m{i}", f"Account ACC-{i:03d} pays a rate of 0.{i + 5}.\n",
                   {"account_id": f"ACC-{i:03d}", "rate": float(f"0.{i + 5}")})
    return corpus


def cli(*args):
    """Invoke the `evalkit` command group in-process; re-raise anything but SystemExit."""
    from click.testing import CliRunner

    from evalkit.cli import main

    res = CliRunner().invoke(main, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res


def specs(*args: str) -> list:
    """``NAME=SPEC`` arguments as the command line hands them on: `BackendSpec`s."""
    from evalkit.backends import BackendSpec

    return [BackendSpec.parse(a) for a in args]
