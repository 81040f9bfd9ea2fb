"""Containment (issue 10, item 4): what a corpus or a command line names stays inside the corpus, the
sources folder or the run folder, or is refused with exit 3 before anything is read, imported or written.

Each escape case plants something outside (a file whose text must never be read, a module that would
write a marker file if imported) and checks: exit 3, one line naming the file or value and the rule,
the outside file never opened (an audit hook sees every ``open``), the marker never written, and the
whole test folder byte-for-byte as it was (no run folder, no sidecar, nothing outside).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from corpus_factory import cli, make_corpus, write_yaml

from evalkit.backends import BackendSpec, check_labels, folder_label, label_folder
from evalkit.errors import Escape

SECRET = "OUTSIDE-SECRET-5519"
# A module that, if ever imported, leaves a marker file beside itself (and is a valid scorer).
EVIL = ('import pathlib\npathlib.Path(__file__).with_name("IMPORTED").write_text("x")\n'
        "from evalkit.scoring.fields import SCORER as S\n")

_opened: list[str] | None = None


def _audit(event: str, args) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@pytest.fixture
def opened():
    """Every path opened while the test runs (by this process: the refusals happen before any worker)."""
    global _opened
    _opened = []
    yield _opened
    _opened = None


def snapshot(root: Path) -> dict[str, str]:
    """Every file and link under `root` with its bytes' sha256 (a link: its target), folders too."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = "dir"
    return out


def refused(res, *needles: str) -> str:
    """Exit 3 with one evalkit line naming each needle (file/value and rule), no traceback."""
    assert res.exit_code == 3, res.output
    lines = [line for line in res.output.splitlines() if line.startswith("evalkit:")]
    assert len(lines) == 1, res.output
    assert "Traceback" not in res.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def never_opened(opened: list[str], outside: Path) -> None:
    root = os.path.realpath(outside)
    hits = [p for p in opened if os.path.realpath(p) == root or os.path.realpath(p).startswith(root + os.sep)]
    assert not hits, hits


@pytest.fixture
def world(tmp_path):
    """A one-task corpus (``memos`` with member ``m0``), an empty sources folder and an ``outside`` folder."""
    corpus = make_corpus(tmp_path, members=1)
    (tmp_path / "sources").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    return tmp_path, corpus, corpus / "memos" / "m0", outside


def edit_manifest(member: Path, **changes) -> None:
    path = member / "manifest.yaml"
    write_yaml(path, {**yaml.safe_load(path.read_text()), **changes})


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_refusal(tmp_path, corpus, opened, outside, needles, *, sources=None, sweep=True):
    """`validate`, `run` and `sweep` all refuse, read nothing outside, and write nothing anywhere.

    (`sweep=False` for a manifest that fails validation: a sweep records such a member as failed and
    goes on with the others — its exit code is the sweep's, not containment's.)"""
    before = snapshot(tmp_path)
    opened.clear()  # from here on: the commands alone
    src = ["--sources", sources] if sources else []
    problems = cli("validate", "--corpus", corpus, *src)
    assert problems.exit_code == 3 and all(n in problems.output for n in needles), problems.output
    refused(cli("run", "--corpus", corpus, *src, "--backend", "fake", "--out", tmp_path / "run", "--no-html"), *needles)
    if sweep:
        refused(cli("sweep", "--corpus", corpus, *src, "--backend", "fake", "--out", tmp_path / "sw",
                    "--no-notebooks"), *needles)
    never_opened(opened, outside)
    assert snapshot(tmp_path) == before  # no run folder, no sidecar, nothing outside


# ----------------------------------------------------------------------------- the corpus's own files


def test_source_symlinked_to_a_file_outside_is_refused(world, opened):
    tmp_path, corpus, member, outside = world
    (outside / "doc.md").write_text(f"Account ACC-000 {SECRET} pays a rate of 0.5.\n")
    (member / "doc.md").unlink()
    (member / "doc.md").symlink_to(outside / "doc.md")
    edit_manifest(member, sha256=sha(outside / "doc.md"))  # pinned to the outside bytes: still refused
    check_refusal(tmp_path, corpus, opened, outside, [f"{member / 'doc.md'}: the source", "the corpus folder"])


