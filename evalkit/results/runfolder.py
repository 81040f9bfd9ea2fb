"""The run folder: every file a run leaves, where it lives, and the one reader and writer of each.

::

    <run>/run.json                       parameters and versions; every backend and member the folder holds
    <run>/summary.json                   per task and backend: counts, means with CIs, calls (`evalkit.results.summary`)
    <run>/judge.json                     the judge phase's figures (--judge)
    <run>/index.html                     links every page (`evalkit.report.render`)
    <run>/diff.ipynb|.html               `evalkit diff OTHER_RUN <run>`: this run against another (`evalkit.compare.diff`)
    <run>/.evalkit.lock, .evalkit.lock.json   held while a run writes the folder (`hold`)
    <run>/.evalkit.unfinished            the last run into the folder did not finish: the next one resumes it
    <run>/<task>/report.ipynb|.html      the task report; compare.ipynb|.html (`evalkit compare`)
    <run>/<task>/pairwise.json           pairwise judging (--judge-mode pairwise|both)
    <run>/<task>/<member>/<backend>/     one member × backend (`member_dir`): extraction.json (the record
                                         and its run block), score.json (the item table), judgments.json
                                         (--judge), extract.ipynb|.html, score.ipynb|.html
    <run>/<task>/<member>/<backend>/samples/<i>/   sample i > 0 of ``--samples K``: its extraction.json and
                                         score.json (scored in-process); sample 0 is the folder's own
                                         files, so a run without --samples (K = 1) writes exactly what it did

A sweep folder holds ``sweep.json`` and one run folder per member, ``members/<task>/<member>/``; while a
sweep runs, ``sweep.members.jsonl`` beside sweep.json records each member it finished (one line each,
appended), and the sweep's last sweep.json takes them in and removes it (`read_sweep_json` reads both).

The backend's folder is its label's safe form (`backends.label_folder`: ``org/model`` → ``org__model``);
extraction.json and score.json record the label itself, and readers take it from there
(`backends.folder_label`). JSON files are written whole, with sorted keys (`evalkit._util.jsonio`): the same
inputs give the same bytes. run.json, extraction.json, score.json and judgments.json are read and written as
their typed records (`evalkit.results.records`: `RunRecord`, `ExtractionRecord`, `ScoreRecord`, `JudgmentsRecord`). `scan` is the one way to find the results a folder holds.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from evalkit._util.interrupt import on_stop
from evalkit._util.jsonio import DISK_ERRNOS, canonical_sha, disk_full, line, read_json, write_json
from evalkit._util.paths import check_name
from evalkit.backends import folder_label, label_folder
from evalkit.backends.spec import redacted_command
from evalkit.errors import CorpusError, RunLocked
from evalkit.results.records import (
    BatchesRecord,
    DiffRecord,
    ExtractionRecord,
    JudgeRecord,
    JudgmentsRecord,
    LockNote,
    PairwiseRecord,
    Record,
    RunRecord,
    ScoreRecord,
)
from evalkit.results.samples import headline
from evalkit.status import NOTEBOOK_FAILED, SCORED, Failed, failure_of, status_of

if TYPE_CHECKING:  # for the annotations only: reading a run folder loads no corpus and no scorer (start-up cost)
    from evalkit.corpus.tasks import Member
    from evalkit.scoring.base import ScoreResult

__all__ = [
    "RUN_JSON", "SUMMARY_JSON", "JUDGE_JSON", "INDEX", "LOCK", "LOCK_HOLDER", "UNFINISHED", "REPORT", "COMPARE", "DIFF", "DIFF_JSON", "PAIRWISE",
    "EXTRACTION", "SCORE", "JUDGMENTS", "EXTRACT_NB", "SCORE_NB", "SWEEP_JSON", "SWEEP_LOG", "FILES", "page",
    "task_dir", "member_dir", "sweep_member_dir", "sweep_of", "Home", "read_extraction", "write_extraction", "read_score",
    "write_score", "read_judgments", "write_judgments", "clear_judgments", "read_pairwise", "write_pairwise",
    "clear_pairwise", "write_judge_json", "read_run_json", "write_run_json", "merge_run_json", "read_sweep_json",
    "write_sweep_json", "append_sweep_members", "is_unfinished", "mark_unfinished", "mark_finished", "RunLocked", "hold",
    "Scored", "scan", "task_results", "BATCHES", "read_batches", "write_batches", "clear_batches", "SAMPLES", "sample_dir",
    "sample_base", "sample_dirs", "read_sample_scores", "clear_samples", "read_diff", "write_diff", "iter_scan",
]

RUN_JSON = "run.json"
SUMMARY_JSON = "summary.json"
JUDGE_JSON = "judge.json"
INDEX = "index.html"
LOCK = ".evalkit.lock"
LOCK_HOLDER = ".evalkit.lock.json"  # who holds the lock (the lock file itself may be truncated by contenders)
UNFINISHED = ".evalkit.unfinished"
REPORT = "report.ipynb"
COMPARE = "compare.ipynb"
DIFF = "diff.ipynb"
DIFF_JSON = "diff.json"  # `evalkit diff`'s `diff_runs`, in RUN_B: computed once, printed, and shown by diff.ipynb
PAIRWISE = "pairwise.json"
EXTRACTION = "extraction.json"
SCORE = "score.json"
JUDGMENTS = "judgments.json"
EXTRACT_NB = "extract.ipynb"
SCORE_NB = "score.ipynb"
SWEEP_JSON = "sweep.json"
SWEEP_LOG = "sweep.members.jsonl"  # members a sweep finished since sweep.json was last written whole, a line each
SWEEP_MEMBERS = "members"
SAMPLES = "samples"  # --samples K: <home>/samples/<i>/ holds sample i > 0 (sample 0 is <home> itself)
BATCHES = ".evalkit.batches.json"  # --batch: the provider batches a run submitted, so a resumed run polls them
# Every file name of a run folder; which notebooks are report pages is `evalkit.report.pages.PAGES`.
FILES = (RUN_JSON, SUMMARY_JSON, JUDGE_JSON, INDEX, LOCK, LOCK_HOLDER, UNFINISHED, PAIRWISE, EXTRACTION, SCORE,
         JUDGMENTS, DIFF_JSON, SWEEP_JSON, SWEEP_LOG, BATCHES, EXTRACT_NB, SCORE_NB, REPORT, COMPARE, DIFF)


def page(notebook: str | Path) -> Path:
    """The HTML page of a notebook, beside it: ``score.ipynb`` → ``score.html``."""
    return Path(notebook).with_suffix(".html")


# --------------------------------------------------------------------------- where things live


def task_dir(run_dir: str | Path, task: str) -> Path:
    """``<run>/<task>/``; the id is a name, never a path (`evalkit._util.paths.check_name`)."""
    return Path(run_dir) / check_name(task, "a task id")


def member_dir(run_dir: str | Path, task: str, member: str, label: str) -> Path:
    """Where one member × backend lives in a run folder: ``<run>/<task>/<member>/<label's folder>/``."""
    return Path(run_dir) / task / member / label_folder(label)


