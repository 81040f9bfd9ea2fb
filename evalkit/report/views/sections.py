"""Sections every shape's pages reuse: a result's metrics and gate, its problem and set-aside items,
and the report's member rows.

Outcomes ``match``/``matched`` are fine; ``ignored`` and ``excluded`` are set aside by design (the
scorer counted them toward nothing), so problem tables leave them out and say how many.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from evalkit.report import frames
from evalkit.report.views.base import SET_ASIDE, SUCCESS, _get, _is_null, figure, items_frame, kv, show_json, table
from evalkit.report.views.charts import _outcome_domain
from evalkit.results.runfolder import SCORE, SCORE_NB, page

# --------------------------------------------------------------------------- a result

def metrics_table(result: Any) -> None:
    """Every metric of the result, one row each (nulls as "—")."""
    metrics = _get(result, "metrics") or {}
    if not metrics:
        print("(no metrics)")
        return
    table([{"metric": k, "value": figure(v, 4)} for k, v in metrics.items()])


def gate(result: Any) -> None:
    """The scorer's gate output (details['gate']) when it has one."""
    g = (_get(result, "details") or {}).get("gate")
    if g is None:
        print("no gate for this scorer")
        return
    if isinstance(g, Mapping):
        kv(g, "gate", "value")
    else:
        show_json(g)


# --------------------------------------------------------------------------- its items

MISMATCH_COLUMNS = ["field", "kind", "weight", "expected", "extracted", "outcome", "credit", "reason"]


def _columns(df: pd.DataFrame, preferred: list[str], drop: Iterable[str] = ("member",)) -> list[str] | None:
    first = [c for c in preferred if c in df.columns]
    if not first:
        return None
    return first + [c for c in df.columns if c not in first and c not in drop]


def _set_aside_line(df: pd.DataFrame) -> str | None:
    aside = frames.set_aside_rows(df)
    if aside.empty:
        return None
    counts = aside["outcome"].map(str).value_counts()
    parts = ", ".join(f"{o} {counts[o]}" for o in SET_ASIDE if o in counts)
    return f"{len(aside)} item(s) set aside by design ({parts}): not problems, not listed here"


def mismatches(items: Any, columns: list[str] | None = None, empty: str = "(no mismatches)") -> None:
    """The problem rows, with their reasons: every row whose outcome is neither a success (match/matched)
    nor set aside by design (ignored/excluded: shown apart, see `set_aside`); all rows without an
    outcome column. A line under the table counts the set-aside rows left out."""
    df = items_frame(items)
    shown = frames.problem_rows(df)
    table(shown, columns if columns is not None else _columns(shown, MISMATCH_COLUMNS), empty=empty)
    note = _set_aside_line(df)
    if note:
        print(note)


def set_aside(items: Any, columns: list[str] | None = None, empty: str = "(nothing set aside)") -> None:
    """The rows a scorer set aside by design (ignored, excluded), with the reason: they count toward nothing."""
    df = frames.set_aside_rows(items_frame(items))
    table(df, columns if columns is not None else _columns(df, MISMATCH_COLUMNS), empty=empty)


def _problems_first(df: pd.DataFrame) -> pd.DataFrame:
    """Problem rows first, then successes (each in the scorer's order)."""
    if "outcome" not in df.columns or df.empty:
        return df
    fine = df["outcome"].isin(SUCCESS)
    return pd.concat([df[~fine], df[fine]])


def _outcome_summary(df: pd.DataFrame) -> str:
    """"12 items (10 matched, 1 missed, 1 spurious)"."""
    n = f"{len(df)} item{'' if len(df) == 1 else 's'}"
    if "outcome" not in df.columns or df.empty:
        return n
    counts = df["outcome"].map(str).value_counts()
    return n + " (" + ", ".join(f"{counts[o]} {o}" for o in _outcome_domain(counts.index) if o in counts) + ")"


# --------------------------------------------------------------------------- a report's members

MEMBER_COLUMNS = ["member", "backend", "score", "verdict", "cause", "faults", "parse", "truncated", "input_tokens",
                  "output_tokens", "usd", "latency_s", "items", "notes"]
SPARSE = ("cause", "faults", "truncated")  # shown only when some member has one
MEMBERS_FULL = f"each member's {SCORE} (`evalkit.report.frames.load_scores(run_dir, task)` reads them all as frames)"


def members_table(members: pd.DataFrame) -> None:
    """One row per member × backend; an errored one shows ERROR and its cause, a schema_invalid or truncated
    answer its faults (`report.answer_faults`; each column is there only when some member has one)."""
    df = members.copy()
    errored = df["verdict"] == "ERROR" if "verdict" in df.columns else pd.Series(False, index=df.index)
    if "score" in df.columns:
        df["score"] = ["ERROR" if e else "" if _is_null(s) else f"{s:.3f}" for s, e in zip(df["score"], errored)]
    columns = [c for c in MEMBER_COLUMNS if c in df.columns
               and (c not in SPARSE or not all(_is_null(v) for v in df[c]))]
    table(df, columns, empty="(no scored members)", links={"member": member_pages(df)}, full=MEMBERS_FULL)


def member_pages(members: pd.DataFrame) -> list[str | None]:
    """Each member row's score page, relative to the task report (from its ``path``: the score.json)."""
    paths = members["path"] if "path" in members.columns else [None] * len(members)
    return [None if _is_null(p) else f"{str(p).rsplit('/', 1)[0]}/{page(SCORE_NB).name}" for p in paths]


def linked_members(rows: pd.DataFrame, empty: str = "(no scored members)") -> None:
    """A table of member rows (from `_member_columns`) whose member names link to their score pages."""
    table(rows.drop(columns=["path"]), empty=empty, links={"member": member_pages(rows)}, full=MEMBERS_FULL)


def _member_columns(members: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """Member × backend rows of chosen metrics; an errored one shows ERROR (cause) and no figures."""
    scored = {(r["member"], r["backend"]): r for r in frames.member_metrics(members)}
    rows = []
    for _, m in members.iterrows():
        r = scored.get((m["member"], m["backend"]))
        if r is not None:
            rows.append({"member": r["member"], "backend": r["backend"], "score": figure(r["score"]),
                         "verdict": r["verdict"], **{t: figure(r["metrics"].get(n)) for t, n in names.items()},
                         "path": m.get("path")})
        elif m.get("verdict") == "ERROR":
            rows.append({"member": m["member"], "backend": m["backend"], "score": "ERROR",
                         "verdict": f"ERROR ({m.get('cause')})", **{t: figure(None) for t in names},
                         "path": m.get("path")})
    return pd.DataFrame(rows, columns=["member", "backend", "score", "verdict", *names, "path"])
