"""Private (BYOM) corpora: publish a member's standing to the committed ``byom-scoreboard.json``.

A private corpus (``--corpus DIR``) keeps its own scoreboard beside its members
(``DIR/scoreboard.json``, never committed). ``evalkit publish MEMBER --corpus DIR`` copies one
member's scored entries onto ``byom-scoreboard.json`` at the root of the evalkit checkout
(``--board PATH`` to choose another file), which *is* committed. What is copied:

* ``identity``: task id, member id, licence SPDX id, held-out flag, source kind, number of source
  files and their sha256, and the truth provenance (authored_by / verified_by / adversarial_pass / date);
* ``run``: date, model, evalkit version, backend label and spec (secrets as ``***``, local paths
  as ``<local>``), request sha256, tokens, USD, latency, calls, parse outcome, truncation, and
  whether the backend reported an error (a flag: the message may quote the document);
* ``truth_sha256``, non-default ``settings``, and the ``metrics`` block reduced to numbers,
  booleans and nulls (aggregate counts and ratios).

Local paths are redacted everywhere in the entry, not only in the spec: a ``python:`` pipeline's
model id is ``python:<local>`` like its spec, and any absolute, ``~/``, ``./`` or ``../`` path (or
``C:\\``) in any other string — a model id a local server reported, the truth provenance's free
text — becomes ``<local>`` (URLs are kept).

Never copied: the manifest title, source file names, document text, truth values, item tables,
notes, error messages, justification texts. Before writing, a guard re-checks that no truth string
value and no long run of document text occurs anywhere in the published entry.

Refused (exit 3): a MEMBER that is a path rather than ``TASK/MEMBER`` names (before anything is
loaded or imported), a member with no scored entry in the private scoreboard, an entry scored by
the ``fake`` or ``predictions`` backend (the truth echoed, or answers from anywhere), one whose
``truth_provenance`` has a leg that is blank or a placeholder, or whose truth changed since it was scored
(``evalkit rescore`` first). A source that no longer matches its pinned or sidecar hash is
refused with exit 4.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalkit._util.paths import member_ref
from evalkit.backends.providers import declared
from evalkit.backends.spec import BackendSpec, redact_stored
from evalkit.corpus.sources import check_integrity, read_document, sha256_file, source_paths
from evalkit.corpus.tasks import DEFAULT_CORPUS, Member, find_task, load_task, sources_dir, task_dirs
from evalkit.errors import EvalkitError, NotPublishable
from evalkit.report.chrome import document, nav
from evalkit.results.runfolder import INDEX
from evalkit.results.scoreboard import (
    Board,
    BoardEntry,
    RunBlock,
    edit_board,
    numeric_metrics,
    read_board,
    truth_sha256,
)

__all__ = ["BYOM_BOARD", "NotPublishable", "default_byom_board", "find_member", "public_entry", "publish",
           "render_byom_html", "write_byom_report"]

BYOM_BOARD = "byom-scoreboard.json"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_URL_OR_PATH = re.compile(r"""(?P<url>\b[A-Za-z][\w+.-]*://[^\s'"<>]+)"""
                          r"""|(?<![\w.~/\\-])(?:~|\.{1,2})?/[^\s,;'"()<>]+|\b[A-Za-z]:\\[^\s,;'"()<>]+""")
_HEX = re.compile(r"^[0-9a-f]{64}$")


def default_byom_board() -> Path:
    """``byom-scoreboard.json`` at the root of the evalkit checkout (beside ``corpus/``)."""
    return DEFAULT_CORPUS.parent / BYOM_BOARD


def find_member(corpus: Path, ref: str) -> Member:
    """``TASK/MEMBER`` or a bare member id (must name exactly one member across the corpus's tasks)."""
    task_id, _, member_id = member_ref(ref).rpartition("/")
    if task_id:
        return find_task(corpus, task_id).member(member_id)
    hits = [d for d in task_dirs(corpus) if (d / member_id / "manifest.yaml").is_file()]
    if not hits:
        raise NotPublishable(f"{corpus}: no member {member_id!r} in any task")
    if len(hits) > 1:
        raise NotPublishable(f"{corpus}: member {member_id!r} is in several tasks "
                             f"({', '.join(d.name for d in hits)}); name it as TASK/{member_id}")
    return load_task(hits[0]).member(member_id)