def sweep_member_dir(sweep_dir: str | Path, task: str, member: str) -> Path:
    """The run folder of one member of a sweep: ``<sweep>/members/<task>/<member>/``."""
    return Path(sweep_dir) / SWEEP_MEMBERS / task / member


def sweep_of(path: str | Path) -> Path | None:
    """The sweep folder `path` is or lies in (the nearest one holding sweep.json), if any."""
    return _nearest(Path(path), SWEEP_JSON)


def _nearest(path: Path, name: str, holds: Callable[[Path, str], bool] = lambda p, name: (p / name).is_file()
             ) -> Path | None:
    """`path` or the nearest folder above it holding a file `name` (`holds` says whether a folder does)."""
    return next((p for p in (path, *path.parents) if holds(p, name)), None)


def sibling(home: str | Path, label: str) -> Path:
    """The folder of the same member under another backend's label (``--reference``)."""
    return Path(home).resolve().parent / label_folder(label)  # resolved: a notebook scores its home as "."


@dataclass(frozen=True)
class Home:
    """One member × backend of a run being made (one sample of it, under --samples): the corpus member, the
    backend's label, its folder."""

    member: Member
    label: str
    dir: Path
    sample: int = 0

    @classmethod
    def of(cls, run_dir: str | Path, member: Member, label: str, sample: int = 0) -> Home:
        return cls(member, label, sample_dir(member_dir(run_dir, member.task.id, member.id, label), sample), sample)


