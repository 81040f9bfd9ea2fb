"""A document part sent beside the prompt (input modes ``pdf`` and ``images``).

Made by the corpus (`evalkit.corpus.sources.document_parts`), sent by the backends (`evalkit.backends.base.Request`).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

PDF_MEDIA_TYPE, PNG_MEDIA_TYPE = "application/pdf", "image/png"


@dataclass(frozen=True)
class Part:
    """A document part sent beside the prompt: one PDF file (input ``pdf``) or one page image (``images``)."""

    media_type: str  # PDF_MEDIA_TYPE or PNG_MEDIA_TYPE
    data: bytes = field(repr=False)
    name: str  # the source file's name, or page-<n>.png
    # Per page: (width, height), in pixels for an image, in points (1/72 inch) for a PDF's pages.
    sizes: tuple[tuple[float, float], ...] = ()
    text_chars: int = 0  # a PDF's text-layer characters (the providers bill them beside the page images)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_uri(self) -> str:
        return f"data:{self.media_type};base64,{self.base64()}"

    def summary(self) -> dict[str, Any]:
        return {"media_type": self.media_type, "name": self.name, "bytes": len(self.data), "sha256": self.sha256,
                "sizes": [[w, h] for w, h in self.sizes]}
