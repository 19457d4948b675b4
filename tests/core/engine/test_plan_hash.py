"""Guard rail: the engine's decisions over a whole simulator run, hashed cycle by cycle.

A refactor or a speed-up of the engine must not change what it decides. This test
replays a small generated workload that exercises every kind of decision (starts on
free GPUs, fair-share, unallocated and priority preemptions, reservations for
whole-host jobs, drains of unhealthy hosts and hosts ready for repair, multi-host
placement, the min-runtime cap, checkpoints, a zero-weight project, mixed host sizes)
and hashes every cycle's full plan, explained queue included, for each policy mode.

The digests were recorded on the engine before it was split into modules (commit
17f9400). A digest detects a change, not its correctness, so each mode's recording has a
readable summary committed next to it, `plan_hash/<mode>.txt`: the digest it goes with,
the decision counts, and one line per cycle that decided something (starts, stops with
their rule, reservations when they change, hosts ready for repair). A change that is
*meant* to change decisions re-records both, in the same commit, saying why in its
message; the summary's diff then shows in review which decisions changed:

    .venv/bin/python -m tests.core.engine.test_plan_hash record

(rewrites `EXPECTED` below and the summaries). `test_each_digest_has_its_summary`
fails when a digest changed but its summary did not, or the summary no longer matches
the decisions of the run.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import random
import re
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from scheduler.core.engine import BudgetNode, CyclePlan, EngineState, Policy, Snapshot, plan
from scheduler.core.sim.model import ClusterSpec, HealthEvent, HostSpec, SimConfig, TraceJob
from scheduler.core.sim.replay import simulate

H = 3600.0
SUMMARIES = Path(__file__).with_name("plan_hash")
DAYS = 1.5
JOBS = 800

# Recorded before the split (see the module docstring); the fair-share ones again when
# the adaptive short-job reserve became the default (issue 24), and once more when it
# gained room under overload (issue 24: on its hosts a short job may take allocated work
# past its protection that runs there alone, of projects that had their share; every
# waiting short job is looked at; it sizes itself by the room its hosts have; it gives
# way to the first job in line only without room outside it soon), and when the share
# floor became the default (issue 24: a project under its share keeps its oldest jobs
# from projects served more than 5 points better), and when the reserve's overload rule
# became the default (issue 24: a short job that waited 15 s may take under-served work
# past its protection on the reserve beyond the budget; room is what a short job can take
# now; the block whose under-served victims hold the fewest GPUs first).
# `fairshare-reserve-off` (`short_reserve_auto=False`, `share_floor=False`) is the
# fair-share recording from before both: the old behaviour, two settings away, decides
# exactly as it did. The three fair-share digests were recorded again when a start reason
# named one GPU as `h0106[6]` instead of `h0106[6-6]` (reason text only: every summary,
# each decision, stayed as it was), and when a fair-share stop named the job it gives way
# to as "with job 950 running" instead of "with 950 running", and a reservation the job
# it holds hosts for as "for job 1396" instead of "for 1396" (reason text only). The
# three fair-share digests and the priority one again (reason text only: every summary,
# each decision, stayed as it was) when the first-ranked project's waiting jobs stopped
# quoting its standing as their cause ("waiting for GPUs: no project ranks above project
# a1 (fair-share rank 1 of 12)": nothing of a better-ranked project is ahead of them), and
# an opportunistic job's stop named the job it gives way to as "job 950" instead of "950".
# The three fair-share digests again when a waiting project's reason named the deciding
# level ("; behind project b2 at the deciding level: prog-a used more relative to its share
# than prog-b (level FS 1.01 vs 1.02)"; reason text only: with that clause cut out of the
# queue reasons, every plan hashed to the digest recorded before, and every summary, each
# decision, stayed as it was).
EXPECTED = {
    "fairshare": "b76898f203800e16399b81dbb3cdf84f3660198a71807cc3fdd8a059a58aa4bf",
    "fairshare-decay": "3c2e11c32702cf44ea6fda55d1f8b28384d25fc0e698e379500b4ba8f071869d",
    "fairshare-reserve-off": "20ca412a0dfefd54be47d926895d22d69efb29797c22d471a80b6d299e3873d6",
    "fifo": "02a1800f2466346389ed6a03fcdcf0789f2c6788357b044f523be81ff1f796ec",
    "priority": "62e14b3917dfe85cb47c86100a3b9e95a55fb47b7a16a6b15219467bd9404364",
    "static": "ec45611c64973d98d2d3358e7a48025eff6711cf1af84e7d8fd0e35ead26908b",
}


def _tree() -> BudgetNode:
    return BudgetNode(
        "org",
        children=(
            BudgetNode(
                "prog-a",
                3,
                (BudgetNode("a1", 5), BudgetNode("a2", 3), BudgetNode("a3", 1)),
            ),
            BudgetNode(
                "prog-b",
                2,
                (
                    BudgetNode("b1", 1),
                    BudgetNode("sub-b", 1, (BudgetNode("b2", 2), BudgetNode("b3", 1))),
                ),
            ),
            BudgetNode("c1", 1),
            BudgetNode("zero", 0),
        ),
    )


PROJECTS = ["a1", "a2", "a3", "b1", "b2", "b3", "c1", "zero"]
POPULARITY = [5, 3, 1, 2, 3, 1, 3, 1]


def _workload(seed: int = 7) -> tuple[ClusterSpec, list[TraceJob]]:
    """10 hosts of 8 GPUs and 2 of 4, 800 jobs over 1.5 days at about 2x demand."""
    rng = random.Random(seed)
    hosts = [HostSpec(f"h{i:02d}", 8) for i in range(10)] + [
        HostSpec("s0", 4),
        HostSpec("s1", 4),
    ]
    events = [
        HealthEvent(5 * H, "h03", False),
        HealthEvent(11 * H, "h03", True),
        HealthEvent(16 * H, "h07", False),
        HealthEvent(17 * H, "s1", False),
        HealthEvent(26 * H, "h07", True),
        HealthEvent(30 * H, "s1", True),
    ]
    jobs: list[TraceJob] = []
    horizon = DAYS * 24 * H
    for i in range(JOBS):
        t = float(int(rng.uniform(0.0, horizon))) if i >= 120 else float(rng.randint(0, 600))
        project = rng.choices(PROJECTS, POPULARITY)[0]
        r = rng.random()
        if r < 0.28:  # debug: short, protected for its whole run
            d = float(rng.randint(60, 900))
            gpus, min_rt, resumable, kind = rng.choice([1, 1, 2, 4]), d, False, "debug"
        elif r < 0.70:  # training, resumable, some asking more than the 4 h cap
            d = float(int(min(3 * 24 * H, max(600.0, rng.lognormvariate(9.0, 1.0)))))
            gpus = rng.choice([1, 2, 2, 3, 4, 8, 8])
            min_rt, resumable, kind = rng.choice([0.5 * H, H, 2 * H, 6 * H]), True, "training"
        elif r < 0.78:  # whole-host jobs: 2-4 hosts of 8 GPUs
            d = float(int(rng.uniform(2 * H, 12 * H)))
            gpus, min_rt, resumable, kind = rng.choice([16, 16, 24, 32]), H, True, "large"
        elif r < 0.83:  # interactive: protected, not resumable
            d = float(int(rng.uniform(H, 6 * H)))
            gpus, min_rt, resumable, kind = rng.choice([1, 2]), 3 * H, False, "interactive"
        else:  # unallocated sweeps
            d = float(int(rng.uniform(600, 8 * H)))
            gpus, min_rt, resumable, kind = rng.choice([1, 2, 4, 8]), 0.0, True, "unallocated"
        jobs.append(
            TraceJob(
                job_id=f"j{i:05d}",
                project=project,
                user="",
                submit_s=t,
                gpus=gpus,
                duration_s=d,
                min_runtime_s=min_rt,
                resumable=resumable,
                priority=rng.choice([0, 0, 0, 1, 2]),
                kind=kind,
            )
        )
    jobs.sort(key=lambda j: j.submit_s)
    return ClusterSpec("guard", tuple(hosts), tuple(events)), jobs


def _plan_text(p: CyclePlan) -> str:
    """A canonical text of everything a plan decides (independent of class names)."""
    parts = []
    for s in p.starts:
        pls = ";".join(f"{x.host}:{','.join(map(str, x.gpu_indices))}" for x in s.placements)
        parts.append(f"S|{s.workload_id}|{pls}|{int(s.allocated)}|{s.reason}")
    for s in p.stops:
        parts.append(
            f"X|{s.workload_id}|{s.reason_code.value}|{int(s.requeue)}|{s.for_workload_id}|{s.reason}"
        )
    for r in p.reservations:
        parts.append(f"R|{r.workload_id}|{','.join(r.hosts)}|{r.reason}")
    for h in p.hosts_ready:
        parts.append(f"H|{h.host}|{h.reason}")
    for q in p.queue:
        parts.append(
            f"Q|{q.workload_id}|{q.project}|{q.position}|{q.project_rank}|{q.metric!r}|{q.reason}"
        )
    for name, factor in p.project_order:
        parts.append(f"O|{name}|{factor!r}")
    return "\n".join(parts)


class _Recorder:
    """A planner for `simulate` that calls the real engine with the queue explained and
    folds every plan into one digest."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.cycles = 0
        self.counts: Counter[str] = Counter()
        self.state = EngineState()  # one per run, as the simulator keeps it
        self.quiet_state = EngineState()
        self.lines: list[str] = []  # the readable summary: one line per deciding cycle
        self.held: list[str] = []  # the reservations of the last cycle, as summarised
        self.ready: list[str] = []  # the hosts ready for repair in the last cycle

    def __call__(self, snapshot: Snapshot, policy: Policy, now: float) -> CyclePlan:
        out = plan(snapshot, replace(policy, explain_queue=True), now, self.state)
        if self.cycles % 5 == 0:
            # Without the explained queue (as the simulator runs) the decisions are the
            # same (checked on every 5th cycle, with a state that sees only those).
            quiet = plan(snapshot, replace(policy, explain_queue=False), now, self.quiet_state)
            assert (quiet.starts, quiet.stops, quiet.reservations, quiet.hosts_ready) == (
                out.starts,
                out.stops,
                out.reservations,
                out.hosts_ready,
            ), now
        self.cycles += 1
        self.digest.update(f"@{now!r}\n{_plan_text(out)}\n".encode())
        self.counts["starts"] += len(out.starts)
        self.counts["multi_host_starts"] += sum(len(s.placements) > 1 for s in out.starts)
        self.counts["reservations"] += len(out.reservations)
        self.counts["hosts_ready"] += len(out.hosts_ready)
        for s in out.stops:
            self.counts[f"stop_{s.reason_code.value}"] += 1
        self._summarise(out, now)
        return out

    def _summarise(self, out: CyclePlan, now: float) -> None:
        """One line for a cycle that decided something: `+job@placements` a start (`~`
        unallocated), `-job rule>beneficiary` a stop (`=` requeued), `R job@hosts` the
        reservations and `ready host` the hosts ready for repair, when they changed
        since the last cycle."""
        parts = []
        for x in out.starts:
            pls = ",".join(f"{p.host}[{_ranges(p.gpu_indices)}]" for p in x.placements)
            parts.append(f"{'+' if x.allocated else '~'}{x.workload_id}@{pls}")
        for x in out.stops:
            beneficiary = f">{x.for_workload_id}" if x.for_workload_id else ""
            mark = "=" if x.requeue else "-"
            parts.append(f"{mark}{x.workload_id} {x.reason_code.value}{beneficiary}")
        held = [f"R {r.workload_id}@{','.join(sorted(r.hosts))}" for r in out.reservations]
        if held != self.held:
            parts += held or ["R none"]
            self.held = held
        ready = [f"ready {h.host}" for h in out.hosts_ready]
        if ready != self.ready:
            parts += ready or ["ready none"]
            self.ready = ready
        if parts:
            self.lines.append(f"{now / H:8.3f}h  " + "  ".join(parts))

    def summary(self) -> str:
        """The summary file's text (see the module docstring)."""
        counts = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        legend = (
            "# one line per cycle that decided something, at hours since the start:\n"
            "# +job@host[gpus] start, ~job@... unallocated start, -job rule>for stop,\n"
            "# =job ... stop and requeue; when changed: R job@hosts reservations, ready host"
        )
        body = "\n".join(self.lines)
        return (
            f"digest {self.digest.hexdigest()}\ncycles {self.cycles}\n{counts}\n{legend}\n{body}\n"
        )


