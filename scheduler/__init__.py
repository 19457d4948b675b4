"""Allot's scheduler: the engine, simulator and planner (pure Python) and the service."""

from scheduler import native

# the mypyc-compiled engine when it is built and matches the source (scheduler/native.py)
native.install()
