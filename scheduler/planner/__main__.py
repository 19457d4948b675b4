"""`python -m scheduler.planner` -> `scheduler.planner.cli.main`."""

import sys

from scheduler.planner.cli import main

sys.exit(main())
