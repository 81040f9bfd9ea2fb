"""Executed notebooks → self-contained HTML pages, and the run's index.html.

In-process nbconvert with evalkit's template (``evalkit/templates/evalkit``,
extending ``lab``): no script tags, nothing loaded from the network, code
inputs hidden (``exclude_input=True``: the pages are reports; the notebooks
keep the code). Same notebook, same bytes.

Untrusted text stays text: tables come escaped from `evalkit.report.views`, and the
template still passes every HTML/Markdown output through an allow-list
sanitizer and re-serializes every SVG from a parsed tree before inlining it.
"""

from __future__ import annotations

import base64
import html
import os
import re
import time
import xml.etree.ElementTree as ET
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalkit._util.jsonio import write_text
from evalkit._util.resources import TEMPLATES_DIR
from evalkit.backends import BackendSpec
from evalkit.errors import EvalkitError
from evalkit.execution.workers import in_worker, run_all
from evalkit.report import chrome
from evalkit.report import pages as reportpages
from evalkit.report.overview import OVERVIEW_CSS, overview_html
from evalkit.report.pages import MEMBER, TASK
from evalkit.results import runfolder
from evalkit.results.runfolder import REPORT, SCORE_NB, page

__all__ = ["render_notebook", "render_run", "render_index", "safe_svg", "clean_output_html", "TEMPLATES"]

TEMPLATES = TEMPLATES_DIR
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


def _tooltips(root: ET.Element) -> None:
    """Give every data mark its tooltip: vega describes each mark in its ``aria-label`` ("field: value;
    ..."); a ``<title>`` child with that text is what a browser shows on hover, with no script."""
    for el in list(root.iter()):
        label = el.get("aria-label")
        if label and el.get("role") == "graphics-symbol" and el.find(f"{{{SVG_NS}}}title") is None:
            ET.SubElement(el, f"{{{SVG_NS}}}title").text = label


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
            _tooltips(root)
            return ET.tostring(root, encoding="unicode")
    except ET.ParseError:
        pass
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}">'


# --------------------------------------------------------------------------- HTML outputs

_HTML_TAGS = [
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "small", "span", "strong", "sub",
    "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul", "details", "summary",
]
# No style attributes: the page's policy allows only its own stylesheet (by hash), so they would not apply.
_HTML_ATTRS = {"*": ["class", "title"], "table": ["border"], "td": ["colspan", "rowspan"],
               "th": ["colspan", "rowspan"]}


def _attr_ok(tag: str, name: str, value: str) -> bool:
    """Links only to pages of the same report: a relative href (no scheme, no host)."""
    if name in _HTML_ATTRS.get(tag, []) or name in _HTML_ATTRS["*"]:
        return True
    return tag == "a" and name == "href" and not re.match(r"^\s*([a-zA-Z][\w+.-]*:|//|\\\\)", value)


@lru_cache(maxsize=1)
def _cleaner() -> Any:
    import bleach  # lazy: bleach is loaded only where it is used (import cost)

    # bleach checks a relative href against "http(s)"; `_attr_ok` has already refused every absolute one.
    return bleach.Cleaner(tags=_HTML_TAGS, attributes=_attr_ok, protocols=["http", "https"],
                          strip=False, strip_comments=True)


def clean_output_html(markup: str) -> str:
    """Allow-list sanitize an HTML output: tables and text markup survive, script becomes text."""
    return _cleaner().clean(markup if isinstance(markup, str) else "".join(markup))


# --------------------------------------------------------------------------- notebooks

@lru_cache(maxsize=1)
def _exporter() -> Any:
    from nbconvert import HTMLExporter  # lazy: nbconvert is loaded only where it is used (import cost)
    from traitlets.config import Config  # lazy: traitlets is loaded only where it is used (import cost)

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


# --------------------------------------------------------------------------- navigation

