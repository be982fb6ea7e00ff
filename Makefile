# The verbs a user types. Every target makes its own virtualenv; nothing is installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BINARY_STAMP := $(VENV)/.binary-installed

.PHONY: venv demo official-run official-env test check lint world world-verify images images-prune runner-image binary bench clean browser postgres

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -e '.[test,lint]'
	touch $(STAMP)

venv: $(STAMP)

# Images are tagged by a digest of their inputs: on a warm machine this step costs ~0.3 s.
images: $(STAMP)
	$(BIN)/ispm images

images-prune: $(STAMP)
	$(BIN)/ispm images --prune

# ispm itself as an image, for auditors: `docker-compose run --rm runner ispm audit /runs/<run-id>` (compose.yaml).
runner-image: $(STAMP) images
	$(BIN)/python -m runner.sandbox.runner_image

# One single-file `ispm` for a host with only Docker: the world, the tasks and the grader (runner/binary.py, PyInstaller
# pinned by the `binary` extra). Cached by a digest of its inputs under ~/.cache/ispm/binary/ (shared by checkouts); dist/ispm is a copy of it.
$(BINARY_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[binary]'
	touch $(BINARY_STAMP)

binary: $(BINARY_STAMP)
	$(BIN)/python -m runner.binary

# Calibration, not an official run: every task in Docker, gold replay, ref judge in both slots, 1 epoch. It builds only
# the images it runs (the base and the replay agent); the other agents are built the first time a run names them.
demo: $(STAMP)
	$(BIN)/ispm demo

official-env:
	@m=0; \
	[ -n "$(AGENT_IMAGE)" ] || { echo "AGENT_IMAGE is not set: export AGENT_IMAGE=<your agent image, e.g. ispm/agent-reference:latest>"; m=2; }; \
	[ -n "$(CANDIDATE)" ] || { echo "CANDIDATE is not set: export CANDIDATE=<provider/model under test, e.g. openai/gpt-4.1>"; m=2; }; \
	[ -n "$(JUDGE_A)" ] || { echo "JUDGE_A is not set: export JUDGE_A=<first judge, e.g. anthropic/claude-sonnet-4-6>"; m=2; }; \
	[ -n "$(JUDGE_B)" ] || { echo "JUDGE_B is not set: export JUDGE_B=<second judge, e.g. openai/gpt-4.1>"; m=2; }; \
	exit $$m

# The official protocol: 127 tasks x 5 epochs, two model judges, concurrency 2, 15 min per sample, 12 h per run.
# Provider keys come from the usual variables (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...). `ispm run` runs the preflight
# itself (probes, the judges' dry run) and names a missing key before any sample starts.
official-run: official-env $(STAMP) images
	$(BIN)/ispm run --official --agent-image "$(AGENT_IMAGE)" --candidate "$(CANDIDATE)" \
	    --judge "$(JUDGE_A)" --judge "$(JUDGE_B)"

# Headless Chromium for the report tests: Debian's own browser and driver, installed only when missing (needs root).
browser:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
	    { apt-get update && apt-get install -y --no-install-recommends chromium chromium-driver; }

# PostgreSQL for the board tests: Debian's server, installed only when missing (needs root). Each test starts its
# own throwaway cluster with initdb and pg_ctl; nothing runs as a service.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	    { apt-get update && apt-get install -y --no-install-recommends postgresql; }

# Everything, as CI runs it: the real Docker engine, chromium, PostgreSQL and Ray clusters on loopback. One session
# on three workers, each taking whole files (module fixtures are made once), the files with a slow test first
# (tests/lanes.py): the tests that wait on the engine, a cluster or a browser leave the CPU to those that do not.
TEST_WORKERS ?= 3
# The runner's bytecode is compiled first: the suite starts hundreds of Python processes (the CLI, Ray's workers, the
# board's), and where PYTHONDONTWRITEBYTECODE is set none of them would keep what it compiled.
test: $(STAMP) images browser postgres
	$(BIN)/python -m compileall -q -j0 runner
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

LANE_PARTS := docker or browser or postgres or ray

# The fast lane: every test that needs no Docker, browser, PostgreSQL or Ray (tests/lanes.py). A test that reaches for
# one without its marker fails here by name: Docker points at no engine and the other parts refuse to start.
check: $(STAMP)
	ISPM_TEST_LANE=check DOCKER_HOST=unix:///nonexistent/ispm-check-lane.sock \
	    $(BIN)/python -m pytest -q -p no:cacheprovider -n auto -m "not ($(LANE_PARTS))"

lint: $(STAMP)
	$(BIN)/ruff check runner tests bench images/base/ispm-sql images/agents
	$(BIN)/ruff format --check runner tests bench images/base/ispm-sql images/agents
	$(BIN)/mypy
	$(BIN)/mypy --strict images/base/ispm-sql
	$(BIN)/mypy --strict images/agents/null/agent.py
	$(BIN)/mypy --strict images/agents/replay/agent.py
	$(BIN)/mypy --strict images/agents/reference/agent.py
	$(BIN)/mypy --strict images/agents/claude-code/agent.py
	$(BIN)/mypy --strict images/agents/openai-agents/agent.py
	$(BIN)/mypy --strict images/agents/codex/agent.py
	$(BIN)/mypy --strict images/agents/gemini/agent.py
	$(BIN)/mypy --strict images/agents/mini-swe-agent/agent.py

world: $(STAMP)
	$(BIN)/ispm world build

world-verify: $(STAMP)
	$(BIN)/ispm world verify

bench: $(STAMP)
	$(BIN)/python bench/world.py
	$(BIN)/python bench/tasks.py
	$(BIN)/python bench/gateway.py
	$(BIN)/python bench/forwarder.py
	$(BIN)/python bench/transcripts.py
	$(BIN)/python bench/sample_pages.py
	$(BIN)/python bench/grading.py
	$(BIN)/python bench/sandbox.py
	$(BIN)/python bench/agents.py
	$(BIN)/python bench/analytics.py
	$(BIN)/python bench/run.py
	$(BIN)/python bench/ray.py
	$(BIN)/python bench/board.py
	$(BIN)/python bench/inspect_sandbox.py
	$(BIN)/python bench/site.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
