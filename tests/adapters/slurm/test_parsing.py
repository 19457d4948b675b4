"""What the Slurm adapter reads from Slurm's output (no cluster needed)."""

from __future__ import annotations

import pytest

from scheduler.adapters.base import AdapterError, ClusterJobState, ClusterPlacement, HostHealthState
from scheduler.adapters.slurm import (
    attempt_comment,
    cluster_job_of,
    gpu_indices_of,
    gpus_in_gres,
    host_of,
    job_script,
    parse_attempt_comment,
    parse_show_job,
    scontrol_word,
)
from scheduler.adapters.slurm.client import sorted_writes
from scheduler.adapters.slurm.parsing import comment_update_line
from tests.adapters.slurm.conftest import start_request

S = ClusterJobState


def squeue_job(state: str, comment: str = "allot-attempt:allot-1-0-x", **extra) -> dict:
    return {
        "job_id": 42,
        "job_state": state,
        "state_reason": "None",
        "comment": comment,
        "nodes": "gpu[01-02]",
        "job_resources": {"allocated_nodes": [{"nodename": "gpu01"}, {"nodename": "gpu02"}]},
        "gres_detail": ["gpu:8(IDX:0-7)", "gpu:2(IDX:1,3)"],
        "start_time": 1796109320,
        "end_time": 1796109420,
        "exit_code": 0,
        **extra,
    }


def test_the_attempt_id_and_the_stop_deadline_live_in_the_comment():
    assert parse_attempt_comment(attempt_comment("allot-7-1-ab")) == ("allot-7-1-ab", None, False)
    stamped = attempt_comment("allot-7-1-ab", stop_by=1796109999)
    assert parse_attempt_comment(stamped) == ("allot-7-1-ab", 1796109999, False)
    assert parse_attempt_comment(attempt_comment("a", abandoned=True)) == ("a", None, True)
    assert parse_attempt_comment("nightly backup") == ("", None, False)
    assert parse_attempt_comment(None) == ("", None, False)


def test_gpus_and_their_indices_come_from_gres_strings():
    assert gpus_in_gres("gpu:8") == 8
    assert gpus_in_gres("gpu:a100:4(S:0-1),gpu:h100:2") == 6
    assert gpus_in_gres("(null)") == 0
    assert gpu_indices_of("gpu:2(IDX:0-1)") == (0, 1)
    assert gpu_indices_of("gpu:a100:3(IDX:0,2-3)") == (0, 2, 3)
    assert gpu_indices_of("gpu:h100:1(IDX:4),gpu:a100:1(IDX:0)") == (0, 4)
    assert gpu_indices_of("gpu(IDX:N/A)") == ()


def test_a_running_job_reports_the_gpus_slurm_gave_on_each_node():
    job = cluster_job_of(squeue_job("RUNNING"))
    assert job.state == S.RUNNING and job.attempt_id == "allot-1-0-x" and job.external_id == "42"
    assert job.placements == (
        ClusterPlacement("gpu01", tuple(range(8))),
        ClusterPlacement("gpu02", (1, 3)),
    )
    assert job.started_at.timestamp() == 1796109320 and job.ended_at is None


@pytest.mark.parametrize(
    ("slurm_state", "comment_stop", "exit_code", "expected", "detail"),
    [
        ("PENDING", False, 0, S.STARTING, "PENDING"),
        ("CONFIGURING", False, 0, S.STARTING, "CONFIGURING"),
        ("RUNNING", True, 0, S.STOPPING, "RUNNING"),
        ("COMPLETING", False, 0, S.STOPPING, "COMPLETING"),
        ("COMPLETED", False, 0, S.SUCCEEDED, "exit code 0"),
        ("FAILED", False, 3 << 8, S.FAILED, "exit code 3"),
        ("FAILED", False, 9, S.FAILED, "killed by signal 9"),
        ("TIMEOUT", False, 0, S.FAILED, "time limit"),
        ("OUT_OF_MEMORY", False, 0, S.FAILED, "out of memory"),
        ("CANCELLED", False, 0, S.CANCELLED, "outside Allot"),
        ("CANCELLED", True, 0, S.STOPPED, "stopped by Allot"),
        ("FAILED", True, 143 << 8, S.STOPPED, "exit code 143"),
        ("NODE_FAIL", False, 0, S.LOST, "lost with gpu[01-02]"),
        ("NODE_FAIL", True, 0, S.LOST, "NODE_FAIL"),
        ("PREEMPTED", False, 0, S.LOST, "preempted by Slurm itself"),
        ("BOOT_FAIL", False, 0, S.FAILED, "boot_fail"),
    ],
)
def test_slurm_states_map_onto_allots(slurm_state, comment_stop, exit_code, expected, detail):
    comment = attempt_comment("allot-1-0-x", stop_by=1 if comment_stop else None)
    job = cluster_job_of(squeue_job(slurm_state, comment, exit_code=exit_code))
    assert job.state == expected
    assert detail in job.detail
    assert (job.ended_at is not None) == job.ended
    if expected == S.STARTING:
        assert job.placements == () and job.started_at is None


def test_newer_slurm_json_shapes_are_read_too():
    job = cluster_job_of(
        squeue_job(
            ["RUNNING", "COMPLETING"],
            start_time={"set": True, "number": 1796109320},
            exit_code={"status": ["SUCCESS"], "return_code": {"set": True, "number": 0}},
        )
    )
    assert job.state == S.STOPPING and job.started_at.timestamp() == 1796109320


