"""From ``--backend``/``--record`` arguments and the environment to backends — and a plan.

Three steps, the same for a real run and ``--dry-run``:

1. `resolve_backends(specs, record_args)` — pure: finds each spec's `Provider`,
   applies ``--record NAME=PATH`` and ``EVALKIT_RECORD_LLM`` /
   ``EVALKIT_REPLAY_LLM``, loads the cassettes involved and collects every
   guard that would abort a run (corrupt or missing cassette, two backends on
   one cassette, a missing API key). No network, no files written.
2. `plan(resolved, requests)` — what a run would do: per backend replay or
   live, records in its cassette, hits and misses, calls that would be made,
   estimated tokens and an upper bound of the USD, and what the provider's prompt
   cache would save. With ``require_prices`` (a
   dry run or ``--max-usd``, without ``--allow-unpriced``) a backend whose
   spend cannot be bounded is a guard too. Still no network and no files
   written.
3. `check_guards(resolved)` then `open_backends(resolved, ctx)` — the real
   run: raise on the first guard *before any call*, then construct the
   backends (a recording backend creates its cassette and failure sidecar).

`build_backends` does 1 + 3 in one call.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evalkit.backends.base import Backend, BackendContext, Request
from evalkit.backends.cassette import (
    CASSETTE,
    RECORD_ENV,
    REPLAY_ENV,
    Cassette,
    RecordingBackend,
    ReplayBackend,
    cassette_key,
    env_cassette,
    miss_message,
    why_missed,
)
from evalkit.backends.live import DEFAULT_MAX_RETRIES, call_budgets, option_int
from evalkit.backends.pricing import PRICES_ENV, PriceTable, default_table, estimate_tokens, parts_tokens, request_chars
from evalkit.backends.providers import Provider, provider, providers
from evalkit.backends.spec import BackendSpec
from evalkit.corpus.sources import sha256_file
from evalkit.errors import CassetteCorrupt, CassetteError, CassetteMiss, EvalkitError, MissingKey, UsageError


@dataclass
class Guard:
    kind: str  # "corrupt_cassette" | "missing_cassette" | "duplicate_cassette" | "missing_api_key" | "cassette_miss"
    #          | "unpriced_model"
    label: str
    message: str

    @property
    def error(self) -> type[EvalkitError]:
        return {"corrupt_cassette": CassetteCorrupt, "missing_cassette": CassetteError,
                "duplicate_cassette": CassetteError, "missing_api_key": MissingKey,
                "cassette_miss": CassetteMiss, "unpriced_model": UsageError}.get(self.kind, UsageError)


@dataclass
class Resolved:
    spec: BackendSpec  # as given on the command line
    provider: Provider  # of its kind
    mode: str  # "live" | "record" | "replay" | "offline"
    model: str | None  # the model id in cassette keys (None: offline kinds, or a multi-model cassette)
    cassette: Path | None = None
    cassette_obj: Cassette | None = None  # when loaded
    via_env: str | None = None  # the env var that chose record/replay
    fresh: bool = False  # records into a cassette that was empty or absent: everything in it is this run's
    guards: list[Guard] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def cassette_path(self) -> Path:
        """The cassette of a record or replay backend (`resolve_backends` gives each of them one)."""
        assert self.cassette is not None, f"backend {self.label} ({self.mode}) has no cassette"
        return self.cassette

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def options(self) -> Mapping[str, str]:
        return self.spec.options


def _split_pairs(args: Iterable[str], flag: str) -> list[tuple[str, str]]:
    out = []
    for arg in args:
        name, eq, value = arg.partition("=")
        if not eq or not name or not value:
            raise UsageError(f"{flag} {arg!r}: expected NAME=PATH")
        out.append((name, value))
    return out


def _load(path: Path, r: Resolved, missing_ok: bool) -> None:
    try:
        r.cassette_obj = Cassette.load(path, missing_ok=missing_ok)
    except CassetteCorrupt as e:
        r.guards.append(Guard("corrupt_cassette", r.label, str(e)))
    except CassetteError as e:
        r.guards.append(Guard("missing_cassette", r.label, str(e)))
    else:
        if r.cassette_obj.torn:
            r.notes.append(r.cassette_obj.torn)


def _key_guard(r: Resolved, env: Mapping[str, str]) -> None:
    missing = r.provider.missing_key(r.spec, env) if r.mode in ("live", "record") else None
    if missing:
        r.guards.append(Guard("missing_api_key", r.label, missing))


KEY_FIX = "export it, or replay a recording instead (--backend NAME=cassette:path=P)"


def missing_keys(specs: Sequence[BackendSpec], env: Mapping[str, str] | None = None) -> None:
    """Raise `MissingKey` (exit 2), one line per backend, when a live backend's API key is not set: the
    missing-key guard of `resolve_backends` alone (no cassette read), checked when a command's options are
    built, so a sweep stops before its first member instead of failing every member. A replay
    (``EVALKIT_REPLAY_LLM``) needs no key; an unknown kind is left to `resolve_backends` to name."""
    env = os.environ if env is None else env
    if (env_cassette(env) or ("",))[0] == "replay":
        return
    missing = []
    for spec in specs:
        try:
            prov = provider(spec.kind)
        except UsageError:
            continue
        if prov.live and (why := prov.missing_key(spec, env)):
            missing.append(f"{why}: {KEY_FIX}")
    if missing:
        raise MissingKey("\n".join(missing))


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _content_sha(path: Path) -> str | None:
    """The file's sha256; None when it is empty or unreadable (nothing to compare)."""
    try:
        return sha256_file(path) if path.stat().st_size else None
    except OSError:
        return None


