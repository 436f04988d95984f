# Two commands for a fresh clone: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test demo clean

$(STAMP): setup.cfg pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# Test processes in parallel (pytest-xdist): most of the suite is single-threaded tracing.
TEST_WORKERS ?= 2

# pytest exits 5 when it collects no test; that is a failure of the suite, say so.
test: $(STAMP)
	@$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: no tests were collected"; exit 1; fi; exit $$rc

demo: $(STAMP)
	$(PY) -m tf_transformer.demo

clean:
	rm -rf $(VENV) runs build *.egg-info
