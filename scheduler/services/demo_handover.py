"""The demo back-fill's hand-over: the jobs its simulation left running or waiting at
its end (`now`) become the live cluster's running and pending jobs, so the history ends
as a busy cluster does and the first live cycle carries on from it.

The history is played on the cluster's own clock at wall speed (an hour of history is
an hour of the wall clock); from `now` on the demo cluster runs `Cluster.clock_speed`
times faster (`scheduler.services.demo.DEMO_SPEED`). A handed-over job crosses that
seam as a job the live load submits would be stored:

- its duration hint and the work it has left stay in the cluster's seconds (the live
  load's `duration_s` is too): the simulated cluster runs the rest of its run for the
  work the simulation had left (`run_for_s`), which at 60x takes a sixtieth of that on
  the wall clock, as any live demo job's run does;
- its minimum runtime is compressed by the clock speed (Allot counts protection in wall
  seconds, and the live load's minimum runtimes are compressed the same way:
  `demo_seconds`), so a waiting job is protected, once it starts, as long on the
  cluster's clock as the simulation would have protected it. A running job keeps the
  start the simulation gave it (the ledger charges its run from then), so its
  protection counts from that start: compressed, it ends within minutes of it, and a
  job the simulation started more than a few wall minutes before `now` is open to
  preemption at the first live cycle. Keeping the history's protection in wall time
  instead would protect a handed-over run sixty times longer than the cluster's clock
  says and longer than its remaining run: none could be preempted before it ended.

On a cluster at wall speed (`clock_speed` 1, as `bench/preview.py --fidelity` builds it)
nothing is compressed, so a what-if preview replays the stored jobs as played.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.accounting import EndReason
from scheduler.adapters.base import AdapterError, AdapterUnavailable, StartRequest
from scheduler.adapters.simulated import adapter_for_cluster
from scheduler.core.engine import StopReason, stop_rule
from scheduler.core.engine.runs import saved_work_s
from scheduler.core.sim.history import RunRecord, runs_with_gpu_indices
from scheduler.core.sim.model import JobState as SimJobState
from scheduler.core.sim.model import SimConfig, SimResult, TraceJob
from scheduler.models import Attempt, AttemptEnd, AttemptState, Cluster, Job, JobState
from scheduler.selectors.translate import placements_from_json
from scheduler.services.transitions import running_reason

log = logging.getLogger(__name__)


# the attempt end each of the simulator's end reasons stands for
END_OF = {
    EndReason.COMPLETED: AttemptEnd.SUCCEEDED,
    EndReason.PREEMPTED: AttemptEnd.PREEMPTED,
    EndReason.DRAINED: AttemptEnd.DRAINED,
    EndReason.HOST_DOWN: AttemptEnd.LOST,
}
# the rule of a simulated move (consolidation), whose run ends `migrated` as a live move's
MOVE_RULE = stop_rule(StopReason.MIGRATE)


def attempt_end(run: RunRecord, rules: Mapping[tuple[str, float], str]) -> str:
    """How an ended simulated run's attempt ended: a move (`rules` names its stop
    consolidation) `migrated` ("Moved to other hosts"), as the live cycle ends a moved
    run; else the attempt end the simulator's end reason stands for."""
    if rules.get((run.job_id, round(run.end_s, 3))) == MOVE_RULE:
        return AttemptEnd.MIGRATED
    return END_OF.get(run.end_reason, AttemptEnd.LOST)


@dataclass(frozen=True, slots=True)
class Handover:
    """What storing the simulation's open jobs needs: the simulated end (seconds since
    the history's origin), the live cluster's clock speed, and the simulator's rules
    on saved work (checkpoint interval, restart overhead)."""

    end_s: float
    speed: float
    checkpoint_s: float
    overhead_s: float

    @classmethod
    def of(cls, config: SimConfig, *, end_s: float, speed: float) -> Handover:
        return cls(end_s, speed, config.checkpoint_interval_s, config.restart_overhead_s)


