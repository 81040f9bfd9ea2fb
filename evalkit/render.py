"""Executed notebooks → self-contained HTML pages, and the run's index.html.

In-process nbconvert with evalkit's template (``evalkit/templates/evalkit``,
extending ``lab``): no script tags, nothing loaded from the network, code
inputs hidden (``exclude_input=True``: the pages are reports; the notebooks
keep the code). Same notebook, same bytes.

Untrusted text stays text: tables come escaped from `evalkit.views`, and the
template still passes every HTML/Markdown output through an allow-list
sanitizer and re-serializes every SVG from a parsed tree before inlining it.
"""

from __future__ import annotations

import base64
import html
import re
import time
import xml.etree.ElementTree as ET
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import runfolder
from .jsonio import write_text
from .overview import OVERVIEW_CSS, overview_html
from .runfolder import COMPARE, EXTRACT_NB, REPORT, SCORE_NB, page
from .status import failure_of

__all__ = ["render_notebook", "render_run", "render_index", "safe_svg", "clean_output_html", "TEMPLATES"]

TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATE = "evalkit"

# --------------------------------------------------------------------------- SVG

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
_SVG_TAGS = {
    "svg", "g", "path", "rect", "line", "circle", "ellipse", "polyline", "polygon", "text", "tspan", "title",
    "desc", "defs", "clipPath", "linearGradient", "radialGradient", "stop", "pattern", "mask", "use", "symbol",
}
_URL_ATTRS = {"href", f"{{{XLINK_NS}}}href"}
_URL = re.compile(r"url\(([^)]*)\)")


def _local(name: str) -> tuple[str | None, str]:
    if name.startswith("{"):
        ns, _, local = name[1:].partition("}")
        return ns, local
    return None, name


def _svg_ok(root: ET.Element) -> bool:
    for el in root.iter():
        ns, tag = _local(el.tag) if isinstance(el.tag, str) else (None, "")
        if ns != SVG_NS or tag not in _SVG_TAGS:
            return False
        for name, value in el.attrib.items():
            ans, local = _local(name)
            if ans not in (None, XLINK_NS) or local.lower().startswith("on"):
                return False
            if name in _URL_ATTRS and not value.startswith("#"):
                return False
            v = value.lower()
            if "javascript:" in v or any(not u.strip(" '\"").startswith("#") for u in _URL.findall(v)):
                return False
    return True


ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)


def safe_svg(svg: str) -> str:
    """Markup to show an SVG output.

    The SVG is parsed as XML and, when every element and attribute is on an
    allow-list (drawing elements only; no script, foreignObject, event
    handlers or external references), re-serialized from the tree and inlined,
    so text is escaped by the serializer whatever the input held. Anything
    else is embedded as an ``<img>`` data URI, where SVG cannot run script.
    """
    svg = svg if isinstance(svg, str) else "".join(svg)
    try:
        root = ET.fromstring(svg)
        if _svg_ok(root):
            return ET.tostring(root, encoding="unicode")
    except ET.ParseError:
        pass
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}">'


# --------------------------------------------------------------------------- HTML outputs

_HTML_TAGS = [
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "small", "span", "strong", "sub",
    "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
]
_HTML_ATTRS = {"*": ["class", "title"], "a": ["href"], "table": ["border"], "td": ["colspan", "rowspan", "style"],
               "th": ["colspan", "rowspan", "style"], "tr": ["style"]}


@lru_cache(maxsize=1)
def _cleaner() -> Any:
    import bleach
    from bleach.css_sanitizer import CSSSanitizer

    return bleach.Cleaner(tags=_HTML_TAGS, attributes=_HTML_ATTRS, protocols=["mailto"],
                          css_sanitizer=CSSSanitizer(allowed_css_properties=["text-align", "vertical-align"]),
                          strip=False, strip_comments=True)


