"""The demo organisation's cluster: its load and its back-filled history (`make run`).

- `demo_cluster_ensure` adds the 128-GPU simulated cluster (16 x 8) to the simulated
  cluster process, running `DEMO_SPEED` times faster than the wall clock.
- `demo_backfill` replays `ALLOT_DEMO_BACKFILL_DAYS` of the organisation's load through
  the simulator (the same engine as live) and stores what happened as jobs, attempts
  and events ending now, then computes the ledger of those hours; a new user sees
  history at first sign-in. The jobs running or waiting at its end are handed over to
  the live cluster (`scheduler.services.demo_handover`): the history ends busy, as the
  live cluster goes on.
- `demo_load_tick` (a beat task) submits the same kind of load through the real submit
  service while the demo runs: debug bursts, team pushes, long training, unallocated
  sweeps (`scheduler.core.sim.generate.organisation_rows`), with `DEMO_SPEED` applied to
  arrival rates and minimum runtimes (and to the cluster's limits on minimum runtimes:
  the short-job limit and the protection cap; and to the reservation admission's bound
  on protection) so the queue keeps moving on the fast cluster as it would on a real one.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from budgets.models import BudgetNode, Membership
from budgets.selectors import tree_index
from budgets.services import budget_tree_export
from config.errors import ApplicationError
from config.plainsql import next_ids
from ledger.accounting import EndReason
from ledger.periods import report_end
from ledger.services import rollups_refresh
from scheduler.core.engine.budget_tree import budget_node, entitled_shares, parse_tree_document
from scheduler.core.sim.generate import TraceRow, organisation_rows
from scheduler.core.sim.history import RunRecord
from scheduler.core.sim.model import ClusterSpec, HostSpec, SimConfig, TraceJob
from scheduler.core.sim.model import JobState as SimJobState
from scheduler.core.sim.replay import simulate
from scheduler.core.utilization import HUNG, IDLE, mean_utilization, profile_for, utilization_at
from scheduler.models import (
    RESERVATION_ADMIT_DEFAULT_MIN,
    Attempt,
    AttemptEnd,
    Cluster,
    Job,
    JobEvent,
    JobState,
    UtilizationSample,
)
from scheduler.selectors.translate import engine_tree
from scheduler.services.clusters import cluster_create, cluster_policy_update
from scheduler.services.demo_handover import (
    END_OF,
    MOVE_RULE,
    Handover,
    attempt_row,
    end_occupancy,
    handover_start,
    open_job_fields,
    open_requests,
    recorded_runs,
    work_left,
)
from scheduler.services.jobs import job_submit
from scheduler.services.previews import sim_config_for_cluster
from scheduler.services.transitions import job_event, job_target

log = logging.getLogger(__name__)

DEMO_CLUSTER = "demo-h100"
DEMO_HOSTS, DEMO_GPUS_PER_HOST = 16, 8
DEMO_SPEED = 60.0  # simulated seconds per wall second: an hour of work runs a minute
# The load's minimum runtimes are divided by DEMO_SPEED (Allot counts protection in wall
# seconds while the cluster runs DEMO_SPEED times faster), so the policy settings that are
# compared with a minimum runtime are divided the same way: the short-job reserve then
# holds what it would hold on a real cluster (jobs protected for at most 15 minutes of
# the cluster's clock), not nearly every job. The back-fill, which replays uncompressed
# history, plans with the uncompressed values (`_backfill_config`). The usage window and
# the reporting windows are not compressed: the back-filled history is in wall time.
REAL_SHORT_JOB_MAX_S = 15 * 60
REAL_MAX_MIN_RUNTIME_S = 8 * 3600
REAL_RESERVATION_ADMIT_S = RESERVATION_ADMIT_DEFAULT_MIN * 60  # a bound on protection
DEMO_RESERVATION_ADMIT_MIN = max(1, int(REAL_RESERVATION_ADMIT_S / DEMO_SPEED) // 60)
DEMO_SEED = 2026
DEMO_PENDING_CAP = 40  # pending jobs per project beyond which the load submits nothing
DAY_S = 86400.0
# The first tick (no tick before it) submits the load of the last simulated day at once,
# so the cluster is busy and a queue waits at first sign-in instead of filling over the
# first half hour.
FIRST_TICK_LOOKBACK_S = DAY_S / DEMO_SPEED


def demo_enabled() -> bool:
    return bool(getattr(settings, "ALLOT_DEMO", True))


def demo_cluster_ensure() -> Cluster:
    """The demo cluster, added to the simulated cluster process on first use."""
    cluster = Cluster.objects.filter(name=DEMO_CLUSTER).first()
    if cluster is not None:
        return _compressed_limits(cluster)
    return cluster_create(
        name=DEMO_CLUSTER,
        hosts=DEMO_HOSTS,
        gpus_per_host=DEMO_GPUS_PER_HOST,
        speed=DEMO_SPEED,
        cycle_s=5,
        grace_s=10,
        short_job_max_s=demo_seconds(REAL_SHORT_JOB_MAX_S),
        max_min_runtime_s=demo_seconds(REAL_MAX_MIN_RUNTIME_S),
        reservation_admit_min=DEMO_RESERVATION_ADMIT_MIN,
        reset=True,
    )


def _compressed_limits(cluster: Cluster) -> Cluster:
    """A demo cluster made before its limits on minimum runtimes, or its reservation
    admission's bound, were compressed (it still has the real-cluster defaults) gets the
    compressed ones, as an audited policy change; one an operator set otherwise keeps them."""
    changes: dict[str, int] = {}
    if (cluster.short_job_max_s, cluster.max_min_runtime_s) == (
        REAL_SHORT_JOB_MAX_S,
        REAL_MAX_MIN_RUNTIME_S,
    ):
        changes["short_job_max_s"] = demo_seconds(REAL_SHORT_JOB_MAX_S)
        changes["max_min_runtime_s"] = demo_seconds(REAL_MAX_MIN_RUNTIME_S)
    if cluster.reservation_admit_min * 60 == REAL_RESERVATION_ADMIT_S:
        changes["reservation_admit_min"] = DEMO_RESERVATION_ADMIT_MIN
    if not changes:
        return cluster
    return cluster_policy_update(
        actor=None,
        cluster_id=cluster.pk,
        changes=changes,
        reason=f"the demo runs {DEMO_SPEED:g}x faster: limits on minimum runtimes and "
        "protection compressed like the load's minimum runtimes",
    )


def demo_seconds(cluster_s: float) -> int:
    """A duration of the demo cluster's clock (a minimum runtime, a policy limit) in the
    wall seconds Allot counts: divided by DEMO_SPEED, at least 1 (0 stays 0: unallocated)."""
    return 0 if cluster_s == 0 else max(1, int(cluster_s / DEMO_SPEED))


def _backfill_config(cluster: Cluster) -> SimConfig:
    """The simulator config of the back-fill: the cluster's policy with the limits on
    minimum runtimes and the reservation admission's bound uncompressed, as the replayed
    (uncompressed) history needs them."""
    return replace(
        sim_config_for_cluster(cluster),
        short_job_max_s=float(REAL_SHORT_JOB_MAX_S),
        max_min_runtime_s=float(REAL_MAX_MIN_RUNTIME_S),
        reservation_admit_s=float(REAL_RESERVATION_ADMIT_S),
    )


def _projects(root: BudgetNode) -> dict[str, BudgetNode]:
    """The demo's projects by name (unique in the demo tree)."""
    children: dict[int | None, list[BudgetNode]] = defaultdict(list)
    for node in BudgetNode.objects.all():
        children[node.parent_id].append(node)
    projects, stack = {}, [root]
    while stack:
        node = stack.pop()
        stack += children[node.pk]
        if node.kind == "project":
            projects[node.name] = node
    return projects


