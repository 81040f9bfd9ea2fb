"""Loading a corpus: tasks, their members, manifests and truth — strictly.

Layout::

    corpus/<task>/task.yaml
    corpus/<task>/<member>/manifest.yaml
    corpus/<task>/<member>/truth.yaml
    corpus/<task>/<member>/<source file>      (or a pointer under the sources dir)

Every problem is reported as ``file:line: key.path: what is wrong``.

Contained (`evalkit._util.paths`): a task folder and every file of a member resolve inside the corpus
folder (a pointer: inside the sources folder), the scorer file inside its task folder, after
following symlinks; a task or member id given by name is a name, never a path. Checked before
the file is read or imported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from evalkit._util.paths import case_twin, check_name, inside
from evalkit._util.resources import CHECKOUT
from evalkit._util.yamlio import KeyPath, Locator, format_keypath, load_yaml
from evalkit.corpus.outschema import schema_problem
from evalkit.corpus.specs import Manifest, TaskSpec
from evalkit.errors import CorpusError, EvalkitError, InvalidCorpus, SourceMissing, UsageError
from evalkit.scoring import Scorer, load_scorer


def default_corpus() -> Path:
    """``./corpus`` when the current folder has one (a project made by `evalkit init`), else the
    source checkout's bundled corpus (which an installed wheel does not carry)."""
    here, bundled = Path("corpus"), CHECKOUT / "corpus"
    return here.resolve() if here.is_dir() or not bundled.is_dir() else bundled


DEFAULT_CORPUS = default_corpus()
SOURCES_ENV = "EVALKIT_SOURCES"


def _problems(err: ValidationError, loc: Locator, prefix: KeyPath = ()) -> list[str]:
    out = []
    for e in err.errors():
        keypath = prefix + tuple(e["loc"])
        if e["type"] == "extra_forbidden":
            msg = "unknown key (remove it or check its spelling)"
        elif e["type"] == "missing":
            msg = "required key is missing"
        else:
            msg = e["msg"].removeprefix("Value error, ")
        # Pydantic reports model-level checks at the parent path; keep the path readable.
        out.append(f"{loc.where(keypath)}: {format_keypath(keypath)}: {msg}")
    return out


def parse(model: type[BaseModel], path: Path, prefix: KeyPath = ()) -> tuple[Any, Locator]:
    """Load YAML at `path` and validate it against `model` (raise InvalidCorpus)."""
    data, loc = load_yaml(path)
    if prefix:
        for k in prefix:
            data = data.get(k) if isinstance(data, dict) else None
    if not isinstance(data, dict):
        raise InvalidCorpus([f"{loc.where(prefix)}: {format_keypath(prefix)}: expected a mapping"])
    try:
        return model.model_validate(data), loc
    except ValidationError as e:
        raise InvalidCorpus(_problems(e, loc, prefix)) from None


@dataclass
class Task:
    dir: Path
    spec: TaskSpec
    scorer: Scorer
    options: Any  # spec.scoring validated by the scorer

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def corpus(self) -> Path:
        """The corpus folder: everything a member names stays inside it."""
        return self.dir.parent

    def member_dirs(self) -> list[Path]:
        return sorted(p for p in self.dir.iterdir() if p.is_dir() and (p / "manifest.yaml").exists())

    def members(self) -> list[Member]:
        return [load_member(self, d) for d in self.member_dirs()]

    def member(self, member_id: str, *, check_truth: bool = True) -> Member:
        d = self.dir / check_name(member_id, "a member id")
        if not (d / "manifest.yaml").is_file():
            known = ", ".join(p.name for p in self.member_dirs())
            raise CorpusError(f"task {self.id!r} has no member {member_id!r} (members: {known})")
        return load_member(self, d, check_truth=check_truth)