def _live_kinds() -> str:
    return ", ".join(p.kind for p in providers() if p.live)


def resolve_backends(specs: Sequence[BackendSpec], record_args: Sequence[str] = (),
                     env: Mapping[str, str] | None = None) -> list[Resolved]:
    """Resolve every backend; collect guards. Raises UsageError for an invalid invocation."""
    env = os.environ if env is None else env
    env_mode = env_cassette(env)
    records = dict(_split_pairs(record_args, "--record"))
    if env_mode and env_mode[0] == "replay" and records:
        raise UsageError(f"--record and {REPLAY_ENV} contradict each other: record or replay, not both")
    out: list[Resolved] = []
    seen: set[str] = set()
    for spec in specs:
        label, kind, options = spec.label, spec.kind, spec.options
        if label in seen:
            raise UsageError(f"--backend {spec}: the name {label!r} is used twice (give each backend its own NAME=)")
        seen.add(label)
        try:
            prov = provider(kind)
        except UsageError as e:
            raise UsageError(f"backend {spec}: {e}") from None
        if kind == CASSETTE:
            if label in records:
                raise UsageError(f"--record {label}=...: backend {label} replays a cassette; record a live backend "
                                 f"({_live_kinds()}) instead")
            if not options.get("path"):
                raise UsageError(f"backend {spec}: give path=PATH")
            r = Resolved(spec, prov, "replay", options.get("model") or None, cassette=Path(options["path"]))
            _load(r.cassette_path, r, missing_ok=False)
            if r.model is None and r.cassette_obj is not None:
                models = r.cassette_obj.models()
                r.model = models[0] if len(models) == 1 else None
                if len(models) > 1:
                    r.notes.append(f"cassette holds {len(models)} models ({', '.join(models)}); "
                                   f"any of them may answer — give model=M to pin one")
        elif prov.live:
            r = Resolved(spec, prov, "live", prov.model(spec))
            if label in records:
                r.mode, r.cassette = "record", Path(records.pop(label))
            elif env_mode and env_mode[0] == "record":
                r.mode, r.cassette, r.via_env = "record", env_mode[1], RECORD_ENV
            elif env_mode and env_mode[0] == "replay":
                r.mode, r.cassette, r.via_env = "replay", env_mode[1], REPLAY_ENV
            if r.mode == "record":
                _load(r.cassette_path, r, missing_ok=True)
                r.fresh = r.cassette_obj is not None and len(r.cassette_obj) == 0
            elif r.mode == "replay":
                _load(r.cassette_path, r, missing_ok=False)
            _key_guard(r, env)
        else:
            r = Resolved(spec, prov, "offline", None)
            if label in records:
                raise UsageError(f"--record {label}=...: backend {label} ({kind}) makes no model calls; "
                                 f"only {_live_kinds()} backends can be recorded")
        out.append(r)
    if records:
        raise UsageError(f"--record {', '.join(records)}: no --backend with that name")
    _duplicate_guards(out)
    return out


