# aptforge: every target that runs code depends on `setup`, so a fresh clone needs only Python and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
GENERATOR ?= offline
CONFIG_SWE ?= configs/swe.yaml
export PREFECT_HOME ?= $(CURDIR)/.prefect
export PREFECT_LOGGING_LEVEL ?= WARNING
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export DO_NOT_TRACK ?= 1

.PHONY: setup build-swe publish-swe test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

build-swe: setup
	$(BIN)/aptforge build $(CONFIG_SWE) --generator $(GENERATOR)

publish-swe: setup
	$(BIN)/aptforge publish $(CONFIG_SWE) $(PUBLISH_FLAGS)

test: setup
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf out .pytest_cache .ruff_cache
