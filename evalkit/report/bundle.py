"""A whole run as one self-contained HTML file (`evalkit report RUN --bundle FILE`), to attach to an email.

Every page of the run (`evalkit.report.render`) becomes a ``<section>`` of one page with the shared head
(`evalkit.report.chrome`: one stylesheet, one script, the policy allowing only those two). Links between
pages become links to sections, and CSS alone shows the section the address points to (``:target``;
the index when it points to none), so navigating needs no script. Ids inside a page (headings, chart
clip paths) get the page's prefix, so two pages' ids never collide. A link to anything not bundled
(a notebook, a JSON file) keeps its text and loses its href.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from urllib.parse import unquote

from evalkit._util.jsonio import write_text
from evalkit.report import chrome
from evalkit.results import runfolder

__all__ = ["bundle_run"]

_CSS = """
.ek-page { display: none; }
.ek-page:target, body:not(:has(.ek-page:target)) #p0 { display: block; }
"""
_TAG = re.compile(r"<[a-zA-Z][^>]*>")
_MAIN = re.compile(r"<main>(.*)</main>", re.S)
_ID = re.compile(r'\bid="([^"]*)"')
_HREF = re.compile(r'\b((?:xlink:)?href)="([^"]*)"')
_URL = re.compile(r"url\(#([^)]*)\)")


def _pages(run_dir: Path) -> list[str]:
    """The run's pages, relative to it: the index first, then every page in path order."""
    pages = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*.html")
                   if p.name != runfolder.INDEX or p.parent != run_dir)
    return [runfolder.INDEX, *pages] if (run_dir / runfolder.INDEX).is_file() else pages


def _section(n: int, name: str, markup: str, ids: dict[str, int]) -> str:
    """One page's main content as section ``p<n>``: its ids prefixed, its links pointed at sections."""
    found = _MAIN.search(markup)
    body = found.group(1) if found else ""
    prefix = f"p{n}-"
    here = posixpath.dirname(name)

    def link(m: re.Match) -> str:
        attr, value = m.group(1), m.group(2)
        if value.startswith("#"):
            return f'{attr}="#{prefix}{value[1:]}"'
        target, _, fragment = value.partition("#")
        path = posixpath.normpath(posixpath.join(here, unquote(target)))
        if path in ids:
            return f'{attr}="#p{ids[path]}"'
        return 'data-not-bundled=""'  # not a page of the bundle: keep the text, drop the link

    def tag(m: re.Match) -> str:  # only inside tags: text (escaped, so holding no "<") stays as it is
        t = _ID.sub(lambda i: f'id="{prefix}{i.group(1)}"', m.group(0))
        t = _HREF.sub(link, t)
        return _URL.sub(lambda u: f"url(#{prefix}{u.group(1)})", t)

    body = _TAG.sub(tag, body)
    return f'<section class="ek-page" id="p{n}" data-page="{chrome.href(name)}">\n{body}\n</section>'


def bundle_run(run_dir: str | Path, out: str | Path) -> Path:
    """Write every rendered page of `run_dir` into the one file `out`; return its path. Same pages, same bytes."""
    run_dir = Path(run_dir)
    names = _pages(run_dir)
    ids = {name: n for n, name in enumerate(names)}
    sections = [_section(n, name, (run_dir / name).read_text(encoding="utf-8"), ids) for n, name in enumerate(names)]
    out = Path(out)
    write_text(out, chrome.document("evalkit run", "\n".join(sections), extra_css=_CSS))
    return out