def _submitters(projects: dict[str, BudgetNode]) -> dict[str, Any]:
    """A member (else a manager, else the first superuser) of each project."""
    users = get_user_model().objects
    fallback = users.filter(is_superuser=True).order_by("pk").first()
    chosen: dict[str, Any] = {}
    roles = Membership.objects.filter(node__in=projects.values()).select_related("user", "node")
    for membership in sorted(roles, key=lambda m: (m.role != "member", m.user.username)):
        chosen.setdefault(membership.node.name, membership.user)
    return {name: chosen.get(name, fallback) for name in projects}


def _tree_document(root: BudgetNode) -> dict[str, Any]:
    return budget_tree_export(root_name=root.name)


# ------------------------------------------------------------------------- back-fill


def demo_backfill(
    *, root: BudgetNode, cluster: Cluster, days: float, now=None, start_runs: bool = True
) -> dict:
    """Replay `days` of the organisation's load through the simulator and store it as
    the cluster's history up to `now`: every job it played, the jobs still running or
    waiting at `now` as the live cluster's running and pending jobs (handed over:
    `scheduler.services.demo_handover`), whose runs `start_runs` starts on the
    simulated cluster for the work they have left. Does nothing if the cluster has jobs.
    Returns counts, the simulation's occupancy of its last hour and seconds."""
    started = time.perf_counter()
    if Job.objects.filter(cluster=cluster).exists():
        return {"skipped": "the cluster already has jobs"}
    now = now or timezone.now()
    origin = now - dt.timedelta(seconds=days * DAY_S)
    index, projects = tree_index(), _projects(root)
    trace, spec, played = _backfill_trace(root, cluster, index, projects, days)
    config = replace(_backfill_config(cluster), until_s=days * DAY_S, seed=0)
    # Played once: the record holds every job played (ended, running or waiting at the
    # end), so a preview replaying the stored jobs plays the same history.
    result = simulate(spec, engine_tree(index), played, config)
    simulated_s = time.perf_counter() - started
    kept, runs_by_job, rules = recorded_runs(result, _host_gpus(cluster))
    handover = Handover.of(config, end_s=days * DAY_S, speed=cluster.clock_speed)
    counts, requests = _store_history(
        cluster=cluster,
        projects=projects,
        trace={t.job_id: t for t in trace},
        outcomes=kept,
        runs_by_job=runs_by_job,
        rules=rules,
        at=lambda s: origin + dt.timedelta(seconds=s),
        handover=handover,
        paths={node.pk: index.path(node.pk) for node in projects.values()},
        own_ids=True,
    )
    _refresh_ledger(cluster, origin, now)
    if start_runs:
        counts.update(handover_start(cluster, requests))
        # the waiting work is handed over: the first tick submits only what arrives after
        cache.set(_LOAD_KEY, now.timestamp(), timeout=None)
    counts.update(
        # the simulation's occupancy of the last complete hour (the dashboards' last)
        last_hour_occupancy=round(end_occupancy(result, _seconds(report_end(now), origin)), 4),
        simulated_s=round(simulated_s, 2),
        seconds=round(time.perf_counter() - started, 2),
    )
    log.info("demo back-fill of %s: %s", cluster, counts)
    return counts


