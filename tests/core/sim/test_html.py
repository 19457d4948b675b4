"""`python -m scheduler.core.sim run ... --html REPORT.html`: one self-contained page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from scheduler.core.sim.cli import main
from scheduler.core.sim.model import POLICIES
from tests.support.sim import scenario


def charts_of(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="charts">(.*?)</script>', page, re.S)
    assert found
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_html_has_every_policy_side_by_side_and_no_network(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main([*scenario(tmp_path), "--policy", "all", "--quiet", "--html", str(out)]) == 0
    page = out.read_text()
    # self-contained: no script (or anything else) loaded from the network
    assert not re.search(r"<script[^>]+src=[\"']?https?://", page)
    assert not re.search(r"<link[^>]+https?://", page)
    assert "Plotly.newPlot" in page and len(page) > 1_000_000  # the bundle is inlined
    for kind in ("occupancy", "delivery", "waits"):
        assert len(re.findall(rf'class="chart {kind}"', page)) == len(POLICIES)
    assert re.findall(r'data-policy="([a-z]+)"', page) == list(POLICIES)


def test_occupancy_parts_sum_to_the_clusters_gpus_per_step(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main([*scenario(tmp_path), "--policy", "fairshare", "--quiet", "--html", str(out)]) == 0
    occ = charts_of(out.read_text())["fairshare"]["occupancy"]
    parts = ("allocated", "unallocated", "idle_blocked", "idle_no_work", "down")
    report = json.loads((tmp_path / "report.json").read_text())
    hours = (report["end_s"] - report["start_s"]) / 3600
    total = sum(sum(occ[p]) for p in parts)
    assert total == pytest.approx(16 * hours)  # 2 hosts x 8 GPUs, every hour accounted
    assert sum(occ["allocated"]) + sum(occ["unallocated"]) > 0


def test_without_html_no_page_is_written(tmp_path: Path) -> None:
    assert main([*scenario(tmp_path), "--policy", "fifo", "--quiet"]) == 0
    assert not list(tmp_path.glob("*.html"))


def test_idle_while_work_waited_counts_allocated_demand_only() -> None:
    """An allocated 4-GPU job runs on an 8-GPU host; an unallocated 8-GPU job waits for
    the whole host. The 4 idle GPUs are "idle, nothing waiting", as the ledger counts
    them (docs/concepts.md: idle while work waited is allocated demand not running)."""
    from scheduler.core.engine.types import BudgetNode
    from scheduler.core.sim.html import _occupancy
    from scheduler.core.sim.model import ClusterSpec, HostSpec, SimConfig, TraceJob
    from scheduler.core.sim.replay import simulate

    jobs = [
        TraceJob("a", "p", "", 0.0, 4, 4 * 3600.0, 3600.0, False, 0, "training"),
        TraceJob("u", "p", "", 10.0, 8, 3600.0, 0.0, False, 0, "training"),
    ]
    result = simulate(
        ClusterSpec("c", (HostSpec("h0", 8),)),
        BudgetNode("org", children=(BudgetNode("p", 1.0),)),
        jobs,
        SimConfig(until_s=2 * 3600.0),
    )
    occ = _occupancy(result)
    assert sum(occ["idle_blocked"]) == pytest.approx(0.0, abs=1e-6)
    assert sum(occ["idle_no_work"]) == pytest.approx(8.0, rel=0.01)  # 4 GPUs x 2 h
