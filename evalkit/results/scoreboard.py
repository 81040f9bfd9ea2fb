"""The scoreboard: the committed standing of every task × member × backend.

``corpus/scoreboard.json`` (a ``--corpus DIR`` corpus keeps its own, ``DIR/scoreboard.json``)::

    {
      "schema_version": 1,
      "tasks": {
        "<task>": {
          "<member>": {
            "<backend label>": {
              "run": {...},            # date, model, evalkit version, tokens, USD, backend spec (no secrets)
              "run_folder": "...",     # the retained run folder (relative to the board)
              "archive": "...",        # the committed extraction record (relative to the board), for `evalkit rescore`
              "truth_sha256": "...",   # the truth file the metrics were scored against
              "settings": {...},       # non-default overrides only (sampling settings, --threshold)
              "metrics": {...},        # the scorer's metrics block
              "passed": true,
              "samples": {...},        # only under --samples K > 1: k, k_scored, mean, sd, pass@k, pass^k, scores
              "justifications": {...}  # only when `evalkit check --justify` accepted a regression
            }}}}}

**The archive.** Run folders live under the ignored ``runs/``; what an entry stands on is committed beside
the board: ``<task>/records/<backend folder>/<member>.json`` (the extraction record, its backend and request
sha256 — no raw text, no prompt), written with the entry, so a fresh clone can `evalkit rescore` every
standing entry with zero calls.

The file is written with sorted keys, an indent of 2 and a trailing newline, so
its git diff reads well. Every write is read-modify-write under a file lock
(``scoreboard.json.lock``) and lands atomically (temp file + ``os.replace``):
many concurrent writers lose nothing and a reader never sees half a file.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import Field, StrictBool, StrictFloat, StrictInt

from evalkit._util.jsonio import dumps, read_json, unsynced, write_json
from evalkit._util.typed import Bool, Num, Record, RecordError, Str, check_version
from evalkit.backends import label_folder
from evalkit.backends.spec import redact_stored
from evalkit.corpus.sources import sha256_file
from evalkit.corpus.tasks import DEFAULT_CORPUS, Member, Task, find_task, sources_dir
from evalkit.errors import CorpusError, EvalkitError, ScoreboardError
from evalkit.results import records
from evalkit.results.records import ExtractionRecord, RunRecord
from evalkit.results.runfolder import SCORE, Scored, scan
from evalkit.status import SCORED

__all__ = [
    "SCHEMA_VERSION", "BOARD_NAME", "ScoreboardError", "board_path", "dumps", "load_board",
    "write_json", "locked", "edit_board", "run_block", "entry_for", "settings_of",
    "truth_sha256", "update_scoreboard", "iter_entries", "numeric_metrics", "ARCHIVE", "archive_path", "archived",
    "read_archived", "Board", "BoardEntry", "RunBlock", "read_board", "write_board",
]

SCHEMA_VERSION = 1
BOARD_NAME = "scoreboard.json"
LOCK_TIMEOUT_S = 120
# Backend spec options whose value is a secret: never written to a board.


def board_path(corpus: str | Path | None = None) -> Path:
    """``<corpus>/scoreboard.json``; the bundled corpus's when `corpus` is None."""
    return Path(corpus or DEFAULT_CORPUS) / BOARD_NAME


# A board metric: a number, a boolean or null (`numeric_metrics`), kept as it was (True is never 1).
Metric = Annotated[StrictBool | StrictInt | StrictFloat | None, Field(union_mode="left_to_right")]


class RunBlock(Record):
    """Who ran an entry, when, with what, at what cost (`run_block`)."""

    run_id: Str | None = None
    date: Str | None = None
    model: Str | None = None
    evalkit_version: Str | None = None
    backend: dict[str, Any] = {}
    request_sha256: Str | None = None
    input_tokens: StrictInt | None = None
    output_tokens: StrictInt | None = None
    usd: Num | None = None
    latency_s: Num | None = None
    calls: StrictInt | None = None
    replayed: Bool | None = None
    parse: Str | None = None
    truncated: Any = None
    error: Any = None