def compressed_s(cluster_s: float, speed: float) -> int:
    """A duration of the cluster's clock (a minimum runtime) in the wall seconds Allot
    counts on a cluster running `speed` times faster: at least 1 (0 stays 0)."""
    return 0 if cluster_s <= 0 else max(1, int(cluster_s / max(speed, 1e-9)))


def is_open(runs: Sequence[RunRecord]) -> bool:
    """Whether the last of a job's runs was still going when the simulation ended."""
    return bool(runs) and runs[-1].end_reason == EndReason.RUNNING_AT_END


def need_s(job: TraceJob, stopped: Sequence[RunRecord], h: Handover) -> float:
    """The work the simulator's next run of `job` needs after its `stopped` runs: its
    duration, less what each stopped run saved at its checkpoints, plus the restart
    overhead of each restart (`scheduler.core.sim.replay_state`'s rule)."""
    need = float(job.duration_s)
    for run in stopped:
        saved = saved_work_s(run.end_s - run.start_s, h.checkpoint_s) if job.resumable else 0.0
        need = max(0.0, need - saved) + h.overhead_s
    return need


def left_s(job: TraceJob, runs: Sequence[RunRecord], h: Handover) -> float:
    """The work an open run of `job` has left at the end: what it needed less what it ran."""
    return max(1.0, need_s(job, runs[:-1], h) - (h.end_s - runs[-1].start_s))


def open_job_fields(
    job: TraceJob, runs: Sequence[RunRecord], min_runtime_s: float, h: Handover, at: Callable
) -> dict:
    """The `Job` columns of a job running or waiting at the end: its minimum runtime
    compressed by the clock speed, the work its stopped runs saved (`progress_s`: the
    live cycle runs a restart for its duration less that) and when it last queued."""
    running = is_open(runs)
    stopped = runs[:-1] if running else runs
    return {
        "state": JobState.RUNNING if running else JobState.PENDING,
        # as the live cycle words it: My jobs' "Why" reads it
        "state_reason": running_reason(placement_rows(runs[-1]), len(runs)) if running else "",
        "min_runtime_s": compressed_s(min_runtime_s, h.speed),
        "progress_s": max(0.0, job.duration_s - need_s(job, stopped, h)),
        "queued_at": at(stopped[-1].end_s if stopped else job.submit_s),
        "first_started_at": at(runs[0].start_s) if runs else None,
        "ended_at": None,
    }


def start_request(
    attempt: Attempt, job: Job, run_for_s: float, project: str, grace_s: float
) -> StartRequest:
    """The start of a handed-over run on the GPUs the simulation placed it, for the work
    it has left (cluster seconds: the simulated cluster runs at its own speed)."""
    return StartRequest(
        attempt_id=attempt.attempt_id,
        job_name=job.name,
        gpus=attempt.gpus,
        placements=tuple(placements_from_json(attempt.placements)),
        spec=job.spec,
        run_for_s=run_for_s,
        project=project,
        grace_s=grace_s,
        kind=job.kind,
    )


def handover_start(cluster: Cluster, requests: Sequence[StartRequest]) -> dict[str, int]:
    """Start the handed-over runs on the simulated cluster. A run the cluster refuses
    (or an unreachable cluster) is logged and left: the first live cycle's reconcile
    finds it missing and records it lost, as it would any run the cluster lost."""
    started = refused = 0
    if not requests:
        return {"started": 0, "not_started": 0}
    with adapter_for_cluster(cluster) as adapter:
        for request in requests:
            try:
                adapter.start(request)
                started += 1
            except AdapterUnavailable as exc:
                log.warning("demo hand-over: %s unreachable: %s", cluster, exc)
                return {"started": started, "not_started": len(requests) - started}
            except AdapterError as exc:
                log.warning("demo hand-over: %s refused: %s", request.attempt_id, exc)
                refused += 1
    return {"started": started, "not_started": refused}


