#!/usr/bin/env bash
# Runs the Python package's tests against the extension in the build tree.
# Says plainly, and succeeds, when the extension or pytest is not available
# (a machine that could not install nanobind/pytest); fails when a test fails.
#   usage: scripts/python_tests.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
py=${PYTHON:-python3}
if ! ls "$build"/python/tilecraft/_C*.so >/dev/null 2>&1; then
  echo "python tests: SKIPPED: the extension was not built (no Python development files or nanobind; see the CMake log)"
  exit 0
fi
if ! "$py" -c "import pytest, numpy" 2>/dev/null; then
  echo "python tests: SKIPPED: pytest or numpy is not installed for $py"
  exit 0
fi
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$root/$build/python:$root/python/tests${PYTHONPATH:+:$PYTHONPATH}" \
  "$py" -m pytest "$root/python/tests" -q -p no:cacheprovider -rs
