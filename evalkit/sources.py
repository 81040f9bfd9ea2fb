"""Finding, hashing and reading a member's source document.

The integrity gate runs before any backend exists for a member: the exact
source bytes must hash to the manifest's sha256, or the member is refused.
Every source file resolves inside the corpus folder (a pointer: inside the
sources folder) after following symlinks, or is refused before it is read
(`evalkit.paths`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from .corpus import SOURCES_ENV, Member
from .errors import IntegrityError, SourceMissing
from .paths import inside

__all__ = ["Document", "IntegrityError", "SourceMissing", "check_integrity", "read_document", "source_paths"]

SIDECAR = "source.sha256"  # seeded for private members whose manifest pins no hash


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
        return [member.file(p, "the source") for p in src.paths]
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
    return paths


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
    pinned = dict(reversed(line.split(None, 1)) for line in sidecar.read_text().splitlines() if line.strip())
    pinned = {k.strip(): v for k, v in pinned.items()}
    for name, digest in current.items():
        if pinned.get(name) != digest:
            raise IntegrityError(
                f"{sidecar}: {name} hashes to {digest}, but was {pinned.get(name)} when first seen; "
                f"the source changed — restore it, or delete {sidecar} to accept the new file"
            )
    return paths


@dataclass(frozen=True)
class Document:
    """A source as text, page-aware: `pages` holds one string per page or file."""

    pages: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n\n".join(self.pages) if len(self.pages) > 1 else (self.pages[0] if self.pages else "")


def _read_pdf(path: Path) -> list[str]:
    from pypdf import PdfReader  # imported lazily: only PDF members need it

    return [page.extract_text() or "" for page in PdfReader(path).pages]


def read_document(paths: list[Path]) -> Document:
    pages: list[str] = []
    for p in paths:
        if p.suffix.lower() == ".pdf":
            pages.extend(_read_pdf(p))
        else:
            pages.append(p.read_text(encoding="utf-8", errors="replace"))
    return Document(pages=tuple(pages))
