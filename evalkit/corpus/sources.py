"""Finding, hashing and reading a member's source document.

The integrity gate runs before any backend exists for a member: the exact
source bytes must hash to the manifest's sha256, or the member is refused.
Every source file resolves inside the corpus folder (a pointer: inside the
sources folder) after following symlinks, or is refused before it is read
(`evalkit._util.paths`).

Bounded (`evalkit.limits`): each source file's size is checked with a stat before it is hashed or
read (DOCUMENT_BYTES), and a document that cannot be read (a corrupt PDF) is an `UnreadableSource`:
`validate` reports either, `run` refuses that member (exit 3) and goes on with the others.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit import limits
from evalkit._util.paths import inside
from evalkit.corpus.parts import PDF_MEDIA_TYPE, PNG_MEDIA_TYPE, Part
from evalkit.corpus.rasterize import page_sizes, render_pages
from evalkit.corpus.tasks import SOURCES_ENV, Member
from evalkit.errors import (
    CorpusError,
    IntegrityError,
    LimitExceeded,
    NoTextLayer,
    SourceMissing,
    UnreadableSource,
    UnsupportedInput,
)

if TYPE_CHECKING:  # pypdf is imported where a PDF is read (start-up cost)
    from pypdf import PageObject

__all__ = ["Document", "IntegrityError", "NoTextLayer", "SourceMissing", "UnreadableSource", "UnsupportedInput",
           "check_input", "check_integrity", "document_parts", "read_document", "read_sidecar", "source_paths"]


NO_TEXT_LAYER = "no text layer"

SIDECAR = "source.sha256"  # seeded for private members whose manifest pins no hash
_SIDECAR_LINE = re.compile(r"([0-9a-f]{64}) [ *]?(\S.*)")  # sha256sum's format: "<digest>  <name>"


def check_size(path: Path) -> Path:
    """`path`, or `LimitExceeded` when it is larger than DOCUMENT_BYTES (a stat: nothing is read)."""
    size, bound = path.stat().st_size, limits.DOCUMENT_BYTES.int_value()
    if size > bound:
        raise LimitExceeded(f"{path}: source document of {size} bytes is larger than {limits.DOCUMENT_BYTES.describe()}")
    return path


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def source_paths(member: Member, sources: Path | None) -> list[Path]:
    """Where the member's source files should be; raise SourceMissing if absent."""
    src = member.manifest.source
    if not src.is_pointer:
        return [check_size(member.file(p, "the source")) for p in src.paths]
    if sources is None:
        raise SourceMissing(
            f"{member.key}: skipped: its source lives outside the repo ({', '.join(src.paths)}); "
            f"pass --sources DIR or set {SOURCES_ENV} to the folder that holds it"
        )
    paths = [inside(sources, Path(sources) / p, "the source pointer", "the sources folder") for p in src.paths]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise SourceMissing(
            f"{member.key}: skipped: source not found: put the file at {missing[0]} "
            f"(pointer {src.paths[paths.index(missing[0])]!r} under --sources {sources})"
        )
    return [check_size(p) for p in paths]


def _expected(member: Member, rel: str) -> str | None:
    pin = member.manifest.sha256
    return pin.get(rel) if isinstance(pin, dict) else pin


def check_integrity(member: Member, sources: Path | None, *, seed: bool = False) -> list[Path]:
    """Verify every source file's sha256; return the paths. Raises before any model spend.

    `seed`: a member that pins no hash gets its sidecar written on first sight — only the
    runner's gate seeds; validating, publishing or re-scoring never writes into a corpus."""
    paths = source_paths(member, sources)
    manifest = member.dir / "manifest.yaml"
    if member.manifest.sha256 is None:
        return _check_sidecar(member, paths, seed)
    for rel, path in zip(member.manifest.source.paths, paths):
        got, want = sha256_file(path), _expected(member, rel)
        if got != want:
            raise IntegrityError(
                f"{manifest}: sha256: {path} hashes to {got}, but the manifest pins {want}; "
                "the source changed — restore the original file, or re-verify the truth and update the pin"
            )
    ptr = member.manifest.truth
    if ptr is not None:
        path = member.truth_path(sources)
        got = sha256_file(path)
        if got != ptr.sha256:
            raise IntegrityError(
                f"{manifest}: truth.sha256: {path} hashes to {got}, but the manifest pins "
                f"{ptr.sha256}; the truth changed — re-verify it and update the pin"
            )
    return paths


def _check_sidecar(member: Member, paths: list[Path], seed: bool) -> list[Path]:
    # Private (BYOM) members may leave the pin out (retail PDFs are watermarked per copy):
    # the first run seeds a local sidecar, which is enforced from then on.
    sidecar = member.file(SIDECAR, "the source sidecar")
    current = {p.name: sha256_file(p) for p in paths}
    if not sidecar.exists():
        if seed:
            sidecar.write_text("".join(f"{h}  {n}\n" for n, h in sorted(current.items())))
        return paths
    pinned = read_sidecar(sidecar)
    for name, digest in current.items():
        if pinned.get(name) != digest:
            raise IntegrityError(
                f"{sidecar}: {name} hashes to {digest}, but was {pinned.get(name)} when first seen; "
                f"the source changed — restore it, or delete {sidecar} to accept the new file"
            )
    return paths