# --------------------------------------------------------------------------- samples (--samples K)


def sample_dir(home: str | Path, sample: int) -> Path:
    """Where sample `sample` of a member × backend lives: its home for sample 0, else ``<home>/samples/<i>/``."""
    return Path(home) / SAMPLES / str(sample) if sample else Path(home)


def sample_base(folder: str | Path) -> Path:
    """The member × backend home a sample's folder belongs to (a home is its own)."""
    folder = Path(folder).resolve()
    return folder.parent.parent if folder.parent.name == SAMPLES and folder.name.isdigit() else folder


def _is_sample(folder: Path) -> bool:
    return folder.parent.name == SAMPLES and folder.name.isdigit() and (folder.parent.parent / EXTRACTION).is_file()


def sample_dirs(home: str | Path) -> list[tuple[int, Path]]:
    """(i, folder) of every sample of a member × backend, sample 0 (the home) first: [(0, home)] without samples."""
    root = Path(home) / SAMPLES
    extra = sorted((int(p.name), p) for p in root.iterdir() if p.name.isdigit() and p.is_dir()) if root.is_dir() else []
    return [(0, Path(home)), *((i, p) for i, p in extra if i > 0)]


def read_sample_scores(home: str | Path, first: ScoreRecord | None = None) -> list[ScoreRecord]:
    """Each sample's score.json, in sample order, with its ``sample`` number (`first`: sample 0's, when already
    read); a sample with no readable score.json is an error with its extraction's failure, or ``notebook_failed``."""
    out = []
    for i, folder in sample_dirs(home):
        data = first.to_json() if i == 0 and first is not None else _read_dict(folder / SCORE)
        if data is None:
            extraction = ExtractionRecord(_read_dict(folder / EXTRACTION) or {})
            data = {"run": extraction.run.to_json(),
                    **(extraction.failure or Failed(NOTEBOOK_FAILED, f"no {SCORE}")).to_json()}
        out.append(ScoreRecord.from_json({**data, "sample": i}, folder / SCORE))
    return out


def clear_samples(home: str | Path, keep: int) -> None:
    """Remove samples ``keep`` and above left by an earlier run into the folder (a run of K samples owns 0..K-1)."""
    for i, folder in sample_dirs(home):
        if i >= keep:
            shutil.rmtree(folder)
    root = Path(home) / SAMPLES
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()


# --------------------------------------------------------------------------- a member × backend's files


def read_extraction(home: str | Path) -> ExtractionRecord:
    """extraction.json (`RecordError` naming the key when it is not one)."""
    path = Path(home) / EXTRACTION
    return ExtractionRecord.from_json(read_json(path), path)


def write_extraction(home: str | Path, extraction: Mapping[str, Any]) -> ExtractionRecord:
    """extraction.json: the record plus its run block and status (`pipeline.extraction_record`); returns it."""
    # Not checked here: its run block is what a backend (a user's python: pipeline, say) reported, written as it
    # always was; `read_extraction` checks it, naming the key.
    record = extraction if isinstance(extraction, ExtractionRecord) else ExtractionRecord(dict(extraction))
    write_json(Path(home) / EXTRACTION, record.to_json())
    return record


