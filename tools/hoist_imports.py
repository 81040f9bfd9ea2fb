"""Hoist imports made inside functions to the module's top, where that is safe; say why where it is not.

    python tools/hoist_imports.py [--dry-run]

For each ``evalkit`` or standard-library import inside a function of ``evalkit/`` that has no comment (on its
line or the line above, as tests/test_layers.py asks), it either moves the import to the module's top or adds
a ``# lazy: ...`` comment naming the reason it stays:

* start-up: the module is loaded by ``evalkit --help`` and the import is not (measured with ``-X importtime``);
* cycle: the module imported already imports this one at its top (a static graph of top-level imports), or
  loads ``evalkit.execution.kernels``, whose papermill import loads it again (papermill's entry point);
* a test patches the imported function on its module, so it is read per call;
* the name means something else at module level, or is assigned in the same function.

Then ``ruff check --select I --fix`` sorts the touched modules' import blocks. Idempotent: run it again after a
merge brings new function-level imports.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "evalkit"
KERNELS = "evalkit.execution.kernels"  # its papermill import loads it again (an entry point)
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# module -> names the tests monkeypatch on it (a name bound at import would not see the patch)
PATCHED_RE = re.compile(r"(?:monkeypatch\.setattr\(|\(monkeypatch, )(?:\"([\w.]+)\"|([\w.]+), \"(\w+)\")")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def parents(mod: str) -> list[str]:
    parts = mod.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def said(lines: list[str], lineno: int) -> bool:
    return "#" in lines[lineno - 1] + (lines[lineno - 2] if lineno > 1 else "")


def targets(node: ast.stmt, modules: set[str]) -> list[str]:
    """The evalkit modules an import statement loads (with their parent packages)."""
    out = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    for n in names:
        if n in modules:
            out += [n, *parents(n)]
    return [t for t in dict.fromkeys(out) if t.startswith("evalkit")]


def is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def top_level_imports(tree: ast.Module):
    """Import statements run when the module is imported (not in a function, not under TYPE_CHECKING)."""
    def visit(node):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, FUNCS) or is_type_checking(ch):
                continue
            if isinstance(ch, (ast.Import, ast.ImportFrom)):
                yield ch
            yield from visit(ch)
    yield from visit(tree)


def function_imports(tree: ast.Module):
    """(import statement, the body list holding it, the innermost function) for each import inside a function."""
    def visit(node, func):
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                for ch in value:
                    if isinstance(ch, ast.AST):
                        inner = ch if isinstance(ch, FUNCS) else func
                        if func is not None and isinstance(ch, (ast.Import, ast.ImportFrom)):
                            yield ch, value, func
                        yield from visit(ch, inner)
            elif isinstance(value, ast.AST):
                yield from visit(value, value if isinstance(value, FUNCS) else func)
    yield from visit(tree, None)


def bindings(node: ast.stmt) -> dict[str, str]:
    """name bound -> what it is bound to, e.g. {"sweep": "evalkit.board.sweep:sweep"}."""
    out = {}
    for a in node.names:
        if isinstance(node, ast.Import):
            out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        else:
            out[a.asname or a.name] = f"{node.module}:{a.name}"
    return out


def global_names(tree: ast.Module) -> dict[str, str]:
    """Module-level names: imports (to what they bind) and everything else defined at the top."""
    out: dict[str, str] = {}

    def visit(body):
        for n in body:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                out.update(bindings(n))
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out[n.name] = f"<def {n.name}>"
            elif isinstance(n, (ast.If, ast.Try, ast.With, ast.For)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(n, field, []))
                for h in getattr(n, "handlers", []):
                    visit(h.body)
            elif isinstance(n, ast.ExceptHandler):
                visit(n.body)
            for leaf in ast.walk(n) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)) else ():
                if isinstance(leaf, ast.Name) and isinstance(leaf.ctx, ast.Store):
                    out[leaf.id] = f"<assigned {leaf.id}>"

    visit(tree.body)
    return out


def assigned_in(func: ast.AST, name: str, skip: ast.stmt) -> bool:
    for n in ast.walk(func):
        if n is skip:
            continue
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            return True
        if isinstance(n, (ast.Import, ast.ImportFrom)) and n is not skip and bindings(n).get(name) not in (
                None, bindings(skip)[name]):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name:
            return True
        if isinstance(n, ast.arg) and n.arg == name:
            return True
    return False


def tail(dotted: str) -> str:
    """runfolder.mark_unfinished for evalkit.stages.runner.runfolder.mark_unfinished: a module's last name, and the attribute."""
    return ".".join(dotted.split(".")[-2:])


