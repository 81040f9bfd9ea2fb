#!/usr/bin/env python3
"""Make the deal-memos-scanned task's members: deal memos as image-only PDFs, as a scanner would.

Each member's memo (corpus/deal-memos/<member>/memo.md, CC0, written for evalkit) is typeset as plain
text on a Letter page at 100 DPI with Pillow's own bundled font (`ImageFont.load_default`: no system font,
so every machine draws the same glyphs), then scanned: seeded speckle noise, a slight seeded skew, grey
levels, JPEG loss. The JPEG is wrapped in a one-page PDF with no text layer (Pillow's PDF writer, a fixed
creation date), written to corpus/deal-memos-scanned/<member>/scan.pdf. The truth is the deal memo's,
unchanged (copied beside it, with its manifest's provenance); the manifest pins the PDF's sha256.

    python tools/make_scanned_pdfs.py           # write the PDFs, truth and manifests
    python tools/make_scanned_pdfs.py --check   # exit 1 if a committed file differs from a fresh make

Byte stability assumes the same Pillow release (its font, libjpeg and zlib); a new one may move bytes: then
re-run this tool, check the pages by eye, commit.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import random
import sys
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SOURCE_TASK = ROOT / "corpus" / "deal-memos"
TASK_DIR = ROOT / "corpus" / "deal-memos-scanned"
MEMBERS = ("clean-single-term", "multi-condition", "mixed-date-formats", "hostile-markup")
HELD_OUT = "mixed-date-formats"  # every task keeps one member back from prompt tuning (README: held-out apart)
CREATED = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
DPI = 100
PAGE = (850, 1100)  # Letter at DPI
MARGIN = 50
FONT_SIZE = 14
LINE_GAP = 3
SKEW_DEGREES = 0.8  # at most, either way
JPEG_QUALITY = 45
PDF_NAME = "scan.pdf"


def typeset(text: str):
    """The memo as black text on a white greyscale page, wrapped to the page's width."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=FONT_SIZE)
    page = Image.new("L", PAGE, 255)
    draw = ImageDraw.Draw(page)
    width = PAGE[0] - 2 * MARGIN
    y = MARGIN
    for line in wrap(text, lambda s: draw.textlength(s, font=font), width):
        draw.text((MARGIN, y), line, font=font, fill=0)
        y += FONT_SIZE + LINE_GAP
    if y > PAGE[1] - MARGIN:
        raise SystemExit(f"the memo does not fit one page ({y} px): shorten it or lower FONT_SIZE")
    return page


def wrap(text: str, measure, width: float) -> list[str]:
    out = []
    for para in text.splitlines():
        words, line = para.split(" "), ""
        for w in words:
            candidate = f"{line} {w}" if line else w
            if line and measure(candidate) > width:
                out.append(line)
                line = w
            else:
                line = candidate
        out.append(line)
    return out


def scan(page, seed: int) -> bytes:
    """The page as a scanner leaves it: skewed, speckled, greyed, JPEG-compressed (seeded: the same bytes)."""
    from PIL import Image

    rng = random.Random(seed)
    page = page.rotate(rng.uniform(-SKEW_DEGREES, SKEW_DEGREES), resample=Image.Resampling.BILINEAR,
                       fillcolor=255, expand=False)
    px = page.load()
    for _ in range(PAGE[0] * PAGE[1] // 400):  # dust and toner specks
        x, y = rng.randrange(PAGE[0]), rng.randrange(PAGE[1])
        px[x, y] = rng.randrange(0, 160)
    page = page.point(lambda v: 28 + v * 212 // 255)  # paper is not white, toner is not black
    buf = io.BytesIO()
    page.save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=False, progressive=False)
    return buf.getvalue()


def wrap_pdf(jpeg: bytes) -> bytes:
    """The JPEG as a one-page PDF at DPI, with no text layer and a fixed creation date."""
    from PIL import Image

    buf = io.BytesIO()
    Image.open(io.BytesIO(jpeg)).save(buf, format="PDF", resolution=float(DPI), creationDate=CREATED.timetuple(),
                                      modDate=CREATED.timetuple(), producer="evalkit tools/make_scanned_pdfs.py",
                                      title="scanned deal memo")
    return buf.getvalue()


def member_files(member: str, index: int) -> dict[str, bytes]:
    """Every file of one scanned member, by name: scan.pdf, truth.yaml, manifest.yaml."""
    src = SOURCE_TASK / member
    pdf = wrap_pdf(scan(typeset((src / "memo.md").read_text(encoding="utf-8")), seed=1000 + index))
    manifest = yaml.safe_load((src / "manifest.yaml").read_text(encoding="utf-8"))
    new = {
        "title": f"{manifest['title']}, scanned",
        "source": {"file": PDF_NAME},
        "sha256": hashlib.sha256(pdf).hexdigest(),
        "license": manifest["license"],
        "truth_provenance": manifest["truth_provenance"],
        **({"heldout": True} if member == HELD_OUT else {}),
        "notes": (f"An image-only scan of corpus/deal-memos/{member}/memo.md (tools/make_scanned_pdfs.py: seeded "
                  "noise, skew and JPEG loss, no text layer); the truth is that memo's, copied unchanged."),
    }
    return {PDF_NAME: pdf, "truth.yaml": (src / "truth.yaml").read_bytes(),
            "manifest.yaml": yaml.safe_dump(new, sort_keys=False, allow_unicode=True, width=100).encode("utf-8")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a committed file differs from a fresh make")
    args = ap.parse_args(argv)
    stale = []
    for i, member in enumerate(MEMBERS):
        for name, data in member_files(member, i).items():
            path = TASK_DIR / member / name
            if args.check:
                if not path.is_file() or path.read_bytes() != data:
                    stale.append(str(path.relative_to(ROOT)))
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    if stale:
        print("differs from a fresh make (run tools/make_scanned_pdfs.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    print("ok" if args.check else f"wrote {len(MEMBERS)} members under {TASK_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
