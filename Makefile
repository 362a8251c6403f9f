# Everyday commands. Every target works on a fresh clone: the ones that need the virtual
# environment create it first (a stamp file remembers that it is installed and up to date).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.mlckit-installed
# The chapters run as notebooks in the tests: every cell must run, and the cells marked
# "nbval-check-output" must print what the saved notebook shows.
NBVAL  := --nbval-lax --nbval-current-env --nbval-sanitize-with chapters/nbval_sanitize.cfg

.PHONY: setup demo test lint fix bench notebooks book clean

# Reinstall when pyproject.toml changes (new dependencies), not on every run.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[dev,docs,torch]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m mlckit.demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest tests chapters $(NBVAL)

fix: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

# The chapter notebooks, generated from chapters/NN_name.py and executed (outputs saved).
notebooks: $(STAMP)
	$(BIN)/python -m mlckit.book notebooks

# The HTML book from book.yml, every chapter executed; offline.
book: $(STAMP)
	$(BIN)/python -m mlckit.book build

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
