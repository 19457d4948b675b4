"""Seeded scenario generator: cluster.json, tree.json and trace.csv (pure Python).

Scenarios (``SCENARIOS``):

- ``ai2-month``: 64 hosts x 8 GPUs, 30 days, org -> 4 programs -> 14 projects with
  uneven weights, calibrated to the production conditions SPEC 1.2/1.6 reports (demand
  2-3x capacity, ~98% occupancy, unallocated work filling what budgets leave idle):
  allocated work of 0.85x capacity in all, with each team busier or quieter than its
  share (0.4-1.6x) and two to four pushes of one to four days at 2-4x its usual rate, so
  budgets and demand do not match hour by hour; on top, unallocated sweeps (min runtime
  0): 2x the cluster's GPUs queued in the first hour, then a stream of 0.065x capacity,
  which keeps a standing backlog. The three constants were tuned so that a fairshare
  replay has queued + running GPUs at ~3x the cluster on average (``demand_x_capacity``
  in the report); a static trace cannot follow the queue the way real users do.
  Job kinds: debug jobs (1-8 GPUs, <= 15 min, min runtime = duration), large training
  (16-128 GPUs on whole hosts, hours to days, resumable, min runtime 1-4 h), small
  training, interactive sessions (1-2 GPUs, hours, min runtime up to 8 h, not
  resumable), sweeps; and host failures. Inside a project, debug (priority 2-3) and
  interactive (2) work outranks training (0-1): ordering a project's own jobs is what
  its priorities are for.
- ``ai2-saturated``: the same tree and kinds as a stress test: every project's allocated
  demand stays above its entitled share all month (2.05x capacity of allocated work,
  sweeps ~18% of submitted GPU-time), so unallocated work only fills fragments.
  Replay either with ``--until-days 30``: the backlog outlives the month by design.
- ``debug-burst``: 8 hosts, 2 days; a saturating training backlog, then 300 debug jobs
  within one hour.
- ``large-gang``: 16 hosts, 3 days; small long jobs that fragment the cluster and large
  gang jobs of 64 and 128 GPUs that must not starve.
- ``host-failures``: 16 hosts, 2 days; mixed load and seven failures (one host fails
  twice, one never comes back).
- ``zero-weight``: 8 hosts, 2 days; a project with weight 0 that submits unallocated
  work (and three allocated jobs, which it may not run).

Same scenario and seed -> byte-identical files.
"""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.core.engine.budget_tree import budget_node, entitled_shares, parse_tree_document
from scheduler.core.sim.io import TRACE_COLUMNS

__all__ = ["SCENARIOS", "SCENARIO_NOTES", "Scenario", "TraceRow", "generate", "write_scenario"]

HOUR = 3600
DAY = 86400


@dataclass(slots=True)
class TraceRow:
    job_id: str
    project: str
    user: str
    submit_s: int
    gpus: int
    duration_s: int
    min_runtime_s: int
    resumable: bool
    priority: int
    kind: str

    def as_row(self) -> list[str | int]:
        return [
            self.job_id,
            self.project,
            self.user,
            self.submit_s,
            self.gpus,
            self.duration_s,
            self.min_runtime_s,
            1 if self.resumable else 0,
            self.priority,
            self.kind,
        ]


@dataclass(slots=True)
class Scenario:
    name: str
    cluster: dict[str, Any]
    tree: dict[str, Any]
    jobs: list[TraceRow]
    days: float
    notes: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- helpers


def _leaf_shares(tree: dict[str, Any]) -> dict[str, float]:
    """Each project's entitled share in a tree document (`budget_tree`'s arithmetic)."""
    return entitled_shares(budget_node(parse_tree_document(tree)))