def open_requests(
    cluster: Cluster,
    attempts: Sequence[Attempt],
    left: Mapping[str, float],
    paths: Mapping[int, str],
) -> list[StartRequest]:
    """The start requests of the open attempts among `attempts`; `left` is the work left
    by attempt id, `paths` the projects' tree paths by node id."""
    return [
        start_request(a, a.job, left[a.attempt_id], paths.get(a.project_id, ""), cluster.grace_s)
        for a in attempts
        if a.attempt_id in left
    ]


def end_occupancy(result: SimResult, end_s: float, span_s: float = 3600.0) -> float:
    """The simulation's occupancy over the `span_s` before `end_s`: GPU-seconds run over
    the capacity's (every host healthy: the demo's are)."""
    since = end_s - span_s
    busy = sum(
        r.gpus * (min(r.end_s, end_s) - max(r.start_s, since))
        for r in result.intervals
        if r.end_s > since and r.start_s < end_s
    )
    capacity = sum(h.gpus for h in result.cluster.hosts) * span_s
    return busy / capacity if capacity else 0.0


def recorded_runs(
    result: SimResult, hosts: dict[str, int]
) -> tuple[dict[str, Any], dict[str, list[RunRecord]], dict[tuple[str, float], str]]:
    """What a simulated history stores: every job it played that was not rejected (job
    id -> outcome: ended, or running or waiting at the end), their runs with GPU indices
    by job (a run going at the end ends `running_at_end`), and the rule of each
    preemption by (job id, time)."""
    kept = {o.job_id: o for o in result.jobs if o.rejected is None}
    runs_by_job: dict[str, list[RunRecord]] = defaultdict(list)
    for run in runs_with_gpu_indices(result.intervals, hosts):
        if run.job_id in kept:
            runs_by_job[run.job_id].append(run)
    rules = {(p.job_id, round(p.at_s, 3)): stop_rule(p.reason_code) for p in result.preemptions}
    return kept, runs_by_job, rules


def finished_runs(
    result: SimResult, hosts: dict[str, int]
) -> tuple[dict[str, Any], dict[str, list[RunRecord]], dict[tuple[str, float], str]]:
    """`recorded_runs` of the jobs that ended only."""
    kept, runs, rules = recorded_runs(result, hosts)
    done = {
        job_id: o
        for job_id, o in kept.items()
        if o.state in (SimJobState.COMPLETED, SimJobState.TERMINATED) and o.end_s is not None
    }
    return done, {job_id: runs[job_id] for job_id in done if job_id in runs}, rules


def work_left(kept, job_of, attempts_of, runs_by_job, trace, handover) -> dict[str, float]:
    """The work each open run has left at the end (cluster seconds), by attempt id."""
    if handover is None:
        return {}
    return {
        attempts_of[job_of[job_id].pk][-1].attempt_id: left_s(trace[job_id], runs, handover)
        for job_id in kept
        if is_open(runs := runs_by_job[job_id])
    }


def placement_rows(run: RunRecord) -> list[dict]:
    """A simulated run's placements as an attempt stores them."""
    return [{"host": h, "gpu_indices": list(ix)} for h, ix in run.placements]


def attempt_row(
    cluster, job: Job, job_id: str, n: int, run: RunRecord, at, rules: Mapping
) -> Attempt:
    """Run `n` of a job as its attempt: ended as the simulator ended it (`attempt_end`),
    or open (running on the GPUs the simulation placed it) when it was still going at
    the end."""
    running = run.end_reason == EndReason.RUNNING_AT_END
    stopped = not running and run.end_reason != EndReason.COMPLETED
    return Attempt(
        job=job,
        number=n,
        attempt_id=f"backfill-{cluster.pk}-{job_id}-{n}",
        cluster=cluster,
        project=job.project,
        gpus=run.gpus,
        placements=placement_rows(run),
        allocated=run.allocated,
        state=AttemptState.RUNNING if running else AttemptState.ENDED,
        created_at=at(run.start_s),
        started_at=at(run.start_s),
        stop_requested_at=at(run.end_s) if stopped else None,
        ended_at=None if running else at(run.end_s),
        end_reason="" if running else attempt_end(run, rules),
    )
