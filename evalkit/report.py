"""A task's results across a run, as pandas frames to present or slice.

Reads ``<run>/<task>/<member>/<backend>/score.json`` (written by
``pipeline.score_member``)::

    from evalkit.report import load_scores, field_accuracy
    members, items = load_scores("runs/2026-11-30", "deal-memos")
    items[items.outcome == "hallucinated"].groupby("field").size()

`members` has one row per (member, backend); `items` is every score.json's
item table stacked, with ``member``, ``backend`` and ``label`` columns added
(``label`` is the member id, or ``member [backend]`` when the run holds more
than one backend). Nothing here assumes the flat-fields item shape except the
helpers that say so (they need ``field`` and ``outcome`` columns).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["load_scores", "field_accuracy", "mean_field_accuracy", "outcome_counts", "verdict"]

SCORE = "score.json"
SUCCESS = ("match", "matched")
EXTRACTION = "extraction.json"

MEMBER_COLUMNS = ["task", "member", "backend", "label", "score", "passed", "verdict", "parse", "input_tokens",
                  "output_tokens", "usd", "latency_s", "items", "notes", "path"]


def verdict(passed: Any, scored: bool = True) -> str:
    if not scored:
        return "no score"
    if passed is None:
        return "n/a"
    return "PASS" if passed else "FAIL"


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def load_scores(run_dir: str | Path, task: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(members, items) for one task of a run.

    A member folder with an extraction.json but no score.json (its scoring
    failed) is listed with verdict "no score" and no items.
    """
    base = Path(run_dir) / task
    folders = sorted({p.parent for p in base.glob(f"*/*/{SCORE}")} | {p.parent for p in base.glob(f"*/*/{EXTRACTION}")})
    backends = {f.name for f in folders}
    rows: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    for folder in folders:
        member, backend = folder.parent.name, folder.name
        label = member if len(backends) <= 1 else f"{member} [{backend}]"
        score_path = folder / SCORE
        scored = score_path.is_file()
        data = _read(score_path) if scored else {}
        if not scored and (folder / EXTRACTION).is_file():
            data = {"run": _read(folder / EXTRACTION).get("run") or {}}
        run = data.get("run") or {}
        member_items = data.get("items") or []
        rows.append({
            "task": task, "member": member, "backend": backend, "label": label,
            "score": data.get("score"), "passed": data.get("passed"),
            "verdict": verdict(data.get("passed"), scored),
            "parse": run.get("parse"), "input_tokens": run.get("input_tokens"),
            "output_tokens": run.get("output_tokens"), "usd": run.get("usd"), "latency_s": run.get("latency_s"),
            "items": len(member_items), "notes": len(data.get("notes") or []),
            "path": f"{member}/{backend}/{SCORE}" if scored else None,
            **{f"metric.{k}": v for k, v in sorted((data.get("metrics") or {}).items())},
        })
        for item in member_items:
            items.append({**item, "task": task, "member": member, "backend": backend, "label": label})
    members_df = pd.DataFrame(rows, columns=None if rows else MEMBER_COLUMNS)
    if not items:
        return members_df, pd.DataFrame(columns=["task", "member", "backend", "label"])
    items_df = pd.DataFrame(items)
    first = ["task", "member", "backend", "label"]
    items_df = items_df[first + [c for c in items_df.columns if c not in first]]
    return members_df, items_df


def _has(items: pd.DataFrame | None, *columns: str) -> bool:
    return items is not None and not items.empty and all(c in items.columns for c in columns)


def field_accuracy(items: pd.DataFrame, by: str = "label") -> pd.DataFrame:
    """Field × member accuracy: the share of each cell's items whose outcome is a success
    (``match``, or ``matched`` for set-shaped scorers).

    Rows keep the fields' first-seen order, columns are sorted; empty when the
    item table has no ``field``/``outcome`` columns.
    """
    if not _has(items, "field", "outcome", by):
        return pd.DataFrame()
    df = pd.DataFrame({"field": items["field"].map(str), by: items[by].map(str),
                       "match": items["outcome"].isin(SUCCESS).astype(float)})
    table = df.pivot_table(index="field", columns=by, values="match", aggfunc="mean", sort=True)
    order = list(dict.fromkeys(df["field"]))
    table = table.reindex(index=order, columns=sorted(table.columns))
    table.columns.name = None
    return table


def mean_field_accuracy(items: pd.DataFrame, by: str = "label") -> float | None:
    """The mean of the field × member accuracy table (each cell weighs the same); None when undefined."""
    table = field_accuracy(items, by)
    if table.empty:
        return None
    values = table.to_numpy().ravel()
    values = values[~pd.isna(values)]
    return float(values.mean()) if len(values) else None


def outcome_counts(items: pd.DataFrame, by: str = "label") -> pd.DataFrame:
    """Member × outcome item counts (empty without an ``outcome`` column)."""
    if not _has(items, "outcome", by):
        return pd.DataFrame()
    counts = items.groupby([by, "outcome"]).size().unstack("outcome", fill_value=0)
    counts.columns.name = None
    return counts