def test_truth_symlinked_to_a_file_outside_is_refused(world, opened):
    tmp_path, corpus, member, outside = world
    (outside / "truth.yaml").write_text(f"record: {{account_id: {SECRET}, rate: 0.5}}\n")
    (member / "truth.yaml").unlink()
    (member / "truth.yaml").symlink_to(outside / "truth.yaml")
    check_refusal(tmp_path, corpus, opened, outside, [f"{member / 'truth.yaml'}: the truth", "the corpus folder"])


def test_member_folder_symlinked_outside_is_refused(world, opened):
    tmp_path, corpus, member, outside = world
    member.rename(outside / "m0")
    member.symlink_to(outside / "m0", target_is_directory=True)
    check_refusal(tmp_path, corpus, opened, outside, [f"{member}: a member folder", "the corpus folder"])


def _truth_pointer(member: Path, pointer: str, target: Path) -> None:
    target.write_text(f"record: {{account_id: {SECRET}, rate: 0.5}}\n")
    (member / "truth.yaml").unlink()
    edit_manifest(member, truth={"pointer": pointer, "sha256": sha(target)})


def test_truth_pointer_climbing_out_of_the_sources_folder_is_refused(world, opened):
    tmp_path, corpus, member, outside = world
    _truth_pointer(member, "../outside/truth.yaml", outside / "truth.yaml")
    check_refusal(tmp_path, corpus, opened, outside,
                  ["manifest.yaml", "truth.pointer: '../outside/truth.yaml' must be a relative path inside its folder"],
                  sources=tmp_path / "sources", sweep=False)


def test_absolute_truth_pointer_is_refused(world, opened):
    tmp_path, corpus, member, outside = world
    _truth_pointer(member, str(outside / "truth.yaml"), outside / "truth.yaml")
    check_refusal(tmp_path, corpus, opened, outside,
                  ["manifest.yaml", f"truth.pointer: '{outside / 'truth.yaml'}' must be a relative path"],
                  sources=tmp_path / "sources", sweep=False)


def test_truth_pointer_through_a_symlink_in_the_sources_folder_is_refused(world, opened):
    tmp_path, corpus, member, outside = world
    _truth_pointer(member, "memos/truth.yaml", outside / "truth.yaml")
    (tmp_path / "sources" / "memos").mkdir()
    (tmp_path / "sources" / "memos" / "truth.yaml").symlink_to(outside / "truth.yaml")
    check_refusal(tmp_path, corpus, opened, outside, ["the truth pointer", "the sources folder"],
                  sources=tmp_path / "sources")


def test_source_pointer_through_a_symlink_in_the_sources_folder_is_refused(world, opened):
    tmp_path, corpus, member, outside = world
    (outside / "doc.md").write_text(f"Account ACC-000 {SECRET} pays a rate of 0.5.\n")
    (tmp_path / "sources" / "memos").mkdir()
    (tmp_path / "sources" / "memos" / "doc.md").symlink_to(outside / "doc.md")
    (member / "doc.md").unlink()
    edit_manifest(member, source={"pointer": "memos/doc.md"}, sha256=sha(outside / "doc.md"))
    check_refusal(tmp_path, corpus, opened, outside,
                  [f"{tmp_path / 'sources' / 'memos' / 'doc.md'}: the source pointer", "the sources folder"],
                  sources=tmp_path / "sources")


def test_scorer_outside_its_task_folder_is_never_imported(world, opened):
    tmp_path, corpus, member, outside = world
    (outside / "x.py").write_text(EVIL)
    task_yaml = corpus / "memos" / "task.yaml"
    write_yaml(task_yaml, {**yaml.safe_load(task_yaml.read_text()), "scorer": "../../outside/x.py:S"})
    check_refusal(tmp_path, corpus, opened, outside, ["the scorer file", "its task folder"])
    assert not (outside / "IMPORTED").exists()
    # The same file reached through a symlink beside task.yaml is refused too.
    (corpus / "memos" / "x.py").symlink_to(outside / "x.py")
    write_yaml(task_yaml, {**yaml.safe_load(task_yaml.read_text()), "scorer": "x.py:S"})
    check_refusal(tmp_path, corpus, opened, outside, [f"{corpus / 'memos' / 'x.py'}: the scorer file"])
    assert not (outside / "IMPORTED").exists()


