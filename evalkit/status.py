"""What became of one member × backend: its status, and the cause when it failed; the one counter.

The vocabulary (docs/corpus-format.md, "Statuses and answers"), defined here and nowhere else:

* a member × backend's **status**: ``scored`` / ``error`` (with its cause) / ``not_covered`` / ``skipped``.
  ``refused`` is a kind of skip: counted among the skipped, with its reason; the run's exit code still
  tells it apart (4 for a changed source, 3 for an invalid input).
* a scored answer's **parse outcome** (`parse_outcome`): ``ok`` / ``malformed`` / ``truncated`` /
  ``schema_invalid``. A malformed answer is scored (often 0): never an error. An ``ok`` answer that needed
  a repair (a fenced or cut-off JSON that still decodes, a truncation that succeeded on retry) carries the
  note ``recovered``; it counts as ok.
* an **error** is only a status: no score. `count` is the one counter of both: every count on every page,
  the CLI, summary.json and `evalkit.load_run` comes from it.

A failure is never a number. Every member × backend of a run ends in one status:

* ``scored``: it has a score (which may be 0, and a malformed or truncated answer is the
  model's real output: scored as such);
* ``error``: no score, because something failed before there was one. Shown as ERROR, left out
  of every mean, band, bootstrap and paired test, counted in an error rate beside them, never
  a standing scoreboard entry, never current for a sweep (the next sweep retries it), exit 5;
* ``skipped``: a pointer member whose source is not present, or (cause ``no_text_layer``) a PDF with no
  text on any page (a scan) in the ``text`` input mode, which has nothing to send; ``refused``: its source fails its
  sha256 (exit 4), or one of its inputs is invalid — too large (`evalkit.limits`), an unreadable
  document, a truth `evalkit validate` rejects (cause ``invalid_input``, exit 3). Neither is extracted.
* ``not_covered``: a replayed cassette holds no recording of the member's request. Neither an error
  nor a score: shown as NOT COVERED with its cause, left out of every mean, never on the scoreboard;
  the others are scored and the exit code is what their verdicts say — unless nothing at all was
  covered (exit 6), or ``--strict-replay`` makes any miss abort the run before a call (exit 6).

The cause of an error (one word, for filtering; the message says the rest):

===========================  ===================================================================================
``provider_error``           the provider answered with an error after its retries
``timeout``                  the provider did not answer in time (after its retries), or a ``python:`` pipeline
``pipeline_exception``       a ``python:`` pipeline raised, exited or crashed (its process died: a signal, the
                             memory cap)
``pipeline_result_invalid``  a ``python:`` pipeline returned what cannot be JSON (bytes, a set, a date, a
                             tuple key, a cycle, NaN) or an answer over the ``answer_bytes`` limit
``budget_stop``              ``--max-usd`` was reached before the call started
``missing_prediction``       ``predictions:dir`` holds no file for the member
``limit_exceeded``           the answer (a prediction file, say) is larger or deeper than its bound (`evalkit.limits`)
``scoring_crash``            the scorer raised
``notebook_failed``          the member's extract or score notebook could not be executed
===========================  ===================================================================================

A replay request with no recording is not among them either: it is ``not_covered``.

The extraction's status is decided once, from its `Completion`, when extraction.json is
written (`extraction_status`); score.json repeats it (`Failed.to_json`), so every reader —
the CLI, reports, index, scoreboard, band, check, history, sweep — asks `status_of(data)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCORED, ERROR, SKIPPED, REFUSED, NOT_COVERED = "scored", "error", "skipped", "refused", "not_covered"
STATUSES = (SCORED, ERROR, NOT_COVERED, SKIPPED)  # what a member × backend is counted as (refused: a skip)
# A budget stop's error text: the pool writes it on the call it did not start, `classify` reads it.
SKIPPED_PREFIX = "skipped:"
OK = "ok"  # extraction.json: the backend returned an answer (to be scored, whatever its shape)

# A scored answer's parse outcome (`parse_outcome`); ``recovered`` is a note on an ok answer, not an outcome.
MALFORMED, TRUNCATED, SCHEMA_INVALID, RECOVERED = "malformed", "truncated", "schema_invalid", "recovered"
PARSE_OUTCOMES = (OK, MALFORMED, TRUNCATED, SCHEMA_INVALID)

PROVIDER_ERROR = "provider_error"
TIMEOUT = "timeout"
PIPELINE_EXCEPTION = "pipeline_exception"
PIPELINE_RESULT_INVALID = "pipeline_result_invalid"
_PIPELINE_CAUSES = (TIMEOUT, PIPELINE_RESULT_INVALID)  # a python: error naming its cause first ("timeout: ...")
BUDGET_STOP = "budget_stop"
MISSING_PREDICTION = "missing_prediction"
SCORING_CRASH = "scoring_crash"
NOTEBOOK_FAILED = "notebook_failed"
LIMIT_EXCEEDED = "limit_exceeded"
INVALID_INPUT = "invalid_input"  # of a refused member: an input of it that `evalkit validate` rejects too
NO_TEXT_LAYER = "no_text_layer"  # of a skipped member: a scan in the text input mode (`sources.check_input`)
REFERENCE_FAILED = "reference_failed"  # --reference: the reference backend has no usable record of this member

LIMIT_PREFIX = "limit exceeded:"  # a backend's error that starts so: its answer was over a bound

# How the SDKs name a timeout (openai and anthropic: APITimeoutError, reported as "<class>: <message>").
_TIMEOUTS = ("APITimeoutError", "TimeoutError", "ReadTimeout", "ConnectTimeout")


@dataclass(frozen=True)
class Failed:
    """A member × backend with no score. Reads like a `ScoreResult` (score and verdict null, no
    metrics, no items), so the score notebook's views take either."""

    cause: str
    message: str
    status: str = ERROR
    score: None = None
    passed: None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.cause}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """What score.json holds for it."""
        return {"status": ERROR, "cause": self.cause, "message": self.message, "score": None, "passed": None,
                "metrics": {}, "notes": [], "details": {}, "items": []}


