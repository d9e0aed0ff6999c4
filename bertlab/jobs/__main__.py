"""`python -m bertlab.jobs supervise RUN_DIR`: the job supervisor (internal; see bertlab.jobs.registry)."""

import sys

from bertlab.jobs.registry import _main

sys.exit(_main(sys.argv[1:]))
