"""The shell every HTML page shares: one stylesheet, one script, the Content-Security-Policy that allows
only those two (by hash), and the navigation bar (breadcrumbs and links between pages).

The notebook pages (`evalkit.report.render`, through the nbconvert template) and the pages built directly in
Python (the run's index, the scoreboard, the bundle) all take their head and navigation from here, so
every page has the same policy: ``default-src 'none'``; the bundled script and stylesheet by their
sha256; images only as ``data:`` URIs; no ``unsafe-inline``. Text from documents, truth or models that
ever slipped past escaping could still not run: the browser runs no script whose hash is not listed.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable, Sequence
from functools import cache
from urllib.parse import quote

from evalkit._util.resources import TEMPLATES_DIR

__all__ = ["css", "script", "csp", "head", "nav", "href", "document", "STATIC", "TABLE_ROWS", "cut_note"]

STATIC = TEMPLATES_DIR / "evalkit" / "static"
# Most rows a table shows on any page (a notebook page's, the index's, the scoreboard's): a page of 10,000 rows
# takes seconds to open; a line under a cut table says how many there are and where the full table is.
TABLE_ROWS = 500


def cut_note(shown: int, total: int, full: str) -> str:
    """The line under a table cut to its first `shown` of `total` rows; `full` names where every row is
    (inserted as given: text, or markup the caller escaped)."""
    return f"first {shown:,} of {total:,} rows; the full table is in {full}"


@cache
def _static(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def css() -> str:
    return _static("evalkit.css")


def script() -> str:
    return _static("evalkit.js")


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def csp(scripts: Iterable[str] = (), styles: Iterable[str] = ()) -> str:
    """The policy allowing exactly these inline scripts and stylesheets (their text, as it is in the page)."""
    script_src = " ".join(_sha(s) for s in scripts) or "'none'"
    style_src = " ".join(_sha(s) for s in styles) or "'none'"
    return (f"default-src 'none'; script-src {script_src}; style-src {style_src}; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def head(title: str, extra_css: str = "") -> str:
    """From ``<head>`` to ``</head>``: the policy first (before anything from data), then title, style."""
    style = css() + extra_css
    return "\n".join([
        "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp([script()], [style]))}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">',
        f"<title>{html.escape(title)}</title>", f"<style>{style}</style>", "</head>"])


def href(*parts: str) -> str:
    """A relative link from path segments (each quoted), escaped for an attribute."""
    return html.escape("/".join(p if p == ".." else quote(p, safe="") for p in parts), quote=True)


def nav(crumbs: Sequence[tuple[str, str | None]], links: Sequence[tuple[str, str | None]] = ()) -> str:
    """The navigation bar: breadcrumbs (text, href or None for the current page) then links (text, href;
    None: shown as plain text). Hrefs must come from `href`; text is escaped here."""
    def item(text: str, url: str | None, current: bool = False) -> str:
        if url is None:
            attr = ' aria-current="page"' if current else ""
            return f"<span{attr}>{html.escape(text)}</span>"
        return f'<a href="{url}">{html.escape(text)}</a>'

    trail = "".join(f"<li>{item(t, u, i == len(crumbs) - 1)}</li>" for i, (t, u) in enumerate(crumbs))
    out = f'<nav class="ek-nav" aria-label="breadcrumb"><ol>{trail}</ol>'
    if links:
        out += '<span class="ek-links">' + "".join(item(t, u) for t, u in links) + "</span>"
    return out + "</nav>"


def document(title: str, body: str, navigation: str = "", extra_css: str = "") -> str:
    """A whole page built in Python: the shared head, the navigation, `body` (already escaped), the script."""
    return "\n".join(["<!DOCTYPE html>", '<html lang="en">', head(title, extra_css), "<body><main>", navigation,
                      body, "</main>", f"<script>{script()}</script>", "</body>", "</html>", ""])
