"""Scorers, found by name through the `evalkit.scorers` entry-point group.

A task names its scorer in task.yaml: a registered name (``fields``),
``FILE.py:ATTR`` for a scorer file beside the task.yaml, or ``DIR/:ATTR`` for a
scorer package (a folder with an ``__init__.py``; its modules import each other
relatively), so a user can add a task with its own scorer without editing
evalkit. The file, or the package folder and every file and folder in it, must
resolve inside the task folder (symlinks followed), or it is refused before
anything is imported.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from evalkit._util.paths import inside
from evalkit.errors import CorpusError
from evalkit.scoring.base import Metric, ScoreContext, Scorer, ScoreResult, ratio

__all__ = ["Metric", "Scorer", "ScoreContext", "ScoreResult", "ratio", "load_scorer"]

GROUP = "evalkit.scorers"

# Built-ins are also listed here so an uninstalled checkout (PYTHONPATH=.) works.
_BUILTIN = {"fields": "evalkit.scoring.fields:SCORER", "graph": "evalkit.scoring.graph:SCORER"}


def _as_scorer(obj: object, name: str) -> Scorer:
    if isinstance(obj, Scorer):
        return obj
    if callable(obj):
        return Scorer(name=name, score=obj)  # a plain function is a scorer too
    raise CorpusError(f"scorer {name!r} is neither a Scorer nor a function")


def _import_attr(target: str) -> object:
    module, _, attr = target.partition(":")
    mod = importlib.import_module(module)
    return getattr(mod, attr)


def _local(task_dir: Path, ref: str) -> Scorer:
    """``FILE.py:ATTR`` or ``DIR/:ATTR`` beside task.yaml, imported once every file it could import from
    resolves inside the task folder."""
    file, _, attr = ref.partition(":")
    package = file.endswith("/")
    what = "the scorer package (task.yaml scorer:)" if package else "the scorer file (task.yaml scorer:)"
    path = inside(task_dir, task_dir / file, what, "its task folder").resolve()
    entry = path / "__init__.py" if package else path
    if not entry.is_file():
        raise CorpusError(f"{task_dir / 'task.yaml'}: scorer: {'package' if package else 'file'} {file!r} not found "
                          f"beside task.yaml{' (a folder with an __init__.py)' if package else ''}")
    if package:  # a submodule (or a folder of them) linked in from outside would be imported too
        for p in sorted(path.rglob("*")):
            inside(task_dir, p, "a file of the scorer package (task.yaml scorer:)", "its task folder")
    modname = f"evalkit_task_scorer_{task_dir.name.replace('-', '_')}"
    for name in [n for n in sys.modules if n == modname or n.startswith(f"{modname}.")]:
        del sys.modules[name]  # another task folder of the same name may have been loaded before
    spec = importlib.util.spec_from_file_location(modname, entry,
                                                  submodule_search_locations=[str(path)] if package else None)
    assert spec is not None and spec.loader is not None  # a .py file always has both
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    if not hasattr(mod, attr):
        raise CorpusError(f"{entry}: has no attribute {attr!r} (named by task.yaml scorer:)")
    return _as_scorer(getattr(mod, attr), ref)


@lru_cache(maxsize=1)
def _registered() -> dict[str, Any]:
    """The ``evalkit.scorers`` entry points by name: looked up once per process (a scan of every installed
    distribution's metadata: ~8 ms, which each member's run of a sweep paid)."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def load_scorer(ref: str, task_dir: Path) -> Scorer:
    if ":" in ref and ref.split(":", 1)[0].endswith((".py", "/")):
        return _local(task_dir, ref)
    if ref in _registered():
        return _as_scorer(_registered()[ref].load(), ref)
    if ref in _BUILTIN:
        return _as_scorer(_import_attr(_BUILTIN[ref]), ref)
    known = sorted(set(_registered()) | set(_BUILTIN))
    raise CorpusError(f"{task_dir / 'task.yaml'}: scorer: unknown scorer {ref!r} (known: {', '.join(known)})")
