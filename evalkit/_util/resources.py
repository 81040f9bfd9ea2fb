"""Where evalkit finds what it ships and where it keeps Jupyter's state.

An installed wheel carries the notebook templates (``evalkit/notebooks/``) and the docs pages
(``evalkit/docs/``), both copied from the checkout's top-level folders by the build backend (see
pyproject.toml), and the nbconvert template (``evalkit/templates/``); all are found with
`importlib.resources`, so evalkit works from any folder. A source checkout (an editable install)
has no ``evalkit/notebooks/`` or ``evalkit/docs/``: there the top-level folders are used, the same
files JupyterLab users open and edit.

Jupyter and IPython state (kernel connection files, profile, config) lives in a per-user cache
folder (``$EVALKIT_JUPYTER_DIR``, else ``$XDG_CACHE_HOME/evalkit/jupyter``, else
``~/.cache/evalkit/jupyter``): never in site-packages, the source tree or the user's Jupyter
folders.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

from evalkit.errors import UsageError

__all__ = ["NOTEBOOKS_DIR", "DOCS_DIR", "TEMPLATES_DIR", "CHECKOUT", "jupyter_dir", "docs", "doc"]

_PACKAGE = Path(str(files("evalkit")))
# The folder holding evalkit/ in a source checkout (site-packages in an installed wheel).
CHECKOUT = _PACKAGE.parent


def _shipped(folder: str) -> Path:
    """``evalkit/<folder>/`` of an installed wheel, else the checkout's ``<folder>/``."""
    shipped = _PACKAGE / folder
    return shipped if shipped.is_dir() else CHECKOUT / folder


NOTEBOOKS_DIR = _shipped("notebooks")
DOCS_DIR = _shipped("docs")
TEMPLATES_DIR = _PACKAGE / "templates"
JUPYTER_DIR_ENV = "EVALKIT_JUPYTER_DIR"


def docs() -> list[str]:
    """The names of the shipped docs pages (``tutorial``, ``authoring``, …)."""
    return sorted(p.stem for p in DOCS_DIR.glob("*.md"))


def doc(name: str) -> Path:
    """The shipped docs page `name` (``tutorial`` or ``tutorial.md``); a `UsageError` (exit 2) naming the
    pages there are when there is none."""
    stem = name.removesuffix(".md")
    if stem not in docs():
        raise UsageError(f"no docs page {name!r}; the pages: {', '.join(docs())}")
    return DOCS_DIR / f"{stem}.md"


def jupyter_dir() -> Path:
    """The per-user folder for Jupyter/IPython state (created by the notebook workers)."""
    if os.environ.get(JUPYTER_DIR_ENV):
        return Path(os.environ[JUPYTER_DIR_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "evalkit" / "jupyter"
