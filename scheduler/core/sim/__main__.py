"""``python -m scheduler.core.sim``: see `scheduler.core.sim.cli`."""

import sys

from scheduler.core.sim.cli import main

if __name__ == "__main__":
    sys.exit(main())
