"""Loading a corpus: tasks, their members, manifests and truth — strictly.

Layout::

    corpus/<task>/task.yaml
    corpus/<task>/<member>/manifest.yaml
    corpus/<task>/<member>/truth.yaml
    corpus/<task>/<member>/<source file>      (or a pointer under the sources dir)

Every problem is reported as ``file:line: key.path: what is wrong``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import CorpusError, InvalidCorpus
from .models import Manifest, TaskSpec
from .scoring import Scorer, load_scorer
from .yamlio import Locator, format_keypath, load_yaml

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "corpus"
SOURCES_ENV = "EVALKIT_SOURCES"


def _problems(err: ValidationError, loc: Locator, prefix: tuple = ()) -> list[str]:
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


def parse(model: type[BaseModel], path: Path, prefix: tuple = ()) -> tuple[Any, Locator]:
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

    def member_dirs(self) -> list[Path]:
        return sorted(p for p in self.dir.iterdir() if p.is_dir() and (p / "manifest.yaml").exists())

    def members(self) -> list["Member"]:
        return [load_member(self, d) for d in self.member_dirs()]

    def member(self, member_id: str) -> "Member":
        d = self.dir / member_id
        if not (d / "manifest.yaml").is_file():
            known = ", ".join(p.name for p in self.member_dirs())
            raise CorpusError(f"task {self.id!r} has no member {member_id!r} (members: {known})")
        return load_member(self, d)


@dataclass
class Member:
    task: Task
    dir: Path
    manifest: Manifest

    @property
    def id(self) -> str:
        return self.dir.name

    @property
    def key(self) -> str:
        return f"{self.task.id}/{self.id}"

    def truth_path(self, sources: Path | None = None) -> Path:
        """truth.yaml in the member folder, or the manifest's truth pointer under `sources`."""
        ptr = self.manifest.truth
        if ptr is None:
            return self.dir / "truth.yaml"
        from .errors import SourceMissing

        if sources is None or not (Path(sources) / ptr.pointer).is_file():
            raise SourceMissing(
                f"{self.key}: skipped: its truth lives outside the repo ({ptr.pointer}); "
                f"pass --sources DIR or set {SOURCES_ENV} to the folder that holds it"
            )
        return Path(sources) / ptr.pointer

    def load_truth(self, sources: Path | None = None) -> Any:
        """The truth, validated by the task's scorer (raises InvalidCorpus / SourceMissing)."""
        return load_truth(self.task, self.truth_path(sources))


def load_task(task_dir: Path) -> Task:
    task_dir = Path(task_dir)
    spec, loc = parse(TaskSpec, task_dir / "task.yaml")
    if spec.id != task_dir.name:
        raise InvalidCorpus([f"{loc.where(('id',))}: id: {spec.id!r} must equal its folder name {task_dir.name!r}"])
    scorer = load_scorer(spec.scorer, task_dir)
    options: Any = spec.scoring
    if scorer.options_model is not None:
        try:
            options = scorer.options_model.model_validate(spec.scoring)
        except ValidationError as e:
            raise InvalidCorpus(_problems(e, loc, ("scoring",))) from None
    return Task(dir=task_dir, spec=spec, scorer=scorer, options=options)


def load_truth(task: Task, path: Path) -> Any:
    if task.scorer.truth_model is None:
        data, _ = load_yaml(path)
        return data
    truth, _ = parse(task.scorer.truth_model, path)
    return truth


def load_member(task: Task, member_dir: Path) -> Member:
    manifest, loc = parse(Manifest, member_dir / "manifest.yaml")
    problems = []
    if not manifest.source.is_pointer:
        for p in manifest.source.paths:
            if not (member_dir / p).is_file():
                problems.append(f"{loc.where(('source', 'file'))}: source.file: {p!r} not found in {member_dir}")
    if manifest.truth is None and not (member_dir / "truth.yaml").is_file():
        problems.append(f"{member_dir / 'truth.yaml'}: file not found (or give `truth: {{pointer, sha256}}` in the manifest)")
    if problems:
        raise InvalidCorpus(problems)
    member = Member(task=task, dir=member_dir, manifest=manifest)
    if manifest.truth is None:
        member.load_truth()  # validate now: a broken truth file is a corpus error
    return member


def task_dirs(corpus: Path) -> list[Path]:
    corpus = Path(corpus)
    if not corpus.is_dir():
        raise CorpusError(f"{corpus}: corpus folder not found (pass --corpus DIR)")
    return sorted(p for p in corpus.iterdir() if (p / "task.yaml").is_file())


def load_tasks(corpus: Path, only: list[str] | None = None) -> list[Task]:
    dirs = task_dirs(corpus)
    if only:
        by_name = {d.name: d for d in dirs}
        missing = [t for t in only if t not in by_name]
        if missing:
            raise CorpusError(f"{corpus}: no task {', '.join(map(repr, missing))} (tasks: {', '.join(by_name)})")
        dirs = [by_name[t] for t in only]
    return [load_task(d) for d in dirs]


def validate_corpus(corpus: Path, sources: Path | None = None) -> list[str]:
    """Lint every task and member; return every problem found (empty when clean)."""
    from .sources import IntegrityError, SourceMissing, check_integrity  # local: sources imports corpus

    problems: list[str] = []
    try:
        dirs = task_dirs(corpus)
    except CorpusError as e:
        return [str(e)]
    if not dirs:
        return [f"{corpus}: no task folders (each needs a task.yaml)"]
    for tdir in dirs:
        try:
            task = load_task(tdir)
        except InvalidCorpus as e:
            problems.extend(e.problems)
            continue
        except CorpusError as e:
            problems.append(str(e))
            continue
        for mdir in task.member_dirs():
            try:
                member = load_member(task, mdir)
            except InvalidCorpus as e:
                problems.extend(e.problems)
                continue
            except CorpusError as e:
                problems.append(str(e))
                continue
            try:
                check_integrity(member, sources)
                if member.manifest.truth is not None:
                    member.load_truth(sources)
            except SourceMissing:
                pass  # reported by `run` as skipped; not a corpus error
            except IntegrityError as e:
                problems.append(str(e))
            except InvalidCorpus as e:
                problems.extend(e.problems)
    return problems


def sources_dir(explicit: str | Path | None) -> Path | None:
    value = explicit or os.environ.get(SOURCES_ENV)
    return Path(value) if value else None
