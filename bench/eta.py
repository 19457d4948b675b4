"""Benchmark: how good is the estimated start time (ETA) of a pending job?

Replays a trace through the simulator (the real engine), and at the submission of each
sampled job asks `scheduler.core.sim.eta.estimate` for its ETA from the state at that
instant (the replay's `probe`): running jobs with their elapsed time, the pending
queue, usage, the work requeued jobs saved in earlier runs; runtimes forecast only from
the jobs completed so far (never the job's own or any running job's real runtime). Compares with the replay's real first start.

One deterministic replay captures the state at the submission of a `--watch` share of
the jobs after the warm-up (default all); of those that then waited at least
`--min-wait` (default 5 min) it draws `--samples` (seeded). Jobs that arrive after a
submission are unknown to its ETA, as in production: it expects the submissions of the
last `--arrival-periods` windows of `--arrival-window-h` hours again at their average
rate, each project's scaled by its last hours (`expected_arrivals`), and for the latest
start of the range the busiest of those windows again (`--arrivals`, `--high-arrivals`).

The middle run spreads each job's runtime quantile around the median by `--spread`
(default `scheduler.core.sim.eta.SPREAD`, as the live service; 0: every job at its median,
the model before 2026-12-04).

`--consolidate on|off|replay`: consolidation (planned moves) in the replay and the
forward runs (default, as the live service), in neither, or in the replay alone
(diagnosis). `--rows` also writes, per evaluated job, the replay's moves during its wait,
a move in the cycle it started in, and its snapshot's running jobs whose run began with a
move or after a requeue.

Prints one JSON object: jobs evaluated, median and p90 absolute error (s), the median
relative error (|eta - real| / real wait), the share of real starts inside the stated
range, the same for the baseline (Slurm backfill-style reservation estimate), the
trace, window, seed and wall time.

Usage: python bench/eta.py [--trace philly] [--start-day 0] [--days 14] [--samples 200]
       [--seed 0]; --scenario ai2-month [--scenario-seed 1] replays a generated workload.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.core.engine.types import Snapshot, Workload  # noqa: E402
from scheduler.core.sim.eta import (  # noqa: E402
    RECENT,
    SPREAD,
    Estimate,
    RuntimeForecast,
    busiest_arrivals,
    estimate,
    expected_arrivals,
    moved_beyond_range,
    range_widening,
    repeat_arrivals,
    steady,
    widened,
)
from scheduler.core.sim.generate import write_scenario  # noqa: E402
from scheduler.core.sim.io import load_cluster, load_trace, load_tree  # noqa: E402
from scheduler.core.sim.model import SimConfig, TraceJob  # noqa: E402
from scheduler.core.sim.replay import policy_for, simulate  # noqa: E402

DAY = 86400.0
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if not DATA.exists():
    DATA = Path("/work/shared/data")


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def _figures(rows: list[tuple[float, float, float | None, float | None, float | None]]) -> dict:
    """rows: (real start, submit, eta, earliest, latest)."""
    errs, rel, inside, unknown = [], [], 0, 0
    for real, submit, eta, lo, hi in rows:
        if eta is None:
            unknown += 1
            continue
        err = abs(eta - real)
        errs.append(err)
        rel.append(err / max(real - submit, 1.0))
        if lo is not None and hi is not None and lo - 1e-6 <= real <= hi + 1e-6:
            inside += 1
    n = len(rows)
    return {
        "median_abs_error_s": round(statistics.median(errs), 1) if errs else None,
        "p90_abs_error_s": round(_quantile(errs, 0.9) or 0.0, 1) if errs else None,
        "median_relative_error": round(statistics.median(rel), 3) if rel else None,
        "inside_range": round(inside / n, 3) if n else None,
        "no_estimate": unknown,
    }


class _Oracle:
    """Diagnosis only: the real remaining runtimes (what no forecast can know)."""

    def __init__(self, spec: dict[str, TraceJob]) -> None:
        self.spec = spec

    def remaining(self, project, user, kind, gpus, elapsed, q):  # noqa: ANN001, ANN201
        return max(0.0, self.spec[user].duration_s - elapsed)  # `user` carries the job id

    def with_running(self, running):  # noqa: ANN001, ANN201
        return self


class _EndedOnly(RuntimeForecast):
    """`--no-censored`: the forecast from the runs that ended alone (before 2026-12-06
    night), for comparison."""

    def with_running(self, running: object) -> RuntimeForecast:
        return self


def full_queue(n_pending: int, seed: int, spread: float = SPREAD, censored: bool = True) -> dict:
    """What the live service computes per cluster and cycle: the ETA of every pending
    job of a 1,024-GPU cluster (128 x 8, every GPU busy) with `n_pending` queued in 20
    projects, from 5,000 past runtimes."""
    from scheduler.core.engine.types import BudgetNode, Host, Placement, RunningWorkload

    rng = random.Random(seed)
    projects = [f"p{i:02d}" for i in range(20)]
    tree = BudgetNode("org", children=tuple(BudgetNode(p, rng.choice([1, 2, 4])) for p in projects))
    hosts = tuple(Host(f"h{i:03d}", 8) for i in range(128))
    running = []
    k = 0
    for h in hosts:
        free = 8
        while free:
            g = min(free, rng.choice([1, 2, 4, 8]))
            w = Workload(f"r{k}", rng.choice(projects), g, 0.0, 3600.0, True, 0, "training")
            idx = tuple(range(8 - free, 8 - free + g))
            running.append(
                RunningWorkload(w, (Placement(h.name, idx),), -rng.uniform(0, 7200), True)
            )
            free -= g
            k += 1
    pending: dict[str, list[Workload]] = {}
    for i in range(n_pending):
        w = Workload(
            f"j{i}",
            rng.choice(projects),
            rng.choice([1, 1, 2, 4, 8, 16]),
            float(i),
            3600.0,
            True,
            0,
            "training",
        )
        pending.setdefault(w.project, []).append(w)
    usage = {p: rng.uniform(0, 1e7) for p in projects}
    snap = Snapshot(hosts=hosts, running=running, pending=pending, tree=tree, usage=usage)
    history = [
        (
            rng.choice(projects),
            "",
            "training",
            rng.choice([1, 2, 4, 8, 16]),
            rng.lognormvariate(8.5, 1.2),
        )
        for _ in range(5000)
    ]
    t0 = time.perf_counter()
    forecast = (RuntimeForecast if censored else _EndedOnly)(history)
    est = estimate(snap, policy_for(SimConfig()), 0.0, forecast, spread=spread)
    ms = 1000 * (time.perf_counter() - t0)
    return {
        "full_queue_pending": n_pending,
        "full_queue_running": len(running),
        "full_queue_estimated": sum(1 for e in est.values() if e.start is not None),
        "full_queue_ms": round(ms, 1),
    }


def churn(
    jobs: list[str],
    wait_of: Callable[[str], tuple[float, float]],
    states: list[tuple[float, Snapshot]],
    state_t: list[float],
    eta_at: Callable[[str, float, Snapshot], Estimate],
    probes: int,
) -> dict:
    """`churn`: the median change of a job's shown ETA between consecutive refreshes,
    relative to the wait it still had (|shown_i+1 - shown_i| / (shown_i - t_i)), over
    the refreshes of `jobs` during their waits (at most `probes` per job, evenly spread);
    `churn_raw` the same for the forward run's start without `steady`, and
    `moves_beyond_range` the share of refreshes that moved the shown start by more than
    the range shown before (the moves the job page explains)."""
    shown_rel, raw_rel, beyond, pairs = [], [], 0, 0
    for jid in jobs:
        submit, start = wait_of(jid)
        lo, hi = bisect_right(state_t, submit), bisect_left(state_t, start)
        picks = states[lo:hi]
        if len(picks) > probes:
            step = len(picks) / probes
            picks = [picks[int(i * step)] for i in range(probes)]
        prev_shown: Estimate | None = None
        prev_raw: Estimate | None = None
        for t, snap in picks:
            if not any(w.id == jid for v in snap.pending.values() for w in v):
                continue
            raw = eta_at(jid, t, snap)
            shown = steady(prev_shown, raw, t)
            if prev_shown is not None and prev_shown.start is not None and shown.start is not None:
                left = max(prev_shown.start - t, 60.0)
                shown_rel.append(abs(shown.start - prev_shown.start) / left)
                pairs += 1
                beyond += moved_beyond_range(prev_shown, shown)
            if prev_raw is not None and prev_raw.start is not None and raw.start is not None:
                raw_rel.append(abs(raw.start - prev_raw.start) / max(prev_raw.start - t, 60.0))
            prev_shown, prev_raw = shown, raw
    return {
        "churn": round(statistics.median(shown_rel), 3) if shown_rel else None,
        "churn_raw": round(statistics.median(raw_rel), 3) if raw_rel else None,
        "churn_refreshes": pairs,
        "moves_beyond_range": round(beyond / pairs, 3) if pairs else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="philly", help="philly (Oct-Nov 2017) or a CSV path")
    ap.add_argument("--cluster", default=None)
    ap.add_argument("--tree", default=None)
    ap.add_argument("--scenario", default=None, help="a generated scenario instead of a trace")
    ap.add_argument("--scenario-seed", type=int, default=1)
    ap.add_argument("--policy", default="fairshare")
    ap.add_argument("--start-day", type=float, default=0.0)
    ap.add_argument("--days", type=float, default=14.0)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-wait", type=float, default=300.0)
    ap.add_argument("--oracle", action="store_true", help="diagnosis: the real runtimes")
    ap.add_argument(
        "--arrivals",
        choices=("expected", "repeat", "none", "oracle"),
        default="expected",
        help="later arrivals: the last --arrival-window repeated, each project's scaled by "
        "its last hours against its average (expected: default, as the live service), "
        "unscaled (repeat: before 2026-12-07), none, or the real ones (diagnosis)",
    )
    ap.add_argument("--arrival-window-h", type=float, default=24.0)
    ap.add_argument(
        "--arrival-periods",
        type=int,
        default=7,
        help="average the expected arrivals over this many past windows (7, as the live service)",
    )
    ap.add_argument(
        "--high-arrivals",
        choices=("busiest", "expected"),
        default="busiest",
        help="what the latest start expects: the busiest past window again (default, as "
        "the live service) or the same arrivals as the estimate",
    )
    ap.add_argument(
        "--spread",
        type=float,
        default=SPREAD,
        help="how far the middle run's runtime quantiles spread around the median "
        f"(default {SPREAD}, as the live service; 0: every job at its median)",
    )
    ap.add_argument(
        "--recent",
        type=int,
        default=RECENT,
        help="a key's runtimes longer than a job's elapsed time that count, the most "
        f"recently finished (default {RECENT}, as the live service; 0: all of them, the "
        "forecast before 2026-12-06 evening)",
    )
    ap.add_argument(
        "--censored",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="count the jobs running at the estimate as runs going (censored runtimes, "
        "as the live service; --no-censored: the forecast from ended runs alone, before "
        "2026-12-06 night)",
    )
    ap.add_argument("--rows", default=None, help="also write every evaluated job as CSV here")
    ap.add_argument(
        "--consolidate",
        choices=("on", "off", "replay"),
        default="on",
        help="consolidation (`Policy.consolidate`) in the replay and the forward runs (on, "
        "as the live service), in neither (off), or in the replay alone (diagnosis)",
    )
    ap.add_argument("--warmup-days", type=float, default=2.0)
    ap.add_argument(
        "--calibrate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="widen ranges by the misses of the real starts known so far (as the live "
        "service; --no-calibrate: the forward runs' range alone)",
    )
    ap.add_argument(
        "--saved-work",
        choices=("all", "running", "pending", "moved", "none"),
        default="none",
        help="count the work a requeued job saved in earlier runs as time it has run "
        "(`Snapshot.worked`): for every job, the running or the pending ones only, the "
        "running ones whose run began with a move (consolidation), or "
        "none (default: every run forecast as if it were the first, as the live service, "
        "whose runtimes are per attempt; `all` was better on the generated month and "
        "Philly days 20-25, worse on days 10-15: docs/benchmarks-history.md)",
    )
    ap.add_argument("--churn-jobs", type=int, default=40, help="jobs re-estimated for churn")
    ap.add_argument(
        "--churn-probes", type=int, default=8, help="re-estimates per job at most, over its wait"
    )
    ap.add_argument("--watch", type=float, default=1.0, help="share of jobs whose state is kept")
    ap.add_argument(
        "--full-queue",
        type=int,
        default=0,
        help="instead: time the ETA of every job of an N-job queue on 1,024 GPUs",
    )
    args = ap.parse_args(argv)
    wall0 = time.perf_counter()
    if args.full_queue:
        print(
            json.dumps(full_queue(args.full_queue, args.seed, args.spread, args.censored), indent=1)
        )
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        if args.scenario:
            cluster_p, tree_p, trace_p = write_scenario(args.scenario, tmp, args.scenario_seed)
            source = f"generated {args.scenario} (seed {args.scenario_seed})"
        else:
            trace_p = DATA / "philly-octnov-2017.csv" if args.trace == "philly" else args.trace
            cluster_p = args.cluster or DATA / "philly-cluster.json"
            tree_p = args.tree or DATA / "philly-tree.json"
            source = str(trace_p)
        cluster = load_cluster(cluster_p)
        tree = load_tree(tree_p)
        trace = load_trace(trace_p, tree, cluster)
    t0 = min((j.submit_s for j in trace), default=0.0) + args.start_day * DAY
    t1 = t0 + args.days * DAY
    jobs = [j for j in trace if t0 <= j.submit_s < t1]
    config = SimConfig(
        policy=args.policy, until_s=t1 + 3 * DAY, seed=0, consolidate=args.consolidate != "off"
    )
    spec: dict[str, TraceJob] = {j.job_id: j for j in jobs}

    # One replay: the state is captured at the submission of a seeded random share of
    # the jobs (after the warm-up); those that then waited >= --min-wait are evaluated.
    rng = random.Random(args.seed)
    warm = t0 + args.warmup_days * DAY
    pool = [j.job_id for j in jobs if j.submit_s >= warm]
    watch = frozenset(rng.sample(pool, min(len(pool), int(args.watch * len(pool)) + 1)))
    seen: dict[str, tuple[float, Snapshot]] = {}

    def probe(now: float, ids: list[str], snapshot: Snapshot) -> None:
        for jid in ids:
            seen[jid] = (now, snapshot)

    first = simulate(cluster, tree, jobs, config, probe=(watch, probe))
    replay_s = first.wall_s
    # the replay's moves (consolidation): (when, job), a run begun by a move
    moves = sorted((p.at_s, p.job_id) for p in first.preemptions if p.reason_code == "migrate")
    move_t = [t for t, _ in moves]
    moved_runs = set(moves)
    real: dict[str, float] = {}
    for out in first.jobs:
        if out.waits_s:
            real[out.job_id] = out.submit_s + out.waits_s[0]
    waited = sorted(
        (jid for jid, s in real.items() if s - spec[jid].submit_s >= args.min_wait),
        key=lambda jid: (spec[jid].submit_s, jid),
    )
    candidates = [jid for jid in waited if jid in seen]
    sample = sorted(rng.sample(candidates, min(args.samples, len(candidates))))
    # completed jobs by end time: the forecast's history at a moment is a prefix
    done = sorted(
        (out.end_s, out.job_id)
        for out in first.jobs
        if out.state == "completed" and out.end_s is not None
    )
    done_t = [t for t, _ in done]
    policy = policy_for(config, consolidate=args.consolidate == "on")
    window = args.arrival_window_h * 3600.0
    # past submissions come from the whole trace: the days before the window were seen
    submitted = sorted((j for j in trace if j.submit_s < t1), key=lambda j: j.submit_s)
    submits = [j.submit_s for j in submitted]
    wl = {
        j.job_id: Workload(
            id=j.job_id,
            project=j.project,
            gpus=j.gpus,
            submit_s=j.submit_s,
            min_runtime_s=min(j.min_runtime_s, config.max_min_runtime_s),
            resumable=j.resumable,
            priority=j.priority,
            kind=j.kind,
        )
        for j in submitted
    }
    users = {j.job_id: (j.job_id if args.oracle else j.user) for j in jobs}
    # the oracle's runtimes: an expected arrival repeats a job from before the window too
    known = {j.job_id: j for j in submitted}

    def eta_at(jid: str, now: float, snapshot: Snapshot) -> Estimate:
        """Job `jid`'s estimate from the state at `now`, as the live service makes it."""
        if args.saved_work != "all":
            keep = (
                {r.workload.id for r in snapshot.running}
                if args.saved_work == "running"
                else {
                    r.workload.id
                    for r in snapshot.running
                    if (r.started_s, r.workload.id) in moved_runs
                }
                if args.saved_work == "moved"
                else {w.id for v in snapshot.pending.values() for w in v}
                if args.saved_work == "pending"
                else set()
            )
            snapshot = replace(
                snapshot, worked={k: v for k, v in snapshot.worked.items() if k in keep}
            )
        n = bisect_right(done_t, now)
        history = (
            (spec[d].project, spec[d].user, spec[d].kind, spec[d].gpus, spec[d].duration_s)
            for _, d in done[:n]
        )
        forecast = (RuntimeForecast if args.censored else _EndedOnly)(
            history, recent=args.recent or None
        )
        if args.oracle:
            forecast = _Oracle(known)  # type: ignore[assignment]
        busy = None  # the latest start expects the same arrivals unless set below
        if args.arrivals == "oracle":
            later = [wl[j.job_id] for j in jobs if now < j.submit_s <= now + 3 * DAY]
        elif args.arrivals in ("expected", "repeat"):
            lo = bisect_left(submits, now - window * args.arrival_periods)
            hi = bisect_left(submits, now)
            recent = [wl[j.job_id] for j in submitted[lo:hi]]
            arrive = expected_arrivals if args.arrivals == "expected" else repeat_arrivals
            later = arrive(recent, now, window, args.arrival_periods, since=submits[0])
            if args.high_arrivals == "busiest":
                busy = busiest_arrivals(recent, now, window, args.arrival_periods)
        else:
            later = []
        who = users
        if args.oracle:  # expected arrivals ("<id>~next") run as long as the job they repeat
            who = {**users, **{w.id: w.id.partition("~")[0] for w in [*later, *(busy or ())]}}
        return estimate(
            snapshot,
            policy,
            now,
            forecast,
            users=who,
            targets={jid},
            arrivals=later,
            busy_arrivals=busy,
            spread=args.spread,
        )[jid]

    # The range calibrates itself on the real starts known at each moment (as the live
    # service does on its cluster's): those of the evaluated jobs that started before it.
    records: list[tuple[float, float, float, float, float]] = []

    def widening_at(now: float) -> float:
        return range_widening(r for r in records if r[4] < now) if args.calibrate else 0.0

    def calibrated(jid: str, now: float, snapshot: Snapshot) -> Estimate:
        return widened(eta_at(jid, now, snapshot), now, widening_at(now))

    ours, base, evaluated = [], [], []
    raws: list[Estimate] = []  # the forward runs' estimates before the calibration (--rows)
    eta_wall = time.perf_counter()
    for jid in sorted(sample, key=lambda j: (spec[j].submit_s, j)):
        if jid not in seen:
            continue
        now, snapshot = seen[jid]
        raw = eta_at(jid, now, snapshot)
        est = widened(raw, now, widening_at(now))
        raws.append(raw)
        if raw.start is not None and raw.earliest is not None and raw.latest is not None:
            records.append((now, raw.start, raw.earliest, raw.latest, real[jid]))
        submit = spec[jid].submit_s
        ours.append((real[jid], submit, est.start, est.earliest, est.latest))
        evaluated.append(jid)
        b = est.baseline_start
        base.append((real[jid], submit, b, b, b))
    eta_s = time.perf_counter() - eta_wall
    # Churn: the same jobs estimated again at later refreshes while they wait (the
    # replay's states at later arrivals), as the live service re-estimates every cycle.
    states = sorted({id(s): (t, s) for t, s in seen.values()}.values(), key=lambda ts: ts[0])
    state_t = [t for t, _ in states]
    churn_rows = churn(
        [jid for jid in sample if jid in seen][: args.churn_jobs],
        lambda jid: (spec[jid].submit_s, real[jid]),
        states,
        state_t,
        calibrated,
        args.churn_probes,
    )
    if args.rows:
        # diagnosis: the replay's moves (consolidation) around each evaluated job: moves
        # during its wait, a move in the cycle it started in, and the running jobs of its
        # snapshot whose current run began with a move (their elapsed time restarted)
        with open(args.rows, "w", encoding="utf-8") as out:
            out.write(
                "job,kind,gpus,submit_s,real_start_s,eta_s,earliest_s,latest_s,baseline_s,"
                "moves_in_wait,move_at_start,running_moved,running_requeued,running,"
                "raw_earliest_s,raw_latest_s,stated_s\n"
            )
            for jid, (real_start, submit, eta, lo, hi), b, raw in zip(
                evaluated, ours, base, raws, strict=True
            ):
                j = spec[jid]
                snap = seen[jid][1]
                in_wait = bisect_right(move_t, real_start) - bisect_right(move_t, submit)
                at_start = bisect_right(move_t, real_start) - bisect_left(move_t, real_start)
                r_moved = sum((rw.started_s, rw.workload.id) in moved_runs for rw in snap.running)
                r_requeued = sum(rw.workload.id in snap.worked for rw in snap.running)
                row = (jid, j.kind, j.gpus, submit, real_start, eta, lo, hi, b[2], in_wait,
                       at_start, r_moved, r_requeued, len(snap.running), raw.earliest,
                       raw.latest, seen[jid][0])  # fmt: skip
                out.write(",".join(str(v) for v in row) + "\n")
    waits = [r - s for r, s, *_ in ours]
    result = {
        "source": source,
        "window": f"submissions in days [{args.start_day:g}, {args.start_day + args.days:g})",
        "policy": args.policy,
        "arrivals": args.arrivals
        if args.arrivals not in ("expected", "repeat")
        else f"the last {args.arrival_periods} x {args.arrival_window_h:g} h on average"
        + (", scaled by the last hours" if args.arrivals == "expected" else "")
        + f", latest: {args.high_arrivals}",
        "runtimes": "oracle" if args.oracle else "forecast",
        "runtime_spread": args.spread,
        "runtime_recent": args.recent or None,
        "runtime_censored": args.censored,
        "saved_work": args.saved_work,
        "range_calibrated": args.calibrate,
        "seed": args.seed,
        "jobs_in_window": len(jobs),
        "jobs_waited_5min": len(waited),
        "warmup_days": args.warmup_days,
        "jobs_evaluated": len(ours),
        "real_wait_median_s": round(statistics.median(waits), 1) if waits else None,
        "eta": _figures(ours),
        "baseline_reservation": _figures(base),
        "bias_median_s": round(statistics.median(e - r for r, _, e, *_ in ours if e is not None), 1)
        if ours
        else None,
        "replay_s": round(replay_s, 1),
        "eta_ms_per_job": round(1000 * eta_s / max(len(ours), 1), 1),
        "wall_s": round(time.perf_counter() - wall0, 1),
    }
    result["median_relative_error"] = result["eta"]["median_relative_error"]
    result["inside_range"] = result["eta"]["inside_range"]
    result.update(churn_rows)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
