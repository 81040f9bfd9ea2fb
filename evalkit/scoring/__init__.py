"""Scorers, found by name through the `evalkit.scorers` entry-point group.

A task names its scorer in task.yaml: a registered name (``fields``), or
``FILE.py:ATTR`` for a scorer file beside the task.yaml, so a user can add a
task with its own scorer without editing evalkit. The file must resolve inside
its task folder (symlinks followed), or it is refused before it is imported.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path

from ..errors import CorpusError
from ..paths import inside
from .base import Scorer, ScoreContext, ScoreResult, ratio

__all__ = ["Scorer", "ScoreContext", "ScoreResult", "ratio", "load_scorer"]

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


def load_scorer(ref: str, task_dir: Path) -> Scorer:
    if ":" in ref and ref.split(":", 1)[0].endswith(".py"):
        file, _, attr = ref.partition(":")
        path = inside(task_dir, task_dir / file, "the scorer file (task.yaml scorer:)", "its task folder").resolve()
        if not path.is_file():
            raise CorpusError(f"{task_dir / 'task.yaml'}: scorer: file {file!r} not found beside task.yaml")
        modname = f"evalkit_task_scorer_{task_dir.name.replace('-', '_')}"
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        spec.loader.exec_module(mod)
        if not hasattr(mod, attr):
            raise CorpusError(f"{path}: has no attribute {attr!r} (named by task.yaml scorer:)")
        return _as_scorer(getattr(mod, attr), ref)
    for ep in entry_points(group=GROUP):
        if ep.name == ref:
            return _as_scorer(ep.load(), ref)
    if ref in _BUILTIN:
        return _as_scorer(_import_attr(_BUILTIN[ref]), ref)
    known = sorted({ep.name for ep in entry_points(group=GROUP)} | set(_BUILTIN))
    raise CorpusError(f"{task_dir / 'task.yaml'}: scorer: unknown scorer {ref!r} (known: {', '.join(known)})")
