"""`python -m bertlab.interpret probe|heads ...`: see bertlab.interpret.cli."""

import sys

from bertlab.interpret.cli import main

sys.exit(main())
