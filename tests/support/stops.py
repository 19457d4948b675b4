"""A 2 x 8-GPU cluster's a1 jobs while a stop is under way, for the ETA's tests of
`scheduler.selectors.snapshot.after_stops` (a move, a preemption): placements, the
runtime history the forecast reads and the running or stopping jobs."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from scheduler.models import AttemptEnd, AttemptState, Job, JobState
from tests.factories import AttemptFactory, JobFactory

RAN_S = 2000  # how long the running and stopping jobs have run


def gpus_on(*indices: int, host: str) -> list[dict]:
    """An attempt's placements JSON: `indices` on `host`."""
    return [{"host": host, "gpu_indices": list(indices)}]


def without_reserve(cluster) -> tuple[str, str]:
    """`cluster` without a short-job reserve; its two host names, in order."""
    cluster.short_reserve_hosts, cluster.short_reserve_auto = 0, False
    cluster.save(update_fields=["short_reserve_hosts", "short_reserve_auto"])
    h0, h1 = cluster.hosts.order_by("name").values_list("name", flat=True)
    return h0, h1


def a1_history(cluster, tree, gpus: int, runtime_s: float, n: int = 20) -> None:
    """`n` finished a1 jobs of `gpus` GPUs that ran `runtime_s` each, ten days ago: the
    forecast's runtimes for that key, outside the usage and arrival windows."""
    ago = timezone.now() - dt.timedelta(days=10)
    for _ in range(n):
        job = JobFactory(
            cluster=cluster,
            project=tree.node("a1"),
            submitter=tree.user("ann"),
            gpus=gpus,
            min_runtime_s=600,
            state=JobState.SUCCEEDED,
            submitted_at=ago,
        )
        AttemptFactory(
            job=job,
            state=AttemptState.ENDED,
            end_reason=AttemptEnd.SUCCEEDED,
            started_at=ago,
            ended_at=ago + dt.timedelta(seconds=runtime_s),
        )


def a1_job(cluster, tree, *, submitted_at, job_state, resumable: bool = True, **attempt) -> Job:
    """A 4-GPU a1 job (min runtime 10 min) in `job_state`, submitted at `submitted_at`, with
    one attempt as given."""
    job = JobFactory(
        cluster=cluster,
        project=tree.node("a1"),
        submitter=tree.user("ann"),
        gpus=4,
        min_runtime_s=600,
        resumable=resumable,
        state=job_state,
        submitted_at=submitted_at,
    )
    AttemptFactory(job=job, **attempt)
    return job


def a1_running(cluster, tree, now, *, resumable: bool = True, **attempt) -> Job:
    """A 4-GPU a1 job submitted and started `RAN_S` before `now`, its attempt as given
    (running unless `state` says stopping)."""
    ran = now - dt.timedelta(seconds=RAN_S)
    stopping = attempt.get("state") == AttemptState.STOPPING
    return a1_job(
        cluster,
        tree,
        submitted_at=ran,
        job_state=JobState.STOPPING if stopping else JobState.RUNNING,
        resumable=resumable,
        started_at=ran,
        **attempt,
    )


def two_hosts_with_a1_runtimes(cluster, tree):
    """The stop scenarios' start: h0 and h1 with no short-job reserve, a1's 8-GPU jobs
    known to run 1,000 s and its 4-GPU ones 10,000 s; (h0, h1, now, ann, a1)."""
    h0, h1 = without_reserve(cluster)
    a1_history(cluster, tree, gpus=8, runtime_s=1000)
    a1_history(cluster, tree, gpus=4, runtime_s=10_000)
    return h0, h1, timezone.now(), tree.user("ann"), tree.node("a1")