def _duplicate_guards(resolved: list[Resolved]) -> None:
    with_cassette = [(r, r.cassette) for r in resolved if r.cassette is not None]
    for i, (a, path_a) in enumerate(with_cassette):
        for b, path_b in with_cassette[:i]:
            if _same_file(path_a, path_b):
                why = f"the same file ({path_a})"
            else:
                sa, sb = _content_sha(path_a), _content_sha(path_b)
                if not (sa and sa == sb):
                    continue
                why = f"byte-identical files ({path_b} and {path_a})"
            a.guards.append(Guard("duplicate_cassette", a.label,
                                  f"backends {b.label} and {a.label} resolve to {why}: comparing a cassette with "
                                  f"itself measures nothing — give each backend its own cassette"))


def _answers(path: Path) -> list[str] | None:
    """A cassette's answers, member by member, without what differs between two recordings of the same
    thing (timestamps, latency, the label's model name); None when it holds none."""
    try:
        records = Cassette.load(path).records
    except CassetteError:
        return None
    answers = sorted(json.dumps([r.get("member"), r.get("call_type"), (r.get("response") or {}).get("content"),
                                 (r.get("response") or {}).get("record")], sort_keys=True) for r in records)
    return answers or None


def duplicate_recordings(resolved: Iterable[Resolved]) -> str | None:
    """After a recording run: two cassettes this run recorded afresh whose answers are byte-identical, member
    by member (one model recorded twice under two labels, by mistake) — the message naming both labels, or
    None. Timestamps and latencies always differ between two recordings; the answers of two models do not
    all coincide."""
    fresh = [(r, answers) for r in resolved if r.fresh and r.cassette is not None
             and (answers := _answers(r.cassette)) is not None]
    for i, (a, sa) in enumerate(fresh):
        for b, sb in fresh[:i]:
            if sa == sb:
                return (f"backends {b.label} and {a.label} recorded byte-identical answers ({b.cassette} and "
                        f"{a.cassette}): the same model recorded twice under two labels? Their results are not two "
                        f"measurements — record each backend from its own model")
    return None


def all_guards(resolved: Iterable[Resolved]) -> list[Guard]:
    return [g for r in resolved for g in r.guards]


def check_guards(resolved: Iterable[Resolved], plan_: Plan | None = None) -> None:
    """Raise (before any call) if any guard fires; the error lists every guard, its class is the first's."""
    guards = all_guards(resolved) + (list(plan_.guards) if plan_ is not None else [])
    seen, unique = set(), []
    for g in guards:
        if (g.kind, g.label, g.message) not in seen:
            seen.add((g.kind, g.label, g.message))
            unique.append(g)
    if unique:
        raise unique[0].error("\n".join(g.message for g in unique))


def check_inputs(resolved: Iterable[Resolved], requests: Sequence[Request], judge: Resolved | None = None) -> None:
    """`UsageError` (before any call) naming the first backend that cannot take a request's input mode
    (`Provider.inputs`: a ``python:`` pipeline takes text only), or a judge asked to judge a run whose
    documents are not sent as text (the judge is given the document's text)."""
    modes = sorted({r.input for r in requests} - {"text"})
    if not modes:
        return
    for r in resolved:
        refused = [m for m in modes if m not in r.provider.inputs]
        if refused:
            member = next(q.member for q in requests if q.input == refused[0])
            raise UsageError(f"backend {r.label} ({r.kind}) cannot take input mode {refused[0]} ({member}, ...): it "
                             f"takes {', '.join(r.provider.inputs)}; run it with --set input=text, or another backend")
    if judge is not None:
        raise UsageError(f"--judge: the judge reads the document as text, and input mode {modes[0]} sends it as "
                         "parts; judge a run with --set input=text")


# -- plan ------------------------------------------------------------------------------------------------
BOUND_METHOD = ("an upper bound: prompt tokens as characters/4 (a PDF's or page images' tokens by the provider's "
                "documented rule, `pricing.PAGE_RULES`), every call billed its whole max_tokens and, "
                "if cut off, once more at twice that, each sent 1 + max_retries times")


