"""`fake`: echoes the truth. The self-test: every member scores 100% and passes its gate."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from evalkit.backends.base import BackendContext, Completion, Request
from evalkit.backends.providers import Provider
from evalkit.backends.spec import BackendSpec
from evalkit.corpus.specs import INPUT_MODES
from evalkit.errors import UsageError


class FakeBackend:
    model = "fake"

    def __init__(self, label: str, expected: Callable[[str], dict[str, Any]]):
        self.label, self.spec = label, "fake"
        self._expected = expected

    async def complete(self, request: Request) -> Completion:
        record = copy.deepcopy(self._expected(request.member))
        return Completion(record=record, raw=json.dumps(record, sort_keys=True), model=self.model)

    async def aclose(self) -> None:
        return None


def make(spec: BackendSpec, ctx: BackendContext) -> FakeBackend:
    if ctx.expected is None:
        raise UsageError("the fake backend needs the corpus truth")
    return FakeBackend(spec.label, ctx.expected)


# It echoes the truth, whatever is sent: free, and its figures say nothing about a model.
PROVIDER = Provider("fake", make, usage="fake", inputs=INPUT_MODES, unpublishable="echoes the truth", free=True)
