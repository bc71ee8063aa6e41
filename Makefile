# Every target works on a fresh clone: it creates .venv and builds what it needs.
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.dev-installed

.PHONY: help demo test test-rust test-python lint build develop clean

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-13s %s\n", $$1, $$2}'

$(STAMP): requirements-dev.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

develop: $(STAMP) ## Build the native module (release) into .venv
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --quiet

demo: develop ## Run the demo transcript
	$(PY) -m rpcwire demo

test: test-rust test-python fuzz-smoke ## Every test: Rust, Python, and a short run of each fuzz target

test-rust: $(STAMP) ## cargo test (the pure-Rust framing and envelope code)
	PYO3_PYTHON=$(abspath $(PY)) cargo test --quiet

test-python: develop ## The pytest suite against rpcwire and rpcwire.pure
	$(PY) -m pytest

lint: develop fuzz-lint ## rustfmt, clippy, ruff, mypy.stubtest (and the same for fuzz/)
	cargo fmt --all -- --check
	PYO3_PYTHON=$(abspath $(PY)) cargo clippy --all-targets -- -D warnings
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy.stubtest rpcwire._rpcwire

build: $(STAMP) ## Build a release wheel into target/wheels
	$(VENV)/bin/maturin build --release

clean: ## Remove build products and .venv
	rm -rf $(VENV) target fuzz/target

include bench/bench.mk
include fuzz/fuzz.mk
