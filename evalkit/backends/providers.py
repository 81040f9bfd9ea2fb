"""Providers: one `Provider` record per backend kind, in one registry.

A record says everything the harness needs to know about a kind: how to make its backend from a
`BackendSpec` (`factory`), whether it calls a model (`live`: it can then be recorded to a cassette
and replayed, needs its key and counts against a budget), the model id its calls are keyed by in a
cassette, the environment variable holding its key. Resolving (`evalkit.backends.resolve`: modes,
key guards, the dry-run plan and its budget), the judge, the cassette miss message, publishing
(`unpublishable`), pricing (`free`, `page_rule`) and the status of a failed call (`failure`) ask the
record instead of naming kinds.

So a provider is added in one place, its record. evalkit's own are the ``PROVIDER`` of each module
in `BUILTIN`; a package adds its own without editing evalkit, through the entry-point group
``evalkit.backends`` (as scorers use ``evalkit.scorers``)::

    [project.entry-points."evalkit.backends"]
    toy = "toy_provider:PROVIDER"

The entry point's name is the kind (``--backend NAME=toy:key=value``) and its object a `Provider`
of that kind. An installed provider is loaded when its kind is first used (a broken one fails only
the runs that name it); it cannot replace a built-in kind.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points

from evalkit.backends.base import Backend, BackendContext
from evalkit.backends.spec import BackendSpec
from evalkit.errors import UsageError

__all__ = ["Provider", "GROUP", "BUILTIN", "provider", "declared", "providers", "registry"]

GROUP = "evalkit.backends"
BUILTIN = ("evalkit.backends.fake", "evalkit.backends.predictions", "evalkit.backends.anthropic",
           "evalkit.backends.openai", "evalkit.backends.pyfunc", "evalkit.backends.cassette")  # each one's PROVIDER


@dataclass(frozen=True)
class Provider:
    kind: str  # the KIND of a spec
    factory: Callable[[BackendSpec, BackendContext], Backend] | None  # None: cassette, which resolve opens (replay)
    usage: str  # how its spec is written, for messages: "openai:url=U[,model=M]"
    live: bool = False  # calls a model or a pipeline: recordable, replayable, key-guarded, budgeted
    default_model: str | None = None  # the model when the spec gives no model= (None: the SPEC itself, as python:)
    key_env: str | None = None  # the environment variable its key comes from (a live call needs it)
    key_unless: tuple[str, ...] = ()  # options that make the key unnecessary (openai's url=, socket=: a local server)
    metered: bool = True  # evalkit makes the calls itself, so prices and retries them (not a python pipeline)
    rerecord: str | None = None  # the spec that calls model {model} again, for a cassette miss's hint
    prompt_cache_min: int = 0  # the shortest prompt prefix (tokens) its prompt cache keeps; 0: no prompt caching
    batch: bool = False  # has a batch API (--batch): its backend has batch_submit / batch_status / batch_results
    # the input modes (`models.Settings.input`) its backend takes; any other is refused before any call
    inputs: tuple[str, ...] = ("text",)
    # Why its figures say nothing about a model (`evalkit publish` refuses its entries): it echoes the truth, or
    # replays answers from anywhere. None: publishable, as a provider's is unless it says otherwise.
    unpublishable: str | None = None
    free: bool = False  # its calls cost nothing (a local model, an offline backend): no price needed, spend 0
    page_rule: str | None = None  # the key of `pricing.PAGE_RULES` its page images are billed by (None: the dearest)
    # What a completion of it that carries no output is (`evalkit.status.classify`): None, its provider's error
    # (or a timeout); a cause of `evalkit.status` otherwise (PIPELINE_EXCEPTION: the error names its cause first).
    failure: str | None = None

    def model(self, spec: BackendSpec) -> str:
        """The model id a live spec's calls are keyed by in a cassette."""
        return spec.options.get("model") or self.default_model or spec.spec

    def missing_key(self, spec: BackendSpec, env: Mapping[str, str]) -> str | None:
        """Why a live call of `spec` cannot be made with `env` (its key is not set), or None."""
        if not self.key_env or env.get(self.key_env) or any(spec.options.get(k) for k in self.key_unless):
            return None
        unless = f" (give {' or '.join(k + '=...' for k in self.key_unless)} for a local server)" if self.key_unless else ""
        return f"backend {spec.label}: {self.key_env} is not set{unless}"


@cache
def registry() -> dict[str, Provider | EntryPoint]:
    """kind → its `Provider`: the built-ins, then installed packages' (loaded on first use, by `provider`)."""
    found: dict[str, Provider | EntryPoint] = {}
    for module in BUILTIN:
        record = importlib.import_module(module).PROVIDER
        found[record.kind] = record
    for ep in sorted(entry_points(group=GROUP), key=lambda ep: ep.name):
        found.setdefault(ep.name, ep)
    return found


def provider(kind: str) -> Provider:
    """The `Provider` of `kind`; `UsageError` for a kind nothing provides, or an entry point that does not load."""
    found = registry().get(kind)
    if found is None:
        raise UsageError(f"unknown kind {kind!r} (known: {', '.join(sorted(registry()))})")
    if isinstance(found, EntryPoint):
        try:
            record = found.load()
        except Exception as e:  # noqa: BLE001 - a broken plugin is a configuration error, named as such
            raise UsageError(f"backend kind {kind!r}: entry point {found.value} ({GROUP}) does not load: "
                             f"{type(e).__name__}: {e}") from None
        if not isinstance(record, Provider) or record.kind != kind:
            raise UsageError(f"backend kind {kind!r}: entry point {found.value} ({GROUP}) must be a Provider "
                             f"of kind {kind!r}")
        found = registry()[kind] = record
    return found


def declared(kind: str | None) -> Provider | None:
    """The `Provider` of `kind` when one is registered and loads, else None: for what a stored run names (a
    backend's ``provider``, a redacted spec's kind), where an unknown kind has only the defaults."""
    try:
        return provider(kind) if kind else None
    except UsageError:
        return None


def providers() -> list[Provider]:
    """Every provider, in registry order (built-ins first)."""
    return [provider(kind) for kind in registry()]
