"""Ontology modes: a vocabulary of entity types and relation labels for graph tasks.

``--ontology PATH`` names a YAML file::

    mode: strict                 # optional: open | strict
    entity_types: [PER, ORG, LOC, TIME, NUM, MISC]
    relation_types: ["country", "place of birth", ...]

and ``--ontology-mode open|strict`` chooses how it is used. The mode on the
command line overrides the file's own ``mode:``; with neither, the mode is
``strict``. ``--ontology-mode`` without ``--ontology`` is a usage error.

* **freeform** (no ontology): the task's prompt is sent unchanged (byte for byte).
* **open**: the vocabulary is appended to the user prompt as the preferred
  labels; another label is allowed when none fits.
* **strict**: the vocabulary is appended as the only labels allowed, and every
  backend gets a ``vocabulary_compliance`` figure: the share of the types it
  emitted (entity types and relation labels) that are inside the ontology.
  The output schema is not changed: compliance is measured, not enforced, so
  it stays separate from structured-output reliability (parse outcomes).

Relation labels are compared after the shared fold (`evalkit.scoring.text.fold`,
so ``Place of Birth`` is ``place of birth``); entity types trimmed and upper-cased.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from evalkit._util.yamlio import load_yaml
from evalkit.errors import CorpusError, UsageError
from evalkit.scoring.text import fold

MODES = ("open", "strict")
FREEFORM = "freeform"

__all__ = ["Ontology", "load_ontology", "resolve_mode", "inject", "compliance", "aggregate_compliance",
           "MODES", "FREEFORM"]


@dataclass(frozen=True)
class Ontology:
    mode: str  # "open" | "strict"
    entity_types: tuple[str, ...]
    relation_types: tuple[str, ...]
    path: str = ""
    sha256: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "path": self.path, "sha256": self.sha256,
                "entity_types": list(self.entity_types), "relation_types": list(self.relation_types)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Ontology | None:
        if not data:
            return None
        return cls(mode=data["mode"], entity_types=tuple(data.get("entity_types") or ()),
                   relation_types=tuple(data.get("relation_types") or ()), path=data.get("path", ""),
                   sha256=data.get("sha256", ""))

    # -- vocabulary tests --------------------------------------------------------------------------------
    @cached_property  # asked once per emitted item
    def _types(self) -> frozenset[str]:
        return frozenset(t.strip().upper() for t in self.entity_types)

    @cached_property
    def _labels(self) -> frozenset[str]:
        return frozenset(fold(r) for r in self.relation_types)

    def has_type(self, entity_type: str) -> bool:
        return str(entity_type or "").strip().upper() in self._types

    def has_label(self, relation: str) -> bool:
        return fold(relation) in self._labels

    # -- prompt ------------------------------------------------------------------------------------------
    def prompt_block(self) -> str:
        types = ", ".join(self.entity_types)
        labels = "\n".join(f"- {r}" for r in self.relation_types)
        if self.mode == "strict":
            head = ("Ontology (strict): use only the vocabulary below. Every entity type must be one of the "
                    "entity types listed, and every relation must be one of the relation labels listed, written "
                    "exactly as listed. Leave out any fact that none of these labels expresses.")
        else:
            head = ("Ontology (open): prefer the vocabulary below. Use these entity types and relation labels, "
                    "written exactly as listed, whenever one fits; use another lower-case label only when none "
                    "of them expresses the fact.")
        parts = [head]
        if types:
            parts.append(f"Entity types: {types}")
        if labels:
            parts.append(f"Relation labels:\n{labels}")
        return "\n\n".join(parts)


def resolve_mode(ontology: str | Path | None, mode: str | None, file_mode: str | None = None) -> str:
    """The effective mode: --ontology-mode, else the file's `mode:`, else strict; freeform without a file."""
    if ontology is None:
        if mode is not None:
            raise UsageError("--ontology-mode needs --ontology PATH (a vocabulary to be open or strict about)")
        return FREEFORM
    if mode is not None and mode not in MODES:
        raise UsageError(f"--ontology-mode {mode!r}: expected one of {', '.join(MODES)}")
    return mode or file_mode or "strict"


