#!/usr/bin/env python3
"""Regenerate the `cuad-contracts` members from the CUAD data folder.

    python tools/import_cuad.py --sources ../shared/data [--out corpus/cuad-contracts]

For every contract listed in ``<sources>/cuad/index.jsonl`` (or ``--index FILE``, any list in its
format, e.g. a held-out set's; ``--only SLUG`` for some of them) this writes
``<out>/<slug>/manifest.yaml`` and ``<out>/<slug>/truth.yaml``, and it writes
``<out>/ATTRIBUTION.md``. It never copies contract text: each manifest points at
``cuad/<slug>/contract.txt`` under the sources folder and pins its sha256, which
is checked against both index.jsonl and the file. task.yaml is hand-written; the
importer only reads its gate (``scoring.gate.required``) to compute each
member's ``expected_missing_fields`` / ``expected_blocking``.

Conversion of CUAD's normalised answers (``cuad/<slug>/cuad.json``):

- dates ``M/D/YY`` -> ``YYYY-MM-DD``; a two-digit year above 50 is 19xx, else
  20xx; blank parts ``[]`` stay unknown (``[]/[]/2000`` -> ``"2000"``);
  ``perpetual`` stays ``"perpetual"``;
- parties: split on ``"; "``, the trailing ``("Alias")`` (and a comma before
  it) dropped, blank names (``[]``) dropped;
- document name and party names: runs of whitespace collapsed to one space
  (PDF-to-text spacing); every other answer is kept as it is;
- an empty answer is null.

CUAD's labels are followed even where the data README lists an inconsistency;
the quirk is written into that member's manifest ``notes`` instead. The output
is deterministic: re-running gives byte-identical files.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
TASK_DIR = REPO / "corpus" / "cuad-contracts"

# record field -> CUAD category (the order is the record's key order)
CATEGORIES = {
    "document_name": "Document Name",
    "parties": "Parties",
    "agreement_date": "Agreement Date",
    "effective_date": "Effective Date",
    "expiration_date": "Expiration Date",
    "renewal_term": "Renewal Term",
    "notice_period": "Notice Period To Terminate Renewal",
    "governing_law": "Governing Law",
}
DATE_FIELDS = ("agreement_date", "effective_date", "expiration_date")

# What the data README (section 1, "Licence and attribution") must say; checked, then quoted.
LICENCE_SENTENCE = (
    "CUAD is licensed under the Creative Commons Attribution 4.0 International "
    "licence (CC BY 4.0, https://creativecommons.org/licenses/by/4.0/)."
)
ATTRIBUTION_SENTENCE = (
    "Contract Understanding Atticus Dataset (CUAD) v1, by The Atticus Project, "
    "Inc., licensed under CC BY 4.0."
)
DISCLAIMER_SENTENCE = (
    "We make no representations or warranties regarding the license status of "
    "the underlying contracts, which are publicly available and downloadable from EDGAR."
)

LICENSE = {
    "spdx": "CC-BY-4.0",
    "verified": (
        f'The data README (README.md of the sources folder, section 1 "Licence and attribution") '
        f'records: "{LICENCE_SENTENCE}" Its required attribution begins: "{ATTRIBUTION_SENTENCE}" '
        "The full attribution and change note travel in corpus/cuad-contracts/ATTRIBUTION.md."
    ),
}
PROVENANCE = {  # docs/authoring.md; `date` is when these conversion rules last changed the truth
    "authored_by": "CUAD v1 (The Atticus Project): law-student annotation; converted by tools/import_cuad.py",
    "verified_by": "attorney review per CUAD v1; the conversion checked by tests/test_cuad_corpus.py",
    "adversarial_pass": "not done",
    "date": "2026-11-30",
}

# Quirks of single contracts, from the data README section 1 "Known quirks" (unless marked).
# Held-out members (docs/authoring.md, issue 12.5): scored like the rest, reported apart, never tuned against.
HELDOUT = {"sphere3d-consulting-2020": "the only consulting agreement, named by no test, doc or prompt: untouched by tuning"}

QUIRKS: dict[str, list[str]] = {
    "aig-capital-maintenance-2014": [
        "Notice Period `30 days` is CUAD's answer, but CUAD's span for it is a termination-right "
        "clause (AIG may terminate on thirty days' notice), not a renewal clause; the span also "
        "joins two non-adjacent pieces with CUAD's `<omitted>` marker (a page number was cut). "
        "Kept as labelled.",
        "Expiration Date is CUAD's `perpetual` (the agreement continues indefinitely unless terminated).",
    ],
    "webmd-content-license-2005": [
        "Renewal Term `1 year` is CUAD's answer although CUAD gives no evidence span for it "
        "(a CSV inconsistency); kept as labelled.",
    ],
    "legacytech-distributor-2005": [
        "Notice Period is null because CUAD's answer is empty, although CUAD marks a span for it "
        "(the term clause requires sixty (60) days' notice before the renewal date); kept as "
        "labelled, so an extraction of `60 days` scores as a mismatch here.",
    ],
    "intelligenthighway-alliance-2018": [
        "Same template as sibannac-alliance-2017, labelled differently: Effective Date is "
        "`1/10/18` here but empty there.",
        "Observed in conversion (not in the data README): Expiration Date is empty here although "
        "the same twelve-month term clause gave `11/30/18` in sibannac-alliance-2017; kept as "
        "labelled (null), so a computed end date scores as a mismatch here.",
    ],
    "sibannac-alliance-2017": [
        "Same template as intelligenthighway-alliance-2018, labelled differently: Effective Date "
        "is empty here (null) but `1/10/18` there; Renewal Term is `12 months` here and `1 year` "
        "there (equal as durations).",
        "Observed in conversion (not in the data README): Expiration Date is `11/30/18` here but "
        "empty in intelligenthighway-alliance-2018 under the same twelve-month term clause.",
        "Observed in conversion (not in the data README): CUAD's Parties answer names `Bravatek "
        "Solutions` without the `Inc.` that its own span and the contract give (`Bravatek Solutions, "
        "Inc.`); kept as labelled, so an extraction with `Inc.` can score as a party mismatch here.",
    ],
    "xacct-maintenance-2000": [
        "A draft form: the date line is unfilled (`the ____ day of ____ 2000`) and the licensee "
        "is not named. Its CUAD filename has no date, so the slug's year is the year of the "
        "contract's date line.",
    ],
}

HEADER = (
    "# Generated by tools/import_cuad.py from cuad/{slug}/cuad.json and cuad/index.jsonl\n"
    "# (CUAD v1, CC BY 4.0: see ../ATTRIBUTION.md). Do not edit: change the importer and re-run it.\n"
)


class ImportFailed(Exception):
    """The data does not look as the importer expects; nothing is guessed."""


# ---------------------------------------------------------------- conversion

_DATE = re.compile(r"^(\[\]|\d{1,2})/(\[\]|\d{1,2})/(\d{2}|\d{4})$")


def iso_date(answer: str) -> str | None:
    """CUAD's `M/D/YY` answer as ISO text (`YYYY-MM-DD`, `YYYY-MM`, `YYYY`), or perpetual / None."""
    a = answer.strip()
    if not a:
        return None
    if a.lower() == "perpetual":
        return "perpetual"
    m = _DATE.match(a)
    if not m:
        raise ImportFailed(f"unrecognised date answer {answer!r}")
    month, day, yy = m.groups()
    year = int(yy)
    if len(yy) == 2:
        year += 1900 if year > 50 else 2000
    if month == "[]":
        if day != "[]":
            raise ImportFailed(f"date answer {answer!r} has a day but no month")
        return f"{year:04d}"
    if day == "[]":
        if not 1 <= int(month) <= 12:
            raise ImportFailed(f"date answer {answer!r} has no month {month}")
        return f"{year:04d}-{int(month):02d}"
    try:
        return dt.date(year, int(month), int(day)).isoformat()
    except ValueError as e:
        raise ImportFailed(f"date answer {answer!r} is not a calendar date: {e}") from None


