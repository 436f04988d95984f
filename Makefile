# Two commands for a fresh clone: `make demo` and `make test`.
# Dependencies: compatible ranges in setup.cfg; the exact versions installed here (and in CI)
# come from constraints.txt.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOK_STAMP := $(VENV)/.installed-notebook
DOCS_STAMP := $(VENV)/.installed-docs
CONSTRAINTS := constraints.txt

# `make smoke` runs on python3.13 unless PYTHON is given (make smoke PYTHON=python3.10).
SMOKE_PYTHON := $(if $(filter file,$(origin PYTHON)),python3.13,$(PYTHON))

.PHONY: venv test test-avx2 demo notebook docs docs-serve smoke clean

$(STAMP): setup.cfg pyproject.toml $(CONSTRAINTS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e '.[dev]'
	@rm -f $(NOTEBOOK_STAMP) $(DOCS_STAMP)
	@touch $(STAMP)

venv: $(STAMP)

# Test processes in parallel (pytest-xdist): most of the suite is single-threaded tracing. A
# module (or group of modules) runs whole on one worker, longest first (tests/conftest.py).
TEST_WORKERS ?= 2

# The multi-worker job's module runs alone after the rest: inside the parallel run its two
# workers lost each other at start ("stopped sending heartbeats") in 3 of 7 runs on 2026-11-28,
# alone it passed 5 of 5 (AMD EPYC with AVX-512, 2 cores).
ALONE_TESTS := tests/training/test_multiworker.py

# pytest exits 5 when it collects no test; that is a failure of the suite, say so.
test: $(STAMP)
	@$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	    --ignore=$(ALONE_TESTS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: no tests were collected"; exit 1; fi; \
	[ $$rc -eq 0 ] || exit $$rc; \
	$(PY) -m pytest -q -p no:cacheprovider $(ALONE_TESTS)

# The modules whose results depend on rounding (decoding, layers, LiteRT, the model, the train
# step), run again with kernels other than this CPU's, as an AVX2-only CPU (no AVX-512) runs
# them. XLA:CPU generates AVX2 code (XLA_FLAGS); then (1) oneDNN is limited to AVX2 for the
# float32 decoding tests, and (2) oneDNN is off for all of them, as TensorFlow is for bfloat16 on
# a CPU without AVX-512 (Eigen's kernels; this reproduces a near-tie an AVX2-only AMD EPYC
# flipped). bfloat16 under (1) aborts on an AVX-512 CPU: TensorFlow gives bfloat16 ops to oneDNN
# whenever the CPU has AVX-512, and oneDNN limited to AVX2 has no bfloat16 matmul. ~1.5 min.
AVX2_LIMITS := XLA_FLAGS=--xla_cpu_max_isa=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
NUMERICS_TESTS := tests/inference/decoding tests/layers tests/backends/litert tests/test_model.py \
    tests/test_masks.py tests/test_shared_embeddings.py tests/training/step \
    tests/inference/test_translator.py
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile
test-avx2: $(STAMP)
	$(AVX2_LIMITS) $(PYTEST) tests/inference/decoding -k "not bfloat16"
	TF_ENABLE_ONEDNN_OPTS=0 $(AVX2_LIMITS) $(PYTEST) $(NUMERICS_TESTS)

# Trains runs/demo on the sample corpus in written style (sample_written), exports it to
# saved_models/demo, prints 5 test translations (pt, reference, cased output) and the cased
# sacreBLEU score on the 1,000-sentence test split.
demo: $(STAMP)
	$(PY) -m tf_transformer.demo

$(NOTEBOOK_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e '.[dev,notebook]'
	@touch $(NOTEBOOK_STAMP)

# JupyterLab on the project's environment, in notebooks/. Extra arguments through
# JUPYTER_ARGS, e.g. make notebook JUPYTER_ARGS="--no-browser --port 8890". Jupyter refuses
# to run as root without --allow-root (containers, these machines): added for root only.
JUPYTER_ARGS ?=
notebook: $(NOTEBOOK_STAMP)
	cd notebooks && ../$(VENV)/bin/jupyter lab \
	    $(if $(filter 0,$(shell id -u)),--allow-root) $(JUPYTER_ARGS)

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e '.[dev,docs]'
	@touch $(DOCS_STAMP)

# The docs site (docs/, mkdocs.yml) into site/. --strict: a broken link, a missing page or an
# API reference that does not resolve fails the build. Figures are drawn at build time
# (docs/hooks/figures.py): the concepts from the package's plots, the benchmark plots from
# docs/benchmarks/data/*.json (bench/plot_results.py).
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs
docs: $(DOCS_STAMP)
	$(MKDOCS) build --strict

# The same site at http://127.0.0.1:8000, rebuilt on every change (DOCS_ADDR=0.0.0.0:8000 to
# reach it from another machine).
DOCS_ADDR ?= 127.0.0.1:8000
docs-serve: $(DOCS_STAMP)
	$(MKDOCS) serve --strict --dev-addr $(DOCS_ADDR)

# A user's install on another Python: a fresh venv in a temporary folder, a non-editable
# install with constraints.txt, import, and a tiny train -> export -> translate (.ci/smoke).
smoke:
	.ci/smoke $(SMOKE_PYTHON)

clean:
	rm -rf $(VENV) runs build site *.egg-info