def _run_root(path: Path, within: Path | None = None) -> Path:
    """The run folder of a page: the nearest folder above holding run.json (not above `within`), else
    where the run layout puts it (``<run>/<task>/<member>/<backend>/`` or ``<run>/<task>/``)."""
    for p in path.parents:
        if (p / runfolder.RUN_JSON).is_file():
            return p
        if within is not None and p == within:
            return within
    return path.parents[3] if _is(path, MEMBER) and len(path.parents) > 3 else path.parents[1]


def _is(path: Path, level: str) -> bool:
    """Whether `path` is a page (`evalkit.report.pages`) of that level of a run folder."""
    return any(p.notebook == path.name for p in reportpages.at(level))


def _up(n: int) -> list[str]:
    return [".."] * n


class _Site:
    """What the navigation bars of a run's pages read: each task's results and which notebooks exist.

    Looked up once per run when `render_run` renders a whole run (a page per member would otherwise read
    every member's score.json: quadratic in the members), and afresh for a single page."""

    def __init__(self, notebooks: list[Path] | None = None):
        self._results: dict[tuple[Path, str], list[Any]] = {}
        self._notebooks = {p.resolve() for p in notebooks} if notebooks is not None else None

    def results(self, run_dir: Path, task: str) -> list[Any]:
        key = (run_dir.resolve(), task)
        if key not in self._results:
            self._results[key] = runfolder.task_results(run_dir, task)
        return self._results[key]

    def exists(self, path: Path) -> bool:
        return path.resolve() in self._notebooks if self._notebooks is not None else path.is_file()


def page_nav(run_dir: Path, path: Path, site: _Site | None = None) -> str:
    """The navigation bar of the page of notebook `path` in `run_dir`: breadcrumbs index › task › member ›
    backend, the member's other pages (extraction ↔ score) and backends, the previous and next member."""
    site = site or _Site()
    try:
        parts = path.resolve().relative_to(run_dir.resolve()).parts
    except ValueError:
        parts = (path.name,)
    depth = len(parts) - 1
    index = ("index", chrome.href(*_up(depth), runfolder.INDEX))
    if depth == 1 and _is(path, TASK):  # <task>/report.ipynb, <task>/compare.ipynb
        task = parts[0]
        here = path.name
        crumbs = [index, (task, None if here == REPORT else chrome.href(page(REPORT).name))]
        if here != REPORT:
            crumbs.append((reportpages.named(here).title, None))
        links = [(p.title, chrome.href(p.html)) for p in reportpages.at(TASK)
                 if here == REPORT and p.notebook != REPORT and site.exists(path.parent / p.notebook)]
        return chrome.nav(crumbs, links)
    if depth != 3 or not _is(path, MEMBER):
        return chrome.nav([index, (path.stem, None)])
    task, member, folder = parts[:3]
    results = site.results(run_dir, task)
    labels = {(s.member, s.home.name): s.backend for s in results}
    label = labels.get((member, folder), folder)
    crumbs = [index, (task, chrome.href("..", "..", page(REPORT).name)), (member, None), (label, None)]
    links: list[tuple[str, str | None]] = []
    for p in reportpages.at(MEMBER):
        if p.notebook == path.name:
            links.append((p.title, None))
        elif site.exists(path.parent / p.notebook):
            links.append((p.title, chrome.href(p.html)))
    for (m, f), other in sorted(labels.items()):
        if m == member and f != folder and site.exists(path.parent.parent / f / path.name):
            links.append((f"backend {other}", chrome.href("..", f, page(path.name).name)))
    same = sorted(m for m, f in labels if f == folder and site.exists(run_dir / task / m / f / path.name))
    if member in same:
        i = same.index(member)
        if i > 0:
            links.append((f"‹ {same[i - 1]}", chrome.href("..", "..", same[i - 1], folder, page(path.name).name)))
        if i + 1 < len(same):
            links.append((f"{same[i + 1]} ›", chrome.href("..", "..", same[i + 1], folder, page(path.name).name)))
    return chrome.nav(crumbs, links)