def test_scorer_package_reaching_outside_its_task_folder_is_never_imported(world, opened):
    """``scorer: DIR/:ATTR``: the package folder and every file and folder in it stay inside the task folder."""
    tmp_path, corpus, member, outside = world
    task_yaml = corpus / "memos" / "task.yaml"
    (outside / "pkg").mkdir()
    (outside / "pkg" / "__init__.py").write_text(EVIL)
    write_yaml(task_yaml, {**yaml.safe_load(task_yaml.read_text()), "scorer": "../../outside/pkg/:S"})
    check_refusal(tmp_path, corpus, opened, outside, ["the scorer package", "its task folder"])
    (corpus / "memos" / "pkg").symlink_to(outside / "pkg", target_is_directory=True)
    write_yaml(task_yaml, {**yaml.safe_load(task_yaml.read_text()), "scorer": "pkg/:S"})
    check_refusal(tmp_path, corpus, opened, outside, [f"{corpus / 'memos' / 'pkg'}: the scorer package"])
    assert not (outside / "pkg" / "IMPORTED").exists()
    # A package inside whose submodule (or subpackage) is a link to outside: refused before its
    # __init__ runs, though only the submodule would have reached out.
    (corpus / "memos" / "pkg").unlink()
    inner = corpus / "memos" / "pkg"
    inner.mkdir()
    (inner / "__init__.py").write_text(EVIL.replace("fields import SCORER as S", "fields import SCORER as S\n"
                                                    "from . import helper  # noqa"))
    (outside / "helper.py").write_text(EVIL)
    (inner / "helper.py").symlink_to(outside / "helper.py")
    check_refusal(tmp_path, corpus, opened, outside, [f"{inner / 'helper.py'}: a file of the scorer package",
                                                      "its task folder"])
    (inner / "helper.py").unlink()
    (inner / "sub").symlink_to(outside / "pkg", target_is_directory=True)
    check_refusal(tmp_path, corpus, opened, outside, [f"{inner / 'sub'}: a file of the scorer package"])
    assert not (inner / "IMPORTED").exists() and not (outside / "IMPORTED").exists()
    assert not (outside / "pkg" / "IMPORTED").exists()


def _outside_task(root: Path) -> Path:
    """A task folder ``x`` under `root` whose scorer leaves a marker when imported, with a member ``m``."""
    task = root / "x"
    write_yaml(task / "task.yaml", {"id": "x", "description": "d", "prompt": {"system": "s", "user": "{document}"},
                                    "schema": {"type": "object"}, "scorer": "evil.py:S"})
    (task / "evil.py").write_text(EVIL)
    (task / "m").mkdir()
    return task


def test_publish_of_a_path_imports_nothing(world, opened):
    tmp_path, corpus, member, outside = world
    task = _outside_task(tmp_path)
    before = snapshot(tmp_path)
    opened.clear()  # from here on: the commands alone
    for ref in ("../x/m", "memos/../../x/m", "../../x"):
        refused(cli("publish", ref, "--corpus", corpus, "--board", tmp_path / "byom.json"), repr(ref), "not a path")
    assert not (task / "IMPORTED").exists()
    never_opened(opened, task)
    assert snapshot(tmp_path) == before


def test_scoreboard_keys_are_names_not_paths(world, opened):
    """A scoreboard is a file too: `rescore` never loads a task its keys would reach outside the corpus."""
    tmp_path, corpus, member, outside = world
    task = _outside_task(tmp_path)
    board = corpus / "scoreboard.json"
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "extraction.json").write_text('{"record": {}}')
    board.write_text(json.dumps({"schema_version": 1, "tasks": {"../x": {"m": {"fake": {"run_folder": "../home"}}}}}))
    opened.clear()
    res = cli("rescore", "--corpus", corpus)
    assert res.exit_code == 3 and "'../x': a task id must be a name" in res.output, res.output
    assert not (task / "IMPORTED").exists()
    never_opened(opened, task)


# ----------------------------------------------------------------------------- command-line names


def test_backend_name_that_is_a_path_writes_nothing(world, opened):
    tmp_path, corpus, member, outside = world
    before = snapshot(tmp_path)
    opened.clear()  # from here on: the commands alone
    for name in ("../../escaped", "../../../../escaped", "/abs", ".hidden", "a//b", "a b"):
        res = cli("run", "--corpus", corpus, "--backend", f"{name}=fake", "--out", tmp_path / "run", "--no-html")
        refused(res, f"backend name {name!r}", "letters, digits")
    res = cli("sweep", "--corpus", corpus, "--backend", "../../escaped=fake", "--out", tmp_path / "sw", "--no-notebooks")
    refused(res, "backend name '../../escaped'")
    assert snapshot(tmp_path) == before


