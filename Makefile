# Two commands: `make run` and `make test`. Each sets itself up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: setup console browser console-screenshots run test test-unit test-integration test-faults test-infra test-e2e lint typecheck build synth bench bench-pipeline bench-cost bench-chat bench-peers bench-console clean

$(INSTALLED): pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -m pip install --quiet -e '.[dev]' 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -m pip install --quiet -e ./clients/python 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -c "import batchroute, batchroute_client, functions, infra, moto, aws_cdk, cdk_nag" 
	touch $@

setup: $(INSTALLED)

## The web console (docs/console.md): rebuilt when its sources or the API's code changed
## (the one fingerprinted builder in infra/assets.py, which `make build` also runs).
console: setup
	$(PY) scripts/build_assets.py --console

## Debian's chromium for the browser tests (no browser download from anywhere else).
browser:
	@command -v chromium >/dev/null || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }

## Screenshots of every console page at 1280x800 (and a few at 390 px) into docs/console/.
console-screenshots: setup console browser
	CONSOLE_SCREENSHOTS=docs/console $(VENV)/bin/pytest tests/e2e/test_console_browser.py tests/e2e/test_console_layout.py

## The whole service locally, in the foreground (Ctrl-C stops it).
run: setup console
	$(VENV)/bin/batchroute-local

## Deployment assets (layer + functions) into .build/, no Docker.
build: setup
	$(PY) scripts/build_assets.py

## CloudFormation for both environments into cdk.out/, offline.
synth: build
	$(PY) app.py

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: setup
	$(VENV)/bin/mypy

test-unit: setup
	$(VENV)/bin/pytest tests/unit

test-integration: setup
	$(VENV)/bin/pytest tests/integration

## The fault suite alone (docs/reliability.md); `make test` runs it too.
test-faults: setup
	$(VENV)/bin/pytest tests/faults

test-infra: build
	$(VENV)/bin/pytest tests/infra

test-e2e: setup console browser
	$(VENV)/bin/pytest tests/e2e

test: lint typecheck build console browser
	# unit, integration and fault tests are isolated per process (moto in-process): two workers,
	# each stealing from the other when its share runs out (the slow tests do not queue at the end)
	$(VENV)/bin/pytest -n 2 --dist worksteal tests/unit tests/integration tests/faults
	# infra and e2e: two workers, a file each, each worker with a local stack of its own
	$(VENV)/bin/pytest -n 2 --dist loadfile tests/infra tests/e2e

bench: setup build
	$(PY) -m bench.coldstart

## The batch pipeline end to end (1k, 10k, 100k items) and the chat path's added latency.
bench-pipeline: setup
	$(PY) -m bench.pipeline --breakdown

## The whole AWS bill per 1M items (10k, 100k, 1M items: the 1M run takes ~20 min).
bench-cost: setup
	$(PY) -m bench.cost_model

bench-peers: setup
	$(PY) -m bench.peers

bench-chat: setup
	$(PY) -m bench.chat_overhead

## The web console's bundle size and time to interactive on the local stack (chromium).
bench-console: setup console browser
	$(PY) -m bench.console_load

clean:
	rm -rf .build cdk.out .local .pytest_cache .mypy_cache .ruff_cache