def _backfill_trace(root, cluster, index, projects, days):
    """The generated load of `days` (project names), the cluster's spec, and the trace as
    played: each job by the id its `Job` row will have and projects named as the live
    cycles name them (the engine tree's leaves by slug path). The engine breaks ties by
    them (Fair Tree by a hash of the path, the victims' order by job id), so a history
    played under other names is not the one a preview or live cycle replays."""
    shares = entitled_shares(budget_node(parse_tree_document(_tree_document(root))))
    engine_names = {name: index.path(node.pk) for name, node in projects.items()}
    hosts = _host_gpus(cluster)
    rows = organisation_rows(DEMO_SEED, shares, sum(hosts.values()), days * DAY_S)
    rows.sort(key=lambda r: r.submit_s)
    ids = next_ids(Job, len(rows))
    trace = [_trace_job(str(pk), r) for pk, r in zip(ids, rows, strict=True)]
    # A job whose utilization profile never leaves 0 (hung) is recorded idle from its
    # start, and a preview replays it so (`idle_after_s`): it is played so too.
    trace = [replace(t, idle_after_s=0.0) if _never_busy(t) else t for t in trace]
    played = [replace(t, project=engine_names.get(t.project, t.project)) for t in trace]
    spec = ClusterSpec(cluster.name, tuple(HostSpec(n, g) for n, g in sorted(hosts.items())))
    return trace, spec, played