def render_notebook(path: str | Path, out: str | Path | None = None, run_dir: str | Path | None = None,
                    site: _Site | None = None) -> Path:
    """Write the HTML page of an executed notebook (default: beside it, ``.html``); return its path.

    `run_dir`: the run folder the notebook belongs to, for the navigation bar (default: the nearest
    folder above holding run.json, else the notebook's place in the run layout)."""
    import nbformat  # lazy: nbformat is loaded only where it is used (import cost)

    path = Path(path)
    out = Path(out) if out is not None else page(path)
    nb = nbformat.read(path, as_version=4)
    root = Path(run_dir) if run_dir is not None else _run_root(path)
    resources = {"metadata": {"name": _title(nb, path)},
                 "evalkit": {"csp": chrome.csp([chrome.script()], [chrome.css()]), "css": chrome.css(),
                             "script": chrome.script(), "nav": page_nav(root, path, site)}}
    body, _ = _exporter().from_notebook_node(nb, resources=resources)
    write_text(out, body)
    return out


# --------------------------------------------------------------------------- the run

def _notebooks(run_dir: Path) -> list[Path]:
    """The executed pages (`evalkit.report.pages`) under `run_dir`: any other notebook there is not a report page."""
    names = {p.notebook for p in reportpages.PAGES}
    return sorted(p for p in run_dir.rglob("*.ipynb") if p.name in names and ".ipynb_checkpoints" not in p.parts)


PARALLEL_FROM = 24  # notebooks: fewer render faster in this process than a pool of workers starts up
CHUNKS_PER_WORKER = 4  # each worker renders a few batches (one exporter each), so none idles at the end


def _render_many(run_dir: Path, batch: list[Path], notebooks: list[Path],
                 on_done: Any = None) -> list[tuple[Path, float]]:
    """Render `batch` (of the run's `notebooks`), in this process: [(page, seconds)]."""
    site = _Site(notebooks)  # one exporter, one template load, one look at the run for every page
    done = []
    for nb_path in batch:
        t0 = time.perf_counter()
        done.append((render_notebook(nb_path, run_dir=_run_root(nb_path, run_dir), site=site),
                     time.perf_counter() - t0))
        if on_done:
            on_done(*done[-1])
    return done