def read_score(home: str | Path) -> ScoreRecord:
    """score.json (`RecordError` naming the key when it is not one)."""
    path = Path(home) / SCORE
    return ScoreRecord.from_json(read_json(path), path)


def write_score(home: str | Path, member_key: str, extraction: ExtractionRecord, result: ScoreResult | Failed,
                reference: str | None = None) -> ScoreRecord:
    """score.json: the status, the result (a `ScoreResult`, or a `status.Failed`) and the extraction's member,
    backend and run block; with `reference`, the label of the backend whose record was the truth (a
    similarity, not an accuracy). Returns what was written."""
    path = Path(home) / SCORE
    payload = {"status": SCORED, **result.to_json(), "member": member_key, "backend": extraction.backend.to_json(),
               "run": extraction.run.to_json(), **({"reference": reference} if reference else {})}
    record = ScoreRecord.from_json(payload, path)
    write_json(path, record.to_json())
    return record


def clear_score(home: str | Path) -> None:
    (Path(home) / SCORE).unlink(missing_ok=True)


def read_judgments(home: str | Path, extraction: ExtractionRecord | None = None) -> JudgmentsRecord | None:
    """judgments.json of a member × backend (None if absent, unreadable or not one); given `extraction`, only
    when its verdicts are on exactly that extraction's record."""
    path = Path(home) / JUDGMENTS
    try:
        data = JudgmentsRecord.from_json(read_json(path), path)
    except CorpusError:  # (a RecordError too: verdicts that are not judgments.json are none)
        return None
    if extraction is not None and data.extraction_sha256 != canonical_sha(extraction.record):
        return None
    return data


def write_judgments(home: str | Path, judgments: Mapping[str, Any]) -> None:
    path = Path(home) / JUDGMENTS
    write_json(path, JudgmentsRecord.from_json(dict(judgments), path).to_json())


def clear_judgments(home: str | Path) -> None:
    """A run without a judge must not inherit an earlier run's verdicts."""
    (Path(home) / JUDGMENTS).unlink(missing_ok=True)


# --------------------------------------------------------------------------- task and run files


_R = TypeVar("_R", bound=Record)


def _record(cls: type[_R], data: _R | Mapping[str, Any], path: Path) -> _R:
    """`data` as the record `cls` (checked, naming `path`, when given as the file's mapping)."""
    return cls.from_json(dict(data), path) if isinstance(data, Mapping) else data


def read_pairwise(run_dir: str | Path, task: str) -> PairwiseRecord | None:
    """pairwise.json of a task (None if absent, unreadable or not one)."""
    path = task_dir(run_dir, task) / PAIRWISE
    try:
        return PairwiseRecord.from_json(read_json(path), path)
    except CorpusError:  # (a RecordError too, as for judgments.json: verdicts that are not pairwise.json are none)
        return None


def write_pairwise(run_dir: str | Path, task: str, pairwise: PairwiseRecord | Mapping[str, Any]) -> None:
    path = task_dir(run_dir, task) / PAIRWISE
    write_json(path, _record(PairwiseRecord, pairwise, path).to_json())


def clear_pairwise(run_dir: str | Path, task: str) -> None:
    (task_dir(run_dir, task) / PAIRWISE).unlink(missing_ok=True)


def read_diff(path: str | Path) -> DiffRecord:
    """A diff.json (`write_diff`): a run folder's (RUN_B of `evalkit diff`), or the file itself."""
    path = Path(path)
    path = path / DIFF_JSON if path.is_dir() else path
    return DiffRecord.from_json(read_json(path), path)


def write_diff(run_dir: str | Path, diff: DiffRecord | Mapping[str, Any]) -> Path:
    """`evalkit diff`'s `diff_runs` into RUN_B, for its diff.ipynb to show; returns the file."""
    path = Path(run_dir) / DIFF_JSON
    write_json(path, _record(DiffRecord, diff, path).to_json())
    return path


