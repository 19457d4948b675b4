"""`python -m scheduler.core.planner` -> `scheduler.core.planner.cli.main`."""

import sys

from scheduler.core.planner.cli import main

sys.exit(main())