def _no_local_paths(value: Any) -> Any:
    """`value` with every local path in its strings (keys too) replaced by ``<local>``; URLs are kept."""
    if isinstance(value, str):
        return _URL_OR_PATH.sub(lambda m: m.group() if m.group("url") else "<local>", value)
    if isinstance(value, Mapping):
        return {_no_local_paths(k): _no_local_paths(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_local_paths(v) for v in value]
    return value


def _public_run(run: RunBlock) -> dict[str, Any]:
    backend = run.backend
    out = {k: getattr(run, k) for k in ("date", "model", "evalkit_version", "request_sha256", "input_tokens",
                                        "output_tokens", "usd", "latency_s", "calls", "replayed", "parse", "truncated")}
    if str(out["model"]).startswith("python:"):  # a pipeline's model id is its spec: python:MODULE_OR_PATH:FUNCTION
        out["model"] = redact_stored(out["model"], public=True)
    out["backend"] = {"label": backend.get("label"), "spec": redact_stored(str(backend.get("spec", "")), public=True)}
    out["error"] = bool(run.error)
    return out


def _backend_kind(label: str, entry: BoardEntry) -> str:
    spec = str(entry.run.backend.get("spec") or "")
    try:
        return BackendSpec.parse(spec, label=label).kind
    except EvalkitError:
        return spec.partition(":")[0]  # a stored spec is redacted and may not parse as typed


def _provenance_problem(member: Member) -> str | None:
    if member.manifest.truth_provenance is None:
        return "no truth_provenance: a member without truth is never published"
    found = member.manifest.truth_provenance.problems()
    return "; ".join(f"truth_provenance.{leg} {why}" for leg, why in found) or None


def public_entry(member: Member, entry: BoardEntry, sources: Path | None) -> dict[str, Any]:
    """The publishable form of one private scoreboard entry (see module docstring)."""
    paths = check_integrity(member, sources)  # IntegrityError (exit 4) if the source changed
    m = member.manifest
    prov = m.truth_provenance
    return _no_local_paths({
        "identity": {
            "task": member.task.id,
            "member": member.id,
            "license": m.license.spdx,
            "heldout": m.heldout,
            "source": {"kind": "pointer" if m.source.is_pointer else "file", "files": len(paths),
                       "sha256": [sha256_file(p) for p in paths]},
            "truth_provenance": prov.model_dump(),
        },
        "run": _public_run(entry.run),
        "truth_sha256": entry.truth_sha256,
        "settings": {k: v for k, v in entry.settings.items() if isinstance(v, (int, float, bool))},
        "metrics": numeric_metrics(entry.metrics),
        "passed": entry.passed,
    })


def _strings(value: Any, path: tuple = ()) -> Iterable[tuple[tuple, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield path + (str(k),), str(k)
            yield from _strings(v, path + (str(k),))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, path + (i,))


def _guard(public: Mapping[str, Any], member: Member, sources: Path | None) -> None:
    """Belt and braces: no truth string and no long run of document text in what is published."""
    truth = member.load_truth(sources)
    truth_data = truth.model_dump(mode="json") if hasattr(truth, "model_dump") else truth
    secrets = {s.strip().casefold() for _, s in _strings(truth_data)
               if len(s.strip()) >= 4 and not _DATE.match(s.strip()) and not s.strip().replace(".", "").isdigit()}
    published = [(p, s) for p, s in _strings(public) if not _HEX.match(s) and not _DATE.match(s)]
    for path, s in published:
        low = s.casefold()
        for t in secrets:
            if t in low:
                raise NotPublishable(f"{member.key}: refusing to publish: {'.'.join(map(str, path))} contains a "
                                     "truth value; rename it")
    text = " ".join(read_document(source_paths(member, sources)).text.split()).casefold()
    for path, s in published:
        if len(s) >= 12 and " ".join(s.split()).casefold() in text:
            raise NotPublishable(f"{member.key}: refusing to publish: {'.'.join(map(str, path))} occurs in the "
                                 "document text; change it")


def publish(member_ref: str, corpus: str | Path, *, board: str | Path | None = None,
            sources: str | Path | None = None, backends: Iterable[str] | None = None,
            private_board: str | Path | None = None) -> list[tuple[str, str, str]]:
    """Copy a member's scored entries (all backends, or `backends`) onto the BYOM board; return the keys."""
    corpus = Path(corpus)
    src = sources_dir(sources)
    board = Path(board) if board is not None else default_byom_board()
    private = read_board(Path(private_board) if private_board else corpus / "scoreboard.json")
    member = find_member(corpus, member_ref)
    want = set(backends or ())
    entries = {label: e for t, m, label, e in private.entries()
               if t == member.task.id and m == member.id and (not want or label in want)}
    if not entries:
        raise NotPublishable(f"{member.key}: no scored entry{' for ' + ', '.join(sorted(want)) if want else ''} in "
                             f"{corpus / 'scoreboard.json'}; score it first (`evalkit sweep --corpus {corpus} "
                             "--backend … --update-scoreboard`)")
    problem = _provenance_problem(member)
    if problem:
        raise NotPublishable(f"{member.dir / 'manifest.yaml'}: {problem}; a member is published only with its "
                             "truth provenance")
    current = truth_sha256(member, src)
    publics = {}
    for label, entry in sorted(entries.items()):
        kind = _backend_kind(label, entry)
        why = getattr(declared(kind), "unpublishable", None)  # the provider says (`Provider.unpublishable`)
        if why:
            raise NotPublishable(f"{member.key} [{label}]: scored by the {kind} backend, which {why}; "
                                 "only a model's (or a pipeline's) own extractions are published")
        if not entry.truth_sha256:
            raise NotPublishable(f"{member.key} [{label}]: the scored entry records no truth_sha256")
        if entry.truth_sha256 != current:
            raise NotPublishable(f"{member.key} [{label}]: the truth changed since it was scored "
                                 f"(scored against {entry.truth_sha256[:12]}…, now {str(current)[:12]}…); "
                                 f"run `evalkit rescore --corpus {corpus}` first")
        pub = public_entry(member, entry, src)
        _guard(pub, member, src)
        publics[label] = pub
    stamp = datetime.now(UTC).date().isoformat()
    with edit_board(board) as b:
        for label, pub in publics.items():
            b["tasks"].setdefault(member.task.id, {}).setdefault(member.id, {})[label] = pub | {"published": stamp}
    return [(member.task.id, member.id, label) for label in sorted(publics)]


# --------------------------------------------------------------------------- `evalkit report --byom`

_CSS = "caption { text-align: left; margin-bottom: .5rem; color: #59636e; }\n"


def _cell(value: Any, num: bool = False) -> str:
    if value is None:
        text = "—"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = f"{value:.4f}"
    else:
        text = str(value)
    cls = ' class="num"' if num else ""
    return f"<td{cls}>{html.escape(text, quote=True)}</td>"


def render_byom_html(board: Board, title: str = "BYOM scoreboard") -> str:
    """A self-contained HTML page of a BYOM board: every text escaped, the shared head of every page
    (`evalkit.report.chrome`: its policy allows only evalkit's stylesheet and sortable-table script)."""
    rows = list(board.entries())
    metric_names = sorted({k for *_, e in rows for k in e.metrics})
    head = ["task", "member", "backend", "model", "date", "verdict", *metric_names, "input tokens", "output tokens",
            "USD", "licence", "truth verified", "truth sha256", "published"]
    out = [f"<h1>{html.escape(title)}</h1>",
           "<table>", f"<caption>{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}: aggregate metrics of private "
                      "corpora; no document text, truth values or item tables.</caption>",
           "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for task, member, label, e in rows:
        run, ident = e.run, e.identity or {}
        verdict = {True: '<td class="PASS">PASS</td>', False: '<td class="FAIL">FAIL</td>'}.get(e.passed, _cell(None))
        cells = [_cell(task), _cell(member), _cell(label), _cell(run.model), _cell(run.date), verdict]
        cells += [_cell(e.metrics.get(k), num=True) for k in metric_names]
        cells += [_cell(run.input_tokens, True), _cell(run.output_tokens, True), _cell(run.usd, True),
                  _cell(ident.get("license")), _cell((ident.get("truth_provenance") or {}).get("verified_by")),
                  _cell((e.truth_sha256 or "")[:12] or None), _cell(e.published)]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")

    return document(title, "\n".join(out), nav([(title, None)]), extra_css=_CSS)


def write_byom_report(board: str | Path | None = None, out: str | Path | None = None) -> Path:
    """Render the BYOM board (default: the committed one) to `out` (default ``runs/byom/index.html``)."""
    board = Path(board) if board is not None else default_byom_board()
    data = read_board(board, must_exist=True)

    out = Path(out) if out is not None else Path("runs") / "byom" / INDEX
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_byom_html(data), encoding="utf-8")
    return out
