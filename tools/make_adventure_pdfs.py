#!/usr/bin/env python3
"""Render the adventure task's own modules to PDF, deterministically.

The two small modules below were written for evalkit and are dedicated to the
public domain (CC0 1.0). Each is rendered with fpdf2 to
``corpus/adventure/<member>/module.pdf`` with a fixed creation date and producer,
so regenerating gives the same bytes (and the manifest's sha256
stays valid). Their truth.yaml files are hand-written beside them.

    python tools/make_adventure_pdfs.py            # write the PDFs, update the manifests' sha256 pins
    python tools/make_adventure_pdfs.py --check    # exit 1 if a committed PDF differs from a fresh render
    python tools/make_adventure_pdfs.py --predictions DIR [--sources DIR]
        # write every member's perfect extraction (its truth, in the extraction
        # shape) as DIR/<member>.json, for `evalkit score --predictions DIR`;
        # the JN1 member's truth is read from the sources folder

Byte stability assumes the same fpdf2 release (2.8.x); the layout code of a
future fpdf2 may move bytes, in which case re-run this tool, re-verify, commit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK_DIR = ROOT / "corpus" / "adventure"
CREATED = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
PRODUCER = "evalkit tools/make_adventure_pdfs.py"

# A module is a list of pages; a page is a list of (style, text) blocks.
# Styles: h1 (title), h2 (section), p (prose), stat (a stat block line).
MODULES: dict[str, dict] = {
    "drowned-bell-tower": {
        "title": "The Drowned Bell Tower",
        "pages": [
            [
                ("h1", "The Drowned Bell Tower"),
                ("p", "An adventure for four to six characters of levels 1 to 3. Written for evalkit and "
                      "dedicated to the public domain (CC0 1.0)."),
                ("h2", "Background"),
                ("p", "The bell tower of Saint Ambry stood on a hill above the marsh until the river moved. Now "
                      "its crypt floods each spring, and the bronze bell rings on still nights with no hand on "
                      "the rope. The sexton who once kept it is bound to it still."),
                ("h2", "The Tower"),
                ("p", "The tower has three levels: the ground floor (areas 1-5), the belfry above it (areas 6-8) "
                      "and the crypt below (areas C1-C3). Doors are oak bound with iron unless the key says "
                      "otherwise."),
                ("h2", "Ground Floor"),
                ("p", "1. ENTRY PORCH. A crumbling porch on the tower's south side is the only way in. Moss "
                      "covers the flagstones. A heavy oak door, unlocked, opens north into the nave (area 2). "
                      "There is nothing of value here."),
                ("p", "2. NAVE. Rows of rotten pews face an empty altar. Four skeletons in the rags of choir "
                      "robes stand between the pews and attack anyone who enters. An open archway in the west "
                      "wall leads to the vestry (area 3); a locked door in the east wall leads to the sexton's "
                      "room (area 4)."),
                ("stat", "4 Skeletons: AC 13, HD 1, #At 1 claw, Dam 1d6, Mv 20', Sv F1, ML 12, XP 25 ea."),
                ("p", "3. VESTRY. Mildewed vestments hang from pegs. A nest of giant rats, 2d4 of them, lives in "
                      "a heap of rotten cloth in the corner. Among the cloth lies a silver censer worth 40 gp. A "
                      "narrow stair climbs from the north corner of the vestry to the stair landing of the "
                      "belfry (area 6)."),
                ("stat", "Giant Rats: AC 13, HD 1d4 hit points, #At 1 bite, Dam 1d3 + disease, Mv 40', Sv F1, "
                         "ML 8, XP 10 ea."),
                ("p", "4. SEXTON'S ROOM. The sexton's cot and table are still here, and so is the sexton: the "
                      "bell warden, a bronze-skinned guardian that was once a man. It strikes with the bell's "
                      "old clapper, and its blows ring in the ears. It keeps its hoard in an iron box under the "
                      "cot (Treasure Type C). The wooden panel behind the table is a secret door into the hidden "
                      "chapel (area 5); it is not locked."),
                ("stat", "Bell Warden: AC 15, HD 4*, #At 1 clapper, Dam 1d8 + deafness for 1d4 rounds, Mv 30', "
                         "Sv F4, ML 11, XP 280. The bell warden is a creature unique to this adventure."),
                ("p", "5. HIDDEN CHAPEL. A tiny chapel with a single kneeling bench. On the altar stands a gold "
                      "chalice worth 150 gp. A trapdoor in the floor opens on a ladder down to the ossuary of "
                      "the crypt (area C1)."),
            ],
            [
                ("h2", "Belfry"),
                ("p", "6. STAIR LANDING. The vestry stair ends on this landing. Two giant bats hang from the "
                      "beams and swoop at lights. An open doorway leads to the bell chamber (area 7), and a "
                      "locked door to the ringer's loft (area 8)."),
                ("stat", "2 Giant Bats: AC 14, HD 2, #At 1 bite, Dam 1d4, Mv 10' Fly 60', Sv F1, ML 8, "
                         "XP 75 ea."),
                ("p", "7. BELL CHAMBER. The great bronze bell hangs here. A harpy has made her nest on the bell "
                      "frame; she sings to lure visitors to the edge of the open arches. In the nest are 12 gp "
                      "and a silver ring worth 25 gp. The only way out is the doorway to the landing."),
                ("stat", "Harpy: AC 13, HD 2*, #At 2 claws, 1 weapon + song, Dam 1d4/1d4/1d6, Mv 20' Fly 50', "
                         "Sv F2, ML 7, XP 100."),
                ("p", "8. RINGER'S LOFT. A bare loft where the bell rope comes down. No creature lives here. A "
                      "purse with 30 gp lies forgotten under a loose board. Its only door is the locked door to "
                      "the landing (area 6)."),
                ("h2", "Crypt"),
                ("p", "C1. OSSUARY. The ladder from the hidden chapel comes down into this low room of stacked "
                      "bones. Six zombies, drowned monks, shuffle in the ankle-deep water. A locked iron door "
                      "leads to the founder's tomb (area C2). There is nothing of value here."),
                ("stat", "6 Zombies: AC 12, HD 2, #At 1 claw, Dam 1d8, Mv 20', Sv F2, ML 12, XP 75 ea."),
                ("p", "C2. TOMB OF THE FOUNDER. A stone sarcophagus holds the wight of the tower's founder, who "
                      "rises against anyone who opens the door. Inside the sarcophagus are 300 gp and a jeweled "
                      "crook worth 200 gp. A low open passage to the south leads to the flooded cistern "
                      "(area C3)."),
                ("stat", "Wight: AC 15, HD 3*, #At 1 touch, Dam energy drain, Mv 30', Sv F3, ML 12, XP 175."),
                ("p", "C3. FLOODED CISTERN. Black water fills this vaulted room to chest height. Three giant "
                      "leeches wait in the water for warm bodies. There is no treasure."),
                ("stat", "3 Giant Leeches: AC 17, HD 6, #At 1 bite, Dam 1d6 + blood drain, Mv 30' Swim 30', "
                         "Sv F3, ML 10, XP 500 ea."),
            ],
        ],
    },
    "fen-hollow": {
        "title": "Two Camps at Fen Hollow",
        "pages": [
            [
                ("h1", "Two Camps at Fen Hollow"),
                ("p", "A short adventure for three to five characters of levels 1 to 2. Written for evalkit and "
                      "dedicated to the public domain (CC0 1.0)."),
                ("p", "Fen Hollow is a wet valley a day's walk from the nearest village. Two camps share it: a "
                      "band of robbers behind a log palisade, and a den of lizard men in the reeds. Each has "
                      "its own map and key below."),
                ("h2", "The Bandit Camp"),
                ("p", "B1. PALISADE GATE. The track from the fen road ends at a gate of sharpened logs. Two "
                      "bandits keep watch from a platform above it; each carries 5 sp. The gate is a plain "
                      "wooden door that is never locked, and it opens into the yard (area B2)."),
                ("stat", "2 Bandits: AC 13, HD 1, #At 1 short sword, Dam 1d6, Mv 40', Sv T1, ML 8, XP 25 ea."),
                ("p", "B2. YARD. A muddy yard with a cold fire pit and a rain barrel. Nobody stays here. The "
                      "gate (area B1) is to the south. A locked door leads into the leader's hut (area B3), and "
                      "an open gap in a wattle fence leads to the pen (area B4). There is nothing of value here."),
                ("p", "B3. LEADER'S HUT. The bandit leader, Mag Orrin, sits here with two bandit cronies. Their "
                      "strongbox holds 200 gp and a silver flask worth 30 gp. The only way out is the locked "
                      "door to the yard."),
                ("stat", "Mag Orrin, Bandit Leader (F3): AC 15, #At 1 longsword, Dam 1d8+1, Mv 20', Sv F3, ML 9, "
                         "XP 145. The leader is a foe with statistics of her own."),
                ("stat", "2 Bandit Cronies (F2): AC 14, #At 1 axe, Dam 1d8, Mv 20', Sv F2, ML 8, XP 75 ea."),
                ("p", "B4. PEN. Three wolves, half tame, are kept in this muddy pen to guard the camp at night. "
                      "There is no treasure."),
                ("stat", "3 Wolves: AC 13, HD 2, #At 1 bite, Dam 1d6, Mv 60', Sv F2, ML 8, XP 75 ea."),
                ("h2", "The Lizard Man Den"),
                ("p", "L1. REED TUNNEL. The den's mouth is a tunnel of woven reeds on the east bank. A muddy "
                      "path from here leads across the hollow to the bandit camp's gate (B1). The tunnel opens "
                      "into the common nest (area L2). No one guards it, and nothing of value lies here."),
                ("p", "L2. COMMON NEST. Five lizard men sleep and eat in this large mound chamber. Tunnels lead "
                      "to the shaman's pool (area L3) and the egg chamber (area L4). Their wealth is heaped in a "
                      "pile of bones and shells (Treasure Type B)."),
                ("stat", "5 Lizard Men: AC 15, HD 2, #At 1 weapon, Dam 1d6+1, Mv 20' Swim 40', Sv F2, ML 11, "
                         "XP 75 ea."),
                ("p", "L3. SHAMAN'S POOL. An old lizard man shaman tends a green pool here and speaks with the "
                      "spirits of the fen. The shaman has no statistics of its own: the GM decides its powers. "
                      "The shaman owns nothing of value."),
                ("p", "L4. EGG CHAMBER. A warm chamber of rotting reeds and a clutch of eggs. No adults stay "
                      "here. Hidden under the eggs are three gems worth 50 gp each."),
            ],
        ],
    },
}

_STYLE = {"h1": ("B", 16, 9), "h2": ("B", 12, 7), "p": ("", 10, 5), "stat": ("I", 9, 4.5)}


def render(member: str) -> bytes:
    """The PDF bytes of one module (deterministic for a given fpdf2 release)."""
    from fpdf import FPDF

    module = MODULES[member]

    class _Module(FPDF):
        def footer(self) -> None:
            self.set_y(-12)
            self.set_font("Helvetica", "", 8)
            self.cell(0, 5, f"{module['title']} - page {self.page_no()}", align="C")

    pdf = _Module(format="A4", unit="mm")
    pdf.set_creation_date(CREATED)
    pdf.set_producer(PRODUCER)
    pdf.set_creator(PRODUCER)
    pdf.set_title(module["title"])
    pdf.set_author("evalkit developers (CC0 1.0)")
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.set_margins(20, 18, 20)
    for page in module["pages"]:
        pdf.add_page()
        for style, text in page:
            font, size, height = _STYLE[style]
            pdf.set_font("Helvetica", font, size)
            if style in ("h1", "h2"):
                pdf.ln(2)
            pdf.multi_cell(0, height, text, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1.5)
    # fpdf2's file id is a hash of the bytes plus the (fixed) creation date: deterministic too.
    return bytes(pdf.output())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _pin_manifest(member: str, digest: str) -> bool:
    path = TASK_DIR / member / "manifest.yaml"
    if not path.is_file():
        return False
    text = path.read_text(encoding="utf-8")
    new = re.sub(r"(?m)^sha256: *[0-9a-f]{64}$", f"sha256: {digest}", text)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return True


def write_predictions(out: Path, sources: Path | None) -> list[str]:
    """Every member's truth, in the extraction shape, as out/<member>.json."""
    sys.path.insert(0, str(ROOT))
    from evalkit.corpus.tasks import load_task
    from evalkit.errors import SourceMissing

    task = load_task(TASK_DIR)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for member in task.members():
        try:
            truth = member.load_truth(sources)
        except SourceMissing as e:
            print(f"skipped {member.id}: {e}", file=sys.stderr)
            continue
        record = task.scorer.expected_extraction(truth)
        (out / f"{member.id}.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n",
                                               encoding="utf-8")
        written.append(member.id)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare fresh renders with the committed PDFs")
    ap.add_argument("--predictions", type=Path, help="write each member's truth as DIR/<member>.json")
    ap.add_argument("--sources", type=Path, help="the sources folder (default: $EVALKIT_SOURCES)")
    args = ap.parse_args(argv)
    if args.predictions:
        import os

        sources = args.sources or (Path(os.environ["EVALKIT_SOURCES"]) if os.environ.get("EVALKIT_SOURCES") else None)
        for m in write_predictions(args.predictions, sources):
            print(f"{args.predictions / (m + '.json')}")
        return 0
    status = 0
    for member in MODULES:
        data = render(member)
        path = TASK_DIR / member / "module.pdf"
        if args.check:
            same = path.is_file() and path.read_bytes() == data
            print(f"{member}: {'ok' if same else 'DIFFERS'} {sha256(data)}")
            status |= 0 if same else 1
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        pinned = _pin_manifest(member, sha256(data))
        print(f"{path.relative_to(ROOT)}  sha256 {sha256(data)}{'  (manifest pinned)' if pinned else ''}")
    return status


if __name__ == "__main__":
    sys.exit(main())
