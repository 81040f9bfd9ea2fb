"""Containment: whatever a corpus or a command line names stays inside its folder, or is refused.

Two rules, each with its one owner here:

* `inside(root, path, ...)`: `path`, with every symlink followed, lies inside `root` (its own
  symlinks followed too). A member's files (source pages, truth, manifest, sidecar) stay inside the
  corpus folder, a pointer inside the sources folder, a task's scorer file inside its task folder.
  Checked before the file is read, imported or written; a stat is all it costs.
* `check_name(value, what)`: a task or member id given to evalkit (``--task``, ``--only``, ``publish``,
  a scoreboard key) is a name — one folder name — never a path.

(A backend label becomes a folder of the run: its rule and its folder name live beside
`evalkit.backends.spec`.) A refusal is an `Escape` (exit 3): one line naming the file
or the value, and the rule.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import Escape

__all__ = ["Escape", "check_name", "inside", "member_ref"]


def inside(root: str | Path, path: str | Path, what: str, where: str) -> Path:
    """`path` if it resolves inside `root` after following symlinks; else raise `Escape`.

    `what` names the file (``the source``), `where` the folder it must stay in (``the corpus folder``).
    """
    real, base = os.path.realpath(path), os.path.realpath(root)
    if real != base and not real.startswith(base.rstrip(os.sep) + os.sep):  # strings: a member checks a dozen paths
        raise Escape(f"{path}: {what} must resolve inside {where} {root} (symlinks followed), but resolves to {real}")
    return Path(path)


def _is_name(value: str) -> bool:
    return bool(value) and value not in (".", "..") and not any(c in value for c in "/\\\0")


def check_name(value: str, what: str) -> str:
    """`value` if it is one folder name (not empty, not ``.`` or ``..``, no ``/`` or ``\\``); else raise `Escape`."""
    if not _is_name(value):
        raise Escape(f"{value!r}: {what} must be a name (one folder name, not '.' or '..', without '/' or '\\'), not a path")
    return value


def member_ref(value: str) -> str:
    """A member selector (``--only``), ``MEMBER`` or ``TASK/MEMBER``: each part a name; else raise `Escape`."""
    parts = value.split("/")
    if len(parts) > 2 or not all(map(_is_name, parts)):
        raise Escape(f"{value!r}: a member must be given as MEMBER or TASK/MEMBER, each a name "
                     "(one folder name, not '.' or '..', without '\\'), not a path")
    return value