@dataclass
class BackendPlan:
    label: str
    spec: str
    kind: str
    mode: str
    model: str | None
    cassette: str | None
    cassette_records: int | None
    requests: int
    replay_hits: int
    calls: int  # provider calls a run would make, one per request not replayed (retries not counted)
    est_input_tokens: int  # one pass: each call sent once
    est_output_tokens: int  # one pass, at max_tokens
    est_usd: float  # the upper bound (BOUND_METHOD)
    priced: bool
    pass_usd: float = 0.0  # one pass: each call sent once, billed its max_tokens
    max_retries: int = 0
    notes: list[str] = field(default_factory=list)
    not_covered: list[str] = field(default_factory=list)  # member keys the replayed cassette has no recording of
    not_covered_why: dict[str, str] = field(default_factory=dict)  # member key → what changed since recording
    cache_prefix_tokens: int = 0  # the longest prefix its calls share (system + schema, chars/4)
    cache_saving_usd: float = 0.0  # what the provider's prompt cache saves on one pass (0: not cached)


@dataclass
class Plan:
    backends: list[BackendPlan]
    guards: list[Guard]
    price_source: str = "built-in"

    @property
    def ok(self) -> bool:
        return not self.guards

    @property
    def calls(self) -> int:
        return sum(b.calls for b in self.backends)

    @property
    def est_usd(self) -> float:
        return sum(b.est_usd for b in self.backends)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "calls": self.calls, "est_usd": round(self.est_usd, 6), "price_table": self.price_source,
                "estimate_method": BOUND_METHOD,
                "backends": [asdict(b) for b in self.backends], "guards": [asdict(g) for g in self.guards]}

    def render(self) -> str:
        out = ["dry run: no calls made"]
        for b in self.backends:
            where = f" cassette {b.cassette} ({b.cassette_records} records)" if b.cassette else ""
            line = f"  {b.label}: {b.mode} {b.spec}{where} — {b.requests} requests"
            if b.mode in ("replay", "record"):
                line += f", {b.replay_hits} replayed"
            if b.not_covered:
                line += f", {len(b.not_covered)} not covered"
            if b.mode in ("live", "record"):
                cost = (f"≤ ${b.est_usd:.4f} (one pass ~${b.pass_usd:.4f})" if b.priced
                        else f"cost unknown ({_unpriced_why(b.kind, b.model)})")
                line += f", {b.calls} calls, ~{b.est_input_tokens} input + ≤{b.est_output_tokens} output tokens, {cost}"
            out.append(line)
            if b.mode in ("live", "record") and b.calls and b.priced and provider(b.kind).prompt_cache_min:
                out.append(f"      prompt caching: {_cache_line(b)}")
            out += [f"      note: {n}" for n in b.notes]
        unpriced = [b.label for b in self.backends if b.calls and not b.priced]
        cost = f"at most ${self.est_usd:.4f}" + (f" plus the unknown cost of {', '.join(unpriced)}" if unpriced else "")
        out.append(f"  total: {self.calls} provider calls, {cost} ({BOUND_METHOD}; prices: {self.price_source})")
        if self.guards:
            out.append("  a real run would abort:")
            out += ["    - " + g.message.replace("\n", "\n      ") for g in self.guards]
        else:
            out.append("  no guard would abort a real run")
        return "\n".join(out)


def _cache_line(b: BackendPlan) -> str:
    least = provider(b.kind).prompt_cache_min
    prefix = f"shared prefix ~{b.cache_prefix_tokens} tokens (system prompt + schema, characters/4)"
    if b.cache_prefix_tokens < least:
        return f"no saving: {prefix}, under the {least}-token minimum a prompt cache keeps"
    return f"saves ~${b.cache_saving_usd:.4f} of the one-pass cost: {prefix}, written once, then read"