def write_judge_json(run_dir: str | Path, summary: JudgeRecord | Mapping[str, Any]) -> None:
    """judge.json: the judge phase's figures (no evalkit module reads it back: it is for people and tools)."""
    path = Path(run_dir) / JUDGE_JSON
    write_json(path, _record(JudgeRecord, summary, path).to_json())


def read_run_json(run_dir: str | Path) -> RunRecord:
    """run.json (an empty record when the folder has none yet; `RecordError` naming the key when it is not one)."""
    path = Path(run_dir) / RUN_JSON
    return RunRecord.from_json(read_json(path), path) if path.is_file() else RunRecord()


def write_run_json(run_dir: str | Path, current: Mapping[str, Any]) -> RunRecord:
    """run.json after a run: `current`, merged with what earlier runs into the folder wrote (`merge_run_json`);
    returns what was written."""
    path = Path(run_dir) / RUN_JSON
    merged = merge_run_json(read_run_json(run_dir), current)
    write_json(path, merged.to_json())
    return merged


def merge_run_json(previous: RunRecord | Mapping[str, Any], current: RunRecord | Mapping[str, Any]) -> RunRecord:
    """run.json after a run into a folder earlier runs wrote to (`RunRecord.merged`)."""
    return _run_record(previous).merged(_run_record(current))


def _run_record(data: RunRecord | Mapping[str, Any]) -> RunRecord:
    return data if isinstance(data, RunRecord) else RunRecord.from_json(dict(data), RUN_JSON)


def read_sweep_json(sweep_dir: str | Path) -> dict[str, Any]:
    """sweep.json with the member records its sidecar (`SWEEP_LOG`) adds, the later line of a member winning
    ({} when neither is there or readable: the sweep starts afresh). O(members): each file is read once."""
    try:
        data = read_json(Path(sweep_dir) / SWEEP_JSON)
    except CorpusError:
        data = {}
    data = data if isinstance(data, dict) else {}
    logged = _read_sweep_log(Path(sweep_dir) / SWEEP_LOG)
    if logged:
        data["members"] = {**(data.get("members") or {}), **logged}
    return data


