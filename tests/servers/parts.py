"""A message's document parts, checked as the providers check them: the fake servers' vision side.

A user message whose content is a list of parts (input modes ``pdf`` and ``images``) is read here:
each part's type and media type must be one the provider takes, its base64 must decode, and the
bytes must be what the media type says (a PNG's signature and header, a PDF's ``%PDF-``) within the
provider's size bound; otherwise the fake answers 400 naming the part, as the API would. The decoded
parts are kept (`Decoded`), and a prompt's tokens count each image as Anthropic documents it
(width x height / 750) instead of its base64's characters.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass, field
from typing import Any

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # Anthropic's bound on one image (base64-decoded)
MAX_PDF_BYTES = 32 * 1024 * 1024  # Anthropic's bound on one request's PDF


class BadPart(ValueError):
    """A part the provider would refuse (the fake answers 400 with this message)."""


@dataclass
class Decoded:
    text: str = ""  # the text parts, joined
    parts: list[tuple[str, bytes]] = field(default_factory=list)  # (media type, decoded bytes), in order
    filenames: list[str] = field(default_factory=list)  # an OpenAI file part's filename

    def sha256s(self) -> list[str]:
        return [hashlib.sha256(data).hexdigest() for _, data in self.parts]

    def part_tokens(self) -> int:
        """The parts' tokens (the text's are counted with the rest of the prompt, characters / 4)."""
        tokens = 0
        for media_type, data in self.parts:
            if media_type == "image/png":
                w, h = png_size(data)
                tokens += w * h // 750
            else:
                tokens += len(data) // 100  # a PDF: any count that grows with it
        return tokens


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; `BadPart` when it is no PNG."""
    if not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise BadPart("image data is not a valid PNG")
    return struct.unpack(">II", data[16:24])


def _b64(data: Any, where: str) -> bytes:
    if not isinstance(data, str):
        raise BadPart(f"{where}: base64 data must be a string")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadPart(f"{where}: invalid base64 data") from None


def _check(media_type: str, data: bytes, where: str) -> tuple[str, bytes]:
    if media_type == "image/png":
        png_size(data)
        if len(data) > MAX_IMAGE_BYTES:
            raise BadPart(f"{where}: image exceeds {MAX_IMAGE_BYTES} bytes")
    elif media_type == "application/pdf":
        if not data.startswith(b"%PDF-"):
            raise BadPart(f"{where}: the PDF specified was not valid")
        if len(data) > MAX_PDF_BYTES:
            raise BadPart(f"{where}: PDF exceeds {MAX_PDF_BYTES} bytes")
    else:
        raise BadPart(f"{where}: media_type {media_type!r} is not supported")
    return media_type, data


def anthropic_content(content: Any) -> Decoded:
    """A Messages API user content: a string, or text / image / document blocks with base64 sources."""
    if isinstance(content, str):
        return Decoded(text=content)
    out = Decoded()
    for i, block in enumerate(content or []):
        where = f"messages.0.content.{i}"
        kind = block.get("type")
        if kind == "text":
            out.text += block.get("text", "")
            continue
        if kind not in ("image", "document"):
            raise BadPart(f"{where}: unknown content block type {kind!r}")
        source = block.get("source") or {}
        if source.get("type") != "base64":
            raise BadPart(f"{where}.source: only base64 sources are served by this fake")
        media_type = source.get("media_type", "")
        if (kind == "document") != (media_type == "application/pdf"):
            raise BadPart(f"{where}: a {kind} block cannot hold {media_type!r}")
        out.parts.append(_check(media_type, _b64(source.get("data"), where), where))
    return out


def openai_content(content: Any) -> Decoded:
    """A chat-completions user content: a string, or text / image_url / file parts with data URLs."""
    if isinstance(content, str):
        return Decoded(text=content)
    out = Decoded()
    for i, part in enumerate(content or []):
        where = f"messages[].content[{i}]"
        kind = part.get("type")
        if kind == "text":
            out.text += part.get("text", "")
        elif kind == "image_url":
            out.parts.append(_data_url((part.get("image_url") or {}).get("url"), where))
        elif kind == "file":
            file = part.get("file") or {}
            if not file.get("filename"):
                raise BadPart(f"{where}.file: filename is required with file_data")
            out.filenames.append(file["filename"])
            out.parts.append(_data_url(file.get("file_data"), where))
        else:
            raise BadPart(f"{where}: unknown content part type {kind!r}")
    return out


def _data_url(url: Any, where: str) -> tuple[str, bytes]:
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise BadPart(f"{where}: expected a data URL (data:<media type>;base64,...)")
    head, data = url[5:].split(";base64,", 1)
    return _check(head, _b64(data, where), where)
