"""`python -m scheduler.core.sim`: exit codes, messages, files written, end to end."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scheduler.core.engine.types import CyclePlan, Placement, Policy, Snapshot, Start
from scheduler.core.sim import replay
from scheduler.core.sim.cli import main
from scheduler.core.sim.model import POLICIES
from tests.support.sim import CLUSTER, TRACE_ROWS, scenario

REPO = Path(__file__).resolve().parents[3]


def fifo_planner(snapshot: Snapshot, policy: Policy, now: float) -> CyclePlan:
    """A stand-in engine for CLI wiring tests: strict arrival order, first fit, no preemption."""
    size = {h.name: h.gpus for h in snapshot.hosts if h.healthy}
    used: dict[str, set[int]] = {h: set() for h in size}
    for r in snapshot.running:
        for p in r.placements:
            used.setdefault(p.host, set()).update(p.gpu_indices)
    pending = sorted(
        (w for ws in snapshot.pending.values() for w in ws), key=lambda w: (w.submit_s, w.id)
    )
    starts = []
    for w in pending:
        free = {h: [i for i in range(size[h]) if i not in used[h]] for h in size}
        if w.gpus <= 8:
            host = next((h for h in size if len(free[h]) >= w.gpus), None)
            if host is None:
                break
            chosen = [(host, free[host][: w.gpus])]
        else:
            empty = [h for h in size if len(free[h]) == size[h]][: w.gpus // 8]
            if len(empty) * 8 < w.gpus:
                break
            chosen = [(h, free[h]) for h in empty]
        for h, idx in chosen:
            used[h].update(idx)
        placements = tuple(Placement(h, tuple(idx)) for h, idx in chosen)
        starts.append(Start(w.id, placements, w.min_runtime_s > 0, "fifo"))
    return CyclePlan(starts=tuple(starts))


def _patch_engine_plan(monkeypatch: pytest.MonkeyPatch, planner: replay.Planner) -> None:
    """Make the CLI's runs plan with `planner` instead of the engine: the CLI calls
    `replay.simulate` through the module, so a wrapper there passes it on (the
    simulator's own functions may be compiled, and a compiled module's calls cannot be
    patched)."""
    simulate = replay.simulate

    def with_planner(*args: Any, **kwargs: Any) -> Any:
        return simulate(*args, **kwargs, planner=planner)

    monkeypatch.setattr(replay, "simulate", with_planner)


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_engine_plan(monkeypatch, fifo_planner)


# ------------------------------------------------------------------ bad input -> exit 2


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"rows": [*TRACE_ROWS, "j5,zz,,0,1,60,60,0,0,debug"]},
            ["trace.csv", "line 6", "project", "'zz'"],
        ),
        ({"rows": [*TRACE_ROWS, "j6,a1,,0,0,60,60,0,0,debug"]}, ["line 6", "gpus"]),
        ({"rows": [*TRACE_ROWS, "j1,a1,,0,1,60,60,0,0,debug"]}, ["line 6", "job_id", "duplicate"]),
        ({"rows": [*TRACE_ROWS, "j7,a1,,x,1,60,60,0,0,debug"]}, ["line 6", "submit_s"]),
        ({"rows": [*TRACE_ROWS, "j8,a1,,0,12,60,60,0,0,debug"]}, ["line 6", "gpus", "multiple"]),
        (
            {"tree": {"name": "org", "children": [{"name": "a1", "weight": -1}]}},
            ["tree.json", "org/a1", "weight"],
        ),
        (
            {"cluster": {**CLUSTER, "events": [{"at_s": 5, "host": "h7", "health": "unhealthy"}]}},
            ["cluster.json", "events[0]", "host", "'h7'"],
        ),
    ],
)
def test_bad_input_exits_2_naming_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kwargs: dict, expected: list[str]
) -> None:
    rc = main(scenario(tmp_path, **kwargs))
    err = capsys.readouterr().err
    assert rc == 2
    for word in expected:
        assert word in err
    assert not (tmp_path / "report.json").exists()


def test_bad_json_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = scenario(tmp_path)
    (tmp_path / "tree.json").write_text("{nope")
    assert main(args) == 2
    assert "tree.json: line 1, column 2: invalid JSON" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--cycle-s", "-1"], ["--lookback-days", "abc"],
                                  ["--policy", "lottery"]])  # fmt: skip
def test_bad_flags_exit_2(tmp_path: Path, flag: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*scenario(tmp_path), *flag])
    assert exc.value.code == 2


def test_module_entry_point_exit_code(tmp_path: Path) -> None:
    args = scenario(tmp_path, rows=["j1,a1,,0,1,60,-60,0,0,debug"])
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler.core.sim", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "line 2: field 'min_runtime_s'" in proc.stderr


# ------------------------------------------------------------------ runs (stand-in engine)


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_run_writes_report_jobs_and_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_engine: None
) -> None:
    args = scenario(tmp_path) + [
        "--policy", "fifo",
        "--jobs-out", str(tmp_path / "jobs.csv"),
        "--intervals-out", str(tmp_path / "intervals.csv"),
    ]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr()
    assert "fifo" in out.out and "occupancy" in out.out  # the table
    assert "fifo" in out.err  # the progress bar
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["jobs"] == {"submitted": 4, "completed": 4, "terminated": 0,
                           "pending_at_end": 0, "running_at_end": 0}  # fmt: skip
    jobs = {r["job_id"]: r for r in read_csv(tmp_path / "jobs.csv")}
    assert set(jobs) == {"j1", "j2", "j3", "j4"}
    # FIFO on 2 hosts: j1 and j2 fill both hosts; j3 (4 GPUs) waits for j2 at 1800 s
    assert float(jobs["j3"]["wait_total_s"]) == pytest.approx(1800 - 60)
    ivs = read_csv(tmp_path / "intervals.csv")
    assert len(ivs) == 4
    busy = sum(int(r["gpus"]) * (float(r["end_s"]) - float(r["start_s"])) for r in ivs)
    span = max(float(r["end_s"]) for r in ivs) - min(float(r["start_s"]) for r in ivs)
    assert rep["occupancy"] == pytest.approx(busy / (16 * span))
    assert {r["hosts"] for r in ivs if r["job_id"] == "j4"} == {"h000;h001"}


def test_policy_all_maps_each_policy_and_writes_per_policy_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_engine: None
) -> None:
    args = scenario(tmp_path) + [
        "--policy", "all", "--quiet",
        "--jobs-out", str(tmp_path / "jobs.csv"),
        "--intervals-out", str(tmp_path / "iv.csv"),
    ]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr()
    assert out.err == ""  # --quiet: no bar
    table = out.out.splitlines()  # the comparison table, one column per policy
    assert all(p in table[0] for p in POLICIES) and "debug wait p90" in out.out
    rep = json.loads((tmp_path / "report.json").read_text())
    assert list(rep) == list(POLICIES)
    for p in POLICIES:
        assert (tmp_path / f"jobs.{p}.csv").exists() and (tmp_path / f"iv.{p}.csv").exists()
        assert rep[p]["jobs"]["submitted"] == 4


def test_until_days_cuts_the_run(tmp_path: Path, fake_engine: None) -> None:
    args = scenario(tmp_path) + ["--policy", "fifo", "--quiet", "--until-days", str(1000 / 86400)]
    assert main(args) == 0
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["jobs"]["running_at_end"] == 2 and rep["jobs"]["pending_at_end"] == 2


def _overload_rules(policies: list[Policy]) -> set[tuple[float, bool, bool]]:
    """The short-job reserve's overload rule of each policy planned with."""
    return {
        (p.short_reserve_take_after_s, p.short_reserve_room_now, p.short_reserve_fewest_gpus)
        for p in policies
    }


