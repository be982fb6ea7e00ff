# The verbs a user types. Every target makes its own virtualenv; nothing is installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint world world-verify images images-prune bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -e '.[test,lint]'
	touch $(STAMP)

venv: $(STAMP)

# Images are tagged by a digest of their inputs: on a warm machine this step costs ~0.3 s.
images: $(STAMP)
	$(BIN)/python -m runner.sandbox.images

images-prune: $(STAMP)
	$(BIN)/python -m runner.sandbox.images --prune

# Calibration, not an official run: every task in Docker, gold replay, ref judge in both slots, 1 epoch.
demo: $(STAMP) images
	$(BIN)/ispm demo

test: $(STAMP) images
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check runner tests bench images/base/ispm-sql images/agents
	$(BIN)/ruff format --check runner tests bench images/base/ispm-sql images/agents
	$(BIN)/mypy
	$(BIN)/mypy --strict images/base/ispm-sql
	$(BIN)/mypy --strict images/agents/null/agent.py
	$(BIN)/mypy --strict images/agents/replay/agent.py
	$(BIN)/mypy --strict images/agents/reference/agent.py

world: $(STAMP)
	$(BIN)/ispm world build

world-verify: $(STAMP)
	$(BIN)/ispm world verify

bench: $(STAMP)
	$(BIN)/python bench/world.py
	$(BIN)/python bench/tasks.py
	$(BIN)/python bench/gateway.py
	$(BIN)/python bench/grading.py
	$(BIN)/python bench/sandbox.py
	$(BIN)/python bench/analytics.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
