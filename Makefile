# Every target works on a fresh clone: it creates .venv and builds what it needs.
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.dev-installed

.PHONY: help demo test test-rust test-python test-versions test-version lint build develop clean

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

# --- test-versions: the suite on every supported CPython (3.10 and newer) found on the machine ---
# Each version gets its own venv (.venv-3.X) and its own cargo target dir (target/py3.X): PyO3 is built
# for one interpreter, so a shared one would rebuild it at every switch and undo the .venv's build.
# The "versions" profile is release without fat LTO (Cargo.toml): same test speed, a third of the rebuild.
# PYTEST_ARGS go to each pytest run (e.g. PYTEST_ARGS="-x -q").
PYENV_ROOT ?= $(shell pyenv root 2>/dev/null || echo "$$HOME/.pyenv")
OLDEST_PYTHON := 10
# Shell function: `python_for 3.X` prints the interpreter of the newest pyenv CPython 3.X.N, else of
# python3.X on PATH (a pyenv shim resolved), and fails when none runs.
PYTHON_FOR = python_for() { \
	for candidate in $$(for dir in $(PYENV_ROOT)/versions/$$1.*; do case "$${dir\#\#*/}" in \
			$$1.*[!0-9]*) ;; *) echo "$$dir/bin/python$$1" ;; esac; done | sort -rV) $$(command -v python$$1); do \
		"$$candidate" -c "import sys; assert sys.implementation.name == 'cpython' \
			and '%d.%d' % sys.version_info[:2] == '$$1'; print(sys.executable)" 2>/dev/null && return 0; \
	done; return 1; }
# Every 3.X (X >= OLDEST_PYTHON) under pyenv or on PATH that runs; `make test-versions PYTHONS="3.10 3.13"` to choose.
PYTHONS ?= $(shell $(PYTHON_FOR); \
	{ ls $(PYENV_ROOT)/versions 2>/dev/null; echo "$$PATH" | tr : '\n' | while read -r dir; do ls "$$dir" 2>/dev/null; done; } \
	| sed -nE 's/^(python)?3\.([0-9]+)(\.[0-9]+)?$$/\2/p' | sort -nu \
	| while read -r minor; do [ "$$minor" -ge $(OLDEST_PYTHON) ] && python_for 3.$$minor >/dev/null && echo 3.$$minor; done)

test-versions: ## Build and run the pytest suite on each CPython 3.10+ found (PYTHONS="3.10 3.13")
	@$(PYTHON_FOR); [ -n "$(strip $(PYTHONS))" ] || { echo "test-versions: no CPython 3.$(OLDEST_PYTHON)+ found"; exit 1; }; \
	failed=0; summary=""; \
	for version in $(PYTHONS); do \
		echo "=== test-versions: CPython $$version"; \
		if ! python_for $$version >/dev/null; then \
			result="not found"; failed=1; \
		elif .venv-$$version/bin/python -c pass 2>/dev/null || rm -rf .venv-$$version; \
			$(MAKE) --no-print-directory test-version V=$$version; then \
			result="passed: $$(cat .venv-$$version/result)"; \
		else \
			result="FAILED: $$(cat .venv-$$version/result 2>/dev/null || echo 'before the suite ran')"; failed=1; \
		fi; \
		summary="$$summary  $$version  $$result\n"; \
	done; \
	printf "=== test-versions\n$$summary"; exit $$failed

# One version of test-versions (V=3.X): its venv, the build, the suite; one summary line in .venv-3.X/result.
# (test-versions first removes a .venv-3.X whose interpreter no longer runs, e.g. after a pyenv upgrade.)
test-version: .venv-$(V)/.dev-installed
	@rm -f .venv-$(V)/result; start=$$(date +%s); \
	VIRTUAL_ENV=$(abspath .venv-$(V)) CARGO_TARGET_DIR=target/py$(V) \
		.venv-$(V)/bin/maturin develop --profile versions --quiet || exit 1; \
	built=$$(date +%s); \
	{ .venv-$(V)/bin/python -m pytest $(PYTEST_ARGS); echo $$? > .venv-$(V)/pytest.rc; } 2>&1 | tee .venv-$(V)/pytest.log; \
	echo "$$(.venv-$(V)/bin/python -V), build $$((built - start)) s, suite $$(($$(date +%s) - built)) s:" \
		"$$(grep -E '(passed|failed|errors?|no tests ran).* in [0-9.]+s' .venv-$(V)/pytest.log | tail -n 1 | sed -E 's/^=+ | =+$$//g')" > .venv-$(V)/result; \
	exit $$(cat .venv-$(V)/pytest.rc)

.venv-%/.dev-installed: requirements-dev.txt
	@$(PYTHON_FOR); python=$$(python_for $*) || { echo "no CPython $* found"; exit 1; }; \
	if [ ! -f $@ ]; then echo "$$python -m venv .venv-$*"; rm -rf .venv-$*; "$$python" -m venv .venv-$* || exit 1; fi; \
	.venv-$*/bin/python -m pip install --quiet -r requirements-dev.txt && touch $@

lint: develop fuzz-lint ## rustfmt, clippy, ruff, mypy.stubtest (and the same for fuzz/)
	cargo fmt --all -- --check
	PYO3_PYTHON=$(abspath $(PY)) cargo clippy --all-targets -- -D warnings
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy.stubtest rpcwire._rpcwire

build: $(STAMP) ## Build a release wheel into target/wheels
	$(VENV)/bin/maturin build --release

clean: ## Remove build products, .venv and the .venv-3.X of test-versions
	rm -rf $(VENV) .venv-* target fuzz/target

include bench/bench.mk
include fuzz/fuzz.mk
include docs/docs.mk