def clean_output_html(markup: str) -> str:
    """Allow-list sanitize an HTML output: tables and text markup survive, script becomes text."""
    return _cleaner().clean(markup if isinstance(markup, str) else "".join(markup))


# --------------------------------------------------------------------------- notebooks

@lru_cache(maxsize=1)
def _exporter() -> Any:
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    c = Config()
    c.HTMLExporter.extra_template_basedirs = [str(TEMPLATES)]
    c.HTMLExporter.template_name = TEMPLATE
    c.HTMLExporter.exclude_input = True
    c.HTMLExporter.exclude_input_prompt = True
    c.HTMLExporter.exclude_output_prompt = True
    c.HTMLExporter.embed_images = False
    c.HTMLExporter.require_js_url = ""
    c.HTMLExporter.mathjax_url = ""
    c.HTMLExporter.mermaid_js_url = ""
    c.HTMLExporter.mermaid_layout_elk_js_url = ""
    c.HTMLExporter.jquery_url = ""
    c.HTMLExporter.widget_renderer_url = ""
    c.HTMLExporter.jupyter_widgets_base_url = ""
    # Script and widget outputs fall back to their text/plain form.
    c.NbConvertBase.display_data_priority = [
        "text/html", "text/markdown", "image/svg+xml", "image/png", "image/jpeg", "text/plain",
    ]
    c.CSSHTMLHeaderPreprocessor.enabled = False  # no input code shown: no pygments CSS needed
    exporter = HTMLExporter(config=c)
    exporter.register_filter("safe_svg", safe_svg)
    exporter.register_filter("clean_output_html", clean_output_html)
    return exporter


def _label(backend: str) -> list[str]:
    """The label of a notebook's ``backend`` parameter (``NAME=SPEC``); none if it is not a spec."""
    from .backends import BackendSpec
    from .errors import EvalkitError

    try:
        return [BackendSpec.parse(backend).label]
    except EvalkitError:
        return []


def _title(nb: Any, path: Path) -> str:
    params = (nb.metadata.get("papermill") or {}).get("parameters") or {}
    parts = ["evalkit", path.stem]
    if params.get("task") and params.get("member"):
        parts.append(f"{params['task']}/{params['member']}")
        if params.get("backend"):
            parts += _label(str(params["backend"]))
    elif params.get("task"):
        parts.append(str(params["task"]))
    return " · ".join(parts)


def render_notebook(path: str | Path, out: str | Path | None = None) -> Path:
    """Write the HTML page of an executed notebook (default: beside it, ``.html``); return its path."""
    import nbformat

    path = Path(path)
    out = Path(out) if out is not None else page(path)
    nb = nbformat.read(path, as_version=4)
    body, _ = _exporter().from_notebook_node(nb, resources={"metadata": {"name": _title(nb, path)}})
    write_text(out, body)
    return out


# --------------------------------------------------------------------------- the run

def _notebooks(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.rglob("*.ipynb")
                  if ".ipynb_checkpoints" not in p.parts and not p.name.endswith(".tmp"))


def render_run(run_dir: str | Path, on_done: Any = None) -> list[Path]:
    """Render every notebook under `run_dir` to HTML beside it, then ``index.html``.

    Returns the pages written (the index last). `on_done(path, seconds)` is
    called after each page, for a progress display.
    """
    run_dir = Path(run_dir)
    pages = []
    for nb_path in _notebooks(run_dir):
        t0 = time.perf_counter()
        pages.append(render_notebook(nb_path))
        if on_done:
            on_done(pages[-1], time.perf_counter() - t0)
    pages.append(render_index(run_dir))
    return pages


def _href(*parts: str) -> str:
    return html.escape("/".join(quote(p, safe="") for p in parts), quote=True)