def _collapse(text: str) -> str:
    return " ".join(text.split())


_ALIAS = re.compile(r'\s*,?\s*\(\s*"[^"]*"\s*\)\s*$')


def parties(answer: str) -> tuple[list[str], list[str]]:
    """CUAD's `Name ("Alias"); Name ("Alias")` as a list of names, plus notes on what changed."""
    names: list[str] = []
    notes: list[str] = []
    if not answer.strip():
        return names, notes
    for part in answer.split("; "):
        name = part
        while True:  # drop every trailing ("Alias")
            stripped = _ALIAS.sub("", name)
            if stripped == name:
                break
            name = stripped
        if re.search(r",\s*\(", part) and not name.endswith(","):
            notes.append(f"Party {_collapse(part)!r}: the comma before its alias was dropped with the alias.")
        clean = _collapse(name)
        if clean in ("", "[]"):
            notes.append(f"Party {part.strip()!r} has a blank name in CUAD and was dropped from `parties`.")
            continue
        if clean != name.strip():
            notes.append(f"Party {name.strip()!r}: runs of whitespace (PDF-to-text spacing) collapsed.")
        names.append(clean)
    return names, notes


def record_from(categories: dict) -> tuple[dict, list[str]]:
    """The truth record and the notes on every conversion that changed more than the form."""
    missing = [c for c in CATEGORIES.values() if c not in categories]
    if missing:
        raise ImportFailed(f"cuad.json lacks categories {missing}")
    rec: dict = {}
    notes: list[str] = []
    for field, cat in CATEGORIES.items():
        answer = categories[cat]["answer"]
        if not isinstance(answer, str):
            raise ImportFailed(f"{cat}: answer is not a string: {answer!r}")
        if field == "parties":
            rec[field], pnotes = parties(answer)
            notes += pnotes
        elif field in DATE_FIELDS:
            rec[field] = iso_date(answer)
            if "[]" in answer:
                notes.append(f"{cat} {answer!r} has blank parts; kept as the partial date {rec[field]!r}.")
        elif field == "document_name":
            rec[field] = _collapse(answer) or None
            if rec[field] is not None and rec[field] != answer.strip():
                notes.append(f"{cat} {answer!r}: runs of whitespace (PDF-to-text spacing) collapsed.")
        else:  # renewal_term, notice_period, governing_law: CUAD's text as is
            rec[field] = answer if answer.strip() else None
    return rec, notes


