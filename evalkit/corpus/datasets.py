"""The public data sets behind the pointer members, and where every pointed-at file stands.

A pointer member's source (and a pointed truth) lives under the sources folder (``--sources`` or
``$EVALKIT_SOURCES``), never in the repository. `DATASETS` says, per top-level folder of the sources
folder, where the data set is published, its licence and the layout to unpack it into (the data
README of the sources folder has the detail). `expected_files` lists every file the corpus points
at with its pinned sha256 and whether it is present and matches: `evalkit sources` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalkit._util.paths import inside
from evalkit.corpus.sources import sha256_file
from evalkit.corpus.tasks import SOURCES_ENV, Member, load_tasks

__all__ = ["DataSet", "DATASETS", "Expected", "expected_files", "problems", "render", "OK", "MISSING", "ALTERED"]

OK, MISSING, ALTERED = "ok", "missing", "altered"


@dataclass(frozen=True)
class DataSet:
    folder: str  # the top-level folder under the sources folder
    name: str
    page: str  # where it is published
    licence: str
    layout: str  # what to unpack where, relative to the sources folder


DATASETS: dict[str, DataSet] = {d.folder: d for d in (
    DataSet("cuad", "CUAD v1 (Contract Understanding Atticus Dataset), The Atticus Project",
            "https://www.atticusprojectai.org/cuad (texts: data/CUAD_v1/full_contract_txt/ of the release)",
            "CC-BY-4.0", "cuad/<slug>/contract.txt: the CUAD full_contract_txt file, bytes unchanged"),
    DataSet("redocred", "Re-DocRED (Tan et al., EMNLP 2022), revising DocRED",
            "https://github.com/tonytan48/Re-DocRED (data/dev_revised.json, data/test_revised.json)",
            "annotations MIT; Wikipedia text CC-BY-SA-4.0",
            "redocred/<slug>/text.txt (the detokenised document) and redocred/<slug>/redocred.json"),
    DataSet("jn1", "JN1 The Chaotic Caves, Release 28 (J.D. Neal, Basic Fantasy Project); truth by osr-forge",
            "https://www.basicfantasy.org (module); https://github.com/mmacy/osr-forge (page texts and truth)",
            "CC-BY-SA-4.0", "jn1/pages/NNNN.txt (PDF page text layers) and jn1/truth.yaml"),
)}


@dataclass(frozen=True)
class Expected:
    """One file a pointer member needs under the sources folder."""

    task: str
    member: str
    pointer: str  # relative to the sources folder
    sha256: str | None  # pinned by the manifest (None: a private member's sidecar decides)
    status: str  # OK, MISSING or ALTERED
    got: str | None = None  # the file's sha256 when it is ALTERED

    @property
    def dataset(self) -> DataSet | None:
        return DATASETS.get(self.pointer.split("/", 1)[0])


def _pins(member: Member) -> list[tuple[str, str | None]]:
    m = member.manifest
    out: list[tuple[str, str | None]] = []
    if m.source.is_pointer:
        out += [(p, m.sha256.get(p) if isinstance(m.sha256, dict) else m.sha256) for p in m.source.paths]
    if m.truth is not None:
        out.append((m.truth.pointer, m.truth.sha256))
    return out


def expected_files(corpus: str | Path, sources: str | Path | None) -> list[Expected]:
    """Every file the corpus's pointer members name, in task and member order, checked against its pin
    (a file several members share is hashed once)."""
    hashes: dict[Path, str] = {}
    out = []
    for task in load_tasks(Path(corpus)):
        for member in task.members():
            for pointer, pin in _pins(member):
                path = None if sources is None else inside(sources, Path(sources) / pointer, "the pointer",
                                                           "the sources folder")
                if path is None or not path.is_file():
                    out.append(Expected(task.id, member.id, pointer, pin, MISSING))
                    continue
                got = hashes.setdefault(path, sha256_file(path))
                status = OK if pin is None or got == pin else ALTERED
                out.append(Expected(task.id, member.id, pointer, pin, status, None if status == OK else got))
    return out


def _where(e: Expected) -> str:
    d = e.dataset
    return f"data set {d.folder}: `evalkit sources` says where to get it" if d else "not a public data set"


def problems(expected: list[Expected], sources: str | Path | None) -> list[str]:
    """One line per missing or altered file (each file once), naming its data set and what to do."""
    lines, seen = [], set()
    for e in expected:
        if e.status == OK or e.pointer in seen:
            continue
        seen.add(e.pointer)
        if e.status == MISSING:
            where = Path(sources) / e.pointer if sources is not None else f"${SOURCES_ENV}/{e.pointer}"
            lines.append(f"missing: {where} ({_where(e)}; needed by {e.task}/{e.member})")
        else:
            lines.append(f"altered: {Path(sources or '') / e.pointer} hashes to {e.got}, pinned {e.sha256} "
                         f"({_where(e)}; restore the original bytes)")
    return lines


def render(expected: list[Expected], sources: str | Path | None) -> str:
    """The listing `evalkit sources` prints: per data set, where to get it, its licence and layout,
    then every expected file with its status."""
    out = [f"Sources folder: {sources if sources is not None else f'(none: pass --sources DIR or set {SOURCES_ENV})'}"]
    by_folder: dict[str, list[Expected]] = {}
    for e in expected:
        by_folder.setdefault(e.pointer.split("/", 1)[0], []).append(e)
    for folder, rows in by_folder.items():
        d = DATASETS.get(folder)
        files = {e.pointer: e for e in rows}
        n_ok = sum(e.status == OK for e in files.values())
        out += ["", f"{folder}/ — {d.name if d else 'not a known public data set'}: {n_ok}/{len(files)} files ok"]
        if d:
            out += [f"  published: {d.page}", f"  licence:   {d.licence}", f"  layout:    {d.layout}"]
        for e in files.values():
            users = sorted({f"{r.task}/{r.member}" for r in rows if r.pointer == e.pointer})
            out.append(f"  {e.status:8} {e.pointer}  ({', '.join(users)})")
    total = len({e.pointer for e in expected})
    bad = len(problems(expected, sources))
    out += ["", f"{total} files expected: {total - bad} ok, {bad} missing or altered"]
    return "\n".join(out) + "\n"
