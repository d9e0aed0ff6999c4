#!/usr/bin/env bash
# Set up and start the app on the shipped default model (checkpoints/bertlab-mini).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r requirements.txt
exec python3 -m streamlit run app.py "$@"
