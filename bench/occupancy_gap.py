"""Benchmark: where a replay's occupancy stands against the ideal-schedule reference
(issue 24's row "occupancy of bound, ai2-month and Philly >= 99%"), split by time.

`occupancy_bound` comes from `scheduler.core.sim.ideal`: fluid processor sharing of the
trace's work, no shapes. Per seed, one replay with the simulator's defaults, sampled
every `--step` seconds (a GPU counts on a healthy host only), prints one JSON line:

- ``occupancy_of_bound`` (as `bench/outcomes.py`);
- ``saturated_share``: the share of the time the reference uses every healthy GPU, and
  ``occupancy_saturated``: the replay's occupancy over that time;
- ``gain_unsaturated`` / ``loss_saturated``: busy GPU-time of the replay minus the
  reference's, in the reference's unsaturated and saturated time, as shares of the
  month's capacity (their sum over the reference's occupancy is occupancy_of_bound - 1;
  a positive gain means the reference is no upper bound there: processor sharing runs
  out of outstanding work that a queue keeps);
- from day `--from-day` on: ``idle_partial`` (mean idle GPUs on hosts partly in use),
  ``idle_repacked`` (what would stay idle if the running jobs of fewer than 8 GPUs
  were repacked onto as few hosts as possible, for free), ``idle_repacked_contracts``
  (the same moving only jobs that may move: unallocated, or allocated, resumable and
  past their min runtime), and ``drain_idle`` (idle GPU-time on a host in the stretch
  before a whole-host job starts there, the host partly used all along, as a share of
  the capacity from that day on).

Usage: python bench/occupancy_gap.py [--scenario ai2-month] [--seeds 9] [--step 300]
       [--from-day 6] [--data DIR]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.outcomes import ROOT, _inputs, _seeds, run_figures  # noqa: E402
from scheduler.core.sim.ideal import ideal_schedule  # noqa: E402
from scheduler.core.sim.model import ClusterSpec, RunInterval, SimConfig, SimResult  # noqa: E402
from scheduler.core.sim.replay import simulate  # noqa: E402

DAY = 86400.0
Windows = dict[str, list[tuple[float, float]]]


def unhealthy_windows(cluster: ClusterSpec) -> Windows:
    """Per host, the [down, up) windows in which it is unhealthy."""
    out: Windows = defaultdict(list)
    down: dict[str, float] = {}
    for ev in sorted(cluster.events, key=lambda e: e.at_s):
        if not ev.healthy and ev.host not in down:
            down[ev.host] = ev.at_s
        elif ev.healthy and ev.host in down:
            out[ev.host].append((down.pop(ev.host), ev.at_s))
    for h, at in down.items():
        out[h].append((at, math.inf))
    return out


def is_healthy(bad: Windows, host: str, t: float) -> bool:
    return not any(a <= t < b for a, b in bad.get(host, ()))


def step_at(steps: Sequence[tuple[float, float]], times: Sequence[float], t: float) -> float:
    """The value of a step function [(t, value from t on)] at `t` (0 before it starts)."""
    i = bisect.bisect_right(times, t) - 1
    return float(steps[i][1]) if i >= 0 else 0.0


def running_at(
    intervals: Sequence[RunInterval], times: Sequence[float]
) -> Iterator[list[RunInterval]]:
    """For each sample time (sorted), the intervals running then."""
    ordered = sorted(intervals, key=lambda v: v.start_s)
    active: list[RunInterval] = []
    i = 0
    for t in times:
        while i < len(ordered) and ordered[i].start_s <= t:
            active.append(ordered[i])
            i += 1
        active = [v for v in active if v.end_s > t]
        yield active


def repacked_idle(small: int, pinned: Counter[str], movable: int, per_host: int = 8) -> int:
    """Idle GPUs on partly used hosts once the `movable` GPUs of small jobs fill the holes
    beside the `pinned` ones (GPUs divisible: a lower bound for that running set)."""
    holes = sum(per_host - g for g in pinned.values())
    if movable <= holes:
        return holes - movable
    return (-(movable - holes)) % per_host


def time_split(result: SimResult, step: float) -> dict[str, Any]:
    """The reference's saturated share of time, the replay's occupancy then, and the
    replay's busy GPU-time minus the reference's in both parts (shares of capacity)."""
    cluster, t1 = result.cluster, result.end_s
    bad = unhealthy_windows(cluster)
    per_host = {h.name: h.gpus for h in cluster.hosts}
    jobs = [j for j in result.jobs if not j.rejected and j.submit_s <= t1]
    ideal = ideal_schedule(
        ((j.submit_s, j.gpus, j.duration_s or 0.0) for j in jobs), result.capacity
    )
    ideal_t = [s[0] for s in ideal.busy]
    times = [result.start_s + step * (k + 0.5) for k in range(int((t1 - result.start_s) // step))]
    cap_all = sat_cap = sat_busy = gain = loss = 0.0
    sat_n = 0
    for t, active in zip(times, running_at(result.intervals, times), strict=True):
        cap = sum(g for h, g in per_host.items() if is_healthy(bad, h, t))
        busy = sum(v.gpus / len(v.hosts) for v in active for h in v.hosts if is_healthy(bad, h, t))
        ref = min(step_at(ideal.busy, ideal_t, t), cap)
        cap_all += cap
        if ref >= cap - 1e-6:
            sat_n += 1
            sat_cap += cap
            sat_busy += busy
            loss += busy - ref
        else:
            gain += busy - ref
    return {
        "saturated_share": sat_n / len(times),
        "occupancy_saturated": sat_busy / sat_cap if sat_cap else None,
        "gain_unsaturated": gain / cap_all,
        "loss_saturated": loss / cap_all,
    }


def fragmentation(
    result: SimResult, min_runtime: dict[str, tuple[float, bool]], step: float, from_s: float
) -> dict[str, float]:
    """Mean idle GPUs on partly used hosts from `from_s` on, observed and repacked
    (`min_runtime`: job id -> (min runtime, resumable))."""
    cluster, t1 = result.cluster, result.end_s
    bad = unhealthy_windows(cluster)
    per_host = {h.name: h.gpus for h in cluster.hosts}
    times = [from_s + step * (k + 0.5) for k in range(int((t1 - from_s) // step))]
    observed = free = contracts = 0.0
    for t, active in zip(times, running_at(result.intervals, times), strict=True):
        used: Counter[str] = Counter()
        pinned: Counter[str] = Counter()
        small = movable = 0
        for v in active:
            for h in v.hosts:
                used[h] += v.gpus // len(v.hosts)
            if len(v.hosts) > 1 or v.gpus >= 8 or not is_healthy(bad, v.hosts[0], t):
                continue
            small += v.gpus
            mrt, resumable = min_runtime[v.job_id]
            if v.allocated and (not resumable or t < v.start_s + mrt):
                pinned[v.hosts[0]] += v.gpus
            else:
                movable += v.gpus
        observed += sum(
            g - used[h] for h, g in per_host.items() if is_healthy(bad, h, t) and 0 < used[h] < g
        )
        free += (-small) % 8
        contracts += repacked_idle(small, pinned, movable)
    n = len(times) or 1
    return {
        "idle_partial": observed / n,
        "idle_repacked": free / n,
        "idle_repacked_contracts": contracts / n,
    }


def drain_idle(result: SimResult, from_s: float) -> float:
    """Idle GPU-time on each host of a whole-host start in the stretch before it in which
    the host was healthy and partly used (from `from_s` on), as a share of the capacity
    from then."""
    bad = unhealthy_windows(result.cluster)
    per_host = {h.name: h.gpus for h in result.cluster.hosts}
    deltas: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for v in result.intervals:
        for h in v.hosts:
            g = v.gpus / len(v.hosts)
            deltas[h] += [(v.start_s, g), (v.end_s, -g)]
    steps: dict[str, list[tuple[float, float]]] = {}
    for h, d in deltas.items():
        used = 0.0
        s: list[tuple[float, float]] = []
        for t, g in sorted(d):
            used += g
            if s and s[-1][0] == t:
                s[-1] = (t, used)
            else:
                s.append((t, used))
        steps[h] = s
    total = 0.0
    for v in result.intervals:
        if v.start_s < from_s or v.gpus < 8:
            continue
        for h in v.hosts:
            s = steps[h]
            i = bisect.bisect_left([x[0] for x in s], v.start_s) - 1
            t_end = v.start_s
            while (
                i >= 0
                and 0 < s[i][1] < per_host[h] - 1e-9
                and not any(a < t_end and s[i][0] < b for a, b in bad.get(h, ()))
            ):
                total += (per_host[h] - s[i][1]) * (t_end - max(s[i][0], from_s))
                if s[i][0] <= from_s:
                    break
                t_end = s[i][0]
                i -= 1
    return total / (sum(per_host.values()) * (result.end_s - from_s))


def run_seed(scenario: str, seed: int, data: Path, step: float, from_day: float) -> dict[str, Any]:
    cluster, tree, jobs, until = _inputs(scenario, seed, data)
    result = simulate(cluster, tree, jobs, SimConfig(until_s=until, seed=seed))
    contracts = {j.job_id: (j.min_runtime_s, j.resumable) for j in jobs}
    figs = run_figures(result, tree)
    return {
        "run": scenario,
        "seed": seed,
        "occupancy": figs["occupancy"],
        "occupancy_bound": figs["occupancy_bound"],
        "occupancy_of_bound": figs["occupancy_of_bound"],
        **time_split(result, step),
        **fragmentation(result, contracts, step, from_day * DAY),
        "drain_idle": drain_idle(result, from_day * DAY),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="ai2-month")
    ap.add_argument("--seeds", default="9")
    ap.add_argument("--step", type=float, default=300.0)
    ap.add_argument("--from-day", type=float, default=6.0)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = ap.parse_args()
    for seed in _seeds(args.seeds):
        row = run_seed(args.scenario, seed, args.data, args.step, args.from_day)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))


if __name__ == "__main__":
    main()
