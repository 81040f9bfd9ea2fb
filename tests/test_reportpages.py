"""The one list of report pages (`evalkit.report.pages`): its templates, their parameters, the docs page, and
which notebooks of a run folder get rendered."""

import ast
from pathlib import Path

import nbformat

from evalkit._util.resources import NOTEBOOKS_DIR
from evalkit.report import pages
from evalkit.report.render import _notebooks
from evalkit.results import runfolder

ROOT = Path(__file__).resolve().parent.parent


def _parameters(nb_path):
    nb = nbformat.read(nb_path, as_version=4)
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    return tuple(t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign) for t in node.targets)


def test_every_page_has_its_template_with_exactly_its_parameters():
    for p in pages.PAGES:
        assert p.template == NOTEBOOKS_DIR / p.notebook and p.template.is_file(), p
        assert _parameters(p.template) == p.params, p.notebook


def test_every_notebook_template_but_the_tutorial_is_a_registered_page():
    shipped = {p.name for p in NOTEBOOKS_DIR.glob("*.ipynb")}
    assert shipped - {p.notebook for p in pages.PAGES} == {"tutorial.ipynb"}
    assert {p.notebook for p in pages.PAGES} <= set(runfolder.FILES)  # each a run-folder name of `runfolder`


def test_the_docs_page_is_the_registry():
    assert (ROOT / "docs" / "pages.md").read_text() == pages.markdown()


def test_only_registered_pages_of_a_run_folder_are_rendered(tmp_path):
    member = tmp_path / "t" / "m" / "fake"
    member.mkdir(parents=True)
    for name in ("score.ipynb", "scratch.ipynb", "score.ipynb.tmp"):
        (member / name).write_text("{}")
    (tmp_path / "diff.ipynb").write_text("{}")
    assert _notebooks(tmp_path) == [tmp_path / "diff.ipynb", member / "score.ipynb"]
