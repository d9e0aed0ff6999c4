# Sourced by app.sh and test.sh: sets PY, the Python to install into and run with. That is python3,
# unless it is a system Python that refuses pip installs (PEP 668's EXTERNALLY-MANAGED, as Debian 12
# and Ubuntu 24.04 ship it) and no virtual environment is active: then .venv here, made once.
PY=python3
if [ -z "${VIRTUAL_ENV:-}" ] && python3 - <<'PYEOF'
import os, sys, sysconfig
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(0 if managed and sys.prefix == sys.base_prefix else 1)
PYEOF
then
  if [ ! -x .venv/bin/python ]; then
    echo "this system's Python takes no pip installs (PEP 668): making a virtual environment in .venv"
    python3 -m venv .venv || {
      echo "could not make .venv: install Python's venv module (Debian/Ubuntu: apt-get install python3-venv)" >&2
      exit 1
    }
  fi
  PY="$PWD/.venv/bin/python"
fi