def gate_of(rec: dict, required: list[str]) -> tuple[list[str], bool]:
    """expected_missing_fields (alphabetical) and expected_blocking against a required-only gate."""
    missing = sorted(f for f in required if rec.get(f) in (None, "", []))
    return missing, bool(missing)


# ---------------------------------------------------------------- files


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, s: str):
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)


_Dumper.add_representer(str, _str)


def dump(data: dict) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100, default_flow_style=False)


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _readme_checks(readme: str) -> str:
    """Check the data README says what the manifests quote; return the attribution block verbatim."""
    flat = _collapse(readme.replace("\n>", "\n"))
    for sentence in (LICENCE_SENTENCE, ATTRIBUTION_SENTENCE, DISCLAIMER_SENTENCE):
        if _collapse(sentence) not in flat:
            raise ImportFailed(f"the data README no longer says: {sentence!r}")
    section = readme.split("## 1. CUAD", 1)[-1].split("\n## 2.", 1)[0]
    after = section.split("Required\nattribution:", 1)
    if len(after) != 2:
        after = section.split("Required attribution:", 1)
    if len(after) != 2:
        raise ImportFailed("the data README's section 1 has no 'Required attribution:'")
    lines = after[1].lstrip("\n").splitlines()
    block = []
    for line in lines:
        if not line.startswith(">"):
            break
        block.append(line.rstrip())
    if not block or ATTRIBUTION_SENTENCE.split(",")[0] not in block[0]:
        raise ImportFailed("could not find the attribution block quoted in the data README")
    return "\n".join(block)


