# The verbs a user types. Every target makes its own virtualenv; nothing is installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint world world-verify bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -e '.[test,lint]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check runner tests bench
	$(BIN)/ruff format --check runner tests bench
	$(BIN)/mypy

world: $(STAMP)
	$(BIN)/ispm world build

world-verify: $(STAMP)
	$(BIN)/ispm world verify

bench: $(STAMP)
	$(BIN)/python bench/world.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
