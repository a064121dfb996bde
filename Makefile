# aptforge: every target that runs code depends on `setup`, so a fresh clone needs only Python and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
GENERATOR ?= offline
CONFIG_SWE ?= configs/swe_issue_fix.yaml
CONFIG_ENV_SETUP ?= configs/swe_env_setup.yaml
CONFIG_DR ?= configs/dr.yaml
REVIEW_PORT ?= 8765
export PREFECT_HOME ?= $(CURDIR)/.prefect
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export DO_NOT_TRACK ?= 1

AUDIT_OUT ?=

.PHONY: audit-real browser setup build-swe build-swe-env-setup build-envsetup build-dr golden review publish-swe publish-swe-env-setup publish-envsetup publish-dr serve eval-demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

build-swe: setup
	$(BIN)/aptforge build $(CONFIG_SWE) --generator $(GENERATOR)

build-swe-env-setup: setup
	$(BIN)/aptforge build $(CONFIG_ENV_SETUP) --generator $(GENERATOR)

build-envsetup: build-swe-env-setup  # the earlier name of the target

build-dr: setup
	$(BIN)/aptforge build $(CONFIG_DR) --generator $(GENERATOR)

golden: setup  # regenerate tests/golden/<name>.jsonl from extractors/samples/<name>/ (all, or NAME=<name>); review the diff
	$(BIN)/python -m tests.golden_support $(NAME)

review: setup  # after `make build-swe`: serve the SWE review queue on 127.0.0.1:$(REVIEW_PORT)
	$(BIN)/aptforge review --config $(CONFIG_SWE) --host 127.0.0.1 --port $(REVIEW_PORT)

publish-swe: setup
	$(BIN)/aptforge publish $(CONFIG_SWE) $(PUBLISH_FLAGS)

publish-swe-env-setup: setup
	$(BIN)/aptforge publish $(CONFIG_ENV_SETUP) $(PUBLISH_FLAGS)

publish-envsetup: publish-swe-env-setup  # the earlier name of the target

publish-dr: setup
	$(BIN)/aptforge publish $(CONFIG_DR) $(PUBLISH_FLAGS)

serve: setup
	$(BIN)/aptforge serve --configs configs

eval-demo: setup  # offline: SWE sample release, n-gram stand-in completions server, eval on both protocols
	$(BIN)/python -m flows.eval_demo

test: setup browser
	$(BIN)/python -m pytest

# the path the browser tests launch (tests/test_annotations_browser.py, tests/test_quality_report.py)
CHROMIUM := /usr/bin/chromium

browser:  # the browser tests drive Debian's headless Chromium: installed with apt-get where it is absent and apt-get can, else a one-line error
	@[ -x $(CHROMIUM) ] || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's chromium for the browser tests (apt-get)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 \
	      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; \
	  fi; \
	  [ -x $(CHROMIUM) ] || { echo "make test: $(CHROMIUM) is missing and could not be installed: run 'sudo apt-get install chromium' (the browser tests need it)" >&2; exit 1; }; }

lint: setup  # style, complexity (C901) and the layering contract of pyproject's [tool.importlinter]
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

audit-real: setup  # build every scenario from the real runs in $$APTFORGE_SHARED (default ../shared); writes bench/validity.md
	$(BIN)/python -m flows.audit_real $(if $(AUDIT_OUT),--out $(AUDIT_OUT))

bench: setup  # benchmarks print ratios against a baseline measured in the same run
	$(BIN)/python bench/run.py

clean:
	rm -rf out .pytest_cache .ruff_cache
