"""Allot's scheduler, in three parts that import one way.

- `scheduler.core`: the pure core (engine, simulator, window planner), no Django.
- `scheduler.adapters`: the cluster side (adapter protocol, the simulated cluster and
  its process, Slurm), no Django.
- everything else here is the Django app: models, services, selectors, the live cycle,
  the API, pages and tasks. See docs/architecture.md.
"""
