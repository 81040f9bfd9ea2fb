"""What became of one member × backend: its status, and the cause when it failed.

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

from dataclasses import dataclass, field
from typing import Any, Mapping

SCORED, ERROR, SKIPPED, REFUSED, NOT_COVERED = "scored", "error", "skipped", "refused", "not_covered"
OK = "ok"  # extraction.json: the backend returned an answer (to be scored, whatever its shape)

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


def classify(completion: Any, provider: str | None) -> Failed | None:
    """The failure a backend's `Completion` reports, or None when it is an answer to score.

    Only a completion that carries no output (``parse == "error"``) is a failure: a malformed or
    truncated answer is the model's real output, even when the backend noted an error beside it.
    `provider`: the backend's ``provider`` attribute ("openai", "anthropic", "python",
    "predictions", ...)."""
    from .pool import SKIPPED_PREFIX

    error = completion.error
    if not error or completion.parse != "error":
        return None
    if error.startswith(SKIPPED_PREFIX):
        return Failed(BUDGET_STOP, error[len(SKIPPED_PREFIX):].strip())
    if error.startswith(LIMIT_PREFIX):
        return Failed(LIMIT_EXCEEDED, error[len(LIMIT_PREFIX):].strip())
    if provider == "python":
        cause, sep, rest = error.partition(": ")
        return Failed(cause, rest) if sep and cause in _PIPELINE_CAUSES else Failed(PIPELINE_EXCEPTION, error)
    if provider == "predictions":
        return Failed(MISSING_PREDICTION, error)
    if error.split(":", 1)[0].strip() in _TIMEOUTS:
        return Failed(TIMEOUT, error)
    return Failed(PROVIDER_ERROR, error)


def extraction_status(completion: Any, provider: str | None) -> dict[str, Any]:
    """The status block of extraction.json: ``{"status": "ok"}`` or ``{"status": "error", "cause", "message"}``."""
    failed = classify(completion, provider)
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
    if status_of(data) != ERROR:
        return None
    return Failed(str(data.get("cause") or PROVIDER_ERROR), str(data.get("message") or ""))  # type: ignore[union-attr]