def read_sidecar(sidecar: Path) -> dict[str, str]:
    """The sidecar's ``{file name: sha256}``; `CorpusError` naming the line when it is not ``<sha256>  <name>``
    lines (as `sha256sum` writes them) — deleting it lets the next run seed it afresh."""
    fix = f"delete {sidecar} and the next run seeds it again from the source as it is now"
    try:
        text = sidecar.read_bytes()[: 1 << 20].decode("utf-8")  # a name a line: a MiB is thousands of files
    except UnicodeDecodeError as e:
        raise CorpusError(f"{sidecar}: not a sha256 sidecar (not UTF-8 text at byte {e.start}); {fix}") from None
    pinned = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _SIDECAR_LINE.fullmatch(line.strip())
        if m is None:
            raise CorpusError(f"{sidecar}:{n}: not a sha256 sidecar line ('<64 hex digits>  <file name>'); {fix}")
        pinned[m.group(2).strip()] = m.group(1)
    return pinned


@dataclass(frozen=True)
class Document:
    """A source as text, page-aware: `pages` holds one string per page or file; `files`, the source files it was
    read from (what the ``pdf`` and ``images`` input modes send)."""

    pages: tuple[str, ...]
    files: tuple[Path, ...] = ()

    @property
    def text(self) -> str:
        return "\n\n".join(self.pages) if len(self.pages) > 1 else (self.pages[0] if self.pages else "")

    def no_text_layer(self) -> bool:
        """Whether it is PDFs whose pages hold no text at all: a scan, which the ``text`` mode cannot send."""
        return bool(self.files) and all(_is_pdf(p) for p in self.files) and not self.text.strip()


def _is_pdf(path: Path) -> bool:
    return path.suffix.lower() == ".pdf"


def check_input(document: Document, mode: str, where: str) -> None:
    """Whether `document` can be sent in input `mode` (`models.Settings.input`), before any call: `NoTextLayer`
    (a scan in ``text`` mode: the member is skipped), `UnsupportedInput` (a text file in ``pdf`` or ``images``:
    refused), `LimitExceeded` (more pages to render than `limits.PAGE_IMAGES`), `UnreadableSource` (PDFium
    cannot open it). `where`: the member, for the message."""
    if mode == "text":
        if document.no_text_layer():
            raise NoTextLayer(f"{where}: skipped: {NO_TEXT_LAYER} in {document.files[0].name} (a scan) to send in "
                              "input mode text; run it with --set input=images or --set input=pdf")
        return
    other = next((p for p in document.files if not _is_pdf(p)), None)
    if other is not None:
        raise UnsupportedInput(f"{where}: input mode {mode} sends PDF sources only, and {other.name} is not a PDF; "
                               "run this task with --set input=text")
    if mode == "images":
        count = sum(len(page_sizes(p.read_bytes(), p)) for p in document.files)
        if count > limits.PAGE_IMAGES.int_value():
            raise LimitExceeded(f"{where}: {count} pages to render as images, more than "
                                f"{limits.PAGE_IMAGES.describe()}")


# The parts are `evalkit.backends.base.Part`s, a layer above this one (hence Any).
def document_parts(document: Document, mode: str, dpi: int) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """(the parts sent beside the prompt, the source files' sha256) for input `mode`: nothing in ``text``; each
    source PDF as it is (``pdf``); each page rendered to PNG at `dpi` (``images``, `evalkit.corpus.rasterize`)."""
    if mode == "text":
        return (), ()
    parts: list[Part] = []
    digests: list[str] = []
    pages_text = iter(document.pages)
    for path in document.files:
        data = path.read_bytes()
        digests.append(hashlib.sha256(data).hexdigest())
        sizes = page_sizes(data, path)
        chars = sum(len(next(pages_text, "")) for _ in sizes)  # `pages` holds one string per page of each PDF
        if mode == "pdf":
            parts.append(Part(PDF_MEDIA_TYPE, data, path.name, tuple(sizes), chars))
            continue
        for png, w, h in render_pages(data, dpi, path, first=len(parts)):
            parts.append(Part(PNG_MEDIA_TYPE, png, f"page-{len(parts) + 1}.png", ((w, h),)))
    return tuple(parts), tuple(digests)


def _read_pdf(path: Path) -> list[str]:
    pages = _pdf_pages(path)
    try:
        return [page.extract_text() or "" for page in pages]
    except Exception as e:  # noqa: BLE001 — as `_pdf_pages`: a damaged page fails with any exception type
        raise _unreadable(path, e) from None


def open_document(paths: list[Path]) -> None:
    """Check the documents can be read without reading them all: each within DOCUMENT_BYTES, each PDF's page
    table opened (`UnreadableSource`), which is where a corrupt or truncated file fails."""
    for p in map(check_size, paths):
        if p.suffix.lower() == ".pdf":
            _pdf_pages(p)


def _pdf_pages(path: Path) -> list[PageObject]:
    from pypdf import PdfReader  # imported lazily: only PDF members need it

    try:
        return list(PdfReader(path).pages)
    except Exception as e:  # noqa: BLE001 — a corrupt file fails anywhere in pypdf, with any exception type
        raise _unreadable(path, e) from None


def _unreadable(path: Path, e: Exception) -> UnreadableSource:
    why = " ".join(str(e).split())[:200] or type(e).__name__
    return UnreadableSource(f"{path}: not a readable PDF ({why}); replace it with an intact copy")


def read_document(paths: list[Path]) -> Document:
    """The documents' text, page-aware; `LimitExceeded` for a file over DOCUMENT_BYTES, `UnreadableSource`
    for one that cannot be read."""
    pages: list[str] = []
    for p in map(check_size, paths):
        if p.suffix.lower() == ".pdf":
            pages.extend(_read_pdf(p))
        else:
            pages.append(p.read_text(encoding="utf-8", errors="replace"))
    return Document(pages=tuple(pages), files=tuple(paths))
