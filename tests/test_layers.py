"""The package's layers: each stage imports only the stages below it (docs/architecture.md draws the map).

Read from the source with `ast`, so an import inside a function counts as much as one at the top, and an
import inside a function must say why (start-up cost, an optional dependency, a cycle it breaks) on its line
or the line above."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "evalkit"

# Lowest first. A module may import its own layer and every layer listed before it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("errors", "limits", "status", "_util")),
    ("scoring", ("scoring",)),
    ("corpus", ("corpus",)),
    ("backends", ("backends",)),
    ("results", ("results",)),
    ("execution", ("execution",)),
    ("report", ("report",)),
    ("stages", ("stages",)),
    ("compare", ("compare",)),
    ("board", ("board",)),
    ("interface", ("cli", "api", "__init__")),
]
RANK = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}
NAME = {unit: name for name, units in LAYERS for unit in units}


def _unit(module: str) -> str:
    """evalkit.results.runfolder -> results; evalkit.errors -> errors; evalkit -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    """(line, imported module, inside a function) for each evalkit import in `path`."""
    tree = ast.parse(path.read_text(), str(path))
    here = _module(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield child.lineno, alias.name, in_function
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package[: len(package) - child.level + 1] + ([base] if base else []))
                for alias in child.names:
                    target = f"{base}.{alias.name}"
                    yield child.lineno, target, in_function
            yield from visit(child, nested)

    for line, target, in_function in visit(tree, False):
        if target == "evalkit" or target.startswith("evalkit."):
            yield line, target, in_function


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def test_every_unit_has_a_layer():
    units = {_unit(_module(p)) for p in _modules()}
    assert units - set(RANK) == set(), "a new subpackage needs its place in LAYERS (and in docs/architecture.md)"


def _violations():
    for path in _modules():
        mine = _unit(_module(path))
        for line, target, _ in _imports(path):
            theirs = _unit(target)
            if target == "evalkit.__version__":
                continue  # the version string, read from the root package by every layer
            if RANK[theirs] > RANK[mine]:
                yield (f"{path.relative_to(PACKAGE.parent)}:{line}: {NAME[mine]} imports {target} "
                       f"({NAME[theirs]}, a higher layer)")


def test_no_layer_imports_a_higher_one():
    assert list(_violations()) == []


def _unexplained():
    for path in _modules():
        lines = path.read_text().splitlines()
        for line, target, in_function in _imports(path):
            if not in_function:
                continue
            said = lines[line - 1] + (lines[line - 2] if line > 1 else "")
            if "#" not in said:
                yield f"{path.relative_to(PACKAGE.parent)}:{line}: {target} imported inside a function without a why"


def test_imports_inside_functions_say_why():
    assert list(_unexplained()) == []


@pytest.mark.parametrize("source, expected", [
    ("from evalkit.board import sweep\n", ["results imports evalkit.board.sweep (board, a higher layer)"]),
    ("def f():\n    from evalkit.errors import EvalkitError\n", []),
])
def test_a_violation_is_named(tmp_path, monkeypatch, source, expected):
    """The check itself: an import upwards is named with its layer; a lower one is fine."""
    fake = PACKAGE / "results" / "_layer_probe.py"
    monkeypatch.setattr(f"{__name__}._modules", lambda: [fake])
    original = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source if self == fake else original(self, *a, **k))
    found = list(_violations())
    assert [v.split(": ", 1)[1] for v in found] == expected
