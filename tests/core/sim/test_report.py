"""scheduler.core.sim.report: figures hand-computed on small SimResults built by hand."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ledger.accounting import EndReason, RunInterval
from scheduler.core.engine.types import BudgetNode
from scheduler.core.sim.model import (
    ClusterSpec,
    DrainRecord,
    HealthEvent,
    HostSpec,
    JobOutcome,
    JobState,
    PreemptionRecord,
    SimResult,
)
from scheduler.core.sim.report import (
    DEBUG_CLASS,
    INTERVAL_COLUMNS,
    build_report,
    capacity_steps,
    comparison_table,
    entitled_shares,
    percentile,
    wait_stats,
    write_intervals_csv,
    write_jobs_csv,
)

H = 3600.0
TREE = BudgetNode("org", 1, (BudgetNode("A", 3), BudgetNode("B", 1)))
CLUSTER = ClusterSpec(
    "c",
    (HostSpec("h0", 8), HostSpec("h1", 8)),
    (HealthEvent(H, "h1", False), HealthEvent(2 * H, "h1", True)),
)


def run(job: str, project: str, gpus: int, host: str, s: float, e: float, alloc: bool,
        why: EndReason) -> RunInterval:  # fmt: skip
    return RunInterval(job, project, "training", gpus, (host,), s, e, alloc, why)


def occupancy_result() -> SimResult:
    """Two hosts of 8 GPUs for 3 hours; h1 is unhealthy during hour 1.

    Healthy capacity 16, 8, 16 GPUs -> 40 GPU-h available.
    j1 A 8 GPUs h0 all 3 h (24); j2 B 4 GPUs h1 0-1.5 h, drained (6 busy, 4 on a
    healthy host); j3 B free 4 GPUs h1 hour 0 (4); j4 A 4 GPUs h1 hour 2 (4).
    Busy on healthy hosts = 24 + 4 + 4 + 4 = 36 -> occupancy 0.9.
    """
    intervals = [
        run("j1", "A", 8, "h0", 0, 3 * H, True, EndReason.RUNNING_AT_END),
        run("j2", "B", 4, "h1", 0, 1.5 * H, True, EndReason.DRAINED),
        run("j3", "B", 4, "h1", 0, H, False, EndReason.PREEMPTED),
        run("j4", "A", 4, "h1", 2 * H, 3 * H, True, EndReason.COMPLETED),
    ]
    jobs = [
        JobOutcome("j1", "A", "training", 8, 3600, 0, JobState.RUNNING, None, [0.0]),
        JobOutcome(
            "j2", "B", "training", 4, 3600, 0, JobState.PENDING, None, [0.0], 1, 1.5 * H
        ),  # fmt: skip
        JobOutcome("j3", "B", "sweep", 4, 0, 0, JobState.TERMINATED, H, [0.0], 1),
        JobOutcome("j4", "A", "training", 4, 600, H, JobState.COMPLETED, 3 * H, [H]),
    ]
    return SimResult(
        policy="fairshare",
        cluster=CLUSTER,
        start_s=0.0,
        end_s=3 * H,
        intervals=intervals,
        jobs=jobs,
        preemptions=[
            PreemptionRecord(H, "j3", "B", "unallocated", 0.0),
            PreemptionRecord(1.5 * H, "j2", "B", "drain", 4 * 1800.0),
        ],
        drains=[DrainRecord("h1", H, 1.5 * H)],
        capacity=[(0.0, 16), (H, 8), (2 * H, 16)],
        wall_s=0.25,
    )


def test_entitled_shares_is_product_along_path() -> None:
    tree = BudgetNode(
        "org",
        1,
        (
            BudgetNode("A", 50, (BudgetNode("A1", 70), BudgetNode("A2", 30))),
            BudgetNode("B", 50, (BudgetNode("B1", 1), BudgetNode("Z", 0))),
            BudgetNode("C", 0, (BudgetNode("C1", 1),)),
        ),
    )
    shares = entitled_shares(tree)
    assert list(shares) == ["A1", "A2", "B1", "Z", "C1"]
    assert shares == pytest.approx({"A1": 0.35, "A2": 0.15, "B1": 0.5, "Z": 0.0, "C1": 0.0})


def test_capacity_steps_from_events_match_hand_steps() -> None:
    assert capacity_steps(CLUSTER, 0.0) == [(0.0, 16), (H, 8), (2 * H, 16)]


def test_report_has_every_key_of_the_issue() -> None:
    rep = build_report(occupancy_result(), TREE)
    assert set(rep) == {
        "occupancy", "allocated_share", "unallocated_share", "entitlement", "wait_per_start_s",
        "preemptions", "jobs", "drain", "wall_s", "demand_x_capacity", "occupancy_bound",
        "occupancy_of_bound", "trace_span", "time_to_share", "start_s", "end_s",
        "last_submit_s", "ideal_end_s",
    }  # fmt: skip
    assert set(rep["trace_span"]) == {
        "start_s", "end_s", "occupancy", "occupancy_bound", "occupancy_of_bound",
    }  # fmt: skip
    assert set(rep["time_to_share"]) == {
        "count", "p50", "p90", "max", "worst_project", "open_at_end",
    }  # fmt: skip
    assert set(rep["entitlement"]) == {
        "overall", "worst", "worst_project", "projects_at_95", "projects",
    }  # fmt: skip
    assert {"capped_entitled_gpu_h", "delivered_gpu_h", "ratio", "ratio_hourly"} <= set(
        rep["entitlement"]["projects"]["A"]
    )
    assert set(rep["wait_per_start_s"]) == {"all", "by_kind", "by_class"}
    assert set(rep["wait_per_start_s"]["all"]) == {"count", "mean", "p50", "p90", "p99", "max"}
    assert set(rep["jobs"]) == {
        "submitted", "completed", "terminated", "pending_at_end", "running_at_end",
    }  # fmt: skip
    assert set(rep["drain"]) == {"drains", "median_s", "max_s"}


def test_demand_counts_queued_and_running_gpus_against_available_capacity() -> None:
    # j1 8 GPUs x 3 h + j2 4 x 3 h (still pending at the end) + j3 4 x 1 h + j4 4 x 2 h
    # = 48 GPU-h asked for, over 40 GPU-h available
    rep = build_report(occupancy_result(), TREE)
    assert rep["demand_x_capacity"] == pytest.approx(48 / 40)


def test_occupancy_and_allocated_shares() -> None:
    rep = build_report(occupancy_result(), TREE)
    assert rep["occupancy"] == pytest.approx(36 / 40)
    # all busy GPU-time: 24 + 6 + 4 + 4 = 38, of which 4 free
    assert rep["allocated_share"] == pytest.approx(34 / 38)
    assert rep["unallocated_share"] == pytest.approx(4 / 38)


def test_capacity_is_derived_from_events_when_missing() -> None:
    res = occupancy_result()
    res.capacity = []
    assert build_report(res, TREE)["occupancy"] == pytest.approx(0.9)


def test_entitlement_capped_by_demand_hour_by_hour() -> None:
    """A 75%, B 25%; capacity 16, 8, 16.

    A demand: j1 8 GPUs all run, j4 4 GPUs from 1 h -> 8, 12, 12; share 12, 6, 12
    -> entitled 8, 6, 12 = 26; delivered 8, 8, 12 = 28 -> ratio 28/26 (not capped: the
    delivery ratio of docs/concepts.md, as the dashboards show it).
    B demand: j2 4 GPUs all run (pending at end; j3 is free work) -> 4, 4, 4; share
    4, 2, 4 -> entitled 10; delivered 4, 2, 0 = 6 -> ratio 0.6 (hourly also 0.6).
    Overall = (26 + 6) / 36.
    """
    ent = build_report(occupancy_result(), TREE)["entitlement"]
    a, b = ent["projects"]["A"], ent["projects"]["B"]
    assert a["capped_entitled_gpu_h"] == pytest.approx(26)
    assert a["delivered_gpu_h"] == pytest.approx(28)
    assert a["ratio"] == pytest.approx(28 / 26) and a["ratio_hourly"] == pytest.approx(1.0)
    assert b["capped_entitled_gpu_h"] == pytest.approx(10)
    assert b["delivered_gpu_h"] == pytest.approx(6)
    assert b["ratio"] == pytest.approx(0.6) and b["ratio_hourly"] == pytest.approx(0.6)
    assert ent["overall"] == pytest.approx(32 / 36)
    assert ent["worst"] == pytest.approx(0.6) and ent["worst_project"] == "B"
    assert ent["projects_at_95"] == 1


def test_preemptions_jobs_drain_and_wall() -> None:
    rep = build_report(occupancy_result(), TREE)
    assert rep["preemptions"] == {
        "total": 2,
        "by_reason": {"host_drain": 1, "unallocated_work": 1},  # the rules job events name
    }
    assert rep["jobs"] == {
        "submitted": 4,
        "completed": 1,
        "terminated": 1,
        "pending_at_end": 1,
        "running_at_end": 1,
    }
    assert rep["drain"] == {"drains": 1, "median_s": 1800.0, "max_s": 1800.0}
    assert rep["wall_s"] == 0.25


def waits_result() -> SimResult:
    jobs = [
        # ten samples 0, 10, ..., 90 for kind "training" (one job with two starts)
        JobOutcome("t0", "A", "training", 16, 3600, 0, JobState.COMPLETED, 1, [0.0, 10.0], 1),
        *(
            JobOutcome(f"t{i}", "A", "training", 16, 3600, 0, JobState.COMPLETED, 1, [i * 10.0])
            for i in range(2, 10)
        ),
        # debug class: <= 8 GPUs and 0 < min runtime <= 15 min
        JobOutcome("d1", "B", "debug", 8, 900, 0, JobState.COMPLETED, 1, [30.0]),
        JobOutcome("d2", "B", "debug", 1, 60, 0, JobState.COMPLETED, 1, [90.0]),
        JobOutcome("d3", "B", "debug", 2, 300, 0, JobState.COMPLETED, 1, [10.0]),
        # not debug class: too large, too long, or unallocated
        JobOutcome("x1", "B", "debug", 16, 300, 0, JobState.COMPLETED, 1, [1000.0]),
        JobOutcome("x2", "B", "interactive", 1, 3600, 0, JobState.COMPLETED, 1, [2000.0]),
        JobOutcome("x3", "B", "sweep", 1, 0, 0, JobState.COMPLETED, 1, [3000.0]),
        # still pending: no sample
        JobOutcome("p1", "B", "debug", 1, 60, 0, JobState.PENDING, None, [], 0, 0.0),
    ]
    return SimResult("fifo", CLUSTER, 0.0, H, [], jobs, [], [
        DrainRecord("h0", 0, 300), DrainRecord("h1", 100, 1900), DrainRecord("h0", 50, None),
    ], [(0.0, 16)])  # fmt: skip


def test_percentile_linear_interpolation() -> None:
    vals = [float(10 * i) for i in range(10)]
    assert percentile(vals, 50) == pytest.approx(45)
    assert percentile(vals, 90) == pytest.approx(81)
    assert percentile(vals, 99) == pytest.approx(89.1)
    assert percentile([7.0], 90) == 7.0
    assert wait_stats([])["count"] == 0 and wait_stats([])["p90"] is None


def test_wait_stats_by_kind_and_debug_class() -> None:
    w = build_report(waits_result(), TREE)["wait_per_start_s"]
    tr = w["by_kind"]["training"]
    assert tr == {"count": 10, "mean": 45.0, "p50": 45.0, "p90": pytest.approx(81.0),
                  "p99": pytest.approx(89.1), "max": 90.0}  # fmt: skip
    assert w["by_kind"]["debug"]["count"] == 4  # d1-d3 and x1; p1 has not started
    dbg = w["by_class"][DEBUG_CLASS]
    assert dbg["count"] == 3
    assert dbg["p50"] == 30.0 and dbg["max"] == 90.0
    assert dbg["p90"] == pytest.approx(30 + 0.8 * 60)
    assert w["all"]["count"] == 16 and w["all"]["max"] == 3000.0
    assert set(w["by_kind"]) == {"training", "debug", "interactive", "sweep"}


def test_drain_median_over_finished_drains() -> None:
    d = build_report(waits_result(), TREE)["drain"]
    assert d == {"drains": 3, "median_s": pytest.approx(1050.0), "max_s": 1800.0}


def test_empty_result_gives_none_not_errors() -> None:
    res = SimResult("static", CLUSTER, 0.0, 0.0, [], [], [], [], [(0.0, 16)])
    rep = build_report(res, TREE)
    assert rep["occupancy"] is None and rep["entitlement"]["overall"] is None
    assert rep["drain"] == {"drains": 0, "median_s": None, "max_s": None}
    assert "static" in comparison_table({"static": rep})


def test_intervals_csv_lets_anyone_recompute_occupancy(tmp_path: Path) -> None:
    res = occupancy_result()
    path = tmp_path / "intervals.csv"
    write_intervals_csv(res, path)
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == INTERVAL_COLUMNS
    assert len(rows) == 4
    assert {r["end_reason"] for r in rows} == {"running_at_end", "drained", "preempted",
                                               "completed"}  # fmt: skip
    # recompute: busy GPU-time on healthy hosts (h1 down during [1h, 2h)) / capacity
    down = {"h1": [(H, 2 * H)]}
    busy = 0.0
    for r in rows:
        s, e, g, hosts = float(r["start_s"]), float(r["end_s"]), int(r["gpus"]), r["hosts"]
        busy += g * (e - s)
        for h in hosts.split(";"):
            for a, b in down.get(h, []):
                busy -= g / len(hosts.split(";")) * max(0.0, min(e, b) - max(s, a))
    assert busy / (40 * H) == pytest.approx(build_report(res, TREE)["occupancy"])
    alloc = sum(int(r["gpus"]) * (float(r["end_s"]) - float(r["start_s"]))
                for r in rows if r["allocated"] == "1")  # fmt: skip
    assert alloc / (38 * H) == pytest.approx(34 / 38)


def test_multi_host_interval_hosts_joined(tmp_path: Path) -> None:
    res = occupancy_result()
    res.intervals = [RunInterval("g", "A", "training", 16, ("h0", "h1"), 0, 10, True,
                                 EndReason.COMPLETED)]  # fmt: skip
    path = tmp_path / "i.csv"
    write_intervals_csv(res, path)
    assert path.read_text().splitlines()[1] == "g,A,training,16,h0;h1,0,10,1,completed"


def test_jobs_csv_one_row_per_job(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    write_jobs_csv(waits_result(), path)
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 16
    t0 = rows[0]
    assert (t0["job_id"], t0["state"], t0["waits_s"], t0["wait_total_s"], t0["starts"]) == (
        "t0", "completed", "0;10", "10", "2",
    )  # fmt: skip
    assert t0["preemptions"] == "1"
    assert rows[-1]["end_s"] == "" and rows[-1]["state"] == "pending"


def test_comparison_table_lists_policies_and_figures() -> None:
    a = build_report(occupancy_result(), TREE)
    b = build_report(waits_result(), TREE)
    table = comparison_table({"fairshare": a, "fifo": b})
    lines = table.splitlines()
    assert "fairshare" in lines[0] and "fifo" in lines[0]
    assert len({len(x) for x in lines}) == 1  # fixed width
    text = "\n".join(lines)
    for label in ("occupancy", "entitlement overall", "entitlement worst", "projects at >= 95%",
                  "wait p50", "wait p90", "debug wait p90", "preemptions"):  # fmt: skip
        assert label in text
    assert "90.0%" in text  # fairshare occupancy
    assert "60.0% (B)" in text
    assert "1/2" in text  # projects at 95%


def test_jobs_submitted_after_the_cut_off_are_not_counted() -> None:
    res = occupancy_result()
    res.jobs.append(JobOutcome("late", "A", "training", 8, 3600, 5 * H, JobState.PENDING))
    rep = build_report(res, TREE)
    assert rep["jobs"]["submitted"] == 4 and rep["jobs"]["pending_at_end"] == 1
    assert rep["entitlement"]["projects"]["A"]["capped_entitled_gpu_h"] == pytest.approx(26)
