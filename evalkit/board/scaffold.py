"""A researcher's own project: `evalkit init DIR` and `evalkit new-member TASK FILE`.

`init_project` writes a corpus with one `fields` task (a commented example schema, every field kind
shown) and one example member (a document, its manifest with the sha256 pinned, its truth), the
place of the scoreboard and a README of the next commands. It validates and scores 100% with
``--backend fake`` as written. `new_member` copies a document into a task, pins its sha256 and writes
a truth.yaml skeleton generated from the task's schema, for the researcher to fill in.
"""

from __future__ import annotations

import datetime as _dt
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from evalkit._util.jsonio import write_json, write_text
from evalkit._util.paths import check_name
from evalkit.corpus.sources import sha256_file
from evalkit.corpus.specs import NO_ADVERSARIAL_PASS
from evalkit.corpus.tasks import find_task
from evalkit.errors import UsageError
from evalkit.results.scoreboard import BOARD_NAME, empty_board

__all__ = ["init_project", "new_member", "truth_skeleton", "EXAMPLE_TASK"]

EXAMPLE_TASK = "invoices"
EXAMPLE_MEMBER = "example-invoice"

TASK_YAML = """\
# One task: what to extract from each document, and how to score it. Format: `evalkit docs corpus-format`
# in the evalkit documentation; `evalkit validate` lints it.
id: invoices
description: >-
  Supplier invoices extracted into one flat record. Replace this example with your own task:
  rename the folder and the id, write the prompt, the schema and a kind for every field.

prompt:
  system: |-
    You extract the key facts of ONE invoice into a JSON record. Return exactly the keys of the
    schema; use null (or an empty list) for anything the invoice does not state; never guess.
  user: |-
    Extract the invoice below as one JSON record.

    {document}

# The JSON Schema of the record (sent to live models; every extraction is checked against it).
schema:
  type: object
  additionalProperties: false
  required: [invoice_number, supplier, issue_date, total, currency, line_items]
  properties:
    invoice_number: {type: [string, "null"], maxLength: 40}
    supplier: {type: [string, "null"], maxLength: 120}
    issue_date: {type: [string, "null"], pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
    total: {type: [number, "null"]}
    currency: {type: [string, "null"], enum: [EUR, GBP, USD, null]}
    line_items:
      type: array
      items: {type: string, maxLength: 120}

scorer: fields   # flat fields; graph and tree scorers exist too (`evalkit docs corpus-format`)
threshold: 0.9   # a member PASSes when its score is at least this (and the gate agrees)
settings:
  max_tokens: 256   # the record is short; a cap keeps a small local model from rambling on

scoring:
  # Field kinds: id (exact; identifier: true also flags values absent from the document as
  # hallucinated), text (normalized words), enum, number (tolerance), date (any notation),
  # duration, set (order-free list), parties, conditions (list of objects). weight: default 1.
  hallucination_penalty: 2
  fields:
    invoice_number: {kind: id, weight: 2, identifier: true}
    supplier: {kind: text}
    issue_date: {kind: date, weight: 2}
    total: {kind: number, weight: 2, tolerance: 0.01}
    currency: {kind: enum}
    line_items: {kind: set}
  gate:
    required: [invoice_number, total]   # missing in an extraction → listed and blocking
"""

EXAMPLE_DOCUMENT = """\
# Invoice INV-2026-0042

From: Brightwater Paper Supplies Ltd
Date: 3 March 2026

| Item | Amount |
| --- | --- |
| A4 copier paper, 20 reams | 96.00 |
| Archive boxes, 50 | 42.50 |

Total due: EUR 138.50, payable within 30 days.
"""

EXAMPLE_TRUTH = """\
# The verified answer for this document: what a perfect extraction returns.
record:
  invoice_number: INV-2026-0042
  supplier: Brightwater Paper Supplies Ltd
  issue_date: '2026-03-03'
  total: 138.5
  currency: EUR
  line_items:
  - A4 copier paper, 20 reams
  - Archive boxes, 50
expected_missing_fields: []   # fields the document leaves out (null in the record)
expected_blocking: false      # true when the gate should block this document
"""

README = """\
# {name}: an evalkit project

    corpus/{task}/task.yaml          the task: prompt, schema, field kinds, threshold
    corpus/{task}/<member>/          one document each: the file, manifest.yaml (sha256), truth.yaml
    corpus/{board}           the scoreboard (`--update-scoreboard` writes it)

Next commands, from this folder:

    evalkit validate                              # lint the corpus
    evalkit run --backend fake                    # self-test: the truth echoed back scores 100%
    evalkit new-member {task} path/to/doc.pdf     # add a document; then fill in its truth.yaml
    evalkit run --backend mine=openai:url=http://localhost:8080/v1 --record mine=cassettes/mine.jsonl
    evalkit run --backend mine=cassette:path=cassettes/mine.jsonl   # replay, offline and free
    evalkit sweep --backend mine=cassette:path=cassettes/mine.jsonl --out runs/sweep-a --update-scoreboard
    evalkit band --from-run runs/sweep-a --from-run runs/sweep-b   # the noise band, from two sweeps
    evalkit check --backend mine=...              # exit 1 when a metric drops beyond its band

A walk through all of it: the tutorial shipped with evalkit (`evalkit docs tutorial` prints its path;
`evalkit docs` lists every page: the corpus format, authoring truth, the scoreboard, …).

Each run writes a folder under runs/: its notebooks and an HTML report (the command prints its path).
"""


