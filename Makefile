# gflkit — the three quickstart commands plus `reproduce`.
VENV    ?= .venv
PY      := $(VENV)/bin/python
PROFILE ?= smoke
PAPER   ?= all
PAPERS  := $(if $(filter all,$(PAPER)),$(patsubst notebooks/%.ipynb,%,$(wildcard notebooks/*.ipynb)),$(PAPER))
# Real data for tests and reproductions: GFLKIT_DATA if set, else the offline copies beside the repo.
export GFLKIT_DATA ?= $(if $(wildcard ../shared/datasets),$(abspath ../shared/datasets),)

.PHONY: setup demo test reproduce archive report lab bench clean

$(PY):
	python3 -m venv $(VENV)

setup: $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[notebooks,test,ray,flower,report]"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null

demo:
	$(PY) -m gflkit.cli notebook quickstart --profile smoke --results results/quickstart

# Notebooks under test write into a fresh folder, so no stored run from an earlier demo is re-used. They show
# text progress bars, as `gflkit notebook` runs them: with widget bars, nbval's 5-second wait for a long cell's
# output timed out on a loaded machine (benchmark.ipynb's run cell, twice in two tries); text bars passed there.
# Tests run on TEST_WORKERS processes (pytest-xdist; default: one per CPU core), each on one thread, a test module
# on one worker; the tests that start Ray, Flower or Jupyter (marked `processes`) then run alone, one at a time.
TEST_WORKERS ?= auto
test: export GFLKIT_THREADS = 1
test: export OMP_NUM_THREADS = 1
test: export MKL_NUM_THREADS = 1
test:
	GFLKIT_RESULTS=$$(mktemp -d) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not processes" --durations=10 tests
	GFLKIT_RESULTS=$$(mktemp -d) $(PY) -m pytest -q -m processes --durations=5 tests
	GFLKIT_RESULTS=$$(mktemp -d) GFLKIT_PROGRESS=text $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --nbval-lax notebooks

# EXECUTOR=ray computes each notebook's runs as Ray tasks; RAY_ADDRESS=ray://host:10001 names a cluster.
reproduce:
	@for p in $(PAPERS); do \
	  $(PY) -m gflkit.cli notebook $$p --profile $(PROFILE) --results results/$$p \
	    $(if $(EXECUTOR),--executor $(EXECUTOR)) $(if $(RAY_ADDRESS),--ray-address $(RAY_ADDRESS)) || exit 1; \
	done

# The archive of executed notebooks (docs/results/NAME_PROFILE/): executes each from its store results/NAME_PROFILE;
# ENTRIES="quickstart:ci sfl:ci" archives only those.
archive:
	$(PY) -m gflkit.cli archive $(ENTRIES)

# The report site, offline, warnings as errors: open site/index.html in a browser.
report:
	rm -rf site
	$(PY) -m sphinx -W --keep-going -q -b html docs site
	rm -rf jupyter_execute
	@echo "report built: open site/index.html"

# JupyterLab on notebooks/ with the project's kernel and the data root; LAB_ARGS passes options through,
# e.g. make lab LAB_ARGS="--no-browser --port 8890". As root (a container), Jupyter needs --allow-root.
lab:
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

bench:
	$(PY) benchmarks/cli_refusal.py
	$(PY) benchmarks/round_overhead.py
	$(PY) benchmarks/pdca_aggregation.py
	$(PY) benchmarks/vectorised_clients.py
	$(PY) benchmarks/whole_runs.py

clean:
	rm -rf results .pytest_cache site docs/_api jupyter_execute