def attribution_md(block: str) -> str:
    return (
        "# Attribution: CUAD contracts (task `cuad-contracts`)\n"
        "\n"
        "<!-- Generated by tools/import_cuad.py from the data README; do not edit: re-run the importer. -->\n"
        "\n"
        "The truth of this task is derived from the Contract Understanding Atticus Dataset\n"
        "(CUAD) v1, licensed under the Creative Commons Attribution 4.0 International licence\n"
        "(CC BY 4.0, https://creativecommons.org/licenses/by/4.0/). The attribution required by\n"
        "the data README (section 1, \"Licence and attribution\"), quoted verbatim:\n"
        "\n"
        f"{block}\n"
        "\n"
        f"The Atticus Project's README adds: \"{DISCLAIMER_SENTENCE}\"\n"
        "\n"
        "## Further changes made in evalkit\n"
        "\n"
        "- The contract texts are not copied into this repository. Each member's\n"
        "  `manifest.yaml` points at `cuad/<slug>/contract.txt` under the sources folder\n"
        "  (`--sources` / `EVALKIT_SOURCES`) and pins its sha256.\n"
        "- Each member's `truth.yaml` was converted by `tools/import_cuad.py` from the 8\n"
        "  normalised CUAD answers in `cuad/<slug>/cuad.json`: dates from `M/D/YY` to ISO\n"
        "  `YYYY-MM-DD` (two-digit years above 50 are 19xx, else 20xx; blank parts stay\n"
        "  unknown, so `[]/[]/2000` becomes `2000`; `perpetual` is kept); parties split on\n"
        "  `; ` with their `(\"Alias\")` and blank (`[]`) names dropped; runs of whitespace in\n"
        "  the document name and party names collapsed; empty answers written as null. The\n"
        "  labels are otherwise kept as CUAD gives them, including its known\n"
        "  inconsistencies, which each manifest's `notes` records.\n"
        "- The converted truth files are distributed under CC BY 4.0 with this attribution.\n"
    )


def build(sources: Path, task_yaml: Path, index: Path | None = None, only: list[str] | None = None) -> dict[str, bytes]:
    """Every file the importer owns, as {path relative to the task folder: bytes}.

    `index`: the contract list (index.jsonl's format; default ``<sources>/cuad/index.jsonl``), e.g. a
    held-out set's; `only`: these slugs of it. Each contract's files are read under ``<sources>/cuad/<slug>/``."""
    cuad = sources / "cuad"
    index_path = index or cuad / "index.jsonl"
    if not index_path.is_file():
        raise ImportFailed(f"{index_path}: not found (pass --sources DIR, the folder holding cuad/)")
    readme_path = sources / "README.md"
    if not readme_path.is_file():
        raise ImportFailed(f"{readme_path}: not found (the data README records CUAD's licence)")
    block = _readme_checks(readme_path.read_text(encoding="utf-8"))

    task = yaml.safe_load(task_yaml.read_text(encoding="utf-8"))
    try:
        required = list(task["scoring"]["gate"]["required"])
    except (KeyError, TypeError):
        raise ImportFailed(f"{task_yaml}: no scoring.gate.required") from None
    if (task["scoring"]["gate"] or {}).get("sum_equals"):
        raise ImportFailed(f"{task_yaml}: the importer only computes a required-fields gate (no sum rules)")

    rows = [json.loads(line) for line in index_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if only:
        unknown = sorted(set(only) - {r["slug"] for r in rows})
        if unknown:
            raise ImportFailed(f"{index_path}: does not list {', '.join(unknown)}")
        rows = [r for r in rows if r["slug"] in only]
    files: dict[str, bytes] = {}
    seen: set[str] = set()
    for row in sorted(rows, key=lambda r: r["slug"]):
        slug = row["slug"]
        if slug in seen or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug):
            raise ImportFailed(f"index.jsonl: bad or repeated slug {slug!r}")
        seen.add(slug)
        pointer = f"cuad/{slug}/contract.txt"
        raw = (sources / pointer).read_bytes()
        digest = sha256_bytes(raw)
        if digest != row["sha256"]:
            raise ImportFailed(f"{sources / pointer}: sha256 {digest} differs from index.jsonl's {row['sha256']}")
        if len(raw) != row["bytes"] or len(raw.decode("utf-8")) != row["chars"]:
            raise ImportFailed(f"{sources / pointer}: size differs from index.jsonl's bytes/chars")
        meta = json.loads((cuad / slug / "cuad.json").read_text(encoding="utf-8"))
        if meta["cuad_filename"] != row["filename"] or meta["cuad_txt_filename"] != row["txt_filename"]:
            raise ImportFailed(f"{slug}: cuad.json and index.jsonl name different CUAD files")

        rec, conv_notes = record_from(meta["categories"])
        if not rec["document_name"]:
            raise ImportFailed(f"{slug}: empty Document Name (it is the manifest title)")
        missing, blocking = gate_of(rec, required)

        notes = list(QUIRKS.get(slug, []))
        notes += conv_notes
        if row["chars"] != row["bytes"]:
            notes.append(
                f"contract.txt has non-ASCII characters: {row['chars']} characters, {row['bytes']} UTF-8 bytes."
            )
        manifest = {
            "title": rec["document_name"],
            "source": {"pointer": pointer},
            "sha256": digest,
            "license": dict(LICENSE),
            "truth_provenance": dict(PROVENANCE),
        }
        if notes:
            manifest["notes"] = "".join(f"- {n}\n" for n in notes)
        truth = {"record": rec, "expected_missing_fields": missing, "expected_blocking": blocking}
        header = HEADER.format(slug=slug)
        held = f"heldout: true  # {HELDOUT[slug]}\n" if slug in HELDOUT else ""
        files[f"{slug}/manifest.yaml"] = (header + dump(manifest) + held).encode("utf-8")
        files[f"{slug}/truth.yaml"] = (header + dump(truth)).encode("utf-8")
    if index is None and not only:  # the bundled list, whole: a quirk of no listed contract is a typo
        for stale in sorted(set(QUIRKS) - seen):
            raise ImportFailed(f"QUIRKS names {stale!r}, which index.jsonl does not list")
    files["ATTRIBUTION.md"] = attribution_md(block).encode("utf-8")
    _validate(files)
    return files