def heldout_keys(corpus: str | Path, tasks: list[str] | None = None) -> set[str]:
    """``task/member`` of every member whose manifest says ``heldout: true``: scored like the rest, reported
    (means, band, check) apart from the tuned members. A member that does not load is left out here (the
    command that needs it says why)."""
    out = set()
    for task in load_tasks(Path(corpus), tasks):
        for d in task.member_dirs():
            try:
                if load_member(task, d).manifest.heldout:
                    out.add(f"{task.id}/{d.name}")
            except EvalkitError:
                continue
    return out


TUNED, HELDOUT = "tuned", "held-out"


def group_of(key: str, heldout: set[str] | frozenset[str]) -> str:
    """Which figures a member's result counts in: the held-out ones or the tuned ones."""
    return HELDOUT if key in heldout else TUNED


@dataclass
class Member:
    task: Task
    dir: Path
    manifest: Manifest
    # (file state, truth) of the last truth validated: a run reads it for the gate, the fake backend and the scorer.
    _truth: tuple[tuple[Path, int, int], Any] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def id(self) -> str:
        return self.dir.name

    @property
    def key(self) -> str:
        return f"{self.task.id}/{self.id}"

    def file(self, rel: str, what: str) -> Path:
        """A file of the member folder, refused (`Escape`) unless it resolves inside the corpus folder."""
        return inside(self.task.corpus, self.dir / rel, what, "the corpus folder")

    def truth_path(self, sources: Path | None = None) -> Path:
        """truth.yaml in the member folder, or the manifest's truth pointer under `sources`."""
        ptr = self.manifest.truth
        if ptr is None:
            return self.file("truth.yaml", "the truth")

        path = None if sources is None else inside(sources, Path(sources) / ptr.pointer, "the truth pointer",
                                                   "the sources folder")
        if path is None or not path.is_file():
            raise SourceMissing(
                f"{self.key}: skipped: its truth lives outside the repo ({ptr.pointer}); "
                f"pass --sources DIR or set {SOURCES_ENV} to the folder that holds it"
            )
        return path

    def load_truth(self, sources: Path | None = None) -> Any:
        """The truth, validated by the task's scorer (raises InvalidCorpus / SourceMissing; UsageError for a
        task without truth)."""
        if not self.task.spec.truth:
            raise UsageError(f"{self.key}: task {self.task.id!r} has no truth (truth: false in its task.yaml): "
                             "score it against another backend with --reference LABEL")
        path = self.truth_path(sources)
        try:
            stat = path.stat()
        except OSError:
            return load_truth(self.task, path)  # which says what is wrong
        state = (path, stat.st_mtime_ns, stat.st_size)
        if self._truth is None or self._truth[0] != state:
            self._truth = (state, load_truth(self.task, path))
        return self._truth[1]


def load_task(task_dir: Path) -> Task:
    """The task in `task_dir` (a folder of its corpus), its scorer loaded and its options validated."""
    task_dir = inside(Path(task_dir).parent, task_dir, "a task folder", "its corpus folder")
    check_id(task_dir, "a task id")
    spec_file = inside(task_dir, task_dir / "task.yaml", "task.yaml", "its task folder")
    spec, loc = _parse_task_yaml(spec_file)
    if spec.id != task_dir.name:
        raise InvalidCorpus([f"{loc.where(('id',))}: id: {spec.id!r} must equal its folder name {task_dir.name!r}"])
    if bad := schema_problem(spec.output_schema):
        raise InvalidCorpus([f"{loc.where(('schema',))}: schema: not a valid JSON Schema (Draft 2020-12): {bad}"])
    scorer = load_scorer(spec.scorer, task_dir)
    options: Any = spec.scoring
    if scorer.options_model is not None:
        try:
            options = scorer.options_model.model_validate(spec.scoring)
        except ValidationError as e:
            raise InvalidCorpus(_problems(e, loc, ("scoring",))) from None
    return Task(dir=task_dir, spec=spec, scorer=scorer, options=options)


