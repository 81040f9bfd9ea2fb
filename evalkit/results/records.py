"""Typed records of every file evalkit writes into a run folder: run.json, extraction.json, score.json,
judgments.json, a task's pairwise.json, judge.json, diff.json, ``.evalkit.batches.json`` and the lock note
``.evalkit.lock.json`` (`evalkit.results.runfolder` owns their names and is their one reader and writer).

Each record is a frozen, typed view of the file's JSON object: `from_json` checks every key it knows
(a wrong type is a `RecordError` naming the file and the key) and keeps the keys it does not know, so
``to_json`` gives back exactly the object read — written through `evalkit._util.jsonio` (sorted keys),
a record read and written again is the same bytes. Readers use the typed properties (``score.passed``,
``extraction.run.usd``, ``run.heldout``), not ``(x or {}).get(...)`` chains.

Schema version: a file records ``schema_version`` only from version 2 on. Every file written so far is
version 1 and carries no such key (so the bytes of every existing run folder, page and cassette stay as
they were); a file naming a version this evalkit does not know is refused with what to do.

A record is not a dict: it has no ``[key]``, ``get`` or ``in``; a reader that needs a key the record has no
property for adds the property here (one place says what each key means). ``to_json`` is for a writer that
must write the object back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

from evalkit.errors import RecordError
from evalkit.status import ERROR, SCORED, Failed, failure_of, row_of, status_of

__all__ = ["SCHEMA_VERSION", "RecordError", "Record", "BackendRef", "RunBlock", "RunRecord", "ExtractionRecord",
           "ScoreRecord", "JudgmentsRecord", "PairwiseRecord", "JudgeRecord", "DiffRecord", "BatchesRecord",
           "LockNote"]

SCHEMA_VERSION = 1  # the version this evalkit writes; version 1 is implied by a file without "schema_version"


# A key's expected JSON types, in the words of the error message.
_TYPES: dict[type, str] = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
                           list: "a list", dict: "an object", type(None): "null"}


def _what(types: tuple[type, ...]) -> str:
    return " or ".join(_TYPES[t] for t in types)


def _check(data: Mapping[str, Any], schema: Mapping[str, tuple[type, ...]], where: str, prefix: str = "") -> None:
    """Every key of `schema` that `data` holds has one of its types (an int is a number, a bool is not)."""
    for key, types in schema.items():
        if key not in data:
            continue
        value = data[key]
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        ok = ok or (float in types and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise RecordError(f"{where}: key {prefix + key!r} must be {_what(types)}, not {type(value).__name__} "
                              f"({value!r:.60}); this file is not one evalkit wrote: remove it and run again")


_T = TypeVar("_T")
_NUM = (int, float)
_OPT_STR = (str, type(None))


@dataclass(frozen=True)
class _View:
    """A typed, read-only view of a JSON object (`data`), checked against `SCHEMA` when built by `of`."""

    data: Mapping[str, Any] = field(default_factory=dict)
    SCHEMA: ClassVar[Mapping[str, tuple[type, ...]]] = {}

    @classmethod
    def of(cls, data: Any, where: str, prefix: str = "") -> Self:
        if not isinstance(data, dict):
            what = f"key {prefix.rstrip('.')!r}" if prefix else "the file"
            raise RecordError(f"{where}: {what} must be an object, not {type(data).__name__}; this file is not one "
                              f"evalkit wrote: remove it and run again")
        _check(data, cls.SCHEMA, where, prefix)
        return cls(data)

    def _get(self, key: str, default: _T) -> _T:
        """`key`'s value, `default` when absent or null (`SCHEMA` checked the value's JSON type, not its items)."""
        value = self.data.get(key)
        return default if value is None else value

    def to_json(self, keys: Iterable[str] | None = None) -> dict[str, Any]:
        """The JSON object: exactly what was read (or built); with `keys`, only those of them it holds (a
        writer copying part of the file unchanged: a key the file lacks stays absent, a null stays null)."""
        return dict(self.data) if keys is None else {k: self.data[k] for k in keys if k in self.data}


class BackendRef(_View):
    """extraction.json's and score.json's ``backend``: the label, the spec it was run with, the model."""

    SCHEMA = {"label": _OPT_STR, "spec": _OPT_STR, "model": _OPT_STR}

    @property
    def label(self) -> str | None:
        return self.data.get("label")

    @property
    def spec(self) -> str | None:
        return self.data.get("spec")

    @property
    def model(self) -> str | None:
        return self.data.get("model")


class RunBlock(_View):
    """The run block of an extraction (and its score): the call's tokens, cost, latency and parse outcome
    (each None when the file holds none: a figure that is missing is not a zero)."""

    SCHEMA = {"calls": (int, type(None)), "usd": (*_NUM, type(None)), "input_tokens": (int, type(None)),
              "output_tokens": (int, type(None)), "latency_s": (*_NUM, type(None)), "parse": _OPT_STR,
              "truncated": _OPT_STR, "replayed": (bool, type(None)), "error": _OPT_STR, "model": _OPT_STR,
              "finish_reason": _OPT_STR, "settings": (dict, type(None)), "schema_violations": (list, type(None))}

    @property
    def calls(self) -> int | None:
        return self.data.get("calls")

    @property
    def usd(self) -> float | None:
        return self.data.get("usd")

    @property
    def input_tokens(self) -> int | None:
        return self.data.get("input_tokens")

    @property
    def output_tokens(self) -> int | None:
        return self.data.get("output_tokens")

    @property
    def latency_s(self) -> float | None:
        return self.data.get("latency_s")

    @property
    def parse(self) -> str | None:
        return self.data.get("parse")

    @property
    def truncated(self) -> str | None:
        return self.data.get("truncated")

    @property
    def replayed(self) -> bool | None:
        """Answered from a cassette (no live call: its figures are the recording's); None: not recorded."""
        return self.data.get("replayed")

    @property
    def model(self) -> str | None:
        """The model the provider says answered."""
        return self.data.get("model")

    @property
    def finish_reason(self) -> str | None:
        return self.data.get("finish_reason")

    @property
    def error(self) -> str | None:
        return self.data.get("error")

    @property
    def settings(self) -> dict[str, Any] | None:
        """The task settings the call was sent beyond the defaults (None: recorded before settings were)."""
        return self.data.get("settings")

    @property
    def schema_violations(self) -> list[dict[str, Any]]:
        """Where the record breaks the task's output schema (``parse: schema_invalid``)."""
        return self._get("schema_violations", [])


class Record(_View):
    """A run-folder file's record: `from_json` checks it (naming the file and the key), `to_json` gives it back."""

    NESTED: ClassVar[Mapping[str, type[_View]]] = {}  # keys holding an object that has its own view

    @classmethod
    def from_json(cls, data: Any, where: str | Path | None = None) -> Self:
        """The record of `data` (the file's JSON object); `where`: the file, for errors (`runfolder` passes it)."""
        where = str(where or cls.__name__)
        record = cls.of(data, where)
        version = record.data.get("schema_version", 1)
        if version != SCHEMA_VERSION:  # (a bool or a string fails _check first: "schema_version" is in SCHEMA)
            raise RecordError(f"{where}: schema_version {version} is not one this evalkit reads (it reads "
                              f"{SCHEMA_VERSION}); read it with the evalkit that wrote it, or re-run into a new folder")
        for key, view in cls.NESTED.items():
            if data.get(key) is not None:
                view.of(data[key], where, f"{key}.")
        return record

    @property
    def schema_version(self) -> int:
        return self._get("schema_version", 1)  # never null: _VERSIONED allows an int only


_VERSIONED = {"schema_version": (int,)}


class _MemberFile(Record):
    """What extraction.json and score.json share: the member, the backend, the run block, the status."""

    NESTED = {"backend": BackendRef, "run": RunBlock}

    @property
    def member(self) -> str | None:
        """``task/member``."""
        return self.data.get("member")

    @property
    def backend(self) -> BackendRef:
        return BackendRef(self._get("backend", {}))

    @property
    def run(self) -> RunBlock:
        return RunBlock(self._get("run", {}))

    @property
    def status(self) -> str:
        """``error`` or what it was taken for (`evalkit.status.status_of`: ``ok``, ``scored``, ...)."""
        return status_of(self.data)

    @property
    def failure(self) -> Failed | None:
        return failure_of(self.data)

    def count_row(self, status: str | None = None, **extra: Any) -> dict[str, Any]:
        """What `evalkit.status.count` reads of this member × backend (`status`: when not the file's own)."""
        return row_of(status or self.status, self.data, **extra)

    @property
    def cause(self) -> str | None:
        return self.data.get("cause")

    @property
    def message(self) -> str | None:
        return self.data.get("message")


_MEMBER_KEYS = {**_VERSIONED, "member": _OPT_STR, "backend": (dict, type(None)), "run": (dict, type(None)),
                "status": _OPT_STR, "cause": _OPT_STR, "message": _OPT_STR}


class ExtractionRecord(_MemberFile):
    """extraction.json: the record a backend returned, its raw text, its run block and status
    (`evalkit.stages.pipeline.extraction_record`)."""

    SCHEMA = {**_MEMBER_KEYS, "record": (dict, list, str, int, float, bool, type(None)), "raw": _OPT_STR,
              "request_sha256": _OPT_STR, "evalkit_version": _OPT_STR, "sample": (int,), "ontology": (dict,),
              "replay": (bool,)}

    @property
    def record(self) -> Any:
        """The extracted record (None when the call gave none)."""
        return self.data.get("record")

    @property
    def raw(self) -> str | None:
        return self.data.get("raw")

    @property
    def request_sha256(self) -> str | None:
        return self.data.get("request_sha256")

    @property
    def evalkit_version(self) -> str | None:
        return self.data.get("evalkit_version")

    @property
    def ontology(self) -> dict[str, Any] | None:
        return self.data.get("ontology")

    @property
    def replay(self) -> bool:
        """A scoreboard archive's (`evalkit.results.scoreboard.archived`): the record is not kept, its committed
        cassette replays it."""
        return bool(self.data.get("replay"))


class ScoreRecord(_MemberFile):
    """score.json: the status, the score result (or a failure) and the extraction's member, backend, run block;
    ``reference``: the label whose record was the truth (``--reference``); ``sample``: which one (--samples)."""

    SCHEMA = {**_MEMBER_KEYS, "score": (*_NUM, type(None)), "passed": (bool, type(None)), "metrics": (dict, type(None)),
              "details": (dict, type(None)), "notes": (list, type(None)), "items": (list, type(None)),
              "reference": _OPT_STR, "sample": (int,), "samples": (dict, type(None))}

    @property
    def score(self) -> float | None:
        return self.data.get("score")

    @property
    def passed(self) -> bool | None:
        return self.data.get("passed")

    @property
    def metrics(self) -> dict[str, Any]:
        return self._get("metrics", {})

    @property
    def details(self) -> dict[str, Any]:
        return self._get("details", {})

    @property
    def notes(self) -> list[Any]:
        return self._get("notes", [])

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The item table (score.json's ``items``)."""
        return self._get("items", [])

    @property
    def reference(self) -> str | None:
        return self.data.get("reference")

    @property
    def sample(self) -> int | None:
        """Which sample of ``--samples K`` (set by `runfolder.read_sample_scores`; None: not read as a sample)."""
        return self.data.get("sample")

    @property
    def samples(self) -> dict[str, Any] | None:
        """Under --samples K > 1, a headline's spread (`evalkit.results.samples.headline`)."""
        return self.data.get("samples")

    @property
    def headline(self) -> str:
        """The name of the headline metric (``details.headline``; ``score`` when none)."""
        return self.details.get("headline") or "score"

    @property
    def is_scored(self) -> bool:
        return self.status == SCORED

    @property
    def is_error(self) -> bool:
        return self.status == ERROR


class JudgmentsRecord(Record):
    """judgments.json (--judge): the judge's verdicts on one extraction's record, keyed by its sha."""

    SCHEMA = {**_VERSIONED, "member": _OPT_STR, "backend": _OPT_STR, "judge": (dict, type(None)),
              "extraction_sha256": _OPT_STR, "mode": _OPT_STR, "axes": (dict, type(None))}

    @property
    def extraction_sha256(self) -> str | None:
        return self.data.get("extraction_sha256")

    @property
    def judge(self) -> dict[str, Any]:
        return self._get("judge", {})

    @property
    def mode(self) -> str | None:
        return self.data.get("mode")

    @property
    def axes(self) -> dict[str, dict[str, Any]]:
        """Per axis (entities, relations, ...): its status and the pairs the judge accepted."""
        return self._get("axes", {})


class RunRecord(Record):
    """run.json: the run's parameters and versions, every backend (each with when its run started) and member
    the folder holds (`evalkit.results.runfolder.merge_run_json`)."""

    SCHEMA = {**_VERSIONED, "backends": (list, type(None)), "members": (list, type(None)), "heldout": (list, type(None)),
              "skipped": (list, type(None)), "parameters": (dict, type(None)), "versions": (dict, type(None)),
              "started": _OPT_STR, "command": _OPT_STR, "evalkit_version": _OPT_STR, "reference": _OPT_STR,
              "ontology_mode": _OPT_STR, "judge": (dict, type(None))}

    @classmethod
    def from_json(cls, data: Any, where: str | Path | None = None) -> Self:
        record = super().from_json(data, where)
        for i, b in enumerate(record.data.get("backends") or []):
            BackendEntry.of(b, str(where or cls.__name__), f"backends[{i}].")
        return record

    @property
    def backends(self) -> list[BackendEntry]:
        entries: list[Mapping[str, Any]] = self._get("backends", [])
        return [BackendEntry(b) for b in entries]

    @property
    def members(self) -> list[str]:
        return self._get("members", [])

    @property
    def heldout(self) -> frozenset[str]:
        """The members held out of the scoreboard (``heldout: true`` in their manifest)."""
        return frozenset(self._get("heldout", []))

    @property
    def skipped(self) -> list[dict[str, Any]]:
        """Members left out before any call: each ``member``, ``status`` (skipped, refused, ...) and ``reason``."""
        return self._get("skipped", [])

    @property
    def evalkit_version(self) -> str | None:
        return self.data.get("evalkit_version")

    @property
    def parameters(self) -> dict[str, Any]:
        return self._get("parameters", {})

    @property
    def corpus(self) -> str | None:
        return self.parameters.get("corpus")

    @property
    def versions(self) -> dict[str, Any]:
        return self._get("versions", {})

    @property
    def started(self) -> str | None:
        return self.data.get("started")

    @property
    def command(self) -> str | None:
        return self.data.get("command")

    @property
    def reference(self) -> str | None:
        """``--reference``: the backend label whose records were the others' truth."""
        return self.data.get("reference")

    @property
    def ontology_mode(self) -> str:
        return self.data.get("ontology_mode") or "freeform"

    @property
    def judge(self) -> dict[str, Any]:
        """--judge: the judge's spec, model and mode ({} without a judge)."""
        return self._get("judge", {})

    def backend(self, label: str) -> BackendEntry | None:
        return next((b for b in self.backends if b.label == label), None)

    def started_for(self, label: str) -> str | None:
        """When `label`'s run started: its own entry (one folder can hold the backends of several runs), else
        the run's."""
        mine = self.backend(label)
        return (mine.started if mine else None) or self.started

    def merged(self, current: RunRecord) -> RunRecord:
        """run.json after a run (`current`) into a folder this one describes: `current`'s parameters and
        versions, with every backend (a re-run label replaces its entry in place) and every member."""
        if not self.data:
            return current
        new = {b.label: b.to_json() for b in current.backends}
        backends = [new.pop(b.label, b.to_json()) for b in self.backends] + list(new.values())
        members = list(dict.fromkeys([*self.members, *current.members]))
        heldout = sorted(self.heldout | current.heldout)
        return RunRecord({**current.data, "backends": backends, "members": members,
                          **({"heldout": heldout} if heldout else {})})


class BackendEntry(_View):
    """One backend of run.json: its label, spec, model and when its run started."""

    SCHEMA = {"label": _OPT_STR, "spec": _OPT_STR, "model": _OPT_STR, "started": _OPT_STR, "cassette_sha256": _OPT_STR}

    @property
    def label(self) -> str | None:
        return self.data.get("label")

    @property
    def spec(self) -> str | None:
        return self.data.get("spec")

    @property
    def model(self) -> str | None:
        return self.data.get("model")

    @property
    def started(self) -> str | None:
        return self.data.get("started")

    @property
    def cassette_sha256(self) -> str | None:
        """A replayed cassette's sha256: which recording the figures are."""
        return self.data.get("cassette_sha256")


class PairwiseRecord(Record):
    """A task's pairwise.json (--judge-mode pairwise|both, `evalkit.stages.judge`): the judge, the backends, the
    per-pair aggregate (`pairs`) and every judged item with both slot orders (`items`)."""

    SCHEMA = {**_VERSIONED, "task": _OPT_STR, "judge": (dict, type(None)), "backends": (list, type(None)),
              "axes": (list, type(None)), "pairs": (list, type(None)), "items": (list, type(None))}

    @property
    def task(self) -> str | None:
        return self.data.get("task")

    @property
    def judge(self) -> dict[str, Any]:
        return self._get("judge", {})

    @property
    def backends(self) -> list[str]:
        return self._get("backends", [])

    @property
    def axes(self) -> list[str]:
        return self._get("axes", [])

    @property
    def pairs(self) -> list[dict[str, Any]]:
        """Per pair of backends and axis: wins, ties, win rate, order inconsistency (`pairwise.aggregate`)."""
        return self._get("pairs", [])

    @property
    def items(self) -> list[dict[str, Any]]:
        """Per member and pair: its status, both slot orders' verdicts and the outcome."""
        return self._get("items", [])

    def among(self, labels: Iterable[str]) -> PairwiseRecord:
        """Only the pairs and items both of whose backends are among `labels` (a comparison of some backends)."""
        keep = set(labels)
        return PairwiseRecord({**self.data, "pairs": [r for r in self.pairs if r["a"] in keep and r["b"] in keep],
                               "items": [i for i in self.items if i["a"] in keep and i["b"] in keep]})


class JudgeRecord(Record):
    """judge.json (--judge): the judge phase's figures: its spec and model, mode, requests, calls, cost."""

    SCHEMA = {**_VERSIONED, "judge": (dict, type(None)), "mode": _OPT_STR, "cache": _OPT_STR,
              "requests": (int, type(None)), "calls": (int, type(None)), "replayed": (int, type(None)),
              "errors": (int, type(None)), "usd": (*_NUM, type(None)), "calls_summary": (dict, type(None))}

    @property
    def judge(self) -> dict[str, Any]:
        return self._get("judge", {})

    @property
    def mode(self) -> str | None:
        return self.data.get("mode")

    @property
    def requests(self) -> int | None:
        return self.data.get("requests")

    @property
    def calls(self) -> int | None:
        return self.data.get("calls")

    @property
    def errors(self) -> int | None:
        return self.data.get("errors")

    @property
    def usd(self) -> float | None:
        return self.data.get("usd")


class DiffRecord(Record):
    """diff.json (`evalkit diff`, `evalkit.compare.diff.diff_runs`): runs A and B, their configuration
    differences and per task the compared pairs (or why none)."""

    SCHEMA = {**_VERSIONED, "a": _OPT_STR, "b": _OPT_STR, "config": (list, type(None)), "tasks": (dict, type(None))}

    @property
    def a(self) -> str | None:
        return self.data.get("a")

    @property
    def b(self) -> str | None:
        return self.data.get("b")

    @property
    def config(self) -> list[Any]:
        return self._get("config", [])

    @property
    def tasks(self) -> dict[str, dict[str, Any]]:
        return self._get("tasks", {})


class BatchesRecord(Record):
    """``.evalkit.batches.json`` (--batch): per backend label, the provider batches submitted into the folder."""

    SCHEMA = _VERSIONED  # (its other keys are labels: each a list, checked in from_json)

    @classmethod
    def from_json(cls, data: Any, where: str | Path | None = None) -> Self:
        record = super().from_json(data, where)
        _check(record.by_label, dict.fromkeys(record.by_label, (list,)), str(where or cls.__name__))
        return record

    @property
    def by_label(self) -> dict[str, list[dict[str, Any]]]:
        """A new dict, label → its batches (`evalkit.backends.batch.prefill` adds to it and saves it)."""
        return {k: v for k, v in self.data.items() if k != "schema_version"}


class LockNote(Record):
    """``.evalkit.lock.json``: who holds the run folder (`evalkit.results.runfolder.hold`), for a refusal."""

    SCHEMA = {**_VERSIONED, "pid": (int,), "host": (str,), "command": (str,), "since": (str,)}

    @property
    def pid(self) -> int | None:
        return self.data.get("pid")

    @property
    def host(self) -> str | None:
        return self.data.get("host")

    @property
    def command(self) -> str | None:
        return self.data.get("command")

    @property
    def since(self) -> str | None:
        return self.data.get("since")
