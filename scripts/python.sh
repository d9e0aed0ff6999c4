# Sourced by app.sh and test.sh: sets PY, the Python to install into and run with. That is python3,
# unless it is a system Python that refuses pip installs (PEP 668's EXTERNALLY-MANAGED, as Debian 12
# and Ubuntu 24.04 ship it; not when pip is told to install there anyway) and no virtual environment
# is active: then .venv here, made once.
PY=python3
managed=$(python3 -c 'import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
print("managed" if os.path.exists(marker) and sys.prefix == sys.base_prefix else "")' 2>/dev/null || true)
if [ "$managed" = managed ] && { [ -n "${PIP_BREAK_SYSTEM_PACKAGES:-}" ] ||
  python3 -m pip config list 2>/dev/null | grep -qi "break-system-packages"; }; then
  managed=""  # pip is set to install into this Python anyway
fi
if [ -z "${VIRTUAL_ENV:-}" ] && [ "$managed" = managed ]; then
  if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    echo "this system's Python takes no pip installs (PEP 668): making a virtual environment in .venv"
    rm -rf .venv
    if ! python3 -m venv .venv || ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
      rm -rf .venv  # a half-made one (no pip) would be taken for a good one next time
      echo "could not make .venv: install Python's venv module (Debian/Ubuntu: apt-get install python3-venv)" >&2
      exit 1
    fi
  fi
  PY="$PWD/.venv/bin/python"
fi
