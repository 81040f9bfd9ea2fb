"""Containment: whatever a corpus or a command line names stays inside its folder, or is refused.

Two rules, each with its one owner here:

* `inside(root, path, ...)`: `path`, with every symlink followed, lies inside `root` (its own
  symlinks followed too). A member's files (source pages, truth, manifest, sidecar) stay inside the
  corpus folder, a pointer inside the sources folder, a task's scorer file inside its task folder.
  Checked before the file is read, imported or written; a stat is all it costs.
* `check_name(value, what)`: a task or member id given to evalkit (``--task``, ``--only``, ``publish``,
  a scoreboard key) or found as a folder is a name — one folder name — never a path, and holds
  no character a reader cannot see (zero-width, bidi controls such as U+202E, U+FEFF, control
  characters): two ids that look the same must be the same. `case_twin` finds a sibling id that
  differs from it only by case or Unicode form (one folder on a case-insensitive disk).

(A backend label becomes a folder of the run: its rule and its folder name live beside
`evalkit.backends.spec`.) A refusal is an `Escape` (exit 3): one line naming the file
or the value, and the rule.
"""

from __future__ import annotations

import os
import unicodedata
from functools import lru_cache
from pathlib import Path

from evalkit.errors import CorpusError, Escape

__all__ = ["Escape", "case_twin", "check_name", "inside", "member_ref"]

# Unicode categories no reader sees: format (zero-width, bidi, BOM), control, private use, line/paragraph separators.
_UNSEEN = ("Cf", "Cc", "Co", "Zl", "Zp")


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


def _unseen(value: str) -> str | None:
    """The first character of `value` a reader cannot see (a space other than U+0020 included), as ``U+200B (NAME)``."""
    for c in value:
        if unicodedata.category(c) in _UNSEEN or (unicodedata.category(c) == "Zs" and c != " "):
            return f"U+{ord(c):04X} ({unicodedata.name(c, 'unnamed')})"
    return None


def check_name(value: str, what: str) -> str:
    """`value` if it is one folder name (not empty, not ``.`` or ``..``, no ``/`` or ``\\``) of visible
    characters; else raise `Escape` (a path) or `CorpusError` (an invisible character)."""
    if not _is_name(value):
        raise Escape(f"{value!r}: {what} must be a name (one folder name, not '.' or '..', without '/' or '\\'), not a path")
    if bad := _unseen(value):
        raise CorpusError(f"{value!r}: {what} holds the invisible character {bad}, so it can pass for another id; "
                          "rename it with visible characters only")
    return value


def fold(name: str) -> str:
    """What a name is on a case-insensitive disk, and to a reader: its NFKC form, case folded."""
    return unicodedata.normalize("NFKC", name).casefold()


def case_twin(folder: Path, name: str) -> str | None:
    """Another entry of `folder` that differs from `name` only by case or Unicode form, or None."""
    try:
        folded = _folded(str(folder), os.stat(folder).st_mtime_ns)
    except OSError:
        return None
    return next((n for n in folded.get(fold(name), ()) if n != name), None)


@lru_cache(maxsize=16)
def _folded(folder: str, mtime_ns: int) -> dict[str, tuple[str, ...]]:
    # One listing a folder state (its mtime changes when an entry comes or goes): a task loads each member.
    out: dict[str, tuple[str, ...]] = {}
    for n in sorted(os.listdir(folder)):
        out[fold(n)] = out.get(fold(n), ()) + (n,)
    return out


def member_ref(value: str) -> str:
    """A member selector (``--only``), ``MEMBER`` or ``TASK/MEMBER``: each part a name; else raise `Escape`."""
    parts = value.split("/")
    if len(parts) > 2 or not all(map(_is_name, parts)):
        raise Escape(f"{value!r}: a member must be given as MEMBER or TASK/MEMBER, each a name "
                     "(one folder name, not '.' or '..', without '\\'), not a path")
    return value
