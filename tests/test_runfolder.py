"""The run folder has one owner (`evalkit.results.runfolder`): its file names are spelled nowhere else, and every
reader finds a run's member × backend results the same way (`scan`)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from corpus_factory import make_corpus, specs

from evalkit.report import pages as reportpages
from evalkit.results import runfolder
from evalkit.stages.runner import RunOptions, run
from evalkit.status import ERROR, NOTEBOOK_FAILED, SCORED

ROOT = Path(__file__).resolve().parent.parent
NAMES = [*runfolder.FILES, *(p.html for p in reportpages.PAGES)]  # and each report page's HTML


def _code_strings(source: str) -> list[tuple[int, str]]:
    """Every string constant of `source` (f-string parts included) that is not a docstring."""
    tree = ast.parse(source)
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def _sources() -> dict[str, str]:
    files = {p: p.read_text(encoding="utf-8") for folder in ("evalkit", "benchmarks", "tools")
             for p in sorted((ROOT / folder).rglob("*.py")) if p.name != "runfolder.py"}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):  # the notebooks' code cells
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        files[nb] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return {str(p.relative_to(ROOT)): text for p, text in files.items()}


def test_run_folder_file_names_are_spelled_only_in_runfolder():
    found = [f"{path}:{line}: {value!r}" for path, text in _sources().items() for line, value in _code_strings(text)
             if any(name in value for name in NAMES)]
    assert found == [], "run-folder file names belong in evalkit/results/runfolder.py:\n" + "\n".join(found)


def test_every_reader_finds_the_same_member_backend_results(tmp_path):
    from evalkit.compare.sides import load
    from evalkit.report.frames import load_scores
    from evalkit.report.render import _member_rows

    corpus = make_corpus(tmp_path, members=3)
    out = tmp_path / "run"
    run(RunOptions(corpus=corpus, backends=specs("a=fake", "org/b=fake"), out=out, notebooks=False))
    lost = runfolder.member_dir(out, "memos", "m1", "org/b")
    (lost / runfolder.SCORE).unlink()  # as when its notebook died before the runner could say so

    assert [(s.member, s.backend) for s in runfolder.scan(out)] == [
        ("m0", "a"), ("m0", "org/b"), ("m1", "a"), ("m2", "a"), ("m2", "org/b")]
    every = runfolder.task_results(out, "memos")
    assert [(s.member, s.backend, s.status) for s in every] == [
        ("m0", "a", SCORED), ("m0", "org/b", SCORED), ("m1", "a", SCORED), ("m1", "org/b", ERROR),
        ("m2", "a", SCORED), ("m2", "org/b", SCORED)]
    assert every[3].home == lost and not every[3].has_score and every[3].score().cause == NOTEBOOK_FAILED

    members, _ = load_scores(out, "memos")
    pairs = [(s.member, s.backend) for s in every]
    assert list(zip(members.member, members.backend)) == pairs
    assert list(members.status) == [s.status for s in every]
    c = load(out, "memos")
    assert list(zip(c.members.member, c.members.backend)) == pairs
    assert [(r["member"], r["backend"]) for r in _member_rows(out / "memos")] == pairs


def test_run_json_keeps_every_backend_and_member_a_folder_holds(tmp_path):
    runfolder.write_run_json(tmp_path, {"started": "t1", "backends": [{"label": "a", "started": "t1"}],
                                        "members": ["t/m0"]})
    runfolder.write_run_json(tmp_path, {"started": "t2", "backends": [{"label": "b", "started": "t2"}],
                                        "members": ["t/m1"]})
    data = runfolder.read_run_json(tmp_path)
    assert [b.label for b in data.backends] == ["a", "b"] and data.members == ["t/m0", "t/m1"]
    assert data.started == "t2" and runfolder.read_run_json(tmp_path / "none").to_json() == {}


# Calls that read a JSON file whole: outside evalkit/results/ none of them may be handed a run-folder file name.
_JSON_READS = {"read_json", "load", "loads", "_read_dict"}


def _names(node: ast.AST) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def test_no_module_outside_results_reads_a_run_folder_file_as_json():
    """run.json, extraction.json, score.json, judgments.json, summary.json … are read by their typed readers
    (`runfolder.read_*`, `summary.read_summary`), never as a raw dict by the module that wants a figure."""
    constants = {name for name, value in vars(runfolder).items() if name.isupper() and value in runfolder.FILES}
    found = []
    for path in sorted((ROOT / "evalkit").rglob("*.py")):
        if (ROOT / "evalkit" / "results") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            hit = constants & set().union(*(_names(a) for a in node.args), set())
            if func in _JSON_READS and hit:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {func}(… {', '.join(sorted(hit))} …)")
    assert found == [], "read these through their typed readers (evalkit.results):\n" + "\n".join(found)