def load_ontology(path: str | Path | None, mode: str | None = None) -> Ontology | None:
    """Read and check an ontology file; None (freeform) without a path. Raises UsageError / CorpusError."""
    if path is None:
        resolve_mode(None, mode)
        return None

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--ontology {p}: file not found")
    data, _ = load_yaml(p)
    if not isinstance(data, dict):
        raise CorpusError(f"{p}: an ontology is a mapping with entity_types and relation_types")
    unknown = set(data) - {"mode", "entity_types", "relation_types"}
    if unknown:
        raise CorpusError(f"{p}: unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                          f"(known: mode, entity_types, relation_types)")
    file_mode = data.get("mode")
    if file_mode is not None and file_mode not in MODES:
        raise CorpusError(f"{p}: mode: {file_mode!r} must be one of {', '.join(MODES)}")

    def labels(key: str) -> tuple[str, ...]:
        value = data.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise CorpusError(f"{p}: {key} must be a list of non-empty strings")
        return tuple(value)

    entity_types, relation_types = labels("entity_types"), labels("relation_types")
    if not entity_types and not relation_types:
        raise CorpusError(f"{p}: the ontology lists no entity_types and no relation_types")
    return Ontology(mode=resolve_mode(p, mode, file_mode), entity_types=entity_types, relation_types=relation_types,
                    path=str(p), sha256=hashlib.sha256(p.read_bytes()).hexdigest())


def inject(user_prompt: str, ontology: Ontology | None) -> str:
    """The user prompt with the vocabulary appended (unchanged, byte for byte, without an ontology)."""
    if ontology is None:
        return user_prompt
    return f"{user_prompt}\n\n{ontology.prompt_block()}"


def compliance(record: Any, ontology: Ontology) -> dict[str, Any]:
    """How much of one record's vocabulary is inside the ontology.

    Counts every emitted entity type and relation label (malformed items and
    an absent record count nothing). ``vocabulary_compliance`` is null when
    nothing was emitted (never 0 or 1).
    """
    rec = record if isinstance(record, dict) else {}
    outside: Counter[str] = Counter()
    ent_n, ent_in = _count_vocabulary(rec.get("entities"), "type", ontology.has_type, "type", outside) \
        if ontology.entity_types else (0, 0)
    rel_n, rel_in = _count_vocabulary(rec.get("relations"), "relation", ontology.has_label, "relation", outside) \
        if ontology.relation_types else (0, 0)
    n = ent_n + rel_n
    return {"vocabulary_compliance": (ent_in + rel_in) / n if n else None,
            "vocabulary_emitted": n, "vocabulary_inside": ent_in + rel_in,
            "entity_types_emitted": ent_n, "entity_types_inside": ent_in,
            "relation_labels_emitted": rel_n, "relation_labels_inside": rel_in,
            "outside": dict(sorted(outside.items()))}


def _count_vocabulary(items: Any, key: str, known: Callable[[str], bool], prefix: str,
                      outside: Counter[str]) -> tuple[int, int]:
    """(emitted, inside) for one list of items; each value outside the ontology is tallied as prefix:value."""
    emitted = inside = 0
    for item in items if isinstance(items, list) else []:
        value = item.get(key) if isinstance(item, dict) else None
        if isinstance(value, str) and value.strip():
            emitted += 1
            if known(value):
                inside += 1
            else:
                outside[f"{prefix}:{value.strip()}"] += 1
    return emitted, inside


def aggregate_compliance(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Micro figure over members: summed inside / summed emitted (null when nothing was emitted)."""
    rows = list(rows)
    emitted = sum(int(r.get("vocabulary_emitted") or 0) for r in rows)
    inside = sum(int(r.get("vocabulary_inside") or 0) for r in rows)
    outside: dict[str, int] = {}
    for r in rows:
        for k, v in (r.get("outside") or {}).items():
            outside[k] = outside.get(k, 0) + int(v)
    return {"vocabulary_compliance": inside / emitted if emitted else None, "vocabulary_emitted": emitted,
            "vocabulary_inside": inside, "members": len(rows),
            "outside": dict(sorted(outside.items(), key=lambda kv: (-kv[1], kv[0])))}