class _Clock:
    """Draws submit times in [t0, t1) with a daytime peak and optional burst windows."""

    def __init__(
        self,
        rng: random.Random,
        t0: float,
        t1: float,
        diurnal: float = 0.0,
        bursts: list[tuple[float, float, float]] | None = None,
    ) -> None:
        self.rng, self.t0, self.t1, self.diurnal = rng, t0, t1, diurnal
        self.bursts = bursts or []  # (start, end, rate multiplier)
        self.peak = (1 + diurnal) * max([1.0] + [m for _, _, m in self.bursts])

    def rate(self, t: float) -> float:
        hour = (t % DAY) / HOUR
        r = 1.0 + self.diurnal * math.sin(math.pi * (hour - 6) / 12) if 6 <= hour < 18 else 1.0
        for b0, b1, mult in self.bursts:
            if b0 <= t < b1:
                r *= mult
        return r

    def draw(self) -> int:
        while True:  # thinning
            t = self.rng.uniform(self.t0, self.t1)
            if self.rng.random() * self.peak <= self.rate(t):
                return int(t)


def _lognormal(rng: random.Random, median: float, sigma: float, lo: float, hi: float) -> int:
    return int(min(hi, max(lo, rng.lognormvariate(math.log(median), sigma))))


def _debug(rng: random.Random) -> tuple[int, int, int, bool, str]:
    gpus = rng.choices([1, 2, 4, 8], [0.4, 0.25, 0.2, 0.15])[0]
    dur = rng.randint(60, 900)
    return gpus, dur, dur, False, "debug"


def _interactive(rng: random.Random) -> tuple[int, int, int, bool, str]:
    gpus = rng.choices([1, 2], [0.6, 0.4])[0]
    dur = rng.randint(1 * HOUR, 10 * HOUR)
    return gpus, dur, min(dur, 8 * HOUR), False, "interactive"


def _small_training(rng: random.Random) -> tuple[int, int, int, bool, str]:
    gpus = rng.choices([1, 2, 4, 8], [0.15, 0.2, 0.3, 0.35])[0]
    dur = _lognormal(rng, 5 * HOUR, 0.8, 1 * HOUR, 48 * HOUR)
    return gpus, dur, min(dur, HOUR), True, "training"


def _large_training(max_gpus: int) -> Callable[[random.Random], tuple[int, int, int, bool, str]]:
    sizes = [s for s in (16, 32, 64, 128) if s <= max_gpus] or [16]
    weights = [0.4, 0.3, 0.2, 0.1][: len(sizes)]

    def make(rng: random.Random) -> tuple[int, int, int, bool, str]:
        gpus = rng.choices(sizes, weights)[0]
        dur = _lognormal(rng, 10 * HOUR, 0.9, 2 * HOUR, 4 * DAY)
        min_rt = min(dur, rng.choice([1, 2, 3, 4]) * HOUR)
        return gpus, dur, min_rt, True, "training"

    return make


def _unallocated(rng: random.Random) -> tuple[int, int, int, bool, str]:
    gpus = rng.choices([1, 2, 4, 8, 16, 32], [0.15, 0.15, 0.25, 0.3, 0.1, 0.05])[0]
    dur = _lognormal(rng, 4 * HOUR, 0.8, 20 * 60, 24 * HOUR)
    return gpus, dur, 0, True, "sweep"


Maker = Callable[[random.Random], tuple[int, int, int, bool, str]]


def _fill(
    rng: random.Random,
    rows: list[TraceRow],
    project: str,
    budget_gpu_s: float,
    make: Maker,
    clock: _Clock,
    users: int = 4,
    priorities: tuple[int, ...] = (0,),
    paced: bool = False,
) -> None:
    """Add jobs from ``make`` until their GPU-time reaches ``budget_gpu_s``.

    Submit times come from ``clock``; with ``paced`` they follow the cumulative GPU-time
    instead (a team that submits its work steadily over [clock.t0, clock.t1)): each job
    is submitted at the start of its share of the span, so the work submitted by any time
    t is at least ``budget * (t - t0) / span`` and the team never runs dry.
    """
    spent = 0.0
    new: list[TraceRow] = []
    while spent < budget_gpu_s:
        gpus, dur, min_rt, resumable, kind = make(rng)
        new.append(
            TraceRow(
                job_id="",
                project=project,
                user=f"{project}-u{rng.randrange(users)}",
                submit_s=0 if paced else clock.draw(),
                gpus=gpus,
                duration_s=dur,
                min_runtime_s=min_rt,
                resumable=resumable,
                priority=rng.choice(priorities),
                kind=kind,
            )
        )
        spent += gpus * dur
    if paced and new:
        span = clock.t1 - clock.t0
        before = 0.0
        for r in new:
            work = r.gpus * r.duration_s
            r.submit_s = int(clock.t0 + span * before / spent)  # at the start of its slot
            before += work
    rows.extend(new)


