"""The member page's explanation of one extraction: the document with every extracted value located in it,
the rendered prompt, the raw response and how it parsed; when the task asks for evidence, each field's quote
highlighted where it is in the document, with its outcome (`evidence`).

Locating is display only (the scorer has already decided every outcome): each item's extracted value is
searched for in the document as text (whole words, any run of whitespace, any case unless shorter than
four characters) and marked with the
item's outcome. A value the scorer called ``hallucinated`` (not in the source) is never marked, even where
its text happens to occur: it is listed as not found, with the scorer's reason. Values that cannot be
found as written (a number the document spells out, a normalized date) are listed too.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import IPython.display
import pandas as pd

from evalkit.report.views.base import _get, _is_null, fmt, items_frame, para, table
from evalkit.results.records import ExtractionRecord

NOT_IN_SOURCE = {"hallucinated"}  # the scorer's verdict: the value is not in the document
MIN_CHARS = 2  # shorter text (a lone digit or letter) would be found everywhere
_CLASSES = {"match", "matched", "mismatch", "extra", "spurious", "hallucinated"}
PARSE = {
    "clean": "the whole response is one JSON object",
    "recovered": "a JSON object was found after cutting away a code fence or prose around it (nothing invented)",
    "malformed": "no JSON object could be found in the response",
    "schema_invalid": "a JSON object, but it breaks the task's output schema (scored as extracted; the item rows "
                      "say where)",
    "error": "the call failed: no response to parse",
}


@dataclass(frozen=True)
class Located:
    start: int
    end: int
    label: str  # "field: outcome"
    outcome: str


def _texts(value: Any) -> Iterator[list[str]]:
    """Per scalar of an extracted value, the literal texts it could appear as in a document (a number
    also as a percentage); none for text too short to place."""
    if _is_null(value) or isinstance(value, bool):
        return
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _texts(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _texts(v)
    else:
        forms = [str(value).strip()]
        if isinstance(value, float):
            forms = [f"{value:g}"] + ([f"{value * 100:g}%"] if 0 < abs(value) < 1 else [])
        forms = [f for f in forms if len(f) >= MIN_CHARS]
        if forms:
            yield forms


def _pattern(text: str) -> re.Pattern[str]:
    """Whole words, any run of whitespace; any case, except for short codes ("US" is not "us")."""
    words = [re.escape(w) for w in text.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE if len(text) >= 4 else 0)


def _group(row: Mapping[str, Any]) -> str:
    for column in ("field", "axis", "family", "key"):
        if not _is_null(row.get(column)):
            return fmt(row[column], 80)
    return "item"


def locate(text: str, items: Any) -> tuple[list[Located], pd.DataFrame]:
    """(marks, not found): where each item's extracted value occurs in `text` (non-overlapping, in order;
    the first item claiming a span keeps it), and the items whose value was not marked, with why."""
    df = items_frame(items)
    marks: list[Located] = []
    missing = []
    taken: list[tuple[int, int]] = []
    if "extracted" not in df.columns:
        return marks, pd.DataFrame(columns=["item", "extracted", "outcome", "why"])
    for row in df.to_dict("records"):
        value, outcome = row.get("extracted"), str(row.get("outcome") or "")
        texts = list(_texts(value))
        if not texts:
            continue
        label = f"{_group(row)}: {outcome}" if outcome else _group(row)
        if outcome in NOT_IN_SOURCE:
            missing.append({"item": _group(row), "extracted": value, "outcome": outcome,
                            "why": row.get("reason") or "not in the document"})
            continue
        for forms in texts:
            found = False
            for t in forms:
                for m in _pattern(t).finditer(text):
                    found = True
                    if not any(m.start() < e and s < m.end() for s, e in taken):
                        taken.append((m.start(), m.end()))
                        marks.append(Located(m.start(), m.end(), label, outcome))
            if not found:
                missing.append({"item": _group(row), "extracted": forms[0], "outcome": outcome,
                                "why": "not found as written (the document may spell it differently)"})
    marks.sort(key=lambda x: x.start)
    # Once per item and text (a list repeats its values), invented values first.
    unique = {(r["item"], fmt(r["extracted"]), r["outcome"]): r for r in missing}
    rows = sorted(unique.values(), key=lambda r: r["outcome"] not in NOT_IN_SOURCE)
    return marks, pd.DataFrame(rows, columns=["item", "extracted", "outcome", "why"])


def marked_html(text: str, marks: list[Located]) -> str:
    """`text` escaped, with each mark wrapped in a span named after its outcome (its label as a tooltip)."""
    out, at = [], 0
    for m in marks:
        out.append(html.escape(text[at:m.start], quote=False))
        cls = f"o-{m.outcome}" if m.outcome in _CLASSES else "o-other"
        out.append(f'<span class="{cls}" title="{html.escape(m.label, quote=True)}">'
                   f"{html.escape(text[m.start:m.end], quote=False)}</span>")
        at = m.end
    out.append(html.escape(text[at:], quote=False))
    return "".join(out)


def _show(markup: str, plain: str) -> None:
    IPython.display.display({"text/html": markup, "text/plain": plain}, raw=True)


def document(text: str, items: Any) -> None:
    """The document with every extracted value located and marked by its outcome, then what was not found."""
    marks, missing = locate(text, items)
    counts = pd.Series([m.outcome for m in marks], dtype=object).value_counts()
    parts = ", ".join(f"{n} {o}" for o, n in counts.items())
    para(f"{len(marks)} extracted value(s) located in the document" + (f" ({parts})" if parts else "")
         + "; hover a mark for its item and outcome.")
    _show(f'<div class="ek-doc"><pre>{marked_html(text, marks)}</pre></div>', text)
    if len(missing):
        para(f"{len(missing)} extracted value(s) not found in the document (a hallucinated value is never "
             "marked, even where its text occurs):")
        table(missing)
    evidence(text, items)


EVIDENCE_CONTEXT = 80  # characters of the document shown on each side of a located quote
_EVIDENCE_CLASSES = {"grounded", "right_value_wrong_evidence", "evidence_does_not_support"}


def quote_html(text: str, row: Mapping[str, Any], context: int = EVIDENCE_CONTEXT) -> str:
    """One evidence row's quote in its place in the document: the text around it and the quote itself escaped
    part by part (documents and model output are untrusted), the quote in a span named after its outcome; a
    quote the scorer did not locate is shown escaped, unmarked."""
    span, quote = row.get("span"), str(row.get("quote") or "")
    if not span or not text:
        return f'<span class="ev-unlocated">{html.escape(quote, quote=False)}</span>'
    start, end = int(span[0]), int(span[1])
    outcome = str(row.get("outcome") or "")
    cls = f"ev-{outcome}" if outcome in _EVIDENCE_CLASSES else "ev-other"
    before, after = max(0, start - context), min(len(text), end + context)
    return ("…" * (before > 0) + html.escape(text[before:start], quote=False)
            + f'<span class="{cls}" title="{html.escape(str(row.get("field")), quote=True)}: '
            f'{html.escape(outcome, quote=True)}">{html.escape(text[start:end], quote=False)}</span>'
            + html.escape(text[end:after], quote=False) + "…" * (after < len(text)))


def evidence(text: str, result: Any) -> None:
    """The evidence a record gave for its fields (the scorer's `details["evidence"]`): one block per field with
    its outcome and reason, its quote highlighted in the document; nothing when the task asks for none."""
    rows = (_get(result, "details") or {}).get("evidence")
    if rows is None:
        return
    counts = pd.Series([r.get("outcome") for r in rows], dtype=object).value_counts()
    para(f"{len(rows)} field(s) with an extracted value asked for a quote"
         + (f" ({', '.join(f'{n} {o}' for o, n in counts.items())})" if len(counts) else "")
         + "; each quote is shown where it is in the document (evidence is reported beside the values, never in "
           "the score).")
    blocks = []
    for r in rows:
        head = (f"{r.get('field')}: {r.get('outcome')} — extracted {fmt(r.get('extracted'), 80)} (value "
                f"{r.get('value')}), page {fmt(r.get('page')) or '—'}. {r.get('reason')}")
        blocks.append(f"<p>{html.escape(head, quote=False)}</p><div class=\"ek-doc\"><pre>{quote_html(text, r)}"
                      "</pre></div>")
    plain = "\n".join(f"{r.get('field')}: {r.get('outcome')} — {r.get('quote')!r}" for r in rows)
    _show("".join(blocks), plain)


def _details(summary: str, body: str) -> str:
    return (f"<details><summary>{html.escape(summary, quote=False)}</summary>"
            f"<pre>{html.escape(body, quote=False)}</pre></details>")


def prompt(request: Any) -> None:
    """The rendered prompt the backend received: system and user messages (the document substituted), and the
    document's parts when it was sent as a PDF or as page images (`pages`)."""
    system, user = getattr(request, "system", "") or "", getattr(request, "user", "") or ""
    para("What the backend received: the task's prompt with the document substituted for {document}.")
    _show(_details(f"system prompt ({len(system)} characters)", system)
          + _details(f"user prompt ({len(user)} characters)", user), f"system:\n{system}\n\nuser:\n{user}")
    pages(request)


def pages(request: Any) -> None:
    """The document as the model saw it when it was sent as parts (input ``pdf`` / ``images``): each page image
    it was sent, as a PNG output (a data URI in the HTML: the page stays self-contained), or the PDF file's name,
    size, pages and sha256."""
    parts = getattr(request, "parts", ()) or ()
    if not parts:
        return
    mode = getattr(request, "input", "")
    if mode == "images":
        para(f"The document as the model saw it: {len(parts)} page image(s) rendered at "
             f"{getattr(request, 'dpi', '?')} DPI (input mode images), sent before the prompt.")
    else:
        para(f"The document was sent as {len(parts)} PDF file(s) before the prompt (input mode {mode}):")
        table(pd.DataFrame([{"file": p.name, "bytes": len(p.data), "pages": len(p.sizes), "sha256": p.sha256}
                            for p in parts]))
        return
    for n, p in enumerate(parts, 1):
        w, h = p.sizes[0] if p.sizes else (None, None)
        caption = f"page {n} · {w}×{h} px · sha256 {p.sha256[:12]}…"
        meta = {"image/png": {"width": w, "height": h}} if w else {}
        IPython.display.display({"image/png": p.base64(), "text/plain": caption}, metadata=meta, raw=True)
        para(caption)


def response(extraction: ExtractionRecord) -> None:
    """The raw response as the backend returned it (redacted) and how it parsed."""
    run = extraction.run
    parse = run.parse or ("error" if run.error else None)
    para(f"parse: {parse or '—'}" + (f" — {PARSE[parse]}" if parse in PARSE else "")
         + ("; replayed from a cassette (the recorded response)" if run.replayed else ""))
    raw = extraction.raw
    if raw:
        _show(f'<div class="ek-doc"><pre>{html.escape(str(raw), quote=False)}</pre></div>', str(raw))
    else:
        print("(no response text)" + (f": {run.error}" if run.error else ""))
