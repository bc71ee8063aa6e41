# Every target works on a fresh clone (or an unpacked sdist): it checks what it needs first (Python 3.10+, Rust
# for the targets that build), creates .venv and builds what it needs.
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.dev-installed
# The Python that creates the venvs: make PYTHON=python3.12 to choose.
PYTHON ?= python3
# Cargo.toml's rust-version (the MSRV), which check-rust asks of rustc.
MSRV := $(shell sed -nE 's/^rust-version = "([0-9.]+)"/\1/p' Cargo.toml)

.PHONY: help demo test test-deep test-rust test-python test-versions test-version lint build develop clean \
	check-python check-rust wheels test-wheels test-free-threaded

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-13s %s\n", $$1, $$2}'

# --- prerequisites: one line each, said before anything is installed or built ---
# (In variables: a comma in $(if ...)'s arguments would split them.)
PYTHON_OK = $(shell $(PYTHON) -c 'import sys; print(sys.version_info >= (3, 10))' 2>/dev/null)
PYTHON_NEEDED = rpcwire needs Python 3.10 or newer as $(PYTHON), found: $(or $(shell $(PYTHON) -V 2>/dev/null),none). \
	Install one (e.g. pyenv install 3.12) and run make PYTHON=python3.12
RUSTC_VERSION = $(shell rustc -V 2>/dev/null | cut -d' ' -f2)
RUST_NEEDED = building rpcwire needs Rust $(MSRV) or newer (cargo and rustc on PATH), found: $(or $(RUSTC_VERSION),none). \
	Install it with rustup (https://rustup.rs) and open a new shell, or run rustup update
check-python:
	@$(if $(filter True,$(PYTHON_OK)),:,$(error $(PYTHON_NEEDED)))

check-rust:
	@$(if $(and $(shell command -v cargo),$(filter $(MSRV),$(firstword $(shell printf '%s\n' $(MSRV) $(RUSTC_VERSION) | sort -V)))),:,$(error $(RUST_NEEDED)))

# --- .venv: the dev tools (requirements-dev.txt), or for `make demo` maturin alone ---
$(STAMP): requirements-dev.txt | check-python
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

$(VENV)/bin/maturin: | check-python
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$$(grep -E '^maturin\b' requirements-dev.txt)"

# What the native module is built from: `make demo` rebuilds it only when one of them changed.
NATIVE_SOURCES := Cargo.toml Cargo.lock build.rs pyproject.toml $(wildcard src/*.rs crates/*/Cargo.toml crates/*/src/*.rs)
NATIVE_STAMP := $(VENV)/.native-built
MATURIN_DEVELOP = VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --quiet

develop: check-rust $(STAMP) ## Build the native module (release) into .venv
	$(MATURIN_DEVELOP)
	@touch $(NATIVE_STAMP)

$(NATIVE_STAMP): $(NATIVE_SOURCES) | check-rust $(VENV)/bin/maturin
	$(MATURIN_DEVELOP)
	@touch $(NATIVE_STAMP)

demo: $(NATIVE_STAMP) ## Run the demo transcript (installs maturin only; rebuilds only what changed)
	$(PY) -m rpcwire demo

test: test-rust test-python fuzz-smoke ## Every test: Rust, Python, and a short run of each fuzz target

test-rust: check-rust $(STAMP) ## cargo test of the workspace (the protocol crate and the PyO3 crate)
	PYO3_PYTHON=$(abspath $(PY)) cargo test --workspace --quiet

# The suite runs on PYTEST_WORKERS processes (pytest-xdist): four fifths of its time is waiting on child
# processes, servers and sockets, so 4 on 2 cores; PYTEST_WORKERS=0 runs it in this process (for -x, pdb).
PYTEST_WORKERS ?= 4
PYTEST_RUN = -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

test-python: develop ## The pytest suite against rpcwire and rpcwire.pure (PYTEST_ARGS="-x -q", PYTEST_WORKERS=4)
	$(PY) -m pytest $(PYTEST_RUN)

# The Hypothesis properties (pytest's `hypothesis` marker, which its plugin gives every @given test) under the
# "deep" profile of tests/conftest.py: ten times the examples `make test` runs. Before a release, or after a
# change to the scanner, the envelope or the framing. Each property may take minutes: the per-test timeout is raised.
DEEP_TIMEOUT ?= 1800
test-deep: develop ## The Hypothesis properties with ten times the examples (HYPOTHESIS_PROFILE=deep), minutes
	HYPOTHESIS_PROFILE=deep $(PY) -m pytest -m hypothesis --timeout=$(DEEP_TIMEOUT) $(PYTEST_RUN)

# --- test-versions: the suite on every supported CPython (3.10 and newer) found on the machine ---
# Each version gets its own venv (.venv-3.X) and its own cargo target dir (target/py3.X): PyO3 is built
# for one interpreter, so a shared one would rebuild it at every switch and undo the .venv's build.
# The "versions" profile is release without fat LTO (Cargo.toml): same test speed, a third of the rebuild.
# PYTEST_ARGS and PYTEST_WORKERS go to each pytest run (e.g. PYTEST_ARGS="-x -q").
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

test-versions: check-rust ## Build and run the pytest suite on each CPython 3.10+ found (PYTHONS="3.10 3.13")
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
	{ .venv-$(V)/bin/python -m pytest $(PYTEST_RUN); echo $$? > .venv-$(V)/pytest.rc; } 2>&1 | tee .venv-$(V)/pytest.log; \
	echo "$$(.venv-$(V)/bin/python -V), build $$((built - start)) s, suite $$(($$(date +%s) - built)) s:" \
		"$$(grep -E '(passed|failed|errors?|no tests ran).* in [0-9.]+s' .venv-$(V)/pytest.log | tail -n 1 | sed -E 's/^=+ | =+$$//g')" > .venv-$(V)/result; \
	exit $$(cat .venv-$(V)/pytest.rc)

.venv-%/.dev-installed: requirements-dev.txt
	@$(PYTHON_FOR); python=$$(python_for $*) || { echo "no CPython $* found"; exit 1; }; \
	if [ ! -f $@ ]; then echo "$$python -m venv .venv-$*"; rm -rf .venv-$*; "$$python" -m venv .venv-$* || exit 1; fi; \
	.venv-$*/bin/python -m pip install --quiet -r requirements-dev.txt && touch $@

# --- wheels: what goes to PyPI, built and tested here as a user would install it ---
# manylinux_2_17 (glibc 2.17+: RHEL 7+, Debian 9+, Ubuntu 18.04+) by linking with zig (the ziglang wheel), which
# brings the old glibc's symbols: this machine's own toolchain would tie the .so to its glibc (2.36 here).
# One wheel per CPython of PYTHONS (cargo target dir target/dist), the .so stripped, each tag checked with
# auditwheel; the sdist; the pure-Python py3-none-any wheel (the same package without the native module).
DIST := dist
DIST_VENV := .venv-dist
DIST_STAMP := $(DIST_VENV)/.installed
WHEEL_FLAGS := --release --strip --zig --compatibility manylinux2014

$(DIST_STAMP): packaging/requirements.txt | check-python
	$(PYTHON) -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/python -m pip install --quiet -r packaging/requirements.txt
	touch $(DIST_STAMP)

wheels: check-rust $(DIST_STAMP) ## dist/: a manylinux wheel per CPython found (PYTHONS="3.12"), the sdist, the pure wheel
	@$(PYTHON_FOR); [ -n "$(strip $(PYTHONS))" ] || { echo "wheels: no CPython 3.$(OLDEST_PYTHON)+ found"; exit 1; }; \
	set -e; rm -rf $(DIST); mkdir -p $(DIST); \
	for version in $(PYTHONS); do \
		python=$$(python_for $$version) || { echo "wheels: no CPython $$version found"; exit 1; }; \
		echo "=== wheels: CPython $$version ($$python)"; \
		PATH=$(abspath $(DIST_VENV))/bin:$$PATH CARGO_TARGET_DIR=target/dist \
			maturin build $(WHEEL_FLAGS) --quiet --interpreter "$$python" --out $(DIST); \
	done; \
	PATH=$(abspath $(DIST_VENV))/bin:$$PATH maturin sdist --out $(DIST); \
	$(DIST_VENV)/bin/python packaging/pure_wheel.py $$(ls $(DIST)/*-cp3*.whl | head -n 1) --out $(DIST) >/dev/null; \
	$(DIST_VENV)/bin/python packaging/check_dist.py $(DIST)

# Each wheel of dist/ for a CPython of PYTHONS, and the pure wheel on PURE_PYTHON (default: the newest of PYTHONS),
# installed into a fresh venv with no cargo on PATH, runs the whole suite from a copy of tests/
# (packaging/test-wheel.sh, which says how the pure wheel's run skips what only the native core does).
# WHEEL_KINDS="native" or "pure" for one kind only.
PURE_PYTHON ?= $(lastword $(PYTHONS))
WHEEL_KINDS ?= native pure
test-wheels: ## Install each wheel of dist/ (make wheels) in a fresh venv, no cargo on PATH, and run the suite there
	@$(PYTHON_FOR); ls $(DIST)/*.whl >/dev/null 2>&1 || $(MAKE) --no-print-directory wheels; \
	failed=0; tested=""; \
	if [ -n "$(filter native,$(WHEEL_KINDS))" ]; then for version in $(PYTHONS); do \
		wheel=$$(ls $(DIST)/*-cp$$(echo $$version | tr -d .)-*.whl 2>/dev/null | head -n 1); \
		[ -n "$$wheel" ] || { echo "test-wheels: no wheel for CPython $$version in $(DIST)/ (make wheels)"; failed=1; continue; }; \
		echo "=== test-wheels: $$wheel"; \
		packaging/test-wheel.sh "$$wheel" "$$(python_for $$version)" $(PYTEST_RUN) || failed=1; \
		tested="$$tested $$wheel"; \
	done; fi; \
	if [ -n "$(filter pure,$(WHEEL_KINDS))" ]; then \
		wheel=$$(ls $(DIST)/*-py3-none-any.whl 2>/dev/null | head -n 1); \
		if [ -z "$$wheel" ]; then echo "test-wheels: no pure wheel in $(DIST)/ (make wheels)"; failed=1; \
		else echo "=== test-wheels: $$wheel on CPython $(PURE_PYTHON)"; \
			packaging/test-wheel.sh "$$wheel" "$$(python_for $(PURE_PYTHON))" $(PYTEST_RUN) || failed=1; \
			tested="$$tested $$wheel"; fi; \
	fi; \
	echo "=== test-wheels"; for wheel in $$tested; do cat build/wheel-tests/$$(basename $$wheel .whl)/result 2>/dev/null \
		|| echo "$$wheel: FAILED before the suite ran"; done; \
	exit $$failed

# --- test-free-threaded: the suite on free-threaded CPython 3.14t (root: a Debian sid chroot; not in CI's time) ---
# packaging/free-threaded.sh builds the interpreter once from Debian's python3.14 source (./configure --disable-gil,
# ~5 minutes on 2 cores), then the wheel for it with the host's Rust, and runs the whole suite on the installed wheel
# (packaging/test-wheel.sh). TEST_WHEEL_SKIP="granian|..." for requirements with no 3.14t wheel (their tests skip).
test-free-threaded: ## As root: the suite on free-threaded CPython 3.14t built from Debian's source in a chroot (~25 min)
	packaging/free-threaded.sh test $(PYTEST_RUN)

lint: develop fuzz-lint ## rustfmt, clippy, ruff, mypy.stubtest, both cores against the contract (mypy), actionlint (and the same for fuzz/)
	cargo fmt --all -- --check
	PYO3_PYTHON=$(abspath $(PY)) cargo clippy --workspace --all-targets -- -D warnings
	PYO3_PYTHON=$(abspath $(PY)) cargo clippy --workspace --all-targets --features public-str-api -- -D warnings
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy.stubtest rpcwire._rpcwire
	$(PY) -m mypy --follow-imports=silent python/rpcwire/_contract.py python/rpcwire/pure/__init__.py
	$(VENV)/bin/actionlint .github/workflows/*.yml

build: check-rust $(STAMP) ## Build a release wheel for this machine's Python and glibc into target/wheels (make wheels: for PyPI)
	$(VENV)/bin/maturin build --release

clean: ## Remove build products, .venv, the .venv-3.X of test-versions and the .venv-dist of make wheels
	rm -rf $(VENV) .venv-* target fuzz/target dist build

include bench/bench.mk
include fuzz/fuzz.mk
include docs/docs.mk
