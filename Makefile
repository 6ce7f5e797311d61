# Two-command quick start (see README.md):
#   make demo   # set up .venv (Python 3.12) and run the main job on the bundled runs (CPU)
#   make test   # set up .venv with the [isaaclab] extra and run the whole test suite
# Both install through the locked dependency set requirements/py312.lock (pip constraints), so a
# fresh machine gets the versions the suite passed on. Maintainers:
#   make lock         # re-resolve setup.py's ranges today and rewrite the lock (nothing installed)
#   make test-latest  # the suite on the newest versions the ranges allow, in .venv-latest (no lock)
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
LOCK := requirements/py312.lock
# every extra the suite exercises (make test, make lock, make test-latest)
EXTRAS_ALL := dev,isaaclab,import,ray,peers
PYTEST_ARGS := -q -n 2 --dist loadfile --durations=25 tests

# The first Python 3.12 found: python3.12 on PATH, else a pyenv install.
PYTHON312 := $(shell for c in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1; then echo $$c; break; fi; done)

.PHONY: venv demo test bench clean-venv lock test-latest

$(PY):
	@if [ -z "$(PYTHON312)" ]; then echo "error: Python 3.12 not found (Isaac Lab 3.0 needs 3.12); install it and retry" >&2; exit 1; fi
	@echo "creating $(VENV) with $(PYTHON312)"
	$(PYTHON312) -m venv $(VENV)
	$(PY) -m pip install -q -c $(LOCK) pip

# core + test tools (the CPU product: MuJoCo backend, fit, export)
$(VENV)/.stamp-core: setup.py extension.toml $(LOCK) | $(PY)
	$(PY) -m pip install -q -c $(LOCK) -e ".[dev]"
	@touch $@

# + Isaac Lab 3.0 (Newton, kit-less CPU/GPU; about 8 GB, a few minutes the first time), the importers, Ray and the peers (mujoco.sysid)
$(VENV)/.stamp-isaaclab: setup.py extension.toml $(LOCK) | $(PY)
	$(PY) -m pip install -q -c $(LOCK) -e ".[$(EXTRAS_ALL)]"
	@touch $@ $(VENV)/.stamp-core

venv: $(VENV)/.stamp-core

demo: $(VENV)/.stamp-core
	$(PY) scripts/demo.py

test: $(VENV)/.stamp-isaaclab
	$(PY) -m pytest $(PYTEST_ARGS)

# Re-resolve setup.py's ranges (every extra) in a throw-away venv and rewrite the lock; installs nothing.
# Review the diff, run `make test` on it (it reinstalls through the new lock), commit both.
lock:
	@if [ -z "$(PYTHON312)" ]; then echo "error: Python 3.12 not found" >&2; exit 1; fi
	rm -rf .venv-lock
	$(PYTHON312) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q --upgrade pip
	.venv-lock/bin/python -m pip install -q --dry-run --ignore-installed --report .venv-lock/report.json -e ".[$(EXTRAS_ALL)]"
	.venv-lock/bin/python requirements/compile_lock.py .venv-lock/report.json $(LOCK) "$$(.venv-lock/bin/python -m pip --version | cut -d' ' -f2)"
	rm -rf .venv-lock

# The suite against the newest versions setup.py's ranges allow (no lock), in its own venv, so that a
# release that breaks us is found by us before a new user's machine resolves it.
test-latest:
	@if [ -z "$(PYTHON312)" ]; then echo "error: Python 3.12 not found" >&2; exit 1; fi
	rm -rf .venv-latest
	$(PYTHON312) -m venv .venv-latest
	.venv-latest/bin/python -m pip install -q --upgrade pip
	.venv-latest/bin/python -m pip install -q --upgrade -e ".[$(EXTRAS_ALL)]"
	.venv-latest/bin/python -m pip list --format=freeze | grep -iE '^(numpy|scipy|pin|cvxpy|cma|torch|mujoco|pandas)==' | tr '\n' ' '; echo
	.venv-latest/bin/python -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.stamp-core
	$(PY) benchmarks/replay_throughput.py
	$(PY) benchmarks/fit_recovery.py --ci
	$(PY) benchmarks/fit_matrix.py --ci

clean-venv:
	rm -rf $(VENV)
