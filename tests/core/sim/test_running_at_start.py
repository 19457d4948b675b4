"""Jobs already running when a replay starts (`TraceJob.running`, what a what-if window
opening on a live cluster carries): they go on with their run on their GPUs instead of
waiting to be started again, keep their protection end and the work they had left."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.engine.placement import place_on_free
from scheduler.core.engine.types import BudgetNode, Host, Placement
from scheduler.core.sim.model import (
    ClusterSpec,
    HostSpec,
    JobState,
    RunningAtStart,
    SimConfig,
    TraceJob,
)
from scheduler.core.sim.replay import simulate
from scheduler.core.sim.whatif import JobRecord, run_whatif

HOUR = 3600.0
CLUSTER = ClusterSpec("c", (HostSpec("h0", 8), HostSpec("h1", 8)))
TREE = BudgetNode("org", children=(BudgetNode("a", 1.0), BudgetNode("b", 1.0)))


def job(
    job_id: str,
    project: str,
    *,
    gpus: int = 8,
    duration_s: float = 4 * HOUR,
    submit_s: float = 0.0,
    min_runtime_s: float = HOUR,
    resumable: bool = True,
    running: RunningAtStart | None = None,
) -> TraceJob:
    return TraceJob(
        job_id, project, "u", submit_s, gpus, duration_s, min_runtime_s, resumable, 0,
        "training", running=running,
    )  # fmt: skip


def ran_on(result, job_id: str) -> list[tuple[float, float, tuple[str, ...]]]:
    return [(iv.start_s, iv.end_s, iv.hosts) for iv in result.intervals if iv.job_id == job_id]


def test_a_running_job_goes_on_on_its_gpus_with_the_work_it_had_left():
    """Started 2 h before the replay on h1 with 3 h left: it runs from 0 to 3 h on h1
    (not h0, which a fresh start would take), is never waiting, and delivers 8 x 3 GPU-h."""
    run = RunningAtStart(started_s=-2 * HOUR, placements=(("h1", tuple(range(8))),))
    result = simulate(CLUSTER, TREE, [job("c", "a", duration_s=3 * HOUR, running=run)], SimConfig())
    assert ran_on(result, "c") == [(0.0, 3 * HOUR, ("h1",))]
    outcome = result.jobs[0]
    assert outcome.state == JobState.COMPLETED and outcome.end_s == 3 * HOUR
    assert outcome.waits_s == [] and outcome.preemptions == 0
    assert result.start_s == 0.0


def test_taken_or_unknown_gpus_are_replaced_by_free_ones_and_no_room_waits():
    """Two runs recorded on h0 (a clash) and one on a host the cluster lacks: the first
    keeps h0, the second gets the free GPUs of h1 (`place_on_free`), and the third finds no room and
    waits from the start like a new job (all of one project: nothing is preempted)."""
    on_h0 = (("h0", tuple(range(8))),)
    jobs = [
        job("first", "a", running=RunningAtStart(-HOUR, on_h0)),
        job("clash", "a", running=RunningAtStart(-HOUR, on_h0)),
        job("gone", "a", running=RunningAtStart(-HOUR, (("h9", tuple(range(8))),))),
    ]
    result = simulate(CLUSTER, TREE, jobs, SimConfig(until_s=HOUR))
    assert ran_on(result, "first") == [(0.0, HOUR, ("h0",))]
    assert ran_on(result, "clash") == [(0.0, HOUR, ("h1",))]
    gone = next(o for o in result.jobs if o.job_id == "gone")
    assert ran_on(result, "gone") == [] and gone.state == JobState.PENDING
    assert gone.pending_since_s == 0.0


def test_a_displaced_run_goes_where_the_engine_would_place_it():
    """One placement rule: a run whose recorded host is gone resumes where the engine's
    placement puts a new job (`place_on_free`: best fit, the host with the fewest free
    GPUs that holds an aligned block), h1 beside the 6-GPU run, not the first host
    with room (h0, which stays whole)."""
    jobs = [
        job("six", "a", gpus=6, running=RunningAtStart(-HOUR, (("h1", tuple(range(6))),))),
        job("moved", "a", gpus=2, running=RunningAtStart(-HOUR, (("h9", (0, 1)),))),
    ]
    result = simulate(CLUSTER, TREE, jobs, SimConfig(until_s=HOUR))
    assert ran_on(result, "moved") == [(0.0, HOUR, ("h1",))]
    hosts = (Host("h0", 8), Host("h1", 8))
    assert place_on_free(hosts, [0xFF, 0xC0], 2) == (Placement("h1", (6, 7)),)
    assert place_on_free(hosts, [0xFF, 0xC0], 3) == (Placement("h0", (0, 1, 2)),)
    assert place_on_free(hosts, [0xFF, 0xFF], 16) == (
        Placement("h0", tuple(range(8))),
        Placement("h1", tuple(range(8))),
    )
    assert place_on_free(hosts, [0xFF, 0xC0], 16) is None
    assert place_on_free((Host("h0", 8, healthy=False), Host("h1", 8)), [0xFF, 0x0F], 8) is None


def test_a_running_job_is_not_preempted_before_its_recorded_protection_ends():
    """Project a has used the cluster for a week and its running job holds all 16 GPUs;
    b's job arrives at 0 and wins fair share. The running job's recorded protection
    ends at 2 h (longer than its minimum runtime from its start would give): it is
    stopped then, not before, and resumes later with its saved work."""
    prior = (("a", -7 * 24 * HOUR, 0.0, 16),)
    run = RunningAtStart(
        started_s=-HOUR,
        placements=(("h0", tuple(range(8))), ("h1", tuple(range(8)))),
        protected_until_s=2 * HOUR,
    )
    jobs = [
        job("held", "a", gpus=16, duration_s=10 * HOUR, running=run),
        job("new", "b", gpus=16, duration_s=HOUR),
    ]
    config = SimConfig(prior_usage=prior, checkpoint_interval_s=1800.0, restart_overhead_s=120.0)
    result = simulate(CLUSTER, TREE, jobs, config)
    stops = [p for p in result.preemptions if p.job_id == "held"]
    assert stops and stops[0].at_s == pytest.approx(2 * HOUR)
    # it ran 3 h of its run (1 h before the replay), all saved at the 1,800 s checkpoints
    held = ran_on(result, "held")
    assert held[0] == (0.0, 2 * HOUR, ("h0", "h1"))
    restart = held[1][0]
    # 10 h left at 0, 2 h done since: 8 h left, plus the restart's overhead
    assert held[1][1] - restart == pytest.approx(8 * HOUR + 120.0)
    assert next(o for o in result.jobs if o.job_id == "held").state == JobState.COMPLETED


def test_without_a_recorded_protection_end_it_counts_from_the_runs_start():
    """Minimum runtime 2 h, started 90 min before the replay: protected until 30 min."""
    prior = (("a", -7 * 24 * HOUR, 0.0, 16),)
    run = RunningAtStart(
        started_s=-1.5 * HOUR, placements=(("h0", tuple(range(8))), ("h1", tuple(range(8))))
    )
    jobs = [
        job("held", "a", gpus=16, duration_s=10 * HOUR, min_runtime_s=2 * HOUR, running=run),
        job("new", "b", gpus=16, duration_s=HOUR),
    ]
    result = simulate(CLUSTER, TREE, jobs, SimConfig(prior_usage=prior))
    stops = [p.at_s for p in result.preemptions if p.job_id == "held"]
    assert stops and stops[0] == pytest.approx(0.5 * HOUR)


def test_an_unchanged_window_delivers_what_the_running_jobs_had_left():
    """The what-if with one running and one waiting carried job and nothing else: the
    replay with unchanged weights delivers exactly their work in the window."""
    records = [
        JobRecord(
            "run", "a", 0.0, 8, 5 * HOUR, min_runtime_s=HOUR, resumable=True,
            running=RunningAtStart(-3 * HOUR, (("h0", tuple(range(8))),), True, -2 * HOUR),
        ),
        JobRecord("wait", "b", 0.0, 8, 2 * HOUR, min_runtime_s=HOUR, resumable=True),
    ]  # fmt: skip
    result = run_whatif(CLUSTER, TREE, TREE, records, start_s=0.0, end_s=24 * HOUR, parallel=False)
    rows = {r["project"]: r for r in result["projects"]}
    assert rows["a"]["delivered_gpu_h_before"] == pytest.approx(8 * 5)
    assert rows["b"]["delivered_gpu_h_before"] == pytest.approx(8 * 2)


def test_times_of_a_running_record_are_shifted_with_the_window():
    """A window starting at 1,000 s: the run's start and protection end are shifted too."""
    run = RunningAtStart(400.0, (("h0", tuple(range(8))),), True, 4600.0)
    records = [JobRecord("r", "a", 1000.0, 8, HOUR, min_runtime_s=HOUR, running=run)]
    result = run_whatif(
        CLUSTER, TREE, TREE, records, start_s=1000.0, end_s=1000.0 + HOUR, parallel=False
    )
    assert {r["project"]: r["delivered_gpu_h_before"] for r in result["projects"]}["a"] == (
        pytest.approx(8.0)
    )


