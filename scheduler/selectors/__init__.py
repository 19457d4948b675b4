"""Reads of the live service.

- `snapshot`: a cluster's state as the scheduling engine reads it (`cluster_snapshot`),
  used by the cycle, the API's dry run and the dashboards' ETA.
"""