def _finish(rows: list[TraceRow], prefix: str) -> list[TraceRow]:
    """Sort by submit time (stable on generation order) and number the jobs."""
    rows.sort(key=lambda r: r.submit_s)
    for i, r in enumerate(rows):
        r.job_id = f"{prefix}-{i:06d}"
    return rows


def _cluster(name: str, hosts: int, events: list[tuple[int, int, str]]) -> dict[str, Any]:
    width = max(3, len(str(hosts - 1)))
    return {
        "name": name,
        "host_count": hosts,
        "gpus_per_host": 8,
        "events": [
            {"at_s": at, "host": f"h{h:0{width}d}", "health": health}
            for at, h, health in sorted(events)
        ],
    }


def _failures(
    rng: random.Random, hosts: int, count: int, t1: float, permanent: int = 0
) -> list[tuple[int, int, str]]:
    events: list[tuple[int, int, str]] = []
    picked = rng.sample(range(hosts), count)
    for i, h in enumerate(picked):
        down = rng.randint(int(0.05 * t1), int(0.85 * t1))
        events.append((down, h, "unhealthy"))
        if i >= permanent:
            events.append((down + rng.randint(2 * HOUR, 24 * HOUR), h, "healthy"))
    return events


# --------------------------------------------------------------------------- scenarios


def _ai2_tree() -> dict[str, Any]:
    programs = [
        ("pretraining", 40, [("olmo-core", 50), ("olmo-mid", 30), ("data-mix", 20)]),
        ("post-training", 30, [("tulu-sft", 40), ("tulu-rl", 35), ("safety", 15), ("evals", 10)]),
        ("multimodal", 20, [("molmo", 60), ("vision-enc", 25), ("speech", 15)]),
        ("science", 10, [("climate", 40), ("bio", 35), ("semantic", 15), ("infra", 10)]),
    ]
    return {
        "name": "ai2",
        "managers": ["ceo"],
        "children": [
            {
                "name": prog,
                "weight": pw,
                "managers": [f"lead-{prog}"],
                "children": [
                    {"name": proj, "weight": w, "members": [f"{proj}-u{i}" for i in range(4)]}
                    for proj, w in projs
                ],
            }
            for prog, pw, projs in programs
        ],
    }


def _ai2_allocated(
    prng: random.Random,
    rows: list[TraceRow],
    proj: str,
    budget: float,
    entitled_gpus: float,
    steady: _Clock,
    clock: _Clock,
    paced: bool,
) -> None:
    """One team's allocated work: large and small training, interactive sessions, debug."""
    large_max = max(16, 8 * math.ceil(2 * entitled_gpus / 8))
    _fill(
        prng,
        rows,
        proj,
        0.70 * budget,
        _large_training(large_max),
        steady,
        priorities=(0, 0, 1),
        paced=paced,
    )
    _fill(prng, rows, proj, 0.24 * budget, _small_training, steady, priorities=(0, 1), paced=paced)
    _fill(prng, rows, proj, 0.054 * budget, _interactive, clock, priorities=(2,))
    _fill(prng, rows, proj, 0.006 * budget, _debug, clock, priorities=(2, 3))


_AI2_ALLOCATED_X = 0.85  # allocated work submitted, x capacity
_AI2_OPENING_X = 2.0  # sweeps queued in the first hour, x the cluster's GPUs (5 h each)
_AI2_SWEEPS_X = 0.065  # sweeps submitted over the month, x capacity