def test_short_reserve_flags_reach_the_engines_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policies: list[Policy] = []

    def recording_planner(snapshot: Snapshot, policy: Policy, now: float) -> CyclePlan:
        policies.append(policy)
        return fifo_planner(snapshot, policy, now)

    _patch_engine_plan(monkeypatch, recording_planner)
    flags = ["--quiet", "--short-reserve-hosts", "1", "--short-job-max-min", "10"]
    assert main(scenario(tmp_path) + flags) == 0
    assert policies and {
        (p.short_reserve_hosts, p.short_job_max_s, p.short_reserve_auto) for p in policies
    } == {(1, 600.0, True)}
    # the adaptive reserve is on by default; one flag turns it off
    policies.clear()
    assert main(scenario(tmp_path) + ["--quiet", "--short-reserve-auto", "off"]) == 0
    assert policies and {(p.short_reserve_hosts, p.short_reserve_auto) for p in policies} == {
        (0, False)
    }
    # the overload rule is on by default (15 s, room now, fewest GPUs); three flags give
    # the earlier one (the budget alone)
    assert _overload_rules(policies) == {(15.0, True, True)}
    policies.clear()
    earlier = ["--short-reserve-take-after-s", "inf", "--short-reserve-room-now", "off"]
    earlier += ["--short-reserve-fewest-gpus", "off"]
    assert main(scenario(tmp_path) + ["--quiet", *earlier]) == 0
    assert _overload_rules(policies) == {(math.inf, False, False)}


@pytest.mark.parametrize(
    "flag",
    [
        ["--short-reserve-hosts", "-1"],
        ["--short-job-max-min", "0"],
        ["--short-reserve-auto", "1"],
        ["--short-reserve-take-after-s", "-1"],
        ["--short-reserve-take-after-s", "nan"],
        ["--short-reserve-room-now", "yes"],
    ],
)
def test_bad_short_reserve_flags_exit_2(tmp_path: Path, flag: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*scenario(tmp_path), *flag])
    assert exc.value.code == 2


