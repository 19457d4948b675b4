"""Scenario loading (field-path errors) and the command line (exit codes 0/1/2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.core.planner.cli import main
from scheduler.core.planner.model import ScenarioError, parse_scenario, scenario_to_dict
from tests.core.planner.conftest import legal_grid, plan_doc, small_raw

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["batch"][1].update(gpus=3), "batch[1].gpus: must be a power of two, got 3"),
        (lambda r: r["batch"][0].update(gpus=16), "batch[0].gpus: must be <= the cluster's 8"),
        (lambda r: r["batch"][0].pop("duration"), "batch[0].duration: is required"),
        (lambda r: r["batch"][0].update(kind="gaming"), "batch[0].kind: must be one of"),
        (lambda r: r["batch"][0].update(arrival=4), "batch[0].arrival: must be < steps (4)"),
        (lambda r: r["batch"][0].update(priority=0), "batch[0].priority: must be > 0"),
        (lambda r: r["batch"][1].update(id="a"), "batch[1].id: duplicate id 'a'"),
        (lambda r: r["realtime"][0].update(demand=[1, 2]), "realtime[0].demand: must have one"),
        (lambda r: r["realtime"][0]["demand"].__setitem__(2, -1), "realtime[0].demand[2]:"),
        (lambda r: r["realtime"][0].update(max_switch="2"), "realtime[0].max_switch: must be an"),
        (lambda r: r.update(gpus_per_host=3), "gpus_per_host: must be a power of two"),
        (lambda r: r.update(decay=1.5), "decay: must be in (0, 1]"),
        (lambda r: r.update(steps=True), "steps: must be an integer"),
        (lambda r: r.update(colour="red"), "colour: unknown field"),
    ],
)
def test_bad_fields_name_their_path(edit, message):
    raw = small_raw()
    edit(raw)
    with pytest.raises(ScenarioError) as err:
        parse_scenario(raw)
    assert str(err.value).startswith(message)


def test_round_trip():
    sc = parse_scenario(small_raw())
    assert parse_scenario(scenario_to_dict(sc)) == sc


def _write(tmp_path: Path, name: str, doc: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_cli_bad_scenario_exits_2_with_the_path(tmp_path):
    raw = small_raw()
    raw["batch"].extend(
        {"id": f"x{i}", "kind": "training", "gpus": 3 if i == 1 else 1, "duration": 1,
         "priority": 1} for i in range(2)
    )  # fmt: skip
    scenario = _write(tmp_path, "bad.json", raw)
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.core.planner", "run", "--scenario", str(scenario),
         "--mode", "fast", "--out", str(tmp_path / "plan.json")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "batch[3].gpus: must be a power of two, got 3" in done.stderr
    assert not (tmp_path / "plan.json").exists()


def test_cli_not_json_exits_2(tmp_path, capsys):
    path = tmp_path / "broken.json"
    path.write_text("{nope")
    assert main(["run", "--scenario", str(path), "--mode", "fifo", "--out", "x.json"]) == 2
    assert "not valid JSON" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["fifo", "fast", "full"])
def test_cli_run_then_validate(tmp_path, mode, capsys):
    scenario = _write(tmp_path, "tiny.json", small_raw())
    out = tmp_path / f"{mode}.json"
    args = ["run", "--scenario", str(scenario), "--mode", mode, "--out", str(out)]
    assert main([*args, "--time-limit", "1"]) == 0
    plan = json.loads(out.read_text())
    assert plan["mode"] == mode
    assert set(plan["metrics"]) == {
        "utilization", "value", "objective", "completed", "unmet_realtime", "runtime_ms",
    }  # fmt: skip
    assert len(plan["grid"]) == 4 and all(len(row) == 8 for row in plan["grid"])
    assert main(["validate", "--scenario", str(scenario), "--plan", str(out)]) == 0
    assert "ok:" in capsys.readouterr().out


def test_cli_validate_lists_violations_and_exits_1(tmp_path, capsys):
    scenario = _write(tmp_path, "tiny.json", small_raw())
    sc = parse_scenario(small_raw())
    grid = legal_grid()
    grid[0][4] = "ghost"
    grid[0][6] = "r"
    plan = _write(tmp_path, "plan.json", plan_doc(sc, grid))
    assert main(["validate", "--scenario", str(scenario), "--plan", str(plan)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("unknown-id:") for line in out)
    assert any(line.startswith("realtime-demand:") for line in out)
