#!/usr/bin/env python3
"""Merge K independently recorded cassettes of the same requests into one multi-sample cassette.

    tools/merge_samples.py OUT IN1 IN2 ... INK

INi (recorded without --samples, e.g. by tools/record_samples.sh: one temperature > 0 pass each, on a fresh
server) becomes sample i-1 of OUT: IN1's records as recorded (sample 0, today's keys), INi's with keys derived
from the recorded key and i-1 (`evalkit.backends.cassette.merge_samples`). Replay OUT with
``evalkit run --samples K --backend NAME=cassette:path=OUT`` at the recorded settings (``--set temperature=...``).
Exit 2 on a refused merge (the same recording twice, an input that already holds samples).
"""

from __future__ import annotations

import sys

from evalkit.backends.cassette import merge_samples
from evalkit.errors import EvalkitError


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        counts = merge_samples(argv[0], argv[1:])
    except EvalkitError as e:
        print(f"merge_samples: {e}", file=sys.stderr)
        return e.exit_code
    print(f"{argv[0]}: " + ", ".join(f"{k}: {n} record(s)" for k, n in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