@st.composite
def carried_windows(draw):
    """Up to four running jobs on their own hosts of a 4 x 8-GPU cluster (some charged
    to a project with a week of prior use), with protections ending before or after the
    start, and a few arrivals of the other project."""
    n = draw(st.integers(1, 4))
    jobs = []
    for i in range(n):
        started = -draw(st.floats(0, 6 * HOUR))
        until = draw(st.one_of(st.none(), st.floats(started, 6 * HOUR)))
        gpus = draw(st.sampled_from((2, 4, 8)))
        run = RunningAtStart(started, ((f"h{i}", tuple(range(gpus))),), draw(st.booleans()), until)
        jobs.append(
            job(
                f"c{i}", "a", gpus=gpus, duration_s=draw(st.floats(60, 8 * HOUR)),
                min_runtime_s=draw(st.sampled_from((0.0, HOUR))),
                resumable=draw(st.booleans()), running=run,
            )
        )  # fmt: skip
    for k in range(draw(st.integers(0, 4))):
        jobs.append(
            job(
                f"n{k}", "b", gpus=draw(st.sampled_from((4, 8, 16))),
                submit_s=draw(st.floats(0, 4 * HOUR)), duration_s=draw(st.floats(60, 4 * HOUR)),
            )
        )  # fmt: skip
    return jobs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=carried_windows(), busy_a=st.booleans())