def test_foreign_jobs_have_no_attempt_id_and_abandoned_starts_are_left_out():
    foreign = cluster_job_of(squeue_job("RUNNING", comment=""))
    assert foreign.attempt_id == "" and foreign.external_id == "42" and foreign.placements
    assert cluster_job_of(squeue_job("CANCELLED", attempt_comment("a", abandoned=True))) is None


@pytest.mark.parametrize(
    ("state", "flags", "reason", "health"),
    [
        ("idle", [], "", HostHealthState.HEALTHY),
        ("mixed", ["NOT_RESPONDING"], "", HostHealthState.HEALTHY),  # not down until SlurmdTimeout
        ("idle", ["DRAIN"], "allot: repair", HostHealthState.DRAINING),
        ("mixed", ["DRAIN"], "bad DIMM", HostHealthState.DRAINING),
        ("down", ["NOT_RESPONDING"], "Not responding", HostHealthState.DOWN),
        ("down", [], "", HostHealthState.DOWN),
        ("idle", ["POWERED_DOWN"], "", HostHealthState.DOWN),
        ("future", [], "", HostHealthState.DOWN),
    ],
)
def test_node_states_map_onto_host_health(state, flags, reason, health):
    host = host_of(
        {"name": "gpu01", "gres": "gpu:8", "state": state, "state_flags": flags, "reason": reason}
    )
    assert host.health == health and host.gpus == 8
    if health != HostHealthState.HEALTHY:
        assert host.reason
    if reason and health != HostHealthState.HEALTHY:
        assert host.reason == reason


def test_nodes_without_gpus_are_not_hosts():
    assert host_of({"name": "login1", "gres": "", "state": "idle", "state_flags": []}) is None
    newer = host_of(
        {"name": "gpu01", "gres": "gpu:h100:8", "state": ["IDLE", "DRAIN"], "reason": "x"}
    )
    assert newer.health == HostHealthState.DRAINING


def test_scontrol_show_job_detail_is_parsed():
    text = """JobId=7 JobName=train
   JobState=RUNNING Reason=None Dependency=(null)
   ReqNodeList=gpu[07-08] ExcNodeList=(null)
   NodeList=gpu[07-08]
   JOB_GRES=gpu:10
     Nodes=gpu07 CPU_IDs=0 Mem=4000 GRES=gpu:8(IDX:0-7)
     Nodes=gpu08 CPU_IDs=0 Mem=4000 GRES=gpu:2(IDX:4-5)
   Comment=allot-attempt:allot-3-0-c
"""
    job = parse_show_job(text)
    assert job["job_state"] == "RUNNING" and job["comment"] == "allot-attempt:allot-3-0-c"
    assert job["allocated"] == [("gpu07", "gpu:8(IDX:0-7)"), ("gpu08", "gpu:2(IDX:4-5)")]


def test_the_job_script_quotes_what_it_is_given_and_traps_a_graceful_stop():
    script = job_script(
        start_request(
            "allot-1-0-x",
            {"gpu01": 1},
            command="python train.py --resume",
            spec={"env": {"A": "it's"}},
        )
    )
    assert script.startswith("#!/bin/bash\n")
    assert "export A='it'\"'\"'s'" in script
    assert "trap forward_stop TERM" in script and "bash -c 'python train.py --resume' &" in script
    listed = job_script(start_request("a", {"gpu01": 1}, command=["echo", "two words"]))
    assert "bash -c 'echo '\"'\"'two words'\"'\"'' &" in listed
    with pytest.raises(AdapterError, match="environment variable"):
        job_script(start_request("a", {"gpu01": 1}, spec={"env": {"BAD NAME": "x"}}))


# -- comments written with one scontrol (its commands read from stdin) ---------------------


def test_a_comment_is_one_scontrol_word_that_reads_like_the_text():
    text = 'allot-job:7 #3 waiting: "a1"\tis  over it\'s share\x1b[0m ETA 2026-12-06 18:00'
    word = scontrol_word(text)
    # scontrol splits at ASCII white space and stores quote characters as they are
    assert not any(ch in word for ch in " \t\n\"'") and "\x1b" not in word
    assert word.split() == [
        "allot-job:7",
        "#3",
        "waiting:",
        "\u201da1\u201d",
        "is",
        "over",
        "it\u2019s",
        "share[0m",
        "ETA",
        "2026-12-06",
        "18:00",
    ]
    assert scontrol_word("ünïcödé → 東京") == "ünïcödé\u00a0→\u00a0東京"


def test_a_comment_is_cut_to_slurms_limit_on_a_character_boundary():
    word = scontrol_word("é" * 700)  # 1,400 bytes of UTF-8
    assert word == "é" * 500 and len(word.encode()) == 1000


def test_an_update_line_names_a_slurm_job_id_or_nothing():
    assert comment_update_line("122_3", "a b") == "update JobId=122_3 Comment=a\u00a0b\n"
    for bad in ("12\nupdate JobId=13 Comment=x", "12 13", "", "x1"):
        with pytest.raises(ValueError):
            comment_update_line(bad, "a")


def test_after_a_failed_batch_squeue_tells_what_held_what_is_gone_and_what_failed():
    wanted = {"1": "a b", "2": "c", "3": "d", "4": "e"}
    shown = {"1": ("PENDING", "a\u00a0b"), "2": ("CANCELLED", "old"), "4": ("PENDING", "old")}
    writes = sorted_writes(wanted, shown, "scontrol: Access/permission denied")
    assert writes.written == ("1",) and writes.gone == ("2", "3")
    assert writes.failed == {"4": "scontrol: Access/permission denied"}
