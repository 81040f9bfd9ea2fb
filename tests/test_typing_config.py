"""`make test` type-checks with mypy after ruff ([tool.mypy] in pyproject.toml): the typed layers (base, scoring,
corpus, backends, results) get exactly what `mypy --strict` would check, flag by flag (`strict` itself is
global-only in mypy), the layers not typed yet are left out, and no third-party module is silenced that is not
named."""

import os
import subprocess
from pathlib import Path

import pytest
from mypy.main import process_options
from mypy.options import PER_MODULE_OPTIONS, Options

ROOT = Path(__file__).resolve().parent.parent
TYPED = ["evalkit.errors", "evalkit.limits", "evalkit.status", "evalkit._util.yamlio", "evalkit.scoring.sets",
         "evalkit.corpus.tasks", "evalkit.backends.live", "evalkit.results.records", "evalkit.results.runfolder",
         "evalkit.results.scoreboard"]
UNTYPED = ["evalkit.api", "evalkit.execution.pool", "evalkit.stages.runner", "evalkit.report.frames"]


def _options(*args: str) -> Options:
    cwd = os.getcwd()
    os.chdir(ROOT)  # the config's `files` are relative to the checkout
    try:
        return process_options([*args])[1]
    finally:
        os.chdir(cwd)


def _strict_flags() -> dict[str, object]:
    """What `--strict` changes per module, as mypy itself sets it."""
    strict, plain = _options("--config-file=", "--strict", "x.py"), _options("--config-file=", "x.py")
    return {k: getattr(strict, k) for k in PER_MODULE_OPTIONS if getattr(strict, k, None) != getattr(plain, k, None)}


def _project() -> Options:
    return _options("--config-file", str(ROOT / "pyproject.toml"))


def test_the_typed_layers_get_every_strict_flag():
    flags, options = _strict_flags(), _project()
    assert flags  # mypy still has a strict mode to compare with
    for module in TYPED:
        mine = options.clone_for_module(module)
        assert {k: getattr(mine, k) for k in flags} == flags, module
        assert not mine.ignore_errors and not mine.ignore_missing_imports, module
    assert options.warn_redundant_casts  # the one global flag of --strict


def test_the_layers_not_typed_yet_are_left_out_and_checked_files_are_the_typed_ones():
    flags, options = _strict_flags(), _project()
    for module in UNTYPED:
        theirs = options.clone_for_module(module)
        assert not any(getattr(theirs, k) == v for k, v in flags.items()), module
    assert "disallow_untyped_defs" in flags
    modules = {f.removesuffix(".py").replace("/", ".") for f in options.files}
    assert {m for m in TYPED if not any(m == f or m.startswith(f + ".") for f in modules)} == set()
    assert not {m for m in UNTYPED if any(m == f or m.startswith(f + ".") for f in modules)}


@pytest.mark.parametrize("module, silenced", [("jsonschema", True), ("scipy.optimize", True), ("psutil", True),
                                              ("pypdfium2", True), ("pandas", False), ("yaml", False)])
def test_only_named_untyped_modules_are_silenced(module, silenced):
    assert _project().clone_for_module(module).ignore_missing_imports is silenced


def test_make_test_runs_mypy_after_ruff():
    lines = subprocess.run(["make", "--no-print-directory", "-n", "test"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    ruff = next(i for i, line in enumerate(lines) if "/ruff check" in line)
    assert lines[ruff + 1].endswith("/mypy")