def test_running_jobs_keep_their_protection_and_their_work(jobs, busy_a):
    """Whatever arrives: no running job is stopped before its protection ends (allocated
    runs only; the engine's rule), nothing is recorded before the start, and a job never
    stopped ends exactly when its work left runs out."""
    cluster = ClusterSpec("c", tuple(HostSpec(f"h{i}", 8) for i in range(4)))
    prior = (("a", -7 * 24 * HOUR, 0.0, 32),) if busy_a else ()
    result = simulate(cluster, TREE, jobs, SimConfig(prior_usage=prior, until_s=12 * HOUR))
    specs = {j.job_id: j for j in jobs}
    assert all(iv.start_s >= 0.0 for iv in result.intervals)
    first_stop: dict[str, float] = {}
    for p in result.preemptions:
        first_stop.setdefault(p.job_id, p.at_s)
    for job_id, spec in specs.items():
        run = spec.running
        if run is None:
            continue
        if run.allocated:
            until = run.protected_until_s
            if until is None:
                until = run.started_s + min(spec.min_runtime_s, SimConfig().max_min_runtime_s)
            if spec.min_runtime_s > 0 or run.protected_until_s is not None:
                assert first_stop.get(job_id, until) >= min(until, spec.duration_s) - 1e-6
        if job_id not in first_stop:
            first = ran_on(result, job_id)[0]
            assert first[0] == 0.0 and first[2] == (run.placements[0][0],)
            assert first[1] == pytest.approx(min(spec.duration_s, 12 * HOUR))
