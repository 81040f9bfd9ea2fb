"""Small functions (issue 26): no function in evalkit/ is longer than `MAX_LINES`, and the run's orchestration
(`runner._run`, `judge.judge_phase`, `sweep._sweep`) reads as a list of named stages, each ≤ `STAGES_MAX`.

Read from the source with `ast`: a function's length is its ``def`` line to its last line (decorators not
counted, nested functions inside it counted)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "evalkit"
MAX_LINES = 80
STAGES_MAX = 50


def lengths(root: Path) -> dict[str, int]:
    """``path:line name`` → length in lines, for every function and method under `root`."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[f"{path.relative_to(root.parent).as_posix()}:{node.lineno} {node.name}"] = (
                    node.end_lineno - node.lineno + 1)
    return out


def too_long(root: Path, limit: int = MAX_LINES) -> list[str]:
    return [f"{where}: {n} lines (at most {limit})" for where, n in lengths(root).items() if n > limit]


def test_no_function_in_evalkit_is_longer_than_80_lines():
    assert too_long(PACKAGE) == []


@pytest.mark.parametrize("module, name", [("stages/runner.py", "_run"), ("stages/judge.py", "judge_phase"),
                                          ("board/sweep.py", "_sweep")])
def test_the_orchestration_is_short_named_stages(module, name):
    found = {where: n for where, n in lengths(PACKAGE).items()
             if where.startswith(f"evalkit/{module}:") and where.endswith(f" {name}")}
    assert len(found) == 1, f"{module}: no single function {name}"
    assert list(found.values())[0] <= STAGES_MAX, found


def test_a_long_function_is_named_with_its_length(tmp_path):
    """The check itself: a function of 81 lines is reported by file, line, name and length; one of 80 is not."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()

    def body(n: int, indent: str) -> str:
        return "\n".join(f"{indent}x{i} = {i}" for i in range(n))

    (pkg / "m.py").write_text(f"def fits():\n{body(79, '    ')}\n\n\nclass C:\n    def long(self):\n{body(80, '        ')}\n")
    assert too_long(pkg) == ["pkg/m.py:84 long: 81 lines (at most 80)"]