def _read_sweep_log(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    members: dict[str, Any] = {}
    for raw in text.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:  # the line a killed sweep was writing: that member runs again
            continue
        if isinstance(entry, dict) and isinstance(entry.get("key"), str) and isinstance(entry.get("member"), dict):
            members[entry["key"]] = entry["member"]
    return members


def append_sweep_members(sweep_dir: str | Path, members: Mapping[str, Any]) -> None:
    """Record finished members in sweep.json's sidecar: one JSONL line each, appended and fsynced, so a
    save costs what it adds, not the whole sweep (`read_sweep_json` applies them; `write_sweep_json`
    compacts them away)."""
    if not members:
        return
    path = Path(sweep_dir) / SWEEP_LOG
    text = "".join(line({"key": k, "member": v}, path) for k, v in members.items())
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        if e.errno in DISK_ERRNOS:
            raise disk_full(e, path) from None
        raise


def write_sweep_json(sweep_dir: str | Path, sweep: Mapping[str, Any]) -> None:
    """sweep.json whole; its sidecar, which it now holds, is removed (a crash between the two leaves lines
    that say again what sweep.json says)."""
    write_json(Path(sweep_dir) / SWEEP_JSON, sweep)
    (Path(sweep_dir) / SWEEP_LOG).unlink(missing_ok=True)


def is_unfinished(run_dir: str | Path) -> bool:
    """Whether the last run into the folder did not finish (stopped, crashed): the next one resumes it."""
    return (Path(run_dir) / UNFINISHED).is_file()


def mark_unfinished(run_dir: str | Path, started: str) -> None:
    write_json(Path(run_dir) / UNFINISHED, {"started": started})


def mark_finished(run_dir: str | Path) -> None:
    (Path(run_dir) / UNFINISHED).unlink()


def read_batches(run_dir: str | Path) -> BatchesRecord:
    """The provider batches submitted into this folder, by backend label (an empty record when none)."""
    path = Path(run_dir) / BATCHES
    return BatchesRecord.from_json(read_json(path), path) if path.is_file() else BatchesRecord()


def write_batches(run_dir: str | Path, batches: BatchesRecord | Mapping[str, Any]) -> None:
    """Written (atomically) the moment a batch is submitted: a run killed afterwards resumes it, never resubmits."""
    path = Path(run_dir) / BATCHES
    write_json(path, _record(BatchesRecord, batches, path).to_json())


def clear_batches(run_dir: str | Path) -> None:
    """A finished run's batches are collected: the next run into the folder submits its own."""
    (Path(run_dir) / BATCHES).unlink(missing_ok=True)


# --------------------------------------------------------------------------- holding the folder


@contextmanager
def hold(folder: str | Path) -> Iterator[None]:
    """Hold `folder` for this run: a second run into it is refused (`RunLocked`) while this one lives.

    The lock is an OS file lock on ``<folder>/.evalkit.lock`` (released if the holder dies); beside it,
    ``.evalkit.lock.json`` names the holder for the refusal's message."""
    from filelock import FileLock, Timeout  # lazy: filelock is loaded only where it is used (import cost)

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / LOCK), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        try:
            h = LockNote.from_json(read_json(folder / LOCK_HOLDER), folder / LOCK_HOLDER)
            if h.pid is None or h.host is None or h.since is None or h.command is None:
                raise ValueError("a partial note")
            holder = f"pid {h.pid} on {h.host} since {h.since}: {redacted_command(shlex.split(h.command)[1:])}"
        except Exception:  # noqa: BLE001 - it is taking the lock right now, or left no note
            holder = "another evalkit process"
        raise RunLocked(f"{folder} is being written by a live run ({holder}); wait for it to finish, "
                        f"or choose another --out") from None
    note = folder / LOCK_HOLDER
    try:
        with on_stop(lambda: note.unlink(missing_ok=True)):  # a stopped worker process leaves no note behind
            write_json(note, LockNote({"pid": os.getpid(), "host": socket.gethostname(),
                                       "command": redacted_command(),  # redacted: the note outlives a killed run
                                       "since": datetime.now(UTC).isoformat(timespec="seconds")}).to_json())
            yield
    finally:
        note.unlink(missing_ok=True)
        lock.release()


# --------------------------------------------------------------------------- finding results


@dataclass(frozen=True)
class Scored:
    """One member × backend result a folder holds: its score.json as `record` (`scan`)."""

    task: str
    member: str
    backend: str  # the label (its folder is the label's safe form)
    home: Path  # <...>/<task>/<member>/<backend folder>/
    run_dir: Path  # the nearest folder above `home` holding run.json (or the scanned root)
    run_id: str  # the sweep folder's name for a sweep, else the run folder's name
    # score.json as read, not yet checked (`score` checks it); see `scan`'s `unscored`
    record: ScoreRecord = field(repr=False, compare=False, hash=False)
    has_score: bool = True  # False: no score.json (`scan`'s `unscored`); `record` then says why it is an error

    @property
    def status(self) -> str:
        return self.record.status

    def score(self) -> ScoreRecord:
        """score.json, checked (or, without one, the error `scan` made of its extraction)."""
        return ScoreRecord.from_json(self.record.to_json(), self.home / SCORE)

    def extraction(self) -> ExtractionRecord:
        return read_extraction(self.home)

    def run_json(self) -> RunRecord:
        return read_run_json(self.run_dir)

    @property
    def sampled(self) -> bool:
        """Whether this result has samples beyond sample 0 (``--samples K``, K > 1)."""
        return (self.home / SAMPLES).is_dir()

    def samples(self) -> list[ScoreRecord]:
        """Each sample's score.json (`read_sample_scores`): [this score.json] without samples."""
        return (read_sample_scores(self.home, self.record) if self.sampled
                else [ScoreRecord.from_json({**self.record.to_json(), "sample": 0}, self.home / SCORE)])

    def as_headline(self) -> Scored:
        """This result as its samples' headline under --samples K > 1 (`samples.headline`: the mean over the
        scored samples, the verdict pass^k, the metrics their means); itself without samples."""
        if not self.sampled:
            return self

        return replace(self, record=headline(self.samples()))

    def started(self, run_json: RunRecord | Mapping[str, Any]) -> str | None:
        """When this backend's run started: its own entry in run.json (one folder can hold the backends
        of several runs), else the run's."""
        record = run_json if isinstance(run_json, RunRecord) else RunRecord.from_json(dict(run_json), self.run_dir / RUN_JSON)
        return record.started_for(self.backend)