def classify(completion: Any, failure: str | None) -> Failed | None:
    """The failure a backend's `Completion` reports, or None when it is an answer to score.

    Only a completion that carries no output (``parse == "error"``) is a failure: a malformed or
    truncated answer is the model's real output, even when the backend noted an error beside it.
    `failure`: what its provider declares such a completion to be (`Provider.failure`): None, a provider
    error (or a timeout); PIPELINE_EXCEPTION, a pipeline's, whose error names its cause first; another cause."""
    error = completion.error
    if not error or completion.parse != "error":
        return None
    if error.startswith(SKIPPED_PREFIX):
        return Failed(BUDGET_STOP, error[len(SKIPPED_PREFIX):].strip())
    if error.startswith(LIMIT_PREFIX):
        return Failed(LIMIT_EXCEEDED, error[len(LIMIT_PREFIX):].strip())
    if failure == PIPELINE_EXCEPTION:
        cause, sep, rest = error.partition(": ")
        return Failed(cause, rest) if sep and cause in _PIPELINE_CAUSES else Failed(PIPELINE_EXCEPTION, error)
    if failure:
        return Failed(failure, error)
    if error.split(":", 1)[0].strip() in _TIMEOUTS:
        return Failed(TIMEOUT, error)
    return Failed(PROVIDER_ERROR, error)


def extraction_status(completion: Any, failure: str | None) -> dict[str, Any]:
    """The status block of extraction.json: ``{"status": "ok"}`` or ``{"status": "error", "cause", "message"}``;
    `failure` as for `classify`."""
    failed = classify(completion, failure)
    if failed is None:
        return {"status": OK}
    return {"status": ERROR, "cause": failed.cause, "message": failed.message}


def shown(status: str) -> str:
    """How a status is printed: ``NOT COVERED``, ``ERROR``, …"""
    return status.replace("_", " ").upper()


def status_of(data: Mapping[str, Any] | None) -> str:
    """The status of an extraction.json or score.json: ``error``, or ``scored`` (``ok`` for an extraction).
    Files written before statuses existed carry none and count as what they were taken for."""
    status = (data or {}).get("status")
    return ERROR if status == ERROR else (status or SCORED)


def failure_of(data: Mapping[str, Any] | None) -> Failed | None:
    """The `Failed` an extraction.json or score.json records, or None."""
    if data is None or status_of(data) != ERROR:
        return None
    return Failed(str(data.get("cause") or PROVIDER_ERROR), str(data.get("message") or ""))