def _manifest(title: str, file: str, digest: str, spdx: str, verified: str, provenance: dict[str, str]) -> str:
    return yaml.safe_dump({
        "title": title, "source": {"file": file}, "sha256": digest,
        "license": {"spdx": spdx, "verified": verified}, "truth_provenance": provenance,
    }, sort_keys=False, allow_unicode=True)


def init_project(dest: str | Path) -> list[Path]:
    """Scaffold a project in `dest` (created; must not hold a corpus yet); return the files written."""
    dest = Path(dest)
    corpus = dest / "corpus"
    if corpus.exists():
        raise UsageError(f"{corpus}: already exists; `evalkit init` only starts a new project")
    member = corpus / EXAMPLE_TASK / EXAMPLE_MEMBER
    member.mkdir(parents=True)
    doc = member / "invoice.md"
    files = {
        corpus / EXAMPLE_TASK / "task.yaml": TASK_YAML,
        doc: EXAMPLE_DOCUMENT,
        member / "truth.yaml": EXAMPLE_TRUTH,
        dest / "README.md": README.format(name=dest.resolve().name, task=EXAMPLE_TASK, board=BOARD_NAME),
    }
    for path, text in files.items():
        write_text(path, text)
    board = corpus / BOARD_NAME
    write_json(board, empty_board())
    manifest = member / "manifest.yaml"
    write_text(manifest, _manifest(
        "Example invoice", doc.name, sha256_file(doc), "CC0-1.0", "written by evalkit init as an example",
        {"authored_by": "evalkit init: an example, written with its document",
         "verified_by": "evalkit's developers: every value is literally in the document",
         "adversarial_pass": NO_ADVERSARIAL_PASS, "date": "2026-12-01"}))
    return sorted([*files, manifest, board])


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "member"


def _blank(schema: dict[str, Any]) -> Any:
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "array" in types:
        return []
    if "object" in types and "null" not in types:
        return {k: _blank(v) for k, v in (schema.get("properties") or {}).items()}
    return None


def truth_skeleton(task) -> str:
    """truth.yaml for a new member of `task`: every schema property blank (null, or [] for a list),
    each line commented with its field kind and type, for the researcher to fill in."""
    props = task.spec.output_schema.get("properties") or {}
    kinds = (task.spec.scoring or {}).get("fields") or {}
    lines = ["# Fill in the verified answer for this document (null: the document does not state it).",
             "record:"]
    for name, schema in props.items():
        value = yaml.safe_dump({name: _blank(schema)}, default_flow_style=True, sort_keys=False).strip()[1:-1]
        kind = (kinds.get(name) or {}).get("kind", "?")
        typ = schema.get("type", "any")
        lines.append(f"  {value}   # kind: {kind}; type: {typ if isinstance(typ, str) else '|'.join(map(str, typ))}")
    # Consistent as written (the gate's required fields are blank, so missing and blocking): the fake
    # self-test passes it. Update both once the record is filled in; `evalkit validate` names them while stale.
    gate = ((task.spec.scoring or {}).get("gate") or {}).get("required") or []
    lines += ["# Update these two once the record is filled in (`evalkit validate` names them while they are stale).",
              f"expected_missing_fields: {yaml.safe_dump(list(gate), default_flow_style=True).strip()}"
              "   # the gate's required fields the document leaves out",
              f"expected_blocking: {'true' if gate else 'false'}   # true when the gate should block this document",
              ""]
    return "\n".join(lines)


def new_member(corpus: str | Path, task_id: str, file: str | Path, member_id: str | None = None) -> Path:
    """Copy `file` into a new member of `task_id`, pin its sha256, write a truth skeleton; return the folder."""
    file = Path(file)
    if not file.is_file():
        raise UsageError(f"{file}: no such file")
    task = find_task(Path(corpus), task_id)
    if task.spec.scorer != "fields":
        raise UsageError(f"{task_id}: new-member writes truth skeletons for `fields` tasks; this task's scorer "
                         f"is {task.spec.scorer!r} (write its truth.yaml by hand: `evalkit docs corpus-format`)")
    member = task.dir / check_name(member_id or _slug(file.stem), "a member id")
    if member.exists():
        raise UsageError(f"{member}: already exists (pass another member id)")
    member.mkdir()
    doc = member / file.name
    shutil.copyfile(file, doc)
    write_text(member / "manifest.yaml", _manifest(
        file.stem, doc.name, sha256_file(doc), "LicenseRef-unknown", "TODO: who may use this document, and how",
        # Placeholders `evalkit validate` names until they are filled in (`evalkit docs authoring`).
        {"authored_by": "TODO", "verified_by": "TODO", "adversarial_pass": "TODO",
         "date": _dt.date.today().isoformat()}))
    write_text(member / "truth.yaml", truth_skeleton(task))
    return member
