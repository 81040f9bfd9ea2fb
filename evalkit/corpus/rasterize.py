"""A PDF's pages as PNG images, for the ``images`` input mode (`models.Settings.input`).

Deterministic: PDFium (through pypdfium2, the renderer Chromium uses) draws each page at the stated
``dpi`` (a PDF point is 1/72 inch), in RGB on white, and Pillow writes the PNG with no time stamp or
text chunk; the same PDF, dpi and library versions give the same bytes. The cassette key covers the
source PDF's sha256 and the dpi, not the PNG bytes (`backends.base.Request.input_key`), so a renderer
update does not orphan a cassette.

Bounded: at most `limits.PAGE_IMAGES` pages per member (`LimitExceeded` naming the file), and a PDF
that PDFium cannot open is `errors.UnreadableSource`.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from evalkit import limits
from evalkit.errors import LimitExceeded, UnreadableSource

POINTS_PER_INCH = 72


def _open(data: bytes, where: Path | str) -> Any:  # a pypdfium2.PdfDocument (pypdfium2 is untyped)
    import pypdfium2 as pdfium  # imported lazily: only the pdf and images modes need it

    try:
        return pdfium.PdfDocument(data)
    except Exception as e:  # noqa: BLE001 — PDFium reports a damaged file with its own error types

        raise UnreadableSource(f"{where}: not a readable PDF ({' '.join(str(e).split())[:200]}); "
                               "replace it with an intact copy") from None


def page_sizes(data: bytes, where: Path | str) -> list[tuple[float, float]]:
    """Each page's (width, height) in points."""
    pdf = _open(data, where)
    try:
        return [tuple(round(v, 2) for v in pdf[i].get_size()) for i in range(len(pdf))]
    finally:
        pdf.close()


def render_pages(data: bytes, dpi: int, where: Path | str, first: int = 0) -> list[tuple[bytes, int, int]]:
    """Each page of the PDF `data` as (PNG bytes, width px, height px) at `dpi`. `first`: pages already rendered
    for this member (its earlier files), counted against `limits.PAGE_IMAGES`."""
    from PIL import Image  # lazy: PIL is loaded only where it is used (import cost)

    pdf = _open(data, where)
    try:
        bound = limits.PAGE_IMAGES.int_value()
        if first + len(pdf) > bound:
            raise LimitExceeded(f"{where}: {first + len(pdf)} pages to render as images, more than "
                                f"{limits.PAGE_IMAGES.describe()}")
        out = []
        for i in range(len(pdf)):
            bitmap = pdf[i].render(scale=dpi / POINTS_PER_INCH, fill_color=(255, 255, 255, 255))
            image: Image.Image = bitmap.to_pil().convert("RGB")
            buf = io.BytesIO()
            image.save(buf, format="PNG", optimize=False, compress_level=6)
            out.append((buf.getvalue(), image.width, image.height))
        return out
    finally:
        pdf.close()
