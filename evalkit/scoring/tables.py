"""Scoring a table field (kind `table`): a list of rows, each a mapping column → value.

A record's table is a set of rows under the task's declared columns; the extraction's rows come in any
order, may be more or fewer, and two truth rows may come back as one. So rows are first **aligned**:
the pairing of truth rows with extracted rows that maximizes the number of equal cells (each cell
compared under its column's kind, `same`), found as an optimal assignment (the Hungarian method,
`scipy.optimize.linear_sum_assignment`). A pair with no equal cell is not kept: those rows are left
over (a truth row missing, an extracted row extra), which counts the same cells as pairing them would.

**Cells.** A cell is the non-null value of one (row, column). In a pair of rows, an equal cell is a
true positive; a cell with different values on both sides is a false positive *and* a false negative
(`mismatch`); a cell only the truth fills is a false negative (`missing`), one only the extraction fills
a false positive (`extra`). Every non-null cell of a left-over row is missing (truth) or extra
(extracted). Cell precision, recall and F1 follow (`sets.PRF`); both tables empty is F1 = 1.

**Structure** is GriTS-Top (Smock, Pesala & Abraham, 2022, "GriTS: Grid table similarity metric for
table structure recognition", arXiv:2203.12555): 2·Σ f(Ã, B̃) / (|A| + |B|) over the two grids' most
similar substructures, f the IoU of each cell's row/column span. A record's table has no spanning
cells and its columns are named, so every cell's topology is the same (f = 1), and the most similar
substructure is min(rows) rows × the columns both tables use (a column is used when some row fills it):

    structure = 2 · min(r_t, r_e) · |C_t ∩ C_e| / (r_t · |C_t| + r_e · |C_e|)

It measures the table's shape alone (two rows merged into one lowers it; two columns' values swapped
do not), beside the cells' content (cell F1). Both tables empty is 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from evalkit.scoring.gate import is_missing
from evalkit.scoring.sets import PRF

# (column, expected value, extracted value) -> (equal under the column's kind, reason); both sides non-null
Same = Callable[[str, Any, Any], "tuple[bool, str]"]


@dataclass(frozen=True)
class Cell:
    row: str  # "2" after the truth row it belongs to (1-based), or "extra 1" for a left-over extracted row
    column: str
    expected: Any
    extracted: Any
    outcome: str  # match, mismatch, missing, extra
    reason: str

    @property
    def slots(self) -> int:
        """What the cell adds to 2·TP + FP + FN, the denominator of F1: a pair of values counts twice."""
        return 2 if self.outcome in ("match", "mismatch") else 1


@dataclass(frozen=True)
class TableScore:
    pairs: list[tuple[int, int]]  # (truth row, extracted row), 0-based, in truth order
    missing: list[int]  # truth rows paired with nothing
    extra: list[int]  # extracted rows paired with nothing
    cells: list[Cell] = field(default_factory=list)
    prf: PRF = PRF(0, 0, 0)
    structure: float = 1.0

    @property
    def f1(self) -> float:
        """Cell F1; 1 when neither table has a cell (nothing to get wrong)."""
        return 1.0 if self.prf.f1 is None else self.prf.f1


def as_rows(value: Any) -> list[dict[str, Any]]:
    """A table value as a list of rows: null or a non-list is no rows; a row that is not an object has every
    cell null (it still counts as a row for the structure)."""
    if not isinstance(value, (list, tuple)):
        return []
    return [dict(r) if isinstance(r, Mapping) else {} for r in value]


def _filled(row: Mapping[str, Any], column: str) -> bool:
    return not is_missing(row.get(column))


def align(expected: Sequence[Mapping[str, Any]], extracted: Sequence[Mapping[str, Any]], columns: Sequence[str],
          same: Same) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The row pairing with the most equal cells (pairs with none dropped), and the equal-cell counts."""
    equal = np.array([[sum(_filled(e, c) and _filled(g, c) and same(c, e[c], g[c])[0] for c in columns)
                       for g in extracted] for e in expected], dtype=float).reshape(len(expected), len(extracted))
    if not equal.size:
        return [], equal
    rows, cols = linear_sum_assignment(equal, maximize=True)
    return sorted((int(i), int(j)) for i, j in zip(rows, cols) if equal[i, j] > 0), equal


def _cell(row: str, column: str, e: Any, g: Any, same: Same) -> Cell | None:
    if is_missing(e) and is_missing(g):
        return None  # an empty cell on both sides states nothing
    if is_missing(g):
        return Cell(row, column, e, None, "missing", "the truth fills this cell, the extraction leaves it null")
    if is_missing(e):
        return Cell(row, column, None, g, "extra", "the truth leaves this cell null, the extraction fills it")
    ok, reason = same(column, e, g)
    return Cell(row, column, e, g, "match" if ok else "mismatch", reason)


def structure(expected: Sequence[Mapping[str, Any]], extracted: Sequence[Mapping[str, Any]],
              columns: Sequence[str]) -> float:
    """GriTS-Top of two span-free grids with named columns (module docstring)."""
    used_t = {c for c in columns if any(_filled(r, c) for r in expected)}
    used_e = {c for c in columns if any(_filled(r, c) for r in extracted)}
    size = len(expected) * len(used_t) + len(extracted) * len(used_e)
    if not size:
        return 1.0 if not expected and not extracted else 0.0
    return 2 * min(len(expected), len(extracted)) * len(used_t & used_e) / size


def score_table(expected: Sequence[Mapping[str, Any]], extracted: Sequence[Mapping[str, Any]],
                columns: Sequence[str], same: Same) -> TableScore:
    pairs, _ = align(expected, extracted, columns, same)
    paired_e, paired_g = {i for i, _ in pairs}, {j for _, j in pairs}
    missing = [i for i in range(len(expected)) if i not in paired_e]
    extra = [j for j in range(len(extracted)) if j not in paired_g]
    cells: list[Cell] = []
    for i, j in pairs:
        cells += [c for col in columns if (c := _cell(str(i + 1), col, expected[i].get(col), extracted[j].get(col),
                                                      same))]
    for i in missing:
        cells += [Cell(str(i + 1), col, expected[i][col], None, "missing", f"truth row {i + 1} has no extracted row "
                       "aligned with it") for col in columns if _filled(expected[i], col)]
    for n, j in enumerate(extra, 1):
        cells += [Cell(f"extra {n}", col, None, extracted[j][col], "extra", f"extracted row {j + 1} aligns with no "
                       "row of the truth") for col in columns if _filled(extracted[j], col)]
    tp = sum(c.outcome == "match" for c in cells)
    mismatched = sum(c.outcome == "mismatch" for c in cells)
    prf = PRF(tp=tp, fp=mismatched + sum(c.outcome == "extra" for c in cells),
              fn=mismatched + sum(c.outcome == "missing" for c in cells))
    return TableScore(pairs, missing, extra, cells, prf, structure(expected, extracted, columns))
