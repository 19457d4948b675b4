"""scheduler.core.sim.io: strict readers; every bad input names the file and the line/field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.core.engine.types import BudgetNode
from scheduler.core.sim.io import (
    MAX_ERRORS,
    InputError,
    leaf_names,
    load_cluster,
    load_trace,
    load_tree,
    load_tree_with_usage,
)

HEADER = "job_id,project,user,submit_s,gpus,duration_s,min_runtime_s,resumable,priority,kind"
GOOD_ROW = "j1,a1,ann,0,8,3600,600,1,0,training"

TREE = {
    "name": "org",
    "managers": ["ceo"],
    "children": [
        {
            "name": "prog-a",
            "weight": 50,
            "children": [
                {"name": "a1", "weight": 70, "members": ["ann"], "usage": 100},
                {"name": "a2", "weight": 30},
            ],
        },
        {"name": "prog-b", "weight": 50, "children": [{"name": "b1", "weight": 1}]},
    ],
}


def write(tmp_path: Path, name: str, content: str | dict | list) -> Path:
    p = tmp_path / name
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


# ------------------------------------------------------------------ tree


def test_load_tree_reads_weights_and_ignores_extra_keys(tmp_path: Path) -> None:
    tree, usage = load_tree_with_usage(write(tmp_path, "t.json", TREE))
    assert tree == BudgetNode(
        "org",
        1.0,
        (
            BudgetNode("prog-a", 50.0, (BudgetNode("a1", 70.0), BudgetNode("a2", 30.0))),
            BudgetNode("prog-b", 50.0, (BudgetNode("b1", 1.0),)),
        ),
    )
    assert usage == {"a1": 100.0}
    assert leaf_names(tree) == ["a1", "a2", "b1"]


def test_shared_philly_tree_loads() -> None:
    tree = load_tree("/work/shared/data/philly-tree.json")
    assert len(leaf_names(tree)) == 11


def bad_tree(mutate) -> dict:  # type: ignore[no-untyped-def]
    t = json.loads(json.dumps(TREE))
    mutate(t)
    return t


def test_same_project_name_in_two_programs_is_keyed_by_path(tmp_path: Path) -> None:
    tree_doc = json.loads(json.dumps(TREE))
    tree_doc["children"][1]["children"].append({"name": "a2", "weight": 2, "usage": 7})
    tree, usage = load_tree_with_usage(write(tmp_path, "tree.json", tree_doc))
    assert leaf_names(tree) == ["a1", "prog-a/a2", "b1", "prog-b/a2"]
    assert usage == {"a1": 100.0, "prog-b/a2": 7.0}
    trace = write(
        tmp_path,
        "trace.csv",
        HEADER
        + "\nj1,prog-a/a2,u,0,1,60,60,0,0,debug\nj2,prog-b/a2,u,0,1,60,60,0,0,debug"
        + "\nj3,prog-a/a1,u,0,1,60,60,0,0,debug\nj4,a1,u,0,1,60,60,0,0,debug\n",
    )
    assert [j.project for j in load_trace(trace, tree)] == ["prog-a/a2", "prog-b/a2", "a1", "a1"]
    bad = write(tmp_path, "bad.csv", HEADER + "\nj1,a2,u,0,1,60,60,0,0,debug\n")
    with pytest.raises(InputError, match="unknown project 'a2'"):
        load_trace(bad, tree)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda t: t["children"][0]["children"][0].update(weight=-1), ["org/prog-a/a1", "weight"]),
        (lambda t: t["children"][0]["children"][1].update(weight="x"), ["org/prog-a/a2", "weight"]),
        (lambda t: t["children"][1].pop("weight"), ["org/prog-b", "weight", "missing"]),
        (
            lambda t: t["children"][1]["children"].append({"name": "b1", "weight": 2}),
            ["org/prog-b", "unique among siblings", "b1"],
        ),
        (lambda t: t["children"][0]["children"][0].update(name=""), ["children[0]", "name"]),
        (lambda t: t["children"][0].update(usage=5), ["org/prog-a", "usage", "leaves"]),
        (lambda t: t["children"][0]["children"][1].update(usage=-5), ["org/prog-a/a2", "usage"]),
        (lambda t: t["children"][0].update(children="nope"), ["org/prog-a", "children"]),
        (lambda t: t["children"][0]["children"][0].update(weight=True), ["a1", "weight"]),
    ],
)
def test_bad_tree_names_node_and_field(tmp_path: Path, mutate, expected: list[str]) -> None:  # type: ignore[no-untyped-def]
    path = write(tmp_path, "tree.json", bad_tree(mutate))
    with pytest.raises(InputError) as exc:
        load_tree(path)
    msg = str(exc.value)
    assert str(path) in msg
    for word in expected:
        assert word in msg


def test_bad_json_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "tree.json", '{"name": "org",\n "children": [,]}')
    with pytest.raises(InputError, match=r"line 2, column \d+: invalid JSON"):
        load_tree(path)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_tree(tmp_path / "absent.json")


def test_tree_errors_are_collected(tmp_path: Path) -> None:
    def two(t: dict) -> None:
        t["children"][0]["weight"] = -1
        t["children"][1]["weight"] = -2

    with pytest.raises(InputError) as exc:
        load_tree(write(tmp_path, "t.json", bad_tree(two)))
    assert len(exc.value.errors) == 2


# ------------------------------------------------------------------ cluster


def test_cluster_count_form_names_hosts() -> None:
    c = load_cluster("/work/shared/data/philly-cluster.json")
    assert len(c.hosts) == 64 and c.total_gpus == 512
    assert c.hosts[0].name == "h000" and c.hosts[-1].name == "h063"


def test_cluster_hosts_form_with_events_sorted(tmp_path: Path) -> None:
    c = load_cluster(
        write(
            tmp_path,
            "c.json",
            {
                "name": "c1",
                "hosts": [{"name": "x", "gpus": 8}, {"name": "y", "gpus": 4}],
                "events": [
                    {"at_s": 7200, "host": "x", "health": "healthy"},
                    {"at_s": 3600, "host": "x", "health": "unhealthy"},
                ],
            },
        )
    )
    assert [(h.name, h.gpus) for h in c.hosts] == [("x", 8), ("y", 4)]
    assert [(e.at_s, e.host, e.healthy) for e in c.events] == [
        (3600, "x", False),
        (7200, "x", True),
    ]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"name": "c", "host_count": 0, "gpus_per_host": 8}, ["host_count"]),
        ({"name": "c", "host_count": 2, "gpus_per_host": -8}, ["gpus_per_host"]),
        ({"name": "c", "hosts": [{"name": "a", "gpus": 0}]}, ["hosts[0]", "gpus"]),
        ({"name": "c", "hosts": [{"name": "a"}, {"name": "a"}]}, ["hosts[1]", "duplicate"]),
        ({"name": "c", "hosts": []}, ["hosts"]),
        ({"hosts": [{"name": "a"}]}, ["name"]),
        ({"name": "c"}, ["missing field 'hosts'"]),
        (
            {
                "name": "c",
                "host_count": 2,
                "gpus_per_host": 8,
                "events": [{"at_s": 1, "host": "h009", "health": "unhealthy"}],
            },
            ["events[0]", "host", "unknown host 'h009'"],
        ),
        (
            {
                "name": "c",
                "host_count": 2,
                "gpus_per_host": 8,
                "events": [{"at_s": -1, "host": "h000", "health": "unhealthy"}],
            },
            ["events[0]", "at_s"],
        ),
        (
            {
                "name": "c",
                "host_count": 2,
                "gpus_per_host": 8,
                "events": [{"at_s": 1, "host": "h000", "health": "broken"}],
            },
            ["events[0]", "health"],
        ),
    ],
)
def test_bad_cluster_names_field(tmp_path: Path, doc: dict, expected: list[str]) -> None:
    path = write(tmp_path, "cluster.json", doc)
    with pytest.raises(InputError) as exc:
        load_cluster(path)
    for word in [str(path), *expected]:
        assert word in str(exc.value)


# ------------------------------------------------------------------ trace


def test_trace_reads_rows_sorted_by_submit_and_ignores_extra_columns(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "t.csv",
        HEADER + ",note\n"
        "j2,a2,,100,1,60,60,0,3,debug,x\n"
        "j1,a1,ann,5.5,16,7200,3600,1,0,training,y\n",
    )
    jobs = load_trace(path, {"a1", "a2"})
    assert [j.job_id for j in jobs] == ["j1", "j2"]
    j1 = jobs[0]
    assert (j1.project, j1.user, j1.submit_s, j1.gpus, j1.duration_s) == (
        "a1",
        "ann",
        5.5,
        16,
        7200,
    )
    assert (j1.min_runtime_s, j1.resumable, j1.priority, j1.kind) == (3600, True, 0, "training")
    assert jobs[1].resumable is False and jobs[1].priority == 3


def test_shared_philly_trace_loads() -> None:
    tree = load_tree("/work/shared/data/philly-tree.json")
    jobs = load_trace(
        "/work/shared/data/philly-octnov-2017.csv",
        tree,
        load_cluster("/work/shared/data/philly-cluster.json"),
    )
    assert len(jobs) == 68503


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("j9,nope,,0,1,60,60,0,0,debug", ["line 3", "project", "unknown project 'nope'"]),
        ("j9,a1,,-5,1,60,60,0,0,debug", ["line 3", "submit_s", ">= 0"]),
        ("j9,a1,,abc,1,60,60,0,0,debug", ["line 3", "submit_s", "not a number"]),
        ("j9,a1,,0,0,60,60,0,0,debug", ["line 3", "gpus", "> 0"]),
        ("j9,a1,,0,-2,60,60,0,0,debug", ["line 3", "gpus"]),
        ("j9,a1,,0,1.5,60,60,0,0,debug", ["line 3", "gpus", "not an integer"]),
        ("j9,a1,,0,1,0,0,0,0,debug", ["line 3", "duration_s", "> 0"]),
        ("j9,a1,,0,1,60,-1,0,0,debug", ["line 3", "min_runtime_s"]),
        ("j9,a1,,0,1,60,nan,0,0,debug", ["line 3", "min_runtime_s", "finite"]),
        ("j9,a1,,0,1,60,60,maybe,0,debug", ["line 3", "resumable"]),
        ("j9,a1,,0,1,60,60,0,high,debug", ["line 3", "priority"]),
        ("j1,a1,,0,1,60,60,0,0,debug", ["line 3", "job_id", "duplicate", "line 2"]),
        (",a1,,0,1,60,60,0,0,debug", ["line 3", "job_id", "empty"]),
        ("j9,a1,,0,1", ["line 3", "expected 10 fields"]),
    ],
)
def test_bad_trace_row_names_line_and_field(tmp_path: Path, row: str, expected: list[str]) -> None:
    path = write(tmp_path, "trace.csv", f"{HEADER}\n{GOOD_ROW}\n{row}\n")
    with pytest.raises(InputError) as exc:
        load_trace(path, {"a1", "a2"})
    for word in [str(path), *expected]:
        assert word in str(exc.value)


def test_missing_column_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "trace.csv", HEADER.replace(",min_runtime_s", "") + "\n")
    with pytest.raises(InputError, match="line 1: missing column.*min_runtime_s"):
        load_trace(path, {"a1"})


def test_empty_trace_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="empty file"):
        load_trace(write(tmp_path, "t.csv", ""), {"a1"})
    with pytest.raises(InputError, match="no jobs"):
        load_trace(write(tmp_path, "t.csv", HEADER + "\n"), {"a1"})


def test_row_errors_are_collected_and_capped(tmp_path: Path) -> None:
    rows = [f"j{i},zz,,0,1,60,60,0,0,debug" for i in range(MAX_ERRORS + 5)]
    path = write(tmp_path, "t.csv", HEADER + "\n" + "\n".join(rows) + "\n")
    with pytest.raises(InputError) as exc:
        load_trace(path, {"a1"})
    err = exc.value
    assert len(err.errors) == MAX_ERRORS and err.more == 5
    assert "line 2:" in err.errors[0] and f"line {MAX_ERRORS + 1}:" in err.errors[-1]
    assert "and 5 more" in str(err)


def test_one_row_with_several_problems_reports_each(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", f"{HEADER}\nj1,zz,,-1,0,60,60,0,0,debug\n")
    with pytest.raises(InputError) as exc:
        load_trace(path, {"a1"})
    assert len(exc.value.errors) == 3  # project, submit_s, gpus


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [(12, "not a multiple of the host size (8)"), (40, "more than the cluster has (32)")],
)
def test_gpu_counts_checked_against_cluster(tmp_path: Path, gpus: int, expected: str) -> None:
    cluster = load_cluster(
        write(tmp_path, "c.json", {"name": "c", "host_count": 4, "gpus_per_host": 8})
    )
    path = write(tmp_path, "t.csv", f"{HEADER}\nj1,a1,,0,{gpus},60,60,0,0,debug\n")
    with pytest.raises(InputError, match=r"line 2: field 'gpus'") as exc:
        load_trace(path, {"a1"}, cluster)
    assert expected in str(exc.value)
    ok = write(tmp_path, "ok.csv", f"{HEADER}\nj1,a1,,0,16,60,60,0,0,debug\n")
    assert load_trace(ok, {"a1"}, cluster)[0].gpus == 16