def _seconds(at: dt.datetime, origin: dt.datetime) -> float:
    return (at - origin).total_seconds()


def _host_gpus(cluster: Cluster) -> dict[str, int]:
    return {h.name: h.gpus for h in cluster.hosts.all()}


def _job_name(job: TraceJob) -> str:
    return f"{job.kind}-{job.job_id.removeprefix('demo-')}"


def _job_spec(kind: str) -> dict[str, str]:
    return {"image": "demo/pytorch:2.5", "command": f"python {kind}.py"}


def _never_busy(job: TraceJob) -> bool:
    """Whether the simulated cluster's profile of `job` (`profile_for`) is never busy."""
    return profile_for(kind=job.kind, spec=_job_spec(job.kind), key=_job_name(job)) in (
        HUNG,
        IDLE,
    )


def _trace_job(job_id: str, row: TraceRow) -> TraceJob:
    return TraceJob(
        job_id=job_id,
        project=row.project,
        user=row.user,
        submit_s=float(row.submit_s),
        gpus=row.gpus,
        duration_s=float(row.duration_s),
        min_runtime_s=float(row.min_runtime_s),
        resumable=row.resumable,
        priority=row.priority,
        kind=row.kind,
    )


@transaction.atomic
def _store_history(
    *,
    cluster,
    projects,
    trace,
    outcomes,
    runs_by_job,
    rules,
    at,
    handover=None,
    paths=None,
    own_ids=False,
) -> tuple[dict, list]:
    """Store the jobs of `outcomes` (job id -> the simulator's outcome) with their runs
    and events; those still running or waiting at the end (only with a `handover`) as
    running and pending jobs. Returns the counts and the start requests of the open runs
    (`paths`: the projects' tree paths by node id, as the live cycle names them).
    `own_ids`: the trace's job ids are the ids the rows take (`config.plainsql.next_ids`)."""
    submitters = _submitters(projects)
    kept = [
        job_id
        for job_id in outcomes
        if trace[job_id].project in projects
        and (runs_by_job.get(job_id) or (handover and outcomes[job_id].end_s is None))
    ]
    rows = [
        _job_row(cluster, projects, submitters, trace[j], outcomes[j], runs_by_job[j], at, handover)
        for j in kept
    ]
    if own_ids:  # the jobs were played under the ids reserved for them
        for job_id, row in zip(kept, rows, strict=True):
            row.pk = int(job_id)
    job_of = dict(zip(kept, Job.objects.bulk_create(rows), strict=True))
    attempts = Attempt.objects.bulk_create(
        attempt_row(cluster, job_of[job_id], job_id, n, run, at, rules)
        for job_id in kept
        for n, run in enumerate(runs_by_job[job_id], start=1)
    )
    UtilizationSample.objects.bulk_create(_profiled(a) for a in attempts if a.ended_at)
    events: list[JobEvent] = []
    attempts_of: dict[int, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        attempts_of[attempt.job_id].append(attempt)
    for job_id in kept:
        job = job_of[job_id]
        events += _job_events(job, attempts_of[job.pk], runs_by_job[job_id], rules, at)
    JobEvent.objects.bulk_create(events)
    left = work_left(kept, job_of, attempts_of, runs_by_job, trace, handover)
    counts = {"jobs": len(rows), "attempts": len(attempts), "events": len(events)}
    counts.update(
        running=sum(r.state == JobState.RUNNING for r in rows),
        pending=sum(r.state == JobState.PENDING for r in rows),
    )
    return counts, open_requests(cluster, attempts, left, paths or {})


def _profiled(attempt: Attempt) -> UtilizationSample:
    """A back-filled attempt's GPU utilization as the simulated cluster would have served
    it (its job's profile over its life, one row), so the demo's pyramid has history."""
    profile = profile_for(kind=attempt.job.kind, spec=attempt.job.spec, key=attempt.job.name)
    life_s = (attempt.ended_at - attempt.started_at).total_seconds()
    step_s = max(60.0, life_s / 500)
    return UtilizationSample(
        attempt=attempt,
        cluster=attempt.cluster,
        start=attempt.started_at,
        end=attempt.ended_at,
        samples=max(1, int(life_s / step_s)),
        mean_pct=mean_utilization(profile, 0.0, life_s, step_s),
        max_pct=max(utilization_at(profile, t * step_s) for t in range(int(life_s / step_s) + 1)),
        known_s=life_s,
    )


def _job_row(cluster, projects, submitters, job: TraceJob, outcome, runs, at, handover=None) -> Job:
    """A played job as stored: ended as the simulator ended it, or (with a `handover`)
    running or waiting as the simulation left it (`open_job_fields`)."""
    fields = (
        open_job_fields(job, runs, outcome.min_runtime_s, handover, at)
        if handover is not None and outcome.end_s is None
        else _ended_job_fields(job, outcome, runs, at)
    )
    return Job(
        cluster=cluster,
        project=projects[job.project],
        submitter=submitters[job.project],
        name=_job_name(job),
        gpus=job.gpus,
        resumable=job.resumable,
        priority=job.priority,
        kind=job.kind,
        spec=_job_spec(job.kind),
        duration_s=int(job.duration_s),
        submitted_at=at(job.submit_s),
        attempt_count=len(runs),
        **fields,
    )


def _ended_job_fields(job: TraceJob, outcome, runs, at) -> dict:
    last = runs[-1]
    return {
        "state": _job_state_after(job, last),
        "min_runtime_s": int(outcome.min_runtime_s),
        "queued_at": at(runs[-2].end_s if len(runs) > 1 else job.submit_s),
        "first_started_at": at(runs[0].start_s),
        "ended_at": at(last.end_s),
        # work saved by the earlier runs, as a live cycle records it (Job.progress_s):
        # a completed job's last run did the rest of its duration. Not floored at 0: a
        # restart in the simulator also runs its restart overhead, so when the earlier
        # runs saved less than that the last run is longer than the duration, and only
        # the duration less the last run keeps saved work + last run = the duration a
        # preview replays (floored, it replayed such a job 120 s longer than it was
        # played, and everything after it shifted)
        "progress_s": (
            job.duration_s - (last.end_s - last.start_s)
            if outcome.state == SimJobState.COMPLETED
            else 0.0
        ),
    }


# what the back-filled history says of a job after a stopped run, by the state it went to
_AFTER_STOP_TEXT = {
    JobState.PENDING: "requeued",
    JobState.PREEMPTED: "preempted, not resumable",
    JobState.FAILED: "lost with its host, not resumable",
}
# ... and after a move's stop (consolidation), which the live cycle ends `migrated`
_AFTER_MOVE_TEXT = "stopped to be moved to other hosts (consolidation), started again at once"


def _job_state_after(job: Job | TraceJob, run: RunRecord) -> str:
    """The state a job goes to when `run` ends: the live cycle's one rule (`job_target`)
    for the attempt end the simulator's end reason stands for."""
    end = END_OF.get(run.end_reason, AttemptEnd.LOST)
    return job_target(end, resumable=job.resumable, started=True)


def _job_events(job: Job, attempts, runs, rules, at) -> list[JobEvent]:
    """The transitions a live cycle would have recorded for these runs."""
    S = JobState
    events = [
        job_event(
            job=job,
            from_state="",
            to_state=S.PENDING,
            reason="submitted",
            at=job.submitted_at,
            reason_code="submitted",
        )
    ]
    for attempt, run in zip(attempts, runs, strict=True):
        start, end = at(run.start_s), at(run.end_s)
        events += [
            job_event(
                job=job,
                from_state=S.PENDING,
                to_state=S.STARTING,
                reason="scheduled",
                at=start,
                reason_code="scheduled",
                attempt=attempt,
            ),
            job_event(
                job=job,
                from_state=S.STARTING,
                to_state=S.RUNNING,
                reason="started",
                at=start,
                reason_code="started",
                attempt=attempt,
            ),
        ]
        if run.end_reason == EndReason.RUNNING_AT_END:
            continue  # handed over to the live cluster running
        if run.end_reason == EndReason.COMPLETED:
            events.append(
                job_event(
                    job=job,
                    from_state=S.RUNNING,
                    to_state=S.SUCCEEDED,
                    reason="finished",
                    at=end,
                    reason_code="succeeded",
                    attempt=attempt,
                )
            )
            continue
        rule = rules.get((run.job_id, round(run.end_s, 3)), str(run.end_reason))
        final = _job_state_after(job, run)
        moved = rule == MOVE_RULE and final == S.PENDING
        events += [
            job_event(
                job=job,
                from_state=S.RUNNING,
                to_state=S.STOPPING,
                # the page and the CLI put the rule's label before it (rule_label)
                reason="stopped by the scheduler",
                at=end,
                reason_code=str(run.end_reason),
                attempt=attempt,
                rule=rule,
            ),
            job_event(
                job=job,
                from_state=S.STOPPING,
                to_state=final,
                reason=_AFTER_MOVE_TEXT if moved else _AFTER_STOP_TEXT[final],
                at=end,
                reason_code=str(run.end_reason),
                attempt=attempt,
            ),
        ]
    return events


def _refresh_ledger(cluster: Cluster, since: dt.datetime, until: dt.datetime) -> None:
    rollups_refresh(cluster_id=cluster.pk, since=since, until=until)


# ------------------------------------------------------------------------ live load

_LOAD_KEY = "demo:load:last-tick"


def demo_load_tick(*, now: dt.datetime | None = None) -> int:
    """Submit the demo load due since the last tick (at most an hour back; the first
    tick: the last simulated day's). Returns the number of jobs submitted. Simulated
    time runs DEMO_SPEED times faster: a generated day of the organisation's load
    arrives in DAY_S / DEMO_SPEED wall seconds."""
    cluster = Cluster.objects.filter(name=DEMO_CLUSTER).first()
    root = BudgetNode.objects.filter(parent=None, name="allot-demo").first()
    if not demo_enabled() or cluster is None or root is None:
        return 0
    now = now or timezone.now()
    last = cache.get(_LOAD_KEY)
    cache.set(_LOAD_KEY, now.timestamp(), timeout=None)
    since = max(last or now.timestamp() - FIRST_TICK_LOOKBACK_S, now.timestamp() - 3600)
    sim_from, sim_to = since * DEMO_SPEED, now.timestamp() * DEMO_SPEED
    projects = _projects(root)
    submitters = _submitters(projects)
    shares = entitled_shares(budget_node(parse_tree_document(_tree_document(root))))
    pending = defaultdict(int)
    for name in Job.objects.filter(cluster=cluster, state=JobState.PENDING).values_list(
        "project__name", flat=True
    ):
        pending[name] += 1
    submitted = 0
    for row in _rows_between(shares, cluster.gpu_capacity, sim_from, sim_to):
        if row.project not in projects or pending[row.project] >= DEMO_PENDING_CAP:
            continue
        min_runtime = demo_seconds(row.min_runtime_s)
        try:
            job_submit(
                actor=submitters[row.project],
                project=projects[row.project].pk,
                cluster=cluster.pk,
                name=f"{row.kind}-demo",
                gpus=row.gpus,
                min_runtime_s=min_runtime,
                resumable=row.resumable,
                priority=row.priority,
                kind=row.kind,
                spec=_job_spec(row.kind),
                duration_s=max(1, int(row.duration_s)),
            )
        except ApplicationError as exc:  # e.g. a shape the cluster cannot hold
            log.info("demo load: %s skipped: %s", row, exc)
            continue
        pending[row.project] += 1
        submitted += 1
    return submitted


def _rows_between(shares, gpus: int, sim_from: float, sim_to: float) -> list[TraceRow]:
    """The generated rows submitted in [sim_from, sim_to) of simulated time: each
    simulated day has its own seeded load."""
    rows: list[TraceRow] = []
    day = int(sim_from // DAY_S)
    while day * DAY_S < sim_to:
        for row in organisation_rows(DEMO_SEED + day, shares, gpus, DAY_S):
            t = day * DAY_S + row.submit_s
            if sim_from <= t < sim_to:
                rows.append(row)
        day += 1
    return rows