def test_task_id_that_is_a_path_is_refused(world, opened):
    tmp_path, corpus, member, outside = world
    task = _outside_task(tmp_path)
    (tmp_path / "run").mkdir()
    before = snapshot(tmp_path)
    opened.clear()  # from here on: the commands alone
    refused(cli("run", "--corpus", corpus, "--task", "../x", "--backend", "fake", "--out", tmp_path / "r2"),
            "'../x': a task id must be a name")
    refused(cli("sweep", "--corpus", corpus, "--task", "../x", "--backend", "fake", "--out", tmp_path / "sw"),
            "'../x': a task id must be a name")
    # compare used to write <run>/../x/compare.ipynb (and read <run>/../x) before it failed
    refused(cli("compare", tmp_path / "run", "--task", "../x"), "'../x': a task id must be a name")
    assert not (task / "IMPORTED").exists()
    never_opened(opened, task)
    assert snapshot(tmp_path) == before


def test_member_id_that_is_a_path_is_refused(world, opened):
    tmp_path, corpus, member, outside = world
    (outside / "x").mkdir()
    (outside / "x" / "manifest.yaml").write_text(f"title: {SECRET}\n")
    before = snapshot(tmp_path)
    opened.clear()  # from here on: the commands alone
    for only in ("../../outside/x", "memos/../../outside/x", "memos/m0/x"):
        refused(cli("run", "--corpus", corpus, "--only", only, "--backend", "fake", "--out", tmp_path / "run"),
                repr(only), "MEMBER or TASK/MEMBER")
        refused(cli("sweep", "--corpus", corpus, "--only", only, "--backend", "fake", "--out", tmp_path / "sw"),
                repr(only), "MEMBER or TASK/MEMBER")
    never_opened(opened, outside)
    assert snapshot(tmp_path) == before


def test_org_model_label_runs_end_to_end_under_a_safe_folder(world):
    tmp_path, corpus, member, outside = world
    board = tmp_path / "board.json"
    res = cli("run", "--corpus", corpus, "--backend", "org/model=fake", "--out", tmp_path / "runs" / "r",
              "--update-scoreboard", "--board", board)
    assert res.exit_code == 0, res.output
    assert "Scoreboard: 1 entry written" in res.output
    run = tmp_path / "runs" / "r"
    home = run / "memos" / "m0" / "org__model"
    assert not (run / "memos" / "m0" / "org").exists()
    for name in ("extraction.json", "score.json"):
        assert json.loads((home / name).read_text())["backend"]["label"] == "org/model"
    entry = json.loads(board.read_text())["tasks"]["memos"]["m0"]
    assert list(entry) == ["org/model"] and entry["org/model"]["run"]["backend"]["label"] == "org/model"
    assert entry["org/model"]["run_folder"].endswith("runs/r/memos/m0/org__model")
    history = [json.loads(line) for line in (tmp_path / "runs" / "index.jsonl").read_text().splitlines()]
    assert [h["backend"] for h in history] == ["org/model"]
    index = (run / "index.html").read_text()
    assert "<td>org/model</td>" in index and "m0/org__model/score.html" in index
    from evalkit.report.frames import load_scores

    members, items = load_scores(run, "memos")
    assert list(members["backend"]) == ["org/model"] and set(items["backend"]) == {"org/model"}
    assert list(members["path"]) == ["m0/org__model/score.json"]


def test_org_model_label_sweeps_and_is_current_on_rerun(world):
    tmp_path, corpus, member, outside = world
    out = tmp_path / "sw"
    args = ("sweep", "--corpus", corpus, "--backend", "org/model=fake", "--out", out, "--no-notebooks",
            "--update-scoreboard", "--board", tmp_path / "board.json")
    first = cli(*args)
    assert first.exit_code == 0 and "1 run, 0 current" in first.output, first.output
    assert (out / "members" / "memos" / "m0" / "memos" / "m0" / "org__model" / "score.json").is_file()
    assert list(json.loads((tmp_path / "board.json").read_text())["tasks"]["memos"]["m0"]) == ["org/model"]
    again = cli(*args)
    assert again.exit_code == 0 and "0 run, 1 current" in again.output, again.output


