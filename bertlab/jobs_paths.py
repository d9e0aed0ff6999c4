"""Where run folders live: `runs/` at the repository root, or $BERTLAB_RUNS."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def runs_root() -> Path:
    env = os.environ.get("BERTLAB_RUNS")
    return Path(env).expanduser() if env else REPO_ROOT / "runs"