def organisation_rows(seed: int, shares: dict[str, float], gpus: int, t1: float) -> list[TraceRow]:
    """An organisation's month-like load over [0, t1) on `gpus` GPUs (SPEC 1.2, 1.6):
    teams whose allocated demand swings above and below their share (quiet weeks,
    deadline pushes: team pushes, long and small training, interactive sessions, debug
    bursts) and a standing backlog of unallocated sweeps that fills what budgets leave
    idle. Rows are unsorted and unnumbered (`_finish` does both). The demo organisation's
    load (`scheduler.services.demo`) is this generator on its own tree."""
    capacity_gpu_s = gpus * t1
    rows: list[TraceRow] = []
    # how busy each team is relative to its share, normalised to _AI2_ALLOCATED_X in all
    intensity = {p: random.Random(f"{seed}:{p}:busy").uniform(0.4, 1.6) for p in shares}
    norm = sum(shares[p] * intensity[p] for p in shares) or 1.0
    for proj, share in shares.items():
        prng = random.Random(f"{seed}:{proj}")
        budget = _AI2_ALLOCATED_X * capacity_gpu_s * share * intensity[proj] / norm
        # two to four pushes of one to four days at 2-4x the team's usual rate
        pushes = []
        for _ in range(prng.randint(2, 4)):
            b0 = prng.uniform(0, max(t1 - DAY, 0.0))
            pushes.append((b0, b0 + prng.uniform(DAY, 4 * DAY), prng.uniform(2, 4)))
        clock = _Clock(prng, 0, t1, diurnal=0.6, bursts=pushes)
        steady = _Clock(prng, 0, t1, diurnal=0.2, bursts=pushes)
        if share > 0:
            _ai2_allocated(prng, rows, proj, budget, share * gpus, steady, clock, paced=False)
        # unallocated sweeps: an opening backlog, then a steady stream (a zero-weight
        # project runs only these, sized like an equal share of the organisation)
        sweep_share = share or 1.0 / len(shares)
        opening = _Clock(prng, 0, HOUR)
        _fill(
            prng, rows, proj, _AI2_OPENING_X * gpus * 5 * HOUR * sweep_share, _unallocated, opening
        )
        _fill(
            prng,
            rows,
            proj,
            _AI2_SWEEPS_X * capacity_gpu_s * sweep_share,
            _unallocated,
            _Clock(prng, 0, t1),
        )
    return rows


def _ai2_month(seed: int) -> Scenario:
    """The production conditions SPEC 1.2/1.6 report (see `organisation_rows`)."""
    rng = random.Random(seed)
    hosts, days = 64, 30
    t1 = days * DAY
    tree = _ai2_tree()
    rows = organisation_rows(seed, _leaf_shares(tree), hosts * 8, t1)
    events = _failures(rng, hosts, 6, t1)
    return Scenario(
        "ai2-month",
        _cluster("ai2-h100", hosts, events),
        tree,
        _finish(rows, "ai2"),
        days,
        notes="replay with --until-days 30",
    )