def test_warmup_days_adds_the_figures_without_the_first_days(
    tmp_path: Path, fake_engine: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """fifo on two hosts: j1 and j2 start at 0, j3 (submitted at 60 s) at 1,800 s, j4 (at
    120 s) at 3,600 s. After a 1,000 s warm-up no wait began in the window; the busy
    GPU-time in [1000, 7200] is 8 x 2600 + 8 x 800 + 4 x 600 + 16 x 3600 = 87,200."""
    args = scenario(tmp_path) + ["--policy", "fifo", "--quiet", "--warmup-days", str(1000 / 86400)]
    assert main(args) == 0
    rep = json.loads((tmp_path / "report.json").read_text())
    after = rep["after_warmup"]
    assert after["start_s"] == pytest.approx(1000) and after["end_s"] == 7200
    assert (
        rep["wait_per_start_s"]["all"]["count"] == 4
        and after["wait_per_start_s"]["all"]["count"] == 0
    )
    assert after["occupancy"] == pytest.approx(87200 / (16 * 6200))
    assert "after 0.0115741 d: occupancy" in capsys.readouterr().out


# ------------------------------------------------------------------ generate and fairshare


def test_generate_then_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "--scenario", "zero-weight", "--out-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.split()
    assert [Path(p).name for p in printed] == ["cluster.json", "tree.json", "trace.csv"]
    from scheduler.core.sim.io import load_cluster, load_trace, load_tree

    tree = load_tree(tmp_path / "tree.json")
    assert load_trace(tmp_path / "trace.csv", tree, load_cluster(tmp_path / "cluster.json"))


def test_generate_unknown_scenario_exits_2(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--scenario", "nope", "--out-dir", str(tmp_path)])
    assert exc.value.code == 2


def test_fairshare_prints_every_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = {
        "name": "org",
        "children": [
            {"name": "A", "weight": 50, "children": [
                {"name": "A1", "weight": 70, "usage": 100},
                {"name": "A2", "weight": 30, "usage": 0},
            ]},
            {"name": "B", "weight": 50, "children": [{"name": "B1", "weight": 1, "usage": 300}]},
        ],
    }  # fmt: skip
    (tmp_path / "t.json").write_text(json.dumps(tree))
    assert main(["fairshare", "--tree", str(tmp_path / "t.json")]) == 0
    text = capsys.readouterr().out
    nodes: dict[str, dict] = {}

    def collect(obj: object) -> None:  # node records, whatever the nesting
        if isinstance(obj, dict):
            for k, v in obj.items():
                if isinstance(v, dict) and "level_fs" in v:
                    nodes[k.rsplit("/", 1)[-1]] = v
                collect(v)

    collect(json.loads(text))  # valid JSON (an infinite level_fs must not break it)
    assert set(nodes) >= {"A", "B", "A1", "A2", "B1"}
    for rec in nodes.values():
        assert {"norm_shares", "effective_usage", "level_fs", "fairshare"} <= set(rec)
    assert nodes["A1"]["norm_shares"] == pytest.approx(0.7)
    assert nodes["A"]["effective_usage"] == pytest.approx(0.25)
    assert nodes["B"]["level_fs"] == pytest.approx(0.5 / 0.75)
    # A2 (no usage) ranks first among the leaves: the highest Slurm fair-share factor
    assert nodes["A2"]["fairshare"] == max(nodes[x]["fairshare"] for x in ("A1", "A2", "B1"))


def test_fairshare_bad_usage_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = {"name": "org", "children": [{"name": "A", "weight": 1, "usage": -3}]}
    (tmp_path / "t.json").write_text(json.dumps(tree))
    # validation happens before the engine is imported
    assert main(["fairshare", "--tree", str(tmp_path / "t.json")]) == 2
    assert "node 'org/A': field 'usage'" in capsys.readouterr().err


def test_end_to_end_with_the_real_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["generate", "--scenario", "host-failures", "--out-dir", str(tmp_path)]) == 0
    args = [
        "run", "--policy", "all", "--quiet",
        "--tree", str(tmp_path / "tree.json"),
        "--cluster", str(tmp_path / "cluster.json"),
        "--trace", str(tmp_path / "trace.csv"),
        "--out", str(tmp_path / "report.json"),
        "--intervals-out", str(tmp_path / "iv.csv"),
        "--until-days", "2",
    ]  # fmt: skip
    assert main(args) == 0
    rep = json.loads((tmp_path / "report.json").read_text())
    assert list(rep) == list(POLICIES)
    fs = rep["fairshare"]
    assert 0 < fs["occupancy"] <= 1.0 + 1e-9
    assert fs["drain"]["drains"] >= 6
    assert fs["jobs"]["submitted"] > 0
    assert abs(fs["allocated_share"] + fs["unallocated_share"] - 1) < 1e-9
