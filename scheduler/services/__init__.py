"""Writes of the live service. Every write a person causes takes `actor=`; the job and
attempt state machines live in one place, `transitions.job_transition` and
`transitions.attempt_transition`.

- `transitions`: the legal job and attempt state changes and their append-only events.
"""