def _ai2_saturated(seed: int) -> Scenario:
    """A stress variant: every team's allocated demand stays above its share all month
    (2.05x capacity of allocated work), so unallocated work only fills fragments."""
    rng = random.Random(seed)
    hosts, days = 64, 30
    t1 = days * DAY
    capacity_gpu_s = hosts * 8 * t1
    tree = _ai2_tree()
    shares = _leaf_shares(tree)
    rows: list[TraceRow] = []
    demand = 2.5 * capacity_gpu_s
    allocated = 0.82 * demand
    for proj, share in shares.items():
        prng = random.Random(f"{seed}:{proj}")
        # every project asks for 1.6x .. 2.4x its entitled share of the cluster (of the
        # 2.05x allocated demand on average), so it keeps submitting enough work
        budget = allocated * share * prng.uniform(0.8, 1.2)
        n_bursts = prng.randint(1, 3)
        bursts = []
        for _ in range(n_bursts):
            b0 = prng.uniform(0, t1 - DAY)
            bursts.append((b0, b0 + prng.uniform(4 * HOUR, DAY), prng.uniform(3, 6)))
        clock = _Clock(prng, 0, t1, diurnal=0.6, bursts=bursts)
        steady = _Clock(prng, 0, t1, diurnal=0.2)
        _ai2_allocated(prng, rows, proj, budget, share * hosts * 8, steady, clock, paced=True)
        # unallocated sweeps: ~18% of all submitted GPU-time
        _fill(prng, rows, proj, (demand - allocated) * share, _unallocated, steady, paced=True)
    events = _failures(rng, hosts, 6, t1)
    return Scenario(
        "ai2-saturated",
        _cluster("ai2-h100", hosts, events),
        tree,
        _finish(rows, "ai2"),
        days,
        notes="replay with --until-days 30",
    )