def render_run(run_dir: str | Path, on_done: Any = None, workers: int | None = None) -> list[Path]:
    """Render every notebook under `run_dir` to HTML beside it, then ``index.html``.

    Returns the pages written (the index last). `on_done(path, seconds)` is
    called after each page, for a progress display. From PARALLEL_FROM notebooks the pages are rendered in
    `workers` worker processes (`evalkit.execution.workers`; default the CPU count), each page by the same function
    as in this process: the same bytes.
    """
    run_dir = Path(run_dir)
    notebooks = _notebooks(run_dir)
    workers = min(workers or os.cpu_count() or 1, max(1, len(notebooks) // CHUNKS_PER_WORKER))
    if workers < 2 or len(notebooks) < PARALLEL_FROM or in_worker():
        pages = [out for out, _ in _render_many(run_dir, notebooks, notebooks, on_done)]
        return [*pages, render_index(run_dir)]
    n = workers * CHUNKS_PER_WORKER
    batches = [notebooks[i::n] for i in range(n)]
    results = run_all([(_render_many, (run_dir, b, notebooks)) for b in batches], workers)
    written: dict[Path, Path] = {}
    for batch, result in zip(batches, results):
        if isinstance(result, Exception):  # as a page that fails to render in this process: raised
            raise result
        for nb_path, (out, seconds) in zip(batch, result):
            written[nb_path] = out
            if on_done:
                on_done(out, seconds)
    return [*(written[p] for p in notebooks), render_index(run_dir)]


def _member_rows(task_dir: Path) -> list[dict[str, Any]]:
    """One row per member × backend of the task (`runfolder.task_results`): its score.json, if any, and
    the names in its folder (which pages to link)."""
    return [{"member": s.member, "folder": s.home.name, "backend": s.backend,
             "names": {p.name for p in s.home.iterdir()}, "score": s.score() if s.has_score else None}
            for s in runfolder.task_results(task_dir.parent, task_dir.name)]


# Where the index's member table is whole once cut (`chrome.TABLE_ROWS`); the overview above it counts every member.
INDEX_FULL = f"each member's {runfolder.SCORE} (<task>/<member>/<backend folder>/{runfolder.SCORE})"


def render_index(run_dir: str | Path) -> Path:
    """Write ``<run>/index.html``: per task, a link to its report and one row per member and backend."""
    run_dir = Path(run_dir)
    e = html.escape
    # Nothing here depends on the run folder's name or location: same results, same bytes (but for the run
    # block of `overview_html`: the run's date and command).
    out = ["<h1>evalkit run</h1>"]
    out.append(overview_html(run_dir))  # the run, the task × backend table, the skipped members (`evalkit.report.overview`)
    tasks = sorted(p for p in run_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    for task_dir in tasks:
        rows = _member_rows(task_dir)
        has_report = (task_dir / page(REPORT)).is_file() or (task_dir / REPORT).is_file()
        if not rows and not has_report:
            continue
        out.append(f"<h2>{e(task_dir.name)}</h2>")
        links = [f'<a href="{chrome.href(task_dir.name, p.html)}">{p.title}</a>' for p in reportpages.at(TASK)
                 if (task_dir / p.html).is_file() or (task_dir / p.notebook).is_file()]
        if links:
            out.append(f"<p>{' · '.join(links)}</p>")
        out.append("<table><thead><tr><th>member</th><th>backend</th><th>score</th><th>verdict</th>"
                   "<th>pages</th></tr></thead><tbody>")
        for r in rows[:chrome.TABLE_ROWS]:  # the first rows: a page of 10,000 takes seconds to open
            s = r["score"]
            failed = None if s is None else s.failure
            if s is None:
                score, verdict = '<span class="missing">—</span>', '<span class="missing">no score</span>'
            elif failed is not None:  # a failure is never a number
                score = '<span class="ERROR">ERROR</span>'
                verdict = f'<span class="ERROR" title="{e(failed.message)}">ERROR</span> {e(failed.cause)}'
            else:
                score = "n/a" if s.score is None else f"{float(s.score):.3f}"
                v = "n/a" if s.passed is None else ("PASS" if s.passed else "FAIL")
                verdict = f'<span class="{v if v != "n/a" else "missing"}">{v}</span>'
            links, folder = [], (task_dir.name, r["member"], r["folder"])
            for p in reportpages.at(MEMBER):
                if p.notebook in r["names"] or p.html in r["names"]:
                    links.append(f'<a href="{chrome.href(*folder, p.html)}">{p.title}</a>')
            first = links[-1] if links else None
            member = (f'<a href="{chrome.href(*folder, page(SCORE_NB).name)}">{e(r["member"])}</a>'
                      if first and SCORE_NB in r["names"] else e(r["member"]))
            out.append(f"<tr><td>{member}</td><td>{e(r['backend'])}</td><td class=\"num\">{score}</td>"
                       f"<td>{verdict}</td><td>{' · '.join(links)}</td></tr>")
        out.append("</tbody></table>")
        if len(rows) > chrome.TABLE_ROWS:
            out.append(f'<p class="ek-cut">{chrome.cut_note(chrome.TABLE_ROWS, len(rows), e(INDEX_FULL))}</p>')
    path = run_dir / runfolder.INDEX
    write_text(path, chrome.document("evalkit run", "\n".join(out), chrome.nav([("index", None)]),
                                         extra_css=OVERVIEW_CSS))
    return path
