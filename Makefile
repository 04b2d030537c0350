# gflkit — the three quickstart commands plus `reproduce`.
VENV    ?= .venv
PY      := $(VENV)/bin/python
PROFILE ?= smoke
PAPER   ?= all
PAPERS  := $(if $(filter all,$(PAPER)),$(patsubst notebooks/%.ipynb,%,$(wildcard notebooks/*.ipynb)),$(PAPER))
# Real data for tests and reproductions: GFLKIT_DATA if set, else the offline copies beside the repo.
export GFLKIT_DATA ?= $(if $(wildcard ../shared/datasets),$(abspath ../shared/datasets),)

.PHONY: setup demo test reproduce bench clean

$(PY):
	python3 -m venv $(VENV)

setup: $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[notebooks,test]"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null

demo:
	$(PY) -m gflkit.cli notebook quickstart --profile smoke --results results/quickstart

# Notebooks under test write into a fresh folder, so no stored run from an earlier demo is re-used.
test:
	GFLKIT_RESULTS=$$(mktemp -d) $(PY) -m pytest -q tests --nbval-lax notebooks

reproduce:
	@for p in $(PAPERS); do \
	  $(PY) -m gflkit.cli notebook $$p --profile $(PROFILE) --results results/$$p || exit 1; \
	done

bench:
	$(PY) benchmarks/round_overhead.py
	$(PY) benchmarks/pdca_aggregation.py

clean:
	rm -rf results .pytest_cache
