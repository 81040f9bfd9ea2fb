#!/usr/bin/env bash
# Record K independent samples of the bundled local model (Gemma 3 270M, see record_default_cassette.sh)
# at a temperature above 0, one task at a time: the real run-to-run noise the committed band is measured from.
#
#   tools/record_samples.sh TASK [K] [TEMPERATURE]      # default K=5, TEMPERATURE=0.8
#
# Each sample is a separate pass on a freshly started server (llama.cpp draws a new random seed per start, so
# at temperature > 0 the passes are independent samples), recorded to cassettes/samples/TASK.sN.jsonl.
# Recording resumes: a pass whose cassette already covers the task's members replays and costs nothing, so an
# interrupted recording is finished by running this again. ~8 min per deal-memos pass, ~12 min per
# cuad-contracts pass on one core.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TASK="${1:?usage: tools/record_samples.sh TASK [K] [TEMPERATURE]}"
K="${2:-5}"
TEMPERATURE="${3:-0.8}"
mkdir -p cassettes/samples

for i in $(seq 1 "$K"); do
  cassette="cassettes/samples/$TASK.s$i.jsonl"
  echo "record_samples: $TASK sample $i of $K (temperature $TEMPERATURE) → $cassette" >&2
  tools/record_default_cassette.sh --cassette "$cassette" -- \
    --task "$TASK" --set "temperature=$TEMPERATURE" --out "runs/samples/$TASK.s$i" --no-html || {
      rc=$?
      # exit 1: some member failed its verdict — a result, expected of a 270M base model
      [ "$rc" -eq 1 ] || exit "$rc"
    }
done
