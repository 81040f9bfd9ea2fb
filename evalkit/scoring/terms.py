"""Aligning the terms of a multi-term record (a deal with several catalogues) before they are scored.

A record may hold a list of terms, each with its own catalogue, dates, rates and conditions. The
extracted list comes in any order and may have more or fewer terms than the truth, so each extracted
term is first paired with the truth term it describes; only then are the fields of a pair compared.

The rule (docs/corpus-format.md, kind `terms`): every (truth, extracted) pair is ranked by how many
of the `align_by` fields agree (catalogue and start), ties by how many of the `tie_by` fields agree
(the rates), then by list position; pairs are taken greedily from the best, each term at most once,
until one side runs out. So as many terms are paired as both sides have (a one-term record is
always paired, and scores exactly as the same fields would flat); the truth terms left over are
missing, the extracted ones extra.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Same = Callable[[str, Any, Any], bool]  # (field, expected value, extracted value) -> equal under its kind


@dataclass(frozen=True)
class Alignment:
    pairs: list[tuple[int, int]]  # (truth index, extracted index), in truth order
    missing: list[int]  # truth terms no extracted term is paired with
    extra: list[int]  # extracted terms paired with no truth term


def as_terms(value: Any) -> list[dict[str, Any]]:
    """A record's terms as a list of objects: one object is one term; null or a non-list is none;
    an item that is not an object is a term with every field null."""
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, (list, tuple)):
        return []
    return [t if isinstance(t, dict) else {} for t in value]


def align(expected: Sequence[dict[str, Any]], extracted: Sequence[dict[str, Any]], same: Same,
          align_by: Sequence[str], tie_by: Sequence[str]) -> Alignment:
    def agree(e: dict[str, Any], g: dict[str, Any], names: Sequence[str]) -> int:
        return sum(same(n, e.get(n), g.get(n)) for n in names)

    ranked = sorted(
        ((-agree(e, g, align_by), -agree(e, g, tie_by), i, j)
         for i, e in enumerate(expected) for j, g in enumerate(extracted)),
    )
    used_e: set[int] = set()
    used_g: set[int] = set()
    pairs: list[tuple[int, int]] = []
    for *_, i, j in ranked:
        if i not in used_e and j not in used_g:
            pairs.append((i, j))
            used_e.add(i)
            used_g.add(j)
    return Alignment(
        pairs=sorted(pairs),
        missing=[i for i in range(len(expected)) if i not in used_e],
        extra=[j for j in range(len(extracted)) if j not in used_g],
    )
