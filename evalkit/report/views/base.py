"""Formatting and escaped display primitives every view is built from.

Untrusted text stays text: tables are ``DataFrame.to_html(escape=True)``, headings and paragraphs
are escaped HTML, anything else is ``print``-ed. Null figures show as "—" (`NULL`), never 0.
"""

from __future__ import annotations

import html
import html as _html
import json
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import IPython.display
import pandas as pd

from evalkit.report import frames
from evalkit.report.chrome import TABLE_ROWS, cut_note
from evalkit.results.runfolder import SCORE

# An outcome is fine when it is a success; set-aside outcomes are not problems either (the scorer
# counted them toward nothing). Pages list them in their own table, never among the problems.
SUCCESS = frames.SUCCESS
SET_ASIDE = frames.SET_ASIDE
NULL = "—"  # how a null figure is shown (an undefined ratio, a metric no judge has filled in): never 0
MAX_CHARS = 200  # longest cell shown in a table (the full value is in score.json)


# --------------------------------------------------------------------------- formatting

def verdict(passed: bool | None) -> str:
    """PASS / FAIL / n/a for a ScoreResult.passed value."""
    if passed is None or (isinstance(passed, float) and math.isnan(passed)):
        return "n/a"
    return "PASS" if passed else "FAIL"


def fmt(value: Any, max_chars: int = MAX_CHARS) -> str:
    """One cell as text: JSON for structures, 4 significant digits for floats, '' for null."""
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4g}"
    if isinstance(value, (dict, list, tuple)):
        s = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    else:
        s = str(value)
    if len(s) > max_chars:
        s = s[: max_chars - 1] + "…"
    return s


def _is_null(value: Any) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):  # arrays, dicts
        return False


# --------------------------------------------------------------------------- primitives

def text(*lines: Any) -> None:
    """Print lines (a stream output: shown as text by Lab and escaped by nbconvert)."""
    for line in lines:
        print(line)


def heading(title: Any, level: int = 2) -> None:
    """A section heading shown by a view (the title is escaped: it may come from data)."""
    level = min(max(int(level), 1), 6)
    t = html.escape(str(title), quote=False)
    IPython.display.display({"text/html": f"<h{level}>{t}</h{level}>", "text/plain": str(title)}, raw=True)


def para(*lines: Any) -> None:
    """A paragraph of prose (escaped), for the explanations a view puts under its headings."""
    t = " ".join(html.escape(str(line), quote=False) for line in lines)
    IPython.display.display({"text/html": f"<p>{t}</p>", "text/plain": " ".join(str(x) for x in lines)}, raw=True)


def figure(value: Any, digits: int = 3) -> str:
    """A metric as text: floats to `digits` decimals, integers as they are, null as "—" (never 0)."""
    if _is_null(value):
        return NULL
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) >= 2 else f"{value:.{digits}f}"
    if isinstance(value, int):
        return str(value)
    return fmt(value)


def show_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=str))


def _as_frame(data: Any, columns: list[str] | None = None) -> pd.DataFrame:
    if isinstance(data, pd.DataFrame):
        df = data
    elif isinstance(data, Mapping):
        df = pd.DataFrame([data])
    else:
        df = pd.DataFrame(list(data))
    if columns is not None:
        df = df[[c for c in columns if c in df.columns]]
    return df


def table(data: Any, columns: list[str] | None = None, max_chars: int = MAX_CHARS,
          empty: str = "(none)", links: Mapping[str, list[str | None]] | None = None, kind: str = "table",
          max_rows: int | None = TABLE_ROWS, full: str = SCORE) -> None:
    """Display rows (a DataFrame, or an iterable of dicts) as an escaped HTML table.

    Every cell is turned into text first (see :func:`fmt`), so nested values,
    long strings and nulls all show the same way in Lab and in HTML. `links`: per
    column, one relative link per row (None: no link) that its cells point to. `kind` "kv": a
    key/value listing, which the page's script leaves unsorted and unfiltered. Only the first `max_rows`
    rows are shown (None: all); a line under the table then counts them and names where the whole table
    is (`full`).
    """
    classes = "evalkit-table" + (" ek-kv" if kind == "kv" else "")
    df = _as_frame(data, columns)
    if df.empty:
        print(empty)
        return
    total = len(df)
    if max_rows is not None and total > max_rows:
        df = df.iloc[:max_rows]
        links = {c: list(h)[:max_rows] for c, h in links.items()} if links else links
    shown = pd.DataFrame({str(c): [fmt(None if _is_null(v) else v, max_chars) for v in df[c]] for c in df.columns},
                         columns=[str(c) for c in df.columns])
    if links:  # escaped here, cell by cell, so the anchors can be markup
        cells = shown.map(lambda v: _html.escape(v, quote=True))
        for column, hrefs in links.items():
            if column in cells.columns:
                cells[column] = [v if h is None else f'<a href="{_html.escape(quote(h), quote=True)}">{v}</a>'
                                 for v, h in zip(cells[column], hrefs)]
        html = cells.to_html(escape=False, index=False, border=0, classes=classes, na_rep="")
    else:
        html = shown.to_html(escape=True, index=False, border=0, classes=classes, na_rep="")
    IPython.display.display({"text/html": html, "text/plain": shown.to_string(index=False)}, raw=True)
    if len(df) < total:
        print(cut_note(len(df), total, full))


def kv(mapping: Mapping[str, Any], key: str = "key", value: str = "value") -> None:
    """A two-column key/value table."""
    table([{key: k, value: v} for k, v in mapping.items()], empty="(empty)", kind="kv")


# --------------------------------------------------------------------------- results and items

def _get(result: Any, name: str, default: Any = None) -> Any:
    """An attribute of a ScoreResult, or a key of its JSON form (score.json)."""
    if isinstance(result, Mapping):
        return result.get(name, default)
    return getattr(result, name, default)


def items_frame(items: Any) -> pd.DataFrame:
    """The item table (a ScoreResult, its JSON form, its items, or a DataFrame) as a DataFrame."""
    if isinstance(items, pd.DataFrame):
        return items
    if isinstance(items, Mapping):
        items = items.get("items")  # score.json
    elif hasattr(items, "items") and not callable(items.items):
        items = items.items  # a ScoreResult
    return pd.DataFrame(list(items or []))
