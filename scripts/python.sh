# Sourced by app.sh and test.sh: sets PY, the Python to install into and run with. That is python3,
# unless it is a system Python that refuses pip installs (PEP 668's EXTERNALLY-MANAGED, as Debian 12
# and Ubuntu 24.04 ship it) and no virtual environment is active: then .venv here, made once.
PY=python3
managed=$(python3 -c 'import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
print("managed" if os.path.exists(marker) and sys.prefix == sys.base_prefix else "")' 2>/dev/null || true)
if [ -z "${VIRTUAL_ENV:-}" ] && [ "$managed" = managed ]; then
  if [ ! -x .venv/bin/python ]; then
    echo "this system's Python takes no pip installs (PEP 668): making a virtual environment in .venv"
    python3 -m venv .venv || true
  fi
  if [ ! -x .venv/bin/python ]; then
    echo "could not make .venv: install Python's venv module (Debian/Ubuntu: apt-get install python3-venv)" >&2
    exit 1
  fi
  PY="$PWD/.venv/bin/python"
fi