def _ranges(indices: tuple[int, ...]) -> str:
    """GPU indices as ranges: (0, 1, 2, 5) -> '0-2,5'."""
    out: list[str] = []
    start = prev = None
    for i in (*indices, None):
        if start is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = i
    return ",".join(out)


@functools.cache
def _run(name: str) -> _Recorder:
    cluster, jobs = _workload()
    mode = name.split("-")[0]
    config = SimConfig(
        policy=mode,
        max_min_runtime_s=4 * H,
        lookback_s=2 * 86400.0,
        half_life_s=0.5 * 86400.0 if name.endswith("decay") else None,
        until_s=DAYS * 24 * H,
        seed=3,
        short_reserve_auto=not name.endswith("reserve-off"),
        share_floor=not name.endswith("reserve-off"),
        consolidate=not name.endswith("reserve-off"),
    )
    rec = _Recorder()
    simulate(cluster, _tree(), jobs, config, planner=rec)
    return rec


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_plans_over_a_whole_run_match_the_recording(name: str) -> None:
    rec = _run(name)
    c = rec.counts
    # The workload reaches what the hash is meant to guard.
    assert c["starts"] > 500 and c["stop_drain"] > 0 and c["hosts_ready"] > 0
    if name.startswith("fairshare"):
        # with the reserve, short jobs that preempted by fair share mostly start there
        assert c["stop_fair_share"] + c["stop_short_reserve"] > 100
        assert c["stop_fair_share"] > 50 and c["stop_unallocated"] > 100
        assert c["stop_priority"] > 20 and c["reservations"] > 100
        # 8 with decay, the reserve and the share floor; 7 with all three off since held
        # hosts admit allocated work (`Policy.reservation_admit_s`)
        assert c["multi_host_starts"] >= 7
    if name == "priority":
        assert c["stop_priority"] > 20
    assert rec.digest.hexdigest() == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_digest_has_its_summary(name: str) -> None:
    """A re-recorded digest comes with its re-recorded summary (the reviewable part),
    and the summary is what the run decides."""
    path = SUMMARIES / f"{name}.txt"
    assert path.exists(), f"no summary {path}: run `python -m {__spec__.name} record`"
    recorded = path.read_text()
    digest = re.match(r"digest ([0-9a-f]{64})\n", recorded)
    assert digest is not None, f"{path} does not start with its digest line"
    assert digest.group(1) == EXPECTED[name], (
        f"the digest of {name} changed but {path} did not: re-record both with "
        f"`python -m {__spec__.name} record` and review the summary's diff"
    )
    summary = _run(name).summary()
    if summary != recorded:
        diff = difflib.unified_diff(
            recorded.splitlines(), summary.splitlines(), "recorded", "this run", lineterm="", n=0
        )
        pytest.fail(f"{path} differs from this run's decisions:\n" + "\n".join(list(diff)[:40]))


def record() -> None:
    """Re-record every mode's digest (in this file's EXPECTED) and summary."""
    SUMMARIES.mkdir(exist_ok=True)
    source = Path(__file__).read_text()
    for name in sorted(EXPECTED):
        rec = _run(name)
        digest = rec.digest.hexdigest()
        (SUMMARIES / f"{name}.txt").write_text(rec.summary())
        source = re.sub(
            rf'(    "{re.escape(name)}": )"[0-9a-f]{{64}}"', rf'\g<1>"{digest}"', source, count=1
        )
        print(name, digest, "changed" if digest != EXPECTED[name] else "unchanged")
    Path(__file__).write_text(source)


if __name__ == "__main__" and sys.argv[1:] == ["record"]:
    record()
