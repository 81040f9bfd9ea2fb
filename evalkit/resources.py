"""Where evalkit finds what it ships and where it keeps Jupyter's state.

An installed wheel carries the notebook templates (``evalkit/notebooks/``, copied from the
checkout's top-level ``notebooks/`` by the build backend: see pyproject.toml) and the nbconvert
template (``evalkit/templates/``); both are found with `importlib.resources`, so evalkit works
from any folder. A source checkout (an editable install) has no ``evalkit/notebooks/``: there
the top-level ``notebooks/`` is used, the same files JupyterLab users open and edit.

Jupyter and IPython state (kernel connection files, profile, config) lives in a per-user cache
folder (``$EVALKIT_JUPYTER_DIR``, else ``$XDG_CACHE_HOME/evalkit/jupyter``, else
``~/.cache/evalkit/jupyter``): never in site-packages, the source tree or the user's Jupyter
folders.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

__all__ = ["NOTEBOOKS_DIR", "TEMPLATES_DIR", "CHECKOUT", "jupyter_dir"]

_PACKAGE = Path(str(files("evalkit")))
# The folder holding evalkit/ in a source checkout (site-packages in an installed wheel).
CHECKOUT = _PACKAGE.parent


def _notebooks() -> Path:
    shipped = _PACKAGE / "notebooks"
    return shipped if shipped.is_dir() else CHECKOUT / "notebooks"


NOTEBOOKS_DIR = _notebooks()
TEMPLATES_DIR = _PACKAGE / "templates"
JUPYTER_DIR_ENV = "EVALKIT_JUPYTER_DIR"


def jupyter_dir() -> Path:
    """The per-user folder for Jupyter/IPython state (created by the notebook workers)."""
    if os.environ.get(JUPYTER_DIR_ENV):
        return Path(os.environ[JUPYTER_DIR_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "evalkit" / "jupyter"