def cache_saving(r: Resolved, calls: Sequence[Request], table: PriceTable) -> tuple[int, float]:
    """(the longest shared prefix in tokens, USD saved) when `calls` go through `r`'s prompt cache: calls
    sharing a system prompt and schema share a prefix; one writes it, the rest read it (`PriceTable.cache_saving`)."""
    least = r.provider.prompt_cache_min
    groups: Counter[tuple[str, str]] = Counter((c.system, json.dumps(c.schema, sort_keys=True, separators=(",", ":"))) for c in calls)
    longest, saved = 0, 0.0
    for (system, schema), n in groups.items():
        tokens = estimate_tokens(len(system) + len(schema))
        longest = max(longest, tokens)
        if least and tokens >= least:
            saved += table.cache_saving(r.model or "", tokens, n)
    return longest, saved


def _max_retries(r: Resolved) -> int:
    return option_int(r.options, "max_retries", DEFAULT_MAX_RETRIES) if r.provider.live and r.provider.metered else 0


def _priced(r: Resolved, table: PriceTable) -> bool:
    """Whether a run can bound what `r` spends: a free provider's spend is 0 (`Provider.free`); a python
    pipeline's own calls are out of evalkit's sight."""
    return r.mode not in ("live", "record") or r.provider.free or (r.provider.metered and table.priced(r.model or ""))


def _unpriced_why(kind: str, model: str | None) -> str:
    if not provider(kind).metered:
        return f"{model} is a python pipeline: evalkit cannot see or price the calls it makes"
    return f"model {model} is not in the price table"


def price_guard(r: Resolved, table: PriceTable) -> Guard | None:
    """Budgets fail closed: a backend whose spend cannot be bounded stops a --max-usd run or a dry run."""
    if _priced(r, table):
        return None
    fix = ("pass --allow-unpriced to run it without a cost bound" if not r.provider.metered else
           f"price it in a YAML or JSON file given with --prices FILE or ${PRICES_ENV} "
           f"('{r.model}: {{input: X, output: Y}}', USD per million tokens), or pass --allow-unpriced to run it "
           f"without a cost bound")
    return Guard("unpriced_model", r.label,
                 f"backend {r.label}: {_unpriced_why(r.kind, r.model)} (prices: {table.source}), so --max-usd cannot "
                 f"bound its spend and a dry run cannot estimate it: {fix}")


