#!/usr/bin/env bash
# Record K independent samples of the bundled local model (Gemma 3 270M, see record_default_cassette.sh)
# at a temperature above 0, one task at a time: the real run-to-run noise the committed band is measured from.
#
#   tools/record_samples.sh TASK [K] [TEMPERATURE]      # default K=5, TEMPERATURE=0.8
#   SAMPLES="4 5" tools/record_samples.sh TASK          # only these samples (e.g. two recorders in parallel)
#
# Each sample is a separate pass on a freshly started server with its own sampling seed (sample 1: llama.cpp's
# default seed, sample i > 1: seed i — the server's default is fixed, so without distinct seeds every pass at any
# temperature gives the same answers), recorded to cassettes/samples/TASK.sN.jsonl; tools/merge_samples.py then
# makes them one K-sample cassette (cassettes/samples/TASK.jsonl).
# Recording resumes: a pass whose cassette already covers the task's members replays and costs nothing, so an
# interrupted recording is finished by running this again. Measured here (2 cores, loaded): ~2 min per
# deal memo and ~4 min per CUAD contract at temperature 0.8 — grammar-constrained sampling over Gemma's 262k
# vocabulary, not the model, is most of it (at temperature 0 a call takes ~40 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TASK="${1:?usage: tools/record_samples.sh TASK [K] [TEMPERATURE]}"
K="${2:-5}"
TEMPERATURE="${3:-0.8}"
mkdir -p cassettes/samples

for i in ${SAMPLES:-$(seq 1 "$K")}; do
  cassette="cassettes/samples/$TASK.s$i.jsonl"
  echo "record_samples: $TASK sample $i (temperature $TEMPERATURE) → $cassette" >&2
  seed=""; [ "$i" -eq 1 ] || seed="$i"
  LLM_SEED="$seed" tools/record_default_cassette.sh --cassette "$cassette" -- \
    --task "$TASK" --set "temperature=$TEMPERATURE" --out "runs/samples/$TASK.s$i" --no-html || {
      rc=$?
      # exit 1: some member failed its verdict — a result, expected of a 270M base model
      [ "$rc" -eq 1 ] || exit "$rc"
    }
done
[ -n "${SAMPLES:-}" ] || .venv/bin/python tools/merge_samples.py "cassettes/samples/$TASK.jsonl" \
  $(for i in $(seq 1 "$K"); do echo "cassettes/samples/$TASK.s$i.jsonl"; done)