def test_two_labels_sharing_a_folder_are_refused(world):
    tmp_path, corpus, member, outside = world
    before = snapshot(tmp_path)
    res = cli("run", "--corpus", corpus, "--backend", "org/model=fake", "--backend", "org__model=fake",
              "--out", tmp_path / "run")
    refused(res, "'org/model' and 'org__model'", "'org__model'")
    assert snapshot(tmp_path) == before


def test_label_rule_and_folder_mapping():
    assert BackendSpec.parse("org/model=fake") == BackendSpec("org/model", "fake")
    assert BackendSpec.parse("gemma-3.270m_q4=fake") == BackendSpec("gemma-3.270m_q4", "fake")
    assert BackendSpec.parse("openai:url=http://x/v1") == BackendSpec("openai", "openai", {"url": "http://x/v1"})
    for bad in ("../x", "a/../b", "/a", "a/", "-a", ".a", "a b", "a\\b", "é"):
        with pytest.raises(Escape, match="backend name"):
            BackendSpec.parse(f"{bad}=fake")
    assert label_folder("org/model") == "org__model" and label_folder("a/b/c") == "a__b__c"
    with pytest.raises(Escape, match="both write to folder 'a__b'"):
        check_labels(["a/b", "a__b"])
    with pytest.raises(Escape, match="both write to folder 'x'"):
        check_labels(["x", "x"])
    assert check_labels(["a/b", "a_b"]) == ["a/b", "a_b"]
    # Readers take the label from the file only when it belongs to the folder.
    assert folder_label(Path("r/m/org__model"), {"backend": {"label": "org/model"}}) == "org/model"
    assert folder_label(Path("r/m/org__model"), {"backend": {"label": "other"}}) == "org__model"
    assert folder_label(Path("r/m/fake"), None) == "fake"


# ----------------------------------------------------------------------------- validate writes nothing


def test_validate_never_writes_into_a_corpus(world):
    tmp_path, corpus, member, outside = world
    manifest = yaml.safe_load((member / "manifest.yaml").read_text())
    del manifest["sha256"]  # a private member: the first *run* seeds source.sha256
    write_yaml(member / "manifest.yaml", manifest)
    before = snapshot(tmp_path)
    assert cli("validate", "--corpus", corpus).exit_code == 0
    assert snapshot(tmp_path) == before
    assert cli("run", "--corpus", corpus, "--backend", "fake", "--out", tmp_path / "run", "--no-html").exit_code == 0
    assert (member / "source.sha256").is_file()


def test_bundled_corpus_still_validates_and_is_left_as_it_was():
    from evalkit.corpus.tasks import DEFAULT_CORPUS
    from evalkit.stages.validate import validate_corpus

    sources = Path(os.environ.get("EVALKIT_SOURCES") or "/nonexistent")
    before = snapshot(DEFAULT_CORPUS)
    assert validate_corpus(DEFAULT_CORPUS, None) == []
    if sources.is_dir():
        assert validate_corpus(DEFAULT_CORPUS, sources) == []
    assert snapshot(DEFAULT_CORPUS) == before


def test_a_folder_whose_name_extends_the_roots_is_outside_it(tmp_path):
    from evalkit._util.paths import inside

    (tmp_path / "corpus" / "a").mkdir(parents=True)
    (tmp_path / "corpus2").mkdir()
    (tmp_path / "corpus2" / "x.md").write_text("x")
    with pytest.raises(Escape, match="corpus2"):
        inside(tmp_path / "corpus", tmp_path / "corpus2" / "x.md", "the source", "the corpus folder")
    with pytest.raises(Escape):
        inside(tmp_path / "corpus", tmp_path / "corpus" / ".." / "corpus2", "the source", "the corpus folder")
    assert inside(tmp_path / "corpus", tmp_path / "corpus" / "a", "x", "y") == tmp_path / "corpus" / "a"
    assert inside(tmp_path / "corpus", tmp_path / "corpus", "x", "y") == tmp_path / "corpus"
    assert inside("/", tmp_path / "corpus2", "x", "y") == tmp_path / "corpus2"
