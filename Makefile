# Two-command quick start (see README.md):
#   make demo   # set up .venv (Python 3.12) and run the main job on the bundled runs
#   make test   # set up .venv and run the whole test suite
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRAS ?= dev

# The first Python 3.12 found: python3.12 on PATH, else a pyenv install.
PYTHON312 := $(shell for c in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1; then echo $$c; break; fi; done)

.PHONY: venv demo test bench clean-venv

$(STAMP): setup.py extension.toml
	@if [ -z "$(PYTHON312)" ]; then echo "error: Python 3.12 not found (Isaac Lab 3.0 needs 3.12); install it and retry" >&2; exit 1; fi
	@if [ ! -x $(PY) ]; then echo "creating $(VENV) with $(PYTHON312)"; $(PYTHON312) -m venv $(VENV); fi
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) scripts/demo.py

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile tests

bench: $(STAMP)
	$(PY) benchmarks/replay_throughput.py

clean-venv:
	rm -rf $(VENV)