def _parse_task_yaml(spec_file: Path) -> tuple[TaskSpec, Locator]:
    """task.yaml parsed once per process while it is unchanged (its size and mtime): a sweep runs each of a
    task's members on its own, a few worker processes for them all. (The scorer is loaded afresh each time:
    a local one may change beside an unchanged task.yaml.)"""
    try:
        stat = spec_file.stat()
    except OSError:
        return parse(TaskSpec, spec_file)  # which says what is wrong
    return _parsed(spec_file, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _parsed(spec_file: Path, mtime_ns: int, size: int) -> tuple[TaskSpec, Locator]:
    return parse(TaskSpec, spec_file)


def find_task(corpus: Path, task_id: str) -> Task:
    """The task `task_id` of `corpus`; the id is a name, never a path (`Escape`)."""
    return load_task(Path(corpus) / check_name(task_id, "a task id"))


def load_truth(task: Task, path: Path) -> Any:
    if task.scorer.truth_model is None:
        data, _ = load_yaml(path)
        return data
    truth, _ = parse(task.scorer.truth_model, path)
    return truth


def check_id(folder: Path, what: str) -> str:
    """The folder's name as an id: a name of visible characters (`check_name`), and no sibling that differs
    from it only by case or Unicode form (`case_twin`); else `CorpusError` naming both."""
    name = check_name(folder.name, what)
    if (twin := case_twin(folder.parent, name)) and (folder.parent / twin).is_dir():
        raise CorpusError(f"{folder.parent}: {what} {name!r} and {twin!r} differ only by case or Unicode form "
                          "(one folder on a case-insensitive disk, one id to a reader); rename one of them")
    return name


def load_member(task: Task, member_dir: Path, *, check_truth: bool = True) -> Member:
    """The member in `member_dir`, its files checked. `check_truth=False`: its truth file is not read here
    (a sweep only hashes it: the member's own run validates it)."""
    inside(task.corpus, member_dir, "a member folder", "the corpus folder")
    check_id(member_dir, "a member id")
    manifest, loc = parse(Manifest, inside(task.corpus, member_dir / "manifest.yaml", "the manifest",
                                           "the corpus folder"))
    problems = []
    if not manifest.source.is_pointer:
        for p in manifest.source.paths:
            if not (member_dir / p).is_file():
                problems.append(f"{loc.where(('source', 'file'))}: source.file: {p!r} not found in {member_dir}")
    if task.spec.truth and manifest.truth is None and not (member_dir / "truth.yaml").is_file():
        problems.append(f"{member_dir / 'truth.yaml'}: file not found (or give `truth: {{pointer, sha256}}` in the manifest)")
    if task.spec.truth and manifest.truth_provenance is None:
        problems.append(f"{loc.where(('truth_provenance',))}: truth_provenance: required: who wrote the truth and "
                        "how it was checked (docs/authoring.md)")
    if problems:
        raise InvalidCorpus(problems)
    member = Member(task=task, dir=member_dir, manifest=manifest)
    if manifest.truth is None and task.spec.truth:
        if check_truth:
            member.load_truth()  # validate now: a broken truth file is a corpus error
        else:
            member.truth_path()  # inside the corpus folder, or refused now: before anything reads it
    return member


def task_dirs(corpus: Path) -> list[Path]:
    corpus = Path(corpus)
    if not corpus.is_dir():
        raise CorpusError(f"{corpus}: corpus folder not found (pass --corpus DIR)")
    return sorted(p for p in corpus.iterdir() if (p / "task.yaml").is_file())


def load_tasks(corpus: Path, only: list[str] | None = None) -> list[Task]:
    dirs = task_dirs(corpus)
    if only:
        only = [check_name(t, "a task id") for t in only]
        by_name = {d.name: d for d in dirs}
        missing = [t for t in only if t not in by_name]
        if missing:
            raise CorpusError(f"{corpus}: no task {', '.join(map(repr, missing))} (tasks: {', '.join(by_name)})")
        dirs = [by_name[t] for t in only]
    return [load_task(d) for d in dirs]


def sources_dir(explicit: str | Path | None) -> Path | None:
    value = explicit or os.environ.get(SOURCES_ENV)
    return Path(value) if value else None