def plan(resolved: Sequence[Resolved], requests: Sequence[Request], prices: PriceTable | None = None, *,
         require_prices: bool = False, judge: Resolved | None = None, strict_replay: bool = False,
         batch: bool = False) -> Plan:
    """What a run of `requests` through every resolved backend (and `judge`, whose requests depend on the
    extractions: guards only) would do. Makes no calls, writes nothing.

    `require_prices` (a dry run, or --max-usd, without --allow-unpriced): every backend that would call
    something, and a live judge, must have a price (`price_guard`). A replayed request with no recording is
    `not covered` (listed, its member left out; `evalkit.status`); with `strict_replay`, a guard."""
    table = prices or default_table()
    plans: list[BackendPlan] = []
    guards = list(all_guards(resolved))
    for r in resolved:
        cas = r.cassette_obj
        counts: Counter[str] = cas.key_counts() if cas is not None else Counter()
        hits = calls = tok_in = tok_out = 0
        usd = pass_usd = 0.0
        retries = _max_retries(r)
        misses: list[tuple[Request, str]] = []
        called: list[Request] = []
        batched = batch and r.provider.batch and r.mode in ("live", "record")  # --batch: first calls at its rate
        models = [r.model] if r.model else (cas.models() if cas is not None else [])
        for req in requests:
            if r.mode in ("replay", "record") and cas is not None:
                key = next((k for k in (cassette_key(req, m) for m in models) if counts[k] > 0), None)
                if key is not None:
                    counts[key] -= 1
                    hits += 1
                    continue
                if r.mode == "replay":
                    misses.append((req, cassette_key(req, models[0]) if models else "-"))
                    continue
            if r.mode in ("live", "record"):
                calls += 1
                called.append(req)
                chars = request_chars(req)
                pages = parts_tokens(req, r.provider.page_rule)  # a PDF or page images: by its provider's rule
                tok_in += estimate_tokens(chars) + pages
                tok_out += req.max_tokens
                if r.provider.metered:
                    usd += table.bound(r.model or "", chars, call_budgets(req.max_tokens), sends=1 + retries,
                                       batch=batched, page_tokens=pages)
                    pass_usd += table.bound(r.model or "", chars, [req.max_tokens], batch=batched, page_tokens=pages)
        if require_prices and calls and (unpriced := price_guard(r, table)):
            guards.append(unpriced)
        prefix, saving = cache_saving(r, called, table) if r.provider.metered else (0, 0.0)
        notes = list(r.notes)
        if r.via_env:
            notes.append(f"{r.mode} chosen by {r.via_env}")
        if batched and calls:
            notes.append(f"--batch: {calls} request(s) in provider batches, priced at the batch rate")
        not_covered = [] if strict_replay else [req.member for req, _ in misses]
        why = {req.member: why_missed(cas, req, models[0] if models else None) for req, _ in misses
               if not strict_replay and cas is not None}
        if not_covered:
            members = ", ".join(not_covered[:5]) + (" ..." if len(not_covered) > 5 else "")
            common, n = Counter(why.values()).most_common(1)[0] if why else ("", 0)
            notes.append(f"{len(not_covered)} member(s) not covered by {r.cassette} ({members}): not scored"
                         + (f"; {'all' if n == len(not_covered) else n}: {common}" if n else "")
                         + "; --strict-replay makes a miss abort the run")
        elif misses and cas is not None:
            first_req, first_key = misses[0]
            members = ", ".join(m.member for m, _ in misses[:5]) + (" ..." if len(misses) > 5 else "")
            guards.append(Guard("cassette_miss", r.label,
                                f"backend {r.label}: {len(misses)} request(s) not in {r.cassette} ({members})\n"
                                + miss_message(cas, r.label, first_req, first_key, models[0] if models else None)))
        plans.append(BackendPlan(
            label=r.label, spec=r.spec.redacted().spec, kind=r.kind, mode=r.mode, model=r.model,
            cassette=str(r.cassette) if r.cassette else None,
            cassette_records=len(cas) if cas is not None else (0 if r.cassette else None),
            requests=len(requests), replay_hits=hits, calls=calls, est_input_tokens=tok_in, est_output_tokens=tok_out,
            est_usd=usd, priced=_priced(r, table), pass_usd=pass_usd, max_retries=retries, notes=notes,
            not_covered=not_covered, not_covered_why=why, cache_prefix_tokens=prefix, cache_saving_usd=saving))
    if judge is not None:
        guards += judge.guards
        if require_prices and (unpriced := price_guard(judge, table)):
            guards.append(unpriced)
    return Plan(plans, guards, price_source=table.source)


# -- opening ---------------------------------------------------------------------------------------------
def _construct(r: Resolved, ctx: BackendContext, prices: PriceTable | None) -> Backend:
    factory = r.provider.factory
    assert factory is not None, f"backend {r.label}: a {r.kind} backend is opened by replay"  # only cassette has none
    b = factory(r.spec, ctx)
    if prices is not None and r.provider.live and hasattr(b, "prices"):
        b.prices = prices
    return b


def open_backends(resolved: Sequence[Resolved], ctx: BackendContext | None = None, prices: PriceTable | None = None,
                  check: bool = True) -> list[Backend]:
    """Construct every backend (after `check_guards`, unless check=False). Recording creates its files here."""
    if check:
        check_guards(resolved)
    ctx = ctx if ctx is not None else BackendContext()
    out: list[Backend] = []
    for r in resolved:
        if r.mode == "replay":
            out.append(ReplayBackend(r.label, r.cassette_path, model=r.model, cassette=r.cassette_obj))
        elif r.mode == "record":
            out.append(RecordingBackend(_construct(r, ctx, prices), r.cassette_path, provider=r.kind,
                                        cassette=r.cassette_obj))
        else:
            out.append(_construct(r, ctx, prices))
    return out


def build_backends(specs: Sequence[BackendSpec], record_args: Sequence[str] = (), ctx: BackendContext | None = None,
                   env: Mapping[str, str] | None = None, prices: PriceTable | None = None) -> list[Backend]:
    """resolve → guards → construct: what a real run calls before its first extraction."""
    return open_backends(resolve_backends(specs, record_args, env), ctx, prices)
