"""Named errors. Each carries the exit code the CLI returns for it.

User mistakes (bad YAML, wrong hashes, unknown backends) are raised as one of
these and printed as a single message, never as a traceback.
"""

from __future__ import annotations

# Exit codes, documented in the README. Scripts may rely on them.
EXIT_OK = 0
EXIT_FAILED = 1  # a member failed its verdict (score below threshold or gate disagrees)
EXIT_USAGE = 2  # bad command line
EXIT_INVALID = 3  # invalid corpus / input files, or a path or name escaping its folder
EXIT_INTEGRITY = 4  # a source's sha256 does not match its manifest
EXIT_BACKEND = 5  # a backend / provider failed
EXIT_CASSETTE = 6  # cassette miss or corrupt cassette
EXIT_PARTIAL = 7  # check: a standing entry was not covered or errored, so the gate saw only part of the board
EXIT_DISK = 8  # the disk is full (or not writable): nothing half-written, the run resumes once space is freed


class EvalkitError(Exception):
    """Base class: a message meant for the user, and an exit code."""

    exit_code = EXIT_INVALID

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(EvalkitError):
    exit_code = EXIT_USAGE


class CorpusError(EvalkitError):
    """A corpus file is missing, malformed or does not match its schema."""

    exit_code = EXIT_INVALID


class Escape(CorpusError):
    """A path or name that would lead outside its folder (corpus, sources, task or run folder),
    refused before anything is read, imported or written (`evalkit._util.paths`)."""


class LimitExceeded(CorpusError):
    """An input is larger, deeper or more expanded than its bound (`evalkit.limits`); the message names
    the file and the limit, and how to raise it."""


class NonFinite(CorpusError):
    """A NaN or Infinity on its way into a JSON file (JSON has neither; strict parsers refuse them):
    refused, naming the file and the key path, before anything is written (`evalkit._util.jsonio`)."""


class RecordError(CorpusError):
    """A file evalkit wrote (run.json, score.json, summary.json, the board, …) holds a value of the wrong type, or
    a schema_version this evalkit does not read: one line naming the file and the key path (exit 3)."""


class InvalidCorpus(CorpusError):
    """Several problems found at once (by `evalkit validate` or strict loading)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class IntegrityError(EvalkitError):
    """A member's source bytes do not match the sha256 its manifest pins."""

    exit_code = EXIT_INTEGRITY


class SourceMissing(EvalkitError):
    """A pointer member's source file is not present: the member is skipped."""

    exit_code = EXIT_INVALID


class UnreadableSource(CorpusError):
    """A source document that is present but cannot be read as what it claims to be (a corrupt PDF)."""


class UnsupportedInput(UnreadableSource):
    """A source the run's input mode cannot send (a text file in the ``pdf`` or ``images`` mode): refused."""


class BackendError(EvalkitError):
    exit_code = EXIT_BACKEND


class MissingKey(BackendError):
    """A live backend's API key variable is not set: a fix on the command line (exit 2), found before any
    member runs (`evalkit.backends.resolve.missing_keys`), not a provider failure."""

    exit_code = EXIT_USAGE


class CassetteError(EvalkitError):
    exit_code = EXIT_CASSETTE


class CassetteMiss(CassetteError):
    pass


class CassetteCorrupt(CassetteError):
    pass


class DiskFull(EvalkitError):
    """Writing a run's files failed for lack of space (ENOSPC/EDQUOT) or permission: one line, and what
    was written before stays whole (every write is atomic), so the same command resumes."""

    exit_code = EXIT_DISK


# The errors of one stage each; defined here so that every error evalkit raises is in one hierarchy, with its
# exit code, and a caller catches one without importing the stage that raises it.


class NoTextLayer(CorpusError):
    """A PDF source with no text on any page (a scan) in the ``text`` input mode: nothing to send, so skipped."""


class ScoreboardError(EvalkitError):
    """The scoreboard (or a run folder it points at) is missing, corrupt or from another schema."""

    exit_code = EXIT_INVALID


class BandError(EvalkitError):
    """A band file, or the sweeps a band is measured from, is missing, corrupt or holds nothing to measure."""

    exit_code = EXIT_INVALID


class SweepFailed(EvalkitError):
    """A band sweep had refused or failed members; its exit code is the worst sweep's."""

    def __init__(self, code: int):
        super().__init__("a band sweep had refused or failed members (listed above); fix them, or pass "
                         "--allow-failures to measure the band on the members every sweep scored")
        self.exit_code = code


class NotPublishable(EvalkitError):
    """A scoreboard entry that may not go on the public board (its backend, truth provenance or licence)."""

    exit_code = EXIT_INVALID


class RunLocked(UsageError):
    """The run folder is held by a live run."""


class WorkerDied(BackendError):
    """The worker process running a call died: the call's result, never raised (`evalkit.execution.workers`)."""

    def __init__(self) -> None:
        super().__init__("the worker process died (killed, out of memory, or a crash in native code)")


class ChildGone(BackendError):
    """A python pipeline's process closed its answers pipe (it exited, crashed or was killed); the backend
    turns it into the call's error (`evalkit.backends.pyfunc`)."""

    def __init__(self, message: str = "the pipeline's process closed its answers pipe") -> None:
        super().__init__(message)


class Oversize(BackendError):
    """A python pipeline's process announced an answer frame over the limit: it is not read."""

    def __init__(self, size: int) -> None:
        super().__init__(f"an answer frame of {size} bytes, over the limit")
        self.size = size