def startup_modules() -> set[str]:
    """Every module `evalkit --help` imports."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-m", "evalkit.cli", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stderr
    return {line.rsplit("|", 1)[1].strip() for line in err.splitlines() if line.startswith("import time:")} - {
        "package"}


def patched_names() -> set[str]:
    """"module.name" for each attribute a test patches on an evalkit module."""
    out = set()
    for path in (ROOT / "tests").rglob("*.py"):
        src = path.read_text()
        aliases = {}
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    aliases[a.asname or a.name] = a.name
        for dotted, obj, name in PATCHED_RE.findall(src):
            if dotted:
                out.add(dotted)
            else:
                head, *rest = obj.split(".")
                out.add(".".join([aliases.get(head, head), *rest, name]))
    return {p for p in out if p.startswith("evalkit.")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--leave", action="append", default=[], metavar="MODULE:FUNCTION",
                    help="leave this function's body as it is (e.g. evalkit.stages.runner:_run, being rewritten)")
    args = ap.parse_args()
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p): p for p in paths}
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in modules.items()}
    graph: dict[str, set[str]] = defaultdict(set)
    for m, tree in trees.items():
        graph[m].update(parents(m))
        for node in top_level_imports(tree):
            graph[m].update(targets(node, set(modules)))
            roots = [a.name.split(".")[0] for a in node.names] if isinstance(node, ast.Import) else \
                [(node.module or "").split(".")[0]]
            if "papermill" in roots:  # papermill's entry point imports the warm engine
                graph[m].add(KERNELS)

    def path_to(start: str, goal: str) -> list[str] | None:
        seen, stack = {start}, [[start]]
        while stack:
            trail = stack.pop()
            if trail[-1] == goal:
                return trail
            for nxt in graph[trail[-1]]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(trail + [nxt])
        return None

    startup = startup_modules()
    patched = {tail(p) for p in patched_names()}
    stdlib = set(sys.stdlib_module_names)
    report = defaultdict(int)
    touched = []
    for m, path in modules.items():
        tree, lines = trees[m], path.read_text().splitlines()
        top = global_names(tree)
        remove: list[ast.stmt] = []
        add: list[str] = []
        comment: dict[int, str] = {}
        left = [f for f in ast.walk(tree) if isinstance(f, FUNCS[:2]) and f"{m}:{f.name}" in args.leave]
        for node, body, func in function_imports(tree):
            if said(lines, node.lineno) or getattr(node, "level", 0):
                continue
            if any(f.lineno <= node.lineno <= f.end_lineno for f in left):
                continue
            root = (node.module if isinstance(node, ast.ImportFrom) else node.names[0].name).split(".")[0]
            if root != "evalkit" and root not in stdlib:
                continue
            loads = targets(node, set(modules)) if root == "evalkit" else \
                [node.module if isinstance(node, ast.ImportFrom) else a.name for a in node.names]
            bound = bindings(node)
            why = None
            if m in startup and not all(t in startup for t in loads):
                why = "keeps `evalkit --help` fast"
            elif root == "evalkit" and (hit := [v for v in bound.values() if tail(v.replace(":", ".")) in patched]):
                why = f"read per call: tests patch {tail(hit[0].replace(':', '.'))}"
            elif clash := [n for n, v in bound.items() if n in top and top[n] != v]:
                why = f"local: `{clash[0]}` names something else at module level"
            elif clash := [n for n in bound if assigned_in(func, n, node)]:
                why = f"local: `{clash[0]}` is also bound elsewhere in this function"
            elif all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body):
                why = "local: the block holds nothing else"
            elif root == "evalkit" and (loop := next((p for t in loads if (p := path_to(t, m))), None)):
                short = [x.removeprefix("evalkit.") for x in loop]
                why = f"a cycle, {short[0]} imports this module" + (f" (via {', '.join(short[1:-1])})" if len(short) > 2 else "")
            elif root == "evalkit" and any(path_to(t, KERNELS) for t in loads):
                why = "a cycle, papermill's entry point imports execution.kernels back"
            if why:
                comment[node.lineno] = f"# lazy: {why}" if not why.startswith("local:") else f"# {why}"
                report["kept: " + why.split(",")[0].split(":")[0]] += 1
                continue
            for t in loads:
                if root == "evalkit":
                    graph[m].add(t)
            remove.append(node)
            new = [f"{n}:{v}" for n, v in bound.items() if top.get(n) != v]
            top.update(bound)
            if new:
                add.append(ast.unparse(node))
            report["hoisted"] += 1
        if not remove and not comment:
            continue
        touched.append(path)
        drop = {i for node in remove for i in range(node.lineno, node.end_lineno + 1)}
        out: list[str] = []
        heads = [n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        last_import_end = max(heads) if heads else tree.body[0].end_lineno  # else: after the docstring
        if not heads and add:
            add.insert(0, "")
        for i, line in enumerate(lines, 1):
            if i in drop:
                continue
            if i in comment:
                text = f"{line}  {comment[i]}"
                if len(text) > 120:
                    indent = line[: len(line) - len(line.lstrip())]
                    out.append(f"{indent}{comment[i]}")
                    text = line
                line = text
            if not line.strip() and (i - 1 in drop) and out and (
                    not out[-1].strip() or out[-1].rstrip().endswith((":", '"""'))):
                continue  # the blank line that followed a removed import block
            out.append(line)
            if i == last_import_end:
                out.extend(dict.fromkeys(add))
        if not args.dry_run:
            path.write_text("\n".join(out) + "\n")
    for k, v in sorted(report.items()):
        print(f"{k}: {v}")
    if touched and not args.dry_run:
        subprocess.run([str(Path(sys.executable).parent / "ruff"), "check", "--select", "I", "--fix", "-q", *map(str, touched)], cwd=ROOT)


if __name__ == "__main__":
    main()
