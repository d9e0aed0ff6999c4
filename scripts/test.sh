#!/usr/bin/env bash
# Set up and run the test suite (what CI runs through .ci/run). Slow tests stay out: -m 'not slow'.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python.sh
"$PY" -m pip install -q -r requirements-dev.txt
# the package itself (editable), so `bertlab ...` commands work as the README writes them
"$PY" -m pip install -q --no-deps -e .
# The real-browser tests drive Debian's Chromium; without it they skip with a reason.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "chromium could not be installed: browser tests will be skipped"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Style first (seconds): lint and the formatter's check; `ruff format .` fixes the second.
"$PY" -m ruff check .
"$PY" -m ruff format --check .
# Then the package's shape (a second): pyproject.toml's [tool.importlinter] contracts, the layers and
# the imports forbidden (streamlit anywhere, torch in the torch-free modules). lint-imports has no
# `python -m`; this is its console script, run by the same Python.
"$PY" -c 'import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())' \
  --no-logo --no-cache
status=0
"$PY" -m pytest -q "$@" || status=$?
if [ "$status" -eq 5 ] && [ "$#" -gt 0 ]; then
  # e.g. `-m slow` when no test is marked slow: say so instead of failing
  echo "no test matched: $*"
  exit 0
fi
exit "$status"
