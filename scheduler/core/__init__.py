"""The pure core: engine, simulator and window planner (no Django, no I/O, no clocks).

Importing it installs the mypyc-compiled engine when it is built and matches the
source (`scheduler/core/native.py`); the decisions are the same either way.
"""

from scheduler.core import native

native.install()
