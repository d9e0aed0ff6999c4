#!/usr/bin/env bash
# Set up and start the app on the shipped default model (checkpoints/bertlab-mini).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python.sh
"$PY" -m pip install -q -r requirements.txt
# the package itself (editable), so `bertlab ...` commands work as the README writes them
"$PY" -m pip install -q --no-deps -e .
exec "$PY" -m streamlit run app.py "$@"