def _small_tree(name: str, projects: list[tuple[str, float]]) -> dict[str, Any]:
    return {
        "name": name,
        "children": [
            {
                "name": "prog-a",
                "weight": 1,
                "children": [
                    {"name": p, "weight": w} for p, w in projects[: (len(projects) + 1) // 2]
                ],
            },
            {
                "name": "prog-b",
                "weight": 1,
                "children": [
                    {"name": p, "weight": w} for p, w in projects[(len(projects) + 1) // 2 :]
                ],
            },
        ],
    }


def _debug_burst(seed: int) -> Scenario:
    rng = random.Random(seed)
    hosts, days = 8, 2
    t1 = days * DAY
    tree = _small_tree("burst", [("alpha", 60), ("beta", 40), ("gamma", 50), ("delta", 50)])
    rows: list[TraceRow] = []
    cap = hosts * 8 * t1
    for proj, share in _leaf_shares(tree).items():
        clock = _Clock(rng, 0, t1 - 6 * HOUR)
        _fill(rng, rows, proj, 2.0 * cap * share, _large_training(32), clock)
        _fill(rng, rows, proj, 0.3 * cap * share, _unallocated, clock)
    burst = _Clock(rng, DAY, DAY + HOUR)
    for i in range(300):
        gpus, dur, min_rt, res, kind = _debug(rng)
        proj = ("alpha", "beta", "gamma", "delta")[i % 4]
        rows.append(
            TraceRow("", proj, f"{proj}-dev", burst.draw(), gpus, dur, min_rt, res, 0, kind)
        )
    return Scenario("debug-burst", _cluster("burst", hosts, []), tree, _finish(rows, "db"), days)


def _large_gang(seed: int) -> Scenario:
    rng = random.Random(seed)
    hosts, days = 16, 3
    t1 = days * DAY
    tree = _small_tree("gang", [("small-a", 1), ("small-b", 1), ("big", 1)])
    rows: list[TraceRow] = []
    cap = hosts * 8 * t1
    clock = _Clock(rng, 0, t1 - 12 * HOUR)

    def fragmenting(r: random.Random) -> tuple[int, int, int, bool, str]:
        gpus = r.choice([1, 2, 3, 4]) if r.random() < 0.8 else 8
        gpus = 4 if gpus == 3 else gpus
        dur = r.randint(2 * HOUR, 10 * HOUR)
        return gpus, dur, min(dur, HOUR), True, "training"

    def gang(r: random.Random) -> tuple[int, int, int, bool, str]:
        gpus = r.choice([64, 128])
        dur = r.randint(4 * HOUR, 12 * HOUR)
        return gpus, dur, min(dur, 2 * HOUR), True, "training"

    _fill(rng, rows, "small-a", 0.8 * cap, fragmenting, clock)
    _fill(rng, rows, "small-b", 0.8 * cap, fragmenting, clock)
    _fill(rng, rows, "big", 0.6 * cap, gang, clock)
    return Scenario("large-gang", _cluster("gang", hosts, []), tree, _finish(rows, "lg"), days)


def _host_failures(seed: int) -> Scenario:
    rng = random.Random(seed)
    hosts, days = 16, 2
    t1 = days * DAY
    tree = _small_tree("failures", [("train", 2), ("serve", 1), ("eval", 1)])
    rows: list[TraceRow] = []
    cap = hosts * 8 * t1
    clock = _Clock(rng, 0, t1 - 6 * HOUR, diurnal=0.5)
    for proj, share in _leaf_shares(tree).items():
        _fill(rng, rows, proj, 1.2 * cap * share, _large_training(32), clock)
        _fill(rng, rows, proj, 0.4 * cap * share, _small_training, clock)
        _fill(rng, rows, proj, 0.1 * cap * share, _interactive, clock)
        _fill(rng, rows, proj, 0.01 * cap * share, _debug, clock)
        _fill(rng, rows, proj, 0.3 * cap * share, _unallocated, clock)
    events = _failures(rng, hosts, 6, t1, permanent=1)
    # one host fails twice
    again = next(e for e in events if e[2] == "healthy")
    events += [
        (again[0] + 4 * HOUR, again[1], "unhealthy"),
        (again[0] + 9 * HOUR, again[1], "healthy"),
    ]
    return Scenario(
        "host-failures", _cluster("failures", hosts, events), tree, _finish(rows, "hf"), days
    )


def _zero_weight(seed: int) -> Scenario:
    rng = random.Random(seed)
    hosts, days = 8, 2
    t1 = days * DAY
    tree = _small_tree("zero", [("funded-a", 1), ("funded-b", 1), ("unfunded", 0)])
    rows: list[TraceRow] = []
    cap = hosts * 8 * t1
    clock = _Clock(rng, 0, t1 - 6 * HOUR)
    for proj in ("funded-a", "funded-b"):
        _fill(rng, rows, proj, 0.9 * cap, _small_training, clock)
        _fill(rng, rows, proj, 0.01 * cap, _debug, clock)
    _fill(rng, rows, "unfunded", 0.6 * cap, _unallocated, clock)
    for _ in range(3):
        gpus, dur, min_rt, res, kind = _small_training(rng)
        rows.append(
            TraceRow("", "unfunded", "unfunded-u0", clock.draw(), gpus, dur, min_rt, res, 0, kind)
        )
    return Scenario("zero-weight", _cluster("zero", hosts, []), tree, _finish(rows, "zw"), days)


SCENARIOS: dict[str, Callable[[int], Scenario]] = {
    "ai2-month": _ai2_month,
    "ai2-saturated": _ai2_saturated,
    "debug-burst": _debug_burst,
    "large-gang": _large_gang,
    "host-failures": _host_failures,
    "zero-weight": _zero_weight,
}


SCENARIO_NOTES: dict[str, str] = {
    "ai2-month": "a standing backlog of sweeps outlives the month: replay with --until-days 30",
    "ai2-saturated": "allocated demand is ~2x capacity, so the backlog outlives the month: "
    "replay with --until-days 30",
}


def generate(name: str, seed: int = 0) -> Scenario:
    """Build a named scenario in memory."""
    try:
        factory = SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; choose from {sorted(SCENARIOS)}") from None
    return factory(seed)


def write_scenario(name: str, out_dir: str | Path, seed: int = 0) -> list[Path]:
    """Write cluster.json, tree.json and trace.csv for a scenario; return their paths."""
    sc = generate(name, seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cluster_p, tree_p, trace_p = out / "cluster.json", out / "tree.json", out / "trace.csv"
    cluster_p.write_text(json.dumps(sc.cluster, indent=1) + "\n", encoding="utf-8")
    tree_p.write_text(json.dumps(sc.tree, indent=1) + "\n", encoding="utf-8")
    with open(trace_p, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(TRACE_COLUMNS)
        w.writerows(r.as_row() for r in sc.jobs)
    return [cluster_p, tree_p, trace_p]
