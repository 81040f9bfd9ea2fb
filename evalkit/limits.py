"""Every input's bound, stated once: its default, the variable that overrides it, what it bounds.

Anything evalkit reads from a corpus, a provider or a user's pipeline is bounded here, so no input can
take unbounded time or memory. Exceeding a bound is never a traceback: a corpus file or document is a
one-line refusal naming the file and the limit (exit 3, `errors.LimitExceeded`), an answer is an
``error`` status with its cause. Each default can be overridden with its environment variable
(``EVALKIT_LIMIT_<NAME>``), read when the limit is checked; docs/limits.md lists them all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from evalkit.errors import UsageError

__all__ = ["Limit", "LIMITS", "DOCUMENT_BYTES", "ANSWER_BYTES", "YAML_BYTES", "YAML_NODES", "NESTING_DEPTH",
           "READ_DEADLINE_S", "markdown_table", "PIPELINE_TIMEOUT_S", "PIPELINE_MEMORY_BYTES", "JSON_FILE_BYTES", "PAGE_IMAGES"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limit:
    name: str  # lower_snake; the variable is EVALKIT_LIMIT_<NAME>
    default: float
    unit: str  # "bytes", "seconds", "nodes", "levels"
    bounds: str  # what it bounds, for the docs and the refusal
    exceeded: str = ""  # what exceeding it becomes (docs/limits.md)

    @property
    def env(self) -> str:
        return "EVALKIT_LIMIT_" + self.name.upper()

    def value(self) -> float:
        """The limit in force: the environment's override, else the default (a bad override is a usage error)."""
        raw = os.environ.get(self.env)
        if raw is None or raw.strip() == "":
            return self.default
        try:
            v = float(raw)
        except ValueError:
            raise UsageError(f"{self.env}={raw!r}: expected a number of {self.unit}") from None
        if v <= 0:
            raise UsageError(f"{self.env}={raw!r}: must be positive")
        return v

    def int_value(self) -> int:
        return int(self.value())

    def row(self) -> str:
        """Its row of the table in docs/limits.md."""
        shown = int(self.default) if float(self.default).is_integer() else self.default
        return f"| `{self.name}` | {shown} {self.unit} | `{self.env}` | {self.bounds} | {self.exceeded} |"

    def describe(self, value: float | None = None) -> str:
        """``document_bytes = 16777216 bytes (EVALKIT_LIMIT_DOCUMENT_BYTES)``, for refusals."""
        v = self.value() if value is None else value
        shown = int(v) if float(v).is_integer() else v
        return f"{self.name} = {shown} {self.unit} (raise it with {self.env})"


DOCUMENT_BYTES = Limit("document_bytes", 16 * MiB, "bytes", "a member's source document (each file of it)",
                       "that member refused (cause `invalid_input`, exit 3) in a run, a problem in `validate`; the others go on")
ANSWER_BYTES = Limit("answer_bytes", 8 * MiB, "bytes", "one answer: a provider's response body or a pipeline's result",
                     "refused from its Content-Length or as it arrives: `error` (cause `provider_error`, or "
                     "`pipeline_result_invalid` for a pipeline, exit 5), never held whole in memory")
YAML_BYTES = Limit("yaml_bytes", 4 * MiB, "bytes", "a corpus YAML file (task.yaml, manifest.yaml, truth.yaml, ontology)",
                   "a one-line refusal naming the file and the limit (exit 3): `validate` lists it, `run` stops before any call")
YAML_NODES = Limit("yaml_nodes", 1_000_000, "nodes", "the nodes a YAML file expands to, aliases counted each time used",
                   "a one-line refusal naming the file and the limit (exit 3): `validate` lists it, `run` stops before any call")
JSON_FILE_BYTES = Limit("json_file_bytes", 64 * MiB, "bytes", "a JSON file read as input (a prediction, a labels file)",
                        "that member × backend an `error` (cause `limit_exceeded`, exit 5); the others are scored")
NESTING_DEPTH = Limit("nesting_depth", 200, "levels", "nesting of any YAML or JSON value (answers included)",
                       "a YAML or JSON input: as its size limit; an answer text: `malformed` (scored as the model's output)")
READ_DEADLINE_S = Limit("read_deadline_s", 600, "seconds", "the whole of one provider call, body included (a deadline, not an idle timeout)",
                        "`error` (cause `timeout`, exit 5); each HTTP attempt is also bounded by the backend's own "
                        "`timeout=`, body included")
PIPELINE_TIMEOUT_S = Limit("pipeline_timeout_s", 300, "seconds", "one call of a python: pipeline (wall clock)",
                           "its process killed: `error` (cause `timeout`, exit 5); also `--pipeline-timeout`")
PIPELINE_MEMORY_BYTES = Limit("pipeline_memory_bytes", 4096 * MiB, "bytes", "the address space of a python: pipeline's process",
                              "the allocation fails in the pipeline's own process: `error` (cause "
                              "`pipeline_exception`, exit 5); evalkit and the other members go on")
PAGE_IMAGES = Limit("page_images", 100, "pages", "the pages of one member rendered to images (input mode `images`)",
                    DOCUMENT_BYTES.exceeded)

LIMITS: tuple[Limit, ...] = (DOCUMENT_BYTES, ANSWER_BYTES, YAML_BYTES, YAML_NODES, JSON_FILE_BYTES, NESTING_DEPTH,
                             READ_DEADLINE_S, PIPELINE_TIMEOUT_S, PIPELINE_MEMORY_BYTES, PAGE_IMAGES)


def markdown_table() -> str:
    """The table docs/limits.md holds (tests/test_limits_doc.py keeps the two in step)."""
    head = ["| Limit | Default | Variable | What it bounds | Exceeding it |", "|---|---|---|---|---|"]
    return "\n".join(head + [limit.row() for limit in LIMITS]) + "\n"
