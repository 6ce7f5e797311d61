# Two-command quick start (see README.md):
#   make demo   # set up .venv (Python 3.12) and run the main job on the bundled runs (CPU)
#   make test   # set up .venv with the [isaaclab] extra and run the whole test suite
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python

# The first Python 3.12 found: python3.12 on PATH, else a pyenv install.
PYTHON312 := $(shell for c in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1; then echo $$c; break; fi; done)

.PHONY: venv demo test bench clean-venv

$(PY):
	@if [ -z "$(PYTHON312)" ]; then echo "error: Python 3.12 not found (Isaac Lab 3.0 needs 3.12); install it and retry" >&2; exit 1; fi
	@echo "creating $(VENV) with $(PYTHON312)"
	$(PYTHON312) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# core + test tools (the CPU product: MuJoCo backend, fit, export)
$(VENV)/.stamp-core: setup.py extension.toml | $(PY)
	$(PY) -m pip install -q -e ".[dev]"
	@touch $@

# + Isaac Lab 3.0 (Newton, kit-less CPU/GPU; about 8 GB, a few minutes the first time), the importers, Ray and the peers (mujoco.sysid)
$(VENV)/.stamp-isaaclab: setup.py extension.toml | $(PY)
	$(PY) -m pip install -q -e ".[dev,isaaclab,import,ray,peers]"
	@touch $@ $(VENV)/.stamp-core

venv: $(VENV)/.stamp-core

demo: $(VENV)/.stamp-core
	$(PY) scripts/demo.py

test: $(VENV)/.stamp-isaaclab
	$(PY) -m pytest -q -n 2 --dist loadfile tests

bench: $(VENV)/.stamp-core
	$(PY) benchmarks/replay_throughput.py
	$(PY) benchmarks/fit_recovery.py --ci
	$(PY) benchmarks/fit_matrix.py --ci

clean-venv:
	rm -rf $(VENV)
