#!/usr/bin/env bash
# Build the bundle a lent GPU machine needs for the ablation suites (.device/, git-ignored) and print the `run`
# call to make: its command and carry list. Runs here, where ../shared/data and PyPI are (bench/device/README.md).
#
#   bash bench/device/prepare.sh table6               # the data and wheels Table 6's suite reads
#   bash bench/device/prepare.sh table5 table7        # several (mind the 64 MiB a call carries)
#   bash bench/device/prepare.sh table7 --tasks ner   # more task data; --python 3.12, --shared DIR, --no-wheels
#
# The work is bench/device/bundle.py's; this only finds the repository and its Python.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} exec "$py" -m bench.device.bundle "$@"