# ----------------------------------------------------------------------------- the one counter


def _get(row: Any, key: str) -> Any:
    """A field of a row: a mapping's key or an object's attribute (a `runner.Outcome`, a frame's record)."""
    value = row.get(key) if isinstance(row, Mapping) else getattr(row, key, None)
    try:
        return None if value != value else value  # NaN (a frame's empty cell) is no value
    except (TypeError, ValueError):
        return value


def parse_outcome(parse: str | None, truncated: str | None = None) -> str:
    """The vocabulary's parse outcome of a scored answer from its run block's ``parse`` (clean, recovered,
    malformed, schema_invalid) and ``truncated`` (retry_succeeded, exhausted). A cut-off answer is
    ``truncated`` whatever it decoded to (the cut is why it is malformed or breaks the schema)."""
    if truncated == "exhausted":
        return TRUNCATED
    if parse in (MALFORMED, SCHEMA_INVALID):
        return parse
    return OK


def recovered(parse: str | None, truncated: str | None = None) -> bool:
    """An ok answer that needed a repair: decoded from a fenced / cut-off text, or a truncation retried."""
    return parse_outcome(parse, truncated) == OK and (parse == RECOVERED or truncated == "retry_succeeded")


def row_of(status: str, data: Mapping[str, Any] | None, **extra: Any) -> dict[str, Any]:
    """What `count` reads of one member × backend, from its status and score.json / extraction.json data."""
    data = data or {}
    run = data.get("run") or {}
    return {"status": status, "passed": data.get("passed"), "cause": data.get("cause"),
            "parse": run.get("parse"), "truncated": run.get("truncated"), **extra}


@dataclass(frozen=True)
class Counts:
    """How many member × backends ended in each status, and the scored answers' parse outcomes.

    ``attempted`` (scored + errors) is the N of "passed / N" and of the error rate; ``members`` is every
    member × backend counted (attempted + not covered + skipped)."""

    scored: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    not_covered: int = 0
    skipped: int = 0  # refused ones included
    refused: int = 0
    causes: dict[str, int] = field(default_factory=dict)
    parse: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PARSE_OUTCOMES, 0))
    recovered: int = 0  # of the ok answers: a note

    @property
    def attempted(self) -> int:
        return self.scored + self.errors

    @property
    def members(self) -> int:
        return self.attempted + self.not_covered + self.skipped

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.attempted if self.attempted else None

    def to_json(self) -> dict[str, Any]:
        return {"members": self.members, "attempted": self.attempted, "scored": self.scored, "passed": self.passed,
                "failed": self.failed, "errors": self.errors, "error_rate": self.error_rate,
                "causes": dict(self.causes), "not_covered": self.not_covered, "skipped": self.skipped,
                "refused": self.refused, "parse": dict(self.parse), "recovered": self.recovered}


def count(rows: Any) -> Counts:
    """The one counter: `Counts` of `rows`, each one member × backend (a mapping or an object with
    ``status``, ``passed``, ``cause``, ``parse``, ``truncated``: `row_of`, a `runner.Outcome`, a
    `report.load_scores` record). A missing status counts as scored (`status_of`)."""
    n = dict.fromkeys((SCORED, ERROR, NOT_COVERED, SKIPPED, REFUSED), 0)
    passed = failed = fixed = 0
    causes: dict[str, int] = {}
    parse = dict.fromkeys(PARSE_OUTCOMES, 0)
    for row in rows:
        status = _get(row, "status") or SCORED
        status = status if status in n else SCORED  # extraction.json's "ok": an answer
        n[status] += 1
        if status == ERROR:
            cause = str(_get(row, "cause") or PROVIDER_ERROR)
            causes[cause] = causes.get(cause, 0) + 1
        elif status == SCORED:
            passed += _get(row, "passed") is True
            failed += _get(row, "passed") is False
            p, t = _get(row, "parse"), _get(row, "truncated")
            parse[parse_outcome(p, t)] += 1
            fixed += recovered(p, t)
    return Counts(scored=n[SCORED], passed=passed, failed=failed, errors=n[ERROR], not_covered=n[NOT_COVERED],
                  skipped=n[SKIPPED] + n[REFUSED], refused=n[REFUSED], causes=dict(sorted(causes.items())),
                  parse=parse, recovered=fixed)
