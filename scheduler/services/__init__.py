"""Writes of the live service. Every write a person causes takes `actor=`; the job
state machine lives in one place, `transitions.job_transition`.

- `transitions`: the legal job state changes and their append-only events.
"""