class BoardEntry(Record):
    """One task × member × backend's standing (`entry_for`; the module docstring shows its keys)."""

    run: RunBlock = RunBlock()
    run_folder: Str | None = None
    archive: Str | None = None
    truth_sha256: Str | None = None
    settings: dict[str, Any] = {}
    metrics: dict[str, Metric] = {}
    passed: Bool | None = None
    samples: dict[str, Any] | None = None  # only under --samples K > 1
    justifications: dict[str, dict[str, Any]] | None = None  # only when a regression was accepted
    identity: dict[str, Any] | None = None  # a BYOM board's entry (`evalkit.board.publish`): the member's identity
    published: Str | None = None  # … and the date it was published

    @property
    def score(self) -> Any:
        return self.metrics.get("score")


class Board(Record):
    """The scoreboard file: ``tasks`` → member → backend label → `BoardEntry`."""

    schema_version: StrictInt = SCHEMA_VERSION
    tasks: dict[str, dict[str, dict[str, BoardEntry]]] = {}

    def entries(self) -> Iterator[tuple[str, str, str, BoardEntry]]:
        """(task, member, backend label, entry) in sorted order."""
        for task in sorted(self.tasks):
            for member in sorted(self.tasks[task]):
                for label in sorted(self.tasks[task][member]):
                    yield task, member, label, self.tasks[task][member][label]

    def by_task(self, tasks: Iterable[str] | None = None) -> dict[str, dict[str, dict[str, BoardEntry]]]:
        """{task: {label: {member: entry}}} — the shape `evalkit check` compares."""
        want = set(tasks) if tasks else None
        out: dict[str, dict[str, dict[str, BoardEntry]]] = {}
        for task, member, label, entry in self.entries():
            if want is None or task in want:
                out.setdefault(task, {}).setdefault(label, {})[member] = entry
        return out


def empty_board() -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "tasks": {}}


def board_of(data: Any, path: str | Path) -> Board:
    """`data` (a board file's JSON) as a `Board`; `ScoreboardError` naming the file and key of a wrong value."""
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), dict):
        raise ScoreboardError(f"{path}: not a scoreboard (expected an object with `tasks`)")
    try:
        check_version(data, SCHEMA_VERSION, path)
        return Board.from_json(data, path)
    except RecordError as e:
        raise ScoreboardError(str(e)) from None


def read_board(path: str | Path, *, must_exist: bool = False) -> Board:
    """The one reader of a scoreboard file (an empty board when it is absent, unless `must_exist`)."""
    path = Path(path)
    if not path.exists():
        if must_exist:
            raise ScoreboardError(f"{path}: no scoreboard yet (write one with `evalkit sweep --update-scoreboard` "
                                  "or `evalkit run … --update-scoreboard`)")
        return Board.from_json(empty_board(), path)
    try:
        data = read_json(path)
    except CorpusError as e:
        raise ScoreboardError(str(e)) from None
    return board_of(data, path)


def write_board(path: str | Path, board: Mapping[str, Any] | Board) -> None:
    """The one writer: the board typed on the way out (a wrong value is refused before anything is written),
    with its schema_version."""
    data = board.to_json() if isinstance(board, Board) else board
    write_json(path, board_of({"schema_version": SCHEMA_VERSION, **data}, path).to_json())


def load_board(path: str | Path, *, must_exist: bool = False) -> dict[str, Any]:
    """The board as plain JSON, for a read-modify-write (`edit_board`): `read_board`'s, as it was read."""
    return read_board(path, must_exist=must_exist).to_json()