def _read_dict(path: Path) -> dict[str, Any] | None:
    """A JSON object, or None: a half-written or foreign file is not a result."""
    try:
        data = read_json(path)
    except CorpusError:
        return None
    return data if isinstance(data, dict) else None


def scan(root: str | Path, status: str | None = SCORED, *, unscored: bool = False) -> list[Scored]:
    """Every member × backend result under `root`: a run or sweep folder, a task folder, or a member's home.

    Found by its score.json in ``<task>/<member>/<backend folder>/``: the task and member are its folders',
    the backend label the file's (`backends.folder_label`). `status`: only results of this status (`evalkit.status`: by default ``scored`` — an error is no result
    to board, band or compare); None: every one. `unscored`: also every folder holding an extraction.json
    but no readable score.json (its notebook failed before the runner could say so, or the run was
    stopped): an error, with its extraction's failure or ``notebook_failed`` — what the reports list.
    Sorted by folder.
    """
    return list(iter_scan(root, status, unscored=unscored))


def iter_scan(root: str | Path, status: str | None = SCORED, *, unscored: bool = False) -> Iterator[Scored]:
    """`scan`, one result at a time: a reader that keeps only part of each score.json (`evalkit diff` at
    10,000 members) never holds them all at once."""
    root = Path(root)
    if not root.is_dir():
        raise CorpusError(f"{root}: run folder not found")
    sweep_root = sweep_of(root)
    holds = functools.cache(lambda folder, name: (folder / name).is_file())  # homes share their parents
    homes = {p.parent for p in root.rglob(SCORE)}
    if unscored:
        homes |= {p.parent for p in root.rglob(EXTRACTION)}
    homes = {h for h in homes if not _is_sample(h)}  # a sample > 0 is part of its home's result (`read_sample_scores`)
    for home in sorted(homes):
        data, has_score = _read_dict(home / SCORE), True
        if data is None and unscored:
            extraction, has_score = _read_dict(home / EXTRACTION), False
            if extraction is not None:
                failed = failure_of(extraction) or Failed(NOTEBOOK_FAILED, f"no {SCORE}")
                data = {"backend": extraction.get("backend"), "run": extraction.get("run") or {}, **failed.to_json()}
        if data is None or (status is not None and status_of(data) != status):
            continue
        run_dir = _nearest(home.parent, RUN_JSON, holds) or root
        run_id = (_nearest(home, SWEEP_JSON, holds) or sweep_root or run_dir).name
        yield Scored(home.parent.parent.name, home.parent.name, folder_label(home, data), home, run_dir, run_id,
                     ScoreRecord(data), has_score)


def task_results(run_dir: str | Path, task: str) -> list[Scored]:
    """Every member × backend of one task of a run — scored, errored, or with no score.json (`scan`'s
    `unscored`) — what the task report and the comparison list; [] when the run has no such task. A
    ``--reference`` run's reference backend is the others' truth, not a result: left out."""
    base = task_dir(run_dir, task)
    if not base.is_dir():
        return []
    reference = RunRecord(_read_dict(Path(run_dir) / RUN_JSON) or {}).reference
    return [s for s in scan(base, status=None, unscored=True) if s.backend != reference]