def _validate(files: dict[str, bytes]) -> None:
    """Parse what was generated back with evalkit's own models (round trip, strict keys)."""
    try:
        from evalkit.corpus.specs import Manifest
        from evalkit.scoring.fields import FieldsTruth
    except ImportError:  # an evalkit checkout without its package installed
        sys.path.insert(0, str(REPO))
        from evalkit.corpus.specs import Manifest
        from evalkit.scoring.fields import FieldsTruth
    for rel, data in files.items():
        if rel.endswith("manifest.yaml"):
            Manifest.model_validate(yaml.safe_load(data))
        elif rel.endswith("truth.yaml"):
            truth = FieldsTruth.model_validate(yaml.safe_load(data))
            for f in DATE_FIELDS:  # dates must stay strings, never YAML timestamps
                if truth.record[f] is not None and not isinstance(truth.record[f], str):
                    raise ImportFailed(f"{rel}: {f} did not round-trip as a string")


def write(files: dict[str, bytes], out: Path) -> list[str]:
    """Write the files (only when changed); return warnings about member folders not generated."""
    out.mkdir(parents=True, exist_ok=True)
    for rel, data in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
    warnings = []
    members = {rel.split("/")[0] for rel in files if "/" in rel}
    for d in sorted(p for p in out.iterdir() if p.is_dir()):
        if d.name not in members:
            warnings.append(f"{d}: not a CUAD member in index.jsonl (left alone; remove it if stale)")
            continue
        for f in sorted(d.iterdir()):
            if f"{d.name}/{f.name}" not in files:
                warnings.append(f"{f}: not written by the importer (left alone)")
    return warnings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", required=True, type=Path, help="the data folder holding cuad/ and README.md")
    ap.add_argument("--out", type=Path, default=TASK_DIR, help="task folder to write (default: %(default)s)")
    ap.add_argument(
        "--task-yaml", type=Path, default=TASK_DIR / "task.yaml", help="task.yaml whose gate is used (default: %(default)s)"
    )
    ap.add_argument("--index", type=Path, default=None,
                    help="the contract list, in index.jsonl's format (default: <sources>/cuad/index.jsonl)")
    ap.add_argument("--only", action="append", default=None, metavar="SLUG", help="only this contract (repeatable)")
    args = ap.parse_args(argv)
    try:
        files = build(args.sources, args.task_yaml, args.index, args.only)
    except (ImportFailed, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"import_cuad: error: {e}", file=sys.stderr)
        return 1
    for w in write(files, args.out):
        print(f"import_cuad: warning: {w}", file=sys.stderr)
    n = sum(1 for rel in files if rel.endswith("manifest.yaml"))
    print(f"import_cuad: {n} members written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