@contextmanager
def locked(path: str | Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold ``<path>.lock`` (an OS file lock: released if the holder dies)."""
    from filelock import FileLock, Timeout  # lazy: filelock is loaded only where it is used (import cost)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path) + ".lock", timeout=timeout)
    try:
        with lock:
            yield
    except Timeout:
        raise ScoreboardError(f"{path}: could not take {path}.lock within {timeout:.0f} s") from None


@contextmanager
def edit_board(path: str | Path) -> Iterator[dict[str, Any]]:
    """Read-modify-write the board under its lock; written only if the block exits cleanly."""
    with locked(path):
        board = load_board(path)
        yield board
        write_board(path, board)


def iter_entries(board: Mapping[str, Any]) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(task, member, backend label, entry) in sorted order, of a board being edited (`edit_board`'s JSON);
    a reader iterates `Board.entries`."""
    for task in sorted(board.get("tasks", {})):
        for member in sorted(board["tasks"][task]):
            for label in sorted(board["tasks"][task][member]):
                yield task, member, label, board["tasks"][task][member][label]


# --------------------------------------------------------------------------- entries


RUN_KEYS = ("input_tokens", "output_tokens", "usd", "latency_s", "calls", "replayed", "parse", "truncated", "error")


def run_block(scored: Scored, extraction: ExtractionRecord | None = None,
              run_json: RunRecord | None = None) -> dict[str, Any]:
    """The provenance of one scored result: who ran it, when, with what, at what cost."""
    ext = extraction if extraction is not None else scored.extraction()
    rj = run_json if run_json is not None else scored.run_json()
    backend = ext.backend
    block = {
        "run_id": scored.run_id,
        "date": scored.started(rj),
        "model": backend.model or ext.run.model,
        "evalkit_version": ext.evalkit_version or rj.evalkit_version,
        "backend": {"label": backend.label or scored.backend, "spec": redact_stored(backend.spec or "")},
        "request_sha256": ext.request_sha256,
    }
    block.update({k: getattr(ext.run, k) for k in RUN_KEYS})
    return block


def truth_sha256(member: Member, sources: Path | None) -> str | None:
    try:
        return sha256_file(member.truth_path(sources))
    except (EvalkitError, OSError):
        return None


def settings_of(member: Member | None, run_json: records.RunRecord,
                run: records.RunBlock | None = None) -> dict[str, Any]:
    """Only what differs from evalkit's defaults: the sampling settings the call was sent (its run block's
    ``settings``: the task's, with any ``--set``; the task's own for a record made before run blocks held
    them), and a ``--threshold`` override."""
    out: dict[str, Any] = {}
    if run is not None and isinstance(run.settings, dict):
        out.update(run.settings)
    elif member is not None:
        out.update(member.task.spec.settings.non_default())
    threshold = run_json.parameters.get("threshold")
    if threshold is not None:
        out["threshold"] = threshold
    return out


def numeric_metrics(metrics: Mapping[str, Any]) -> dict[str, float | int | bool | None]:
    """Aggregate counts and ratios only: numbers, booleans and nulls (anything else is dropped)."""
    return {k: v for k, v in metrics.items() if v is None or isinstance(v, (int, float, bool))}


@dataclasses.dataclass
class Loaded:
    """The tasks and members an update has loaded (None: not in the corpus, or does not load): each once."""

    tasks: dict[str, Task | None] = dataclasses.field(default_factory=dict)
    members: dict[tuple[str, str], Member | None] = dataclasses.field(default_factory=dict)


def _member(corpus: Path, task: str, member: str, cache: Loaded) -> Member | None:
    """The corpus's member (None when it does not load), each task and member loaded once a `cache`; its
    truth is not parsed here (only hashed: `truth_sha256`; its scoring validated it)."""
    if (task, member) in cache.members:
        return cache.members[(task, member)]
    if task not in cache.tasks:
        try:
            cache.tasks[task] = find_task(corpus, task)
        except EvalkitError:
            cache.tasks[task] = None
    t = cache.tasks[task]
    try:
        found = t.member(member, check_truth=False) if t is not None else None
    except EvalkitError:
        found = None
    cache.members[(task, member)] = found
    return found


ARCHIVE = "records"  # <board dir>/<task>/records/<backend folder>/<member>.json


def archive_path(board_dir: str | Path, task: str, member: str, label: str) -> Path:
    """Where the extraction record behind an entry is committed (the board's archive)."""
    return Path(board_dir) / task / ARCHIVE / label_folder(label) / f"{member}.json"


def archived(extraction: records.ExtractionRecord, pointer: bool = False) -> dict[str, Any]:
    """What the archive keeps of an extraction.json: enough to score it again, nothing more (its raw text and
    run block stay in the run folder; the spec is stored redacted). A `pointer` member's document is not
    redistributed, and a model's record may quote it: when the record was replayed from a committed cassette,
    the archive names that cassette (``"replay": true``) instead of copying the record (`replayed_record`)."""
    backend = extraction.backend
    replay = pointer and (backend.spec or "").startswith("cassette:") and bool(extraction.run.replayed)
    fields = ("member", "request_sha256", "evalkit_version", "status", "cause", "message", "ontology")
    keep = extraction.to_json(keys=(*fields, *(() if replay else ("record",))))
    if replay:
        keep["replay"] = True
    return {**keep, "backend": {"label": backend.label, "model": backend.model,
                                "spec": redact_stored(backend.spec or "")}}


def read_archived(board_dir: str | Path, entry: BoardEntry) -> records.ExtractionRecord | None:
    """The archived extraction behind an entry (None when the entry names none, or it is not there)."""
    path = Path(board_dir) / entry.archive if entry.archive else None
    if path is None or not path.is_file():
        return None
    return records.ExtractionRecord.from_json(read_json(path), path)


def entry_for(scored: Scored, board_dir: Path, corpus: Path, sources: Path | None,
              cache: Loaded | None = None, *, extraction: ExtractionRecord | None = None,
              run_json: RunRecord | None = None) -> dict[str, Any]:
    """The scoreboard entry of one scored member × backend (`extraction`, `run_json`: its records, when the
    caller has read them already)."""
    cache = Loaded() if cache is None else cache
    score = scored.score()
    ext = extraction if extraction is not None else scored.extraction()
    rj = run_json if run_json is not None else scored.run_json()
    member = _member(corpus, scored.task, scored.member, cache)
    return {
        "run": run_block(scored, ext, rj),
        "run_folder": Path(os.path.relpath(scored.home.resolve(), board_dir.resolve())).as_posix(),
        "archive": archive_path(".", scored.task, scored.member, scored.backend).as_posix(),
        "truth_sha256": truth_sha256(member, sources) if member is not None else None,
        "settings": settings_of(member, rj, ext.run),
        "metrics": score.metrics,
        "passed": score.passed,
        **({"samples": score.samples} if score.samples else {}),  # --samples K > 1: K and the spread
    }


def _justifications_for(task: str, label: str, justifications: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keys are ``METRIC`` (every task), ``TASK/METRIC`` or ``TASK/BACKEND/METRIC``; values a reason
    or a dict holding ``reason`` (and whatever else should be recorded beside it)."""
    out: dict[str, Any] = {}
    for key, value in (justifications or {}).items():
        parts = key.split("/")
        metric = parts[-1]
        if len(parts) >= 2 and parts[0] != task:
            continue
        if len(parts) >= 3 and parts[1] != label:
            continue
        out[metric] = value if isinstance(value, dict) else {"reason": str(value)}
    return out


class OutcomeView(Protocol):
    """What the scoreboard and the history read of a `runner.Outcome`: which member × backend, and its status."""

    @property
    def task(self) -> str: ...
    @property
    def member(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def status(self) -> str: ...


class RunOutcomes(Protocol):
    """A `runner.RunResult` or a `sweep.SweepResult` (layers above this one), as the scoreboard and history take it."""

    @property
    def run_dir(self) -> Path: ...
    @property
    def outcomes(self) -> Sequence[OutcomeView]: ...


def _selected(result: RunOutcomes | str | Path,
              statuses: tuple[str, ...] = (SCORED,)) -> tuple[Path, set[tuple[str, str, str]] | None]:
    """(folder to scan, the (task, member, backend) keys of the outcomes of these statuses — None: every
    one found)."""
    if isinstance(result, (str, Path)):
        return Path(result), None
    keys = {(o.task, o.member, o.backend) for o in result.outcomes if o.status in statuses}
    return Path(result.run_dir), keys


def update_scoreboard(run_result: Any, board_path: str | Path, justifications: Mapping[str, Any] | None = None,
                      *, corpus: str | Path | None = None, sources: str | Path | None = None) -> list[tuple[str, str, str]]:
    """Write the scored members of a run into the scoreboard; return the (task, member, backend) keys written.

    `run_result` is a `runner.RunResult` / `sweep.SweepResult` (its scored outcomes are taken) or a
    run/sweep folder path (every score.json under it). `corpus` (default: the board's folder) and
    `sources` (default: $EVALKIT_SOURCES) locate the truth whose sha256 is recorded.
    `justifications` maps ``METRIC``, ``TASK/METRIC`` or ``TASK/BACKEND/METRIC`` to a reason (or a dict
    holding ``reason``); they are recorded in the written entries they match. Entries of other
    members and backends are left as they are, and so is the standing entry of a member × backend
    whose new outcome is an error (`evalkit.status`): a failure is never an entry.
    """
    board_path = Path(board_path)
    root, keys = _selected(run_result)
    corpus = Path(corpus) if corpus is not None else board_path.parent
    src = sources_dir(sources)
    # --samples K > 1: an entry is its samples' headline (the mean of each metric, pass^k; `samples.headline`)
    found = [h for s in scan(root, status=None) if keys is None or (s.task, s.member, s.backend) in keys
             if (h := s.as_headline()).status == SCORED]
    similar = sorted({r for s in found if (r := s.score().reference) is not None})
    if similar:
        raise ScoreboardError(f"{root}: scored against the reference backend {', '.join(similar)} (--reference): a "
                              "similarity, not an accuracy, is never a scoreboard entry")
    if keys is not None:
        missing = keys - {(s.task, s.member, s.backend) for s in found}
        if missing:
            names = ", ".join(f"{t}/{m} [{b}]" for t, m, b in sorted(missing))
            raise ScoreboardError(f"{root}: no {SCORE} for {names}")
    entries = _entries(found, board_path.parent, corpus, src, justifications)
    with edit_board(board_path) as board:
        with unsynced():  # one sync for every archive file below, not one fsync each (minutes at 10,000)
            for s, entry, record in entries:
                write_json(board_path.parent / entry["archive"], record)
                board["tasks"].setdefault(s.task, {}).setdefault(s.member, {})[s.backend] = entry
        if entries:
            os.sync()  # the archives are on disk before the board that names them lands (fsynced, atomically)
    return [(s.task, s.member, s.backend) for s, _, _ in entries]


def _entries(found: list[Scored], board_dir: Path, corpus: Path, sources: Path | None,
             justifications: Mapping[str, Any] | None) -> list[tuple[Scored, dict[str, Any], dict[str, Any]]]:
    """(result, its entry, its archive record) of each result, built before the board's lock is taken (it is
    held only for the read-modify-write). Each record is read once, run.json once a run folder (it lists
    every member: read per entry, it made the update quadratic), each member loaded once."""
    cache = Loaded()
    runs: dict[Path, RunRecord] = {}
    out = []
    for s in found:
        ext = s.extraction()
        if s.run_dir not in runs:
            runs[s.run_dir] = s.run_json()
        entry = entry_for(s, board_dir, corpus, sources, cache, extraction=ext, run_json=runs[s.run_dir])
        if just := _justifications_for(s.task, s.backend, justifications):
            entry["justifications"] = just
        member = _member(corpus, s.task, s.member, cache)
        out.append((s, entry, archived(ext, member is not None and member.manifest.source.is_pointer)))
    return out
