"""One error hierarchy: every public exception evalkit defines lives in `evalkit.errors`, with its exit code."""

import ast
from pathlib import Path

import pytest

from evalkit import errors
from evalkit.errors import (
    EXIT_BACKEND,
    EXIT_INVALID,
    EXIT_USAGE,
    BandError,
    ChildGone,
    EvalkitError,
    NoTextLayer,
    NotPublishable,
    Oversize,
    RunLocked,
    ScoreboardError,
    SweepFailed,
    WorkerDied,
)

ROOT = Path(__file__).resolve().parent.parent


def _exception_classes(path: Path) -> list[str]:
    """The module-level classes of `path` that derive from an exception (a name ending in Error or Exception,
    an evalkit.errors class, or any class so derived earlier in the file)."""
    known = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, BaseException)}
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
        if any(b in known or b.endswith(("Error", "Exception")) for b in bases):
            known.add(node.name)
            found.append(node.name)
    return found


def test_every_public_exception_is_defined_in_errors():
    outside = [f"{p.relative_to(ROOT)}: {name}" for p in sorted((ROOT / "evalkit").rglob("*.py"))
               if p.name != "errors.py" for name in _exception_classes(p) if not name.startswith("_")]
    assert outside == [], "define these in evalkit/errors.py (with their exit code) and import them from there"


@pytest.mark.parametrize("error, code", [
    (NoTextLayer("x"), EXIT_INVALID), (NotPublishable("x"), EXIT_INVALID), (ScoreboardError("x"), EXIT_INVALID),
    (BandError("x"), EXIT_INVALID), (SweepFailed(5), EXIT_BACKEND), (RunLocked("x"), EXIT_USAGE),
    (WorkerDied(), EXIT_BACKEND), (ChildGone(), EXIT_BACKEND), (Oversize(7), EXIT_BACKEND),
])
def test_the_moved_errors_are_evalkit_errors_with_their_exit_codes(error, code):
    assert isinstance(error, EvalkitError) and error.exit_code == code and str(error)


def test_the_moved_errors_keep_their_messages():
    assert str(WorkerDied()) == "the worker process died (killed, out of memory, or a crash in native code)"
    assert "--allow-failures" in str(SweepFailed(6)) and SweepFailed(6).exit_code == 6
    assert Oversize(123).size == 123 and "123 bytes" in str(Oversize(123))
