"""The report pages evalkit ships: one record per notebook template, the one list of them.

Each page is a notebook in ``notebooks/`` (``evalkit/notebooks/`` of a wheel: `evalkit._util.resources`) that a
command executes with papermill into a run folder and `evalkit.report.render` turns into HTML beside it. Rendering
(which notebooks of a run folder are pages, the links between them), the wheel's test (every page's template
is in the built wheel) and docs/pages.md (`markdown`) all read `PAGES`; a new page is one record here, its
template in ``notebooks/`` and its file name in `evalkit.results.runfolder` (``FILES``).

What each page *shows* per item shape is `evalkit.report.views.pages`; this module only says which pages exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalkit._util.resources import NOTEBOOKS_DIR
from evalkit.results.runfolder import (
    COMPARE,
    DIFF,
    DIFF_JSON,
    EXTRACT_NB,
    EXTRACTION,
    PAIRWISE,
    REPORT,
    SCORE,
    SCORE_NB,
    page,
)

__all__ = ["Page", "PAGES", "MEMBER", "TASK", "RUN", "at", "named", "markdown"]

# Where a page sits in a run folder.
MEMBER = "member"  # <run>/<task>/<member>/<backend>/
TASK = "task"  # <run>/<task>/
RUN = "run"  # <run>/


@dataclass(frozen=True)
class Page:
    notebook: str  # its template's name in notebooks/, and its name in the run folder (`runfolder`)
    level: str  # MEMBER, TASK or RUN
    title: str  # the text of a link to it from another page
    params: tuple[str, ...]  # its papermill parameters: the names its ``parameters`` cell assigns
    command: str  # the command that writes it
    needs: str  # what it reads

    @property
    def template(self) -> Path:
        return NOTEBOOKS_DIR / self.notebook

    @property
    def html(self) -> str:
        return page(self.notebook).name


_MEMBER_PARAMS = ("task", "member", "backend", "corpus", "sources", "out")

PAGES: tuple[Page, ...] = (
    Page(EXTRACT_NB, MEMBER, "extraction", _MEMBER_PARAMS, "evalkit run",
         f"the member's document and task; the backend's {EXTRACTION}"),
    Page(SCORE_NB, MEMBER, "score", (*_MEMBER_PARAMS, "threshold", "reference"), "evalkit run",
         f"the member's truth.yaml and {EXTRACTION} (or --reference's); writes {SCORE}"),
    Page(REPORT, TASK, "task report", ("run_dir", "task"), "evalkit run",
         f"every {SCORE} of the task"),
    Page(COMPARE, TASK, "backend comparison", ("run_dir", "task", "backends", "judge_mode"), "evalkit compare",
         f"every {SCORE} of the task, two backends or more; {PAIRWISE} with --judge-mode pairwise"),
    Page(DIFF, RUN, "diff", ("run_a", "run_b", "diff_json"), "evalkit diff",
         f"the {SCORE} files of two runs; the {DIFF_JSON} `evalkit diff` computed, when given"),
)


def at(level: str) -> tuple[Page, ...]:
    """The pages that sit at `level` of a run folder, in `PAGES` order."""
    return tuple(p for p in PAGES if p.level == level)


def named(name: str) -> Page | None:
    """The page whose notebook is `name` (``score.ipynb``), if any."""
    return next((p for p in PAGES if p.notebook == name), None)


def markdown() -> str:
    """docs/pages.md: the table of pages (tests/test_reportpages.py keeps the committed page equal to it)."""
    where = {MEMBER: "`<run>/<task>/<member>/<backend>/`", TASK: "`<run>/<task>/`", RUN: "`<run>/`"}
    lines = [
        "# Report pages",
        "",
        "Every page of a run's HTML report is a notebook template in `notebooks/` (in an installed wheel:",
        "`evalkit/notebooks/`), executed by papermill into the run folder and rendered beside it as HTML.",
        "This table is generated from `evalkit/report/pages.py`, the one list of them: rendering, the wheel",
        "and this page all read it (regenerate: `python -c 'from evalkit.report.pages import markdown;",
        "print(markdown(), end=\"\")' > docs/pages.md`).",
        "",
        "| notebook | where | written by | parameters | reads |",
        "| --- | --- | --- | --- | --- |",
    ]
    for p in PAGES:
        params = ", ".join(f"`{n}`" for n in p.params)
        lines.append(f"| `{p.notebook}` ({p.title}) | {where[p.level]} | `{p.command}` | {params} | {p.needs} |")
    return "\n".join(lines) + "\n"