def _member_rows(task_dir: Path) -> list[dict[str, Any]]:
    """One row per member × backend of the task (`runfolder.task_results`): its score.json, if any, and
    the names in its folder (which pages to link)."""
    return [{"member": s.member, "folder": s.home.name, "backend": s.backend,
             "names": {p.name for p in s.home.iterdir()}, "score": s.score() if s.has_score else None}
            for s in runfolder.task_results(task_dir.parent, task_dir.name)]


_INDEX_CSS = """
body { margin: 0; color: #1f2328; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { font-size: 1.7em; } h2 { font-size: 1.3em; border-bottom: 1px solid #d8dee4; padding-bottom: .2em; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #d8dee4; padding: 4px 10px; text-align: left; }
thead th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.PASS { color: #1a7f37; font-weight: 600; } .FAIL { color: #cf222e; font-weight: 600; }
.ERROR { color: #9a6700; font-weight: 600; }
.missing { color: #8c959f; }
"""


def render_index(run_dir: str | Path) -> Path:
    """Write ``<run>/index.html``: per task, a link to its report and one row per member and backend."""
    run_dir = Path(run_dir)
    e = html.escape
    # Nothing here depends on the run folder's name or location: same results, same bytes (but for the run
    # block of `overview_html`: the run's date and command).
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1.0">',
           "<title>evalkit run</title>", f"<style>{_INDEX_CSS}{OVERVIEW_CSS}</style>", "</head>",
           "<body><main>", "<h1>evalkit run</h1>"]
    out.append(overview_html(run_dir))  # the run, the task × backend table, the skipped members (`evalkit.overview`)
    tasks = sorted(p for p in run_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    for task_dir in tasks:
        rows = _member_rows(task_dir)
        has_report = (task_dir / page(REPORT)).is_file() or (task_dir / REPORT).is_file()
        if not rows and not has_report:
            continue
        out.append(f"<h2>{e(task_dir.name)}</h2>")
        links = [f'<a href="{_href(task_dir.name, page(nb).name)}">{label}</a>'
                 for nb, label in ((REPORT, "task report"), (COMPARE, "backend comparison"))
                 if (task_dir / page(nb)).is_file() or (task_dir / nb).is_file()]
        if links:
            out.append(f"<p>{' · '.join(links)}</p>")
        out.append("<table><thead><tr><th>member</th><th>backend</th><th>score</th><th>verdict</th>"
                   "<th>pages</th></tr></thead><tbody>")
        for r in rows:
            s = r["score"]
            failed = failure_of(s)
            if s is None:
                score, verdict = '<span class="missing">—</span>', '<span class="missing">no score</span>'
            elif failed is not None:  # a failure is never a number
                score = '<span class="ERROR">ERROR</span>'
                verdict = f'<span class="ERROR" title="{e(failed.message)}">ERROR</span> {e(failed.cause)}'
            else:
                score = "n/a" if s.get("score") is None else f"{float(s['score']):.3f}"
                v = "n/a" if s.get("passed") is None else ("PASS" if s["passed"] else "FAIL")
                verdict = f'<span class="{v if v != "n/a" else "missing"}">{v}</span>'
            links, folder = [], (task_dir.name, r["member"], r["folder"])
            for nb, text in ((EXTRACT_NB, "extraction"), (SCORE_NB, "score")):
                if nb in r["names"] or page(nb).name in r["names"]:
                    links.append(f'<a href="{_href(*folder, page(nb).name)}">{text}</a>')
            first = links[-1] if links else None
            member = (f'<a href="{_href(*folder, page(SCORE_NB).name)}">{e(r["member"])}</a>'
                      if first and SCORE_NB in r["names"] else e(r["member"]))
            out.append(f"<tr><td>{member}</td><td>{e(r['backend'])}</td><td class=\"num\">{score}</td>"
                       f"<td>{verdict}</td><td>{' · '.join(links)}</td></tr>")
        out.append("</tbody></table>")
    out += ["</main></body>", "</html>", ""]
    path = run_dir / runfolder.INDEX
    write_text(path, "\n".join(out))
    return path
