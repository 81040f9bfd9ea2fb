"""`predictions:dir=DIR`: records made elsewhere, one ``<member id>.json`` per member.

Each file is bounded (`evalkit.limits`): its size (JSON_FILE_BYTES) is checked before it is read, its
nesting (NESTING_DEPTH) before it is scored; over either, the member is an ``error`` (cause
``limit_exceeded``) and the others are scored."""

from __future__ import annotations

import json
from pathlib import Path

from evalkit import limits
from evalkit._util.jsonio import loads, read_bounded_text
from evalkit.backends.base import BackendContext, Completion, Request
from evalkit.backends.providers import Provider
from evalkit.backends.spec import BackendSpec
from evalkit.corpus.specs import INPUT_MODES
from evalkit.errors import CorpusError, LimitExceeded, UsageError
from evalkit.status import LIMIT_PREFIX, MISSING_PREDICTION


def prediction_file(directory: str | Path, member_id: str) -> Path:
    """The one file a member's prediction is read from (a sweep's currency key stats it alone)."""
    return Path(directory) / f"{member_id}.json"


class PredictionsBackend:
    model = provider = "predictions"

    def __init__(self, label: str, directory: str, member_ids: dict[str, str]):
        self.label, self.spec = label, BackendSpec(label, "predictions", {"dir": directory}).redacted().spec
        self.dir = Path(directory)
        self._ids = member_ids

    async def complete(self, request: Request) -> Completion:
        member_id = self._ids.get(request.member, request.member.rsplit("/", 1)[-1])
        path = prediction_file(self.dir, member_id)
        if not path.is_file():
            return Completion(record=None, parse="error", model=self.model, calls=0,
                              error=f"no prediction file {path}")
        try:
            raw = read_bounded_text(path, limits.JSON_FILE_BYTES, "prediction file")
            record = loads(raw, str(path))
        except LimitExceeded as e:
            return Completion(record=None, parse="error", model=self.model, calls=0, error=f"{LIMIT_PREFIX} {e}")
        except CorpusError as e:  # not UTF-8: not a JSON text at all
            return Completion(record=None, parse="malformed", model=self.model, calls=0, error=str(e))
        except json.JSONDecodeError as e:
            return Completion(record=None, raw=raw, parse="malformed", model=self.model, calls=0,
                              error=f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})")
        if not isinstance(record, dict):
            return Completion(record=None, raw=raw, parse="malformed", model=self.model, calls=0,
                              error=f"{path}: expected a JSON object, got {type(record).__name__}")
        return Completion(record=record, raw=raw, model=self.model, calls=0)

    async def aclose(self) -> None:
        return None


def make(spec: BackendSpec, ctx: BackendContext) -> PredictionsBackend:
    if "dir" not in spec.options:
        raise UsageError("predictions backend: give dir=PATH")
    return PredictionsBackend(spec.label, spec.options["dir"], ctx.member_ids)


# It reads files and sends nothing: free, and the files may come from anywhere.
PROVIDER = Provider("predictions", make, usage="predictions:dir=PATH", inputs=INPUT_MODES, free=True,
                    unpublishable="replays a folder of answers from anywhere", failure=MISSING_PREDICTION)
