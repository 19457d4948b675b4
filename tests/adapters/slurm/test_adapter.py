"""The Slurm adapter against a real slurmctld and 16 slurmd (tests/adapters/slurm/conftest.py)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from scheduler.adapters.base import (
    AdapterError,
    AdapterUnavailable,
    ClusterAdapter,
    ClusterJobState,
    HostHealthState,
)
from scheduler.adapters.slurm import (
    SlurmAdapter,
    SlurmClient,
    SubmitOptions,
    parse_attempt_comment,
    scontrol_word,
)
from scheduler.adapters.slurm.parsing import TYPOGRAPHIC_QUOTES
from tests.adapters.slurm.conftest import TimingOutClient, start_request, wait_for, wait_until

S = ClusterJobState


def running(job) -> bool:
    return job.state == S.RUNNING


def ended(job) -> bool:
    return job.ended


def slurm_jobs_of(client: SlurmClient, attempt_prefix: str) -> list[dict]:
    """Slurm's jobs whose attempt id starts with `attempt_prefix`."""
    return [
        j
        for j in client.jobs()
        if parse_attempt_comment(j.get("comment"))[0].startswith(attempt_prefix)
    ]


def test_the_adapter_implements_the_protocol(adapter):
    assert isinstance(adapter, ClusterAdapter)


def test_hosts_and_their_gpus_come_from_slurm(adapter, slurm):
    hosts = adapter.hosts()
    assert [h.name for h in hosts] == slurm.node_names
    assert {h.gpus for h in hosts} == {8}
    assert {h.health for h in hosts} == {HostHealthState.HEALTHY}


def test_start_runs_held_then_released_on_the_chosen_nodes_with_slurms_gpu_indices(adapter, client):
    first = adapter.start(start_request("t-1-0-aaa", {"gpu03": 2}))
    assert first.state == S.STARTING and first.external_id
    adapter.start(start_request("t-2-0-bbb", {"gpu03": 4}))
    adapter.start(start_request("t-3-0-ccc", {"gpu07": 8, "gpu08": 8}))

    a = wait_for(adapter, "t-1-0-aaa", running)
    b = wait_for(adapter, "t-2-0-bbb", running)
    g = wait_for(adapter, "t-3-0-ccc", running)
    assert [p.host for p in a.placements] == ["gpu03"] and len(a.placements[0].gpu_indices) == 2
    assert [p.host for p in b.placements] == ["gpu03"] and len(b.placements[0].gpu_indices) == 4
    assert not set(a.placements[0].gpu_indices) & set(b.placements[0].gpu_indices)
    assert {p.host: p.gpu_indices for p in g.placements} == {
        "gpu07": tuple(range(8)),
        "gpu08": tuple(range(8)),
    }
    assert a.started_at is not None and a.external_id == first.external_id
    # what Slurm was told: the attempt id in the comment, no requeue in Slurm
    shown = client.run("scontrol", "show", "job", a.external_id)
    assert "Comment=allot-attempt:t-1-0-aaa" in shown and "Requeue=0" in shown
    assert "ReqNodeList=gpu03" in shown


def test_a_job_that_finishes_or_fails_ends_with_its_exit_code(adapter):
    adapter.start(start_request("t-4-0-ok", {"gpu01": 1}, command="echo done"))
    adapter.start(start_request("t-5-0-bad", {"gpu01": 1}, command="exit 3"))
    ok = wait_for(adapter, "t-4-0-ok", ended)
    bad = wait_for(adapter, "t-5-0-bad", ended)
    assert ok.state == S.SUCCEEDED and ok.ended_at is not None
    assert bad.state == S.FAILED and "exit code 3" in bad.detail


def test_the_job_script_has_the_specs_environment_and_ignores_the_image(adapter, tmp_path):
    out = tmp_path / "env.txt"
    request = start_request(
        "t-6-0-env",
        {"gpu02": 1},
        command=f'echo "$GREETING|$ALLOT_ATTEMPT_ID" > {out}',
        spec={"env": {"GREETING": "hello world; $(not run)"}, "image": "ghcr.io/x/y:1"},
    )
    adapter.start(request)
    assert wait_for(adapter, "t-6-0-env", ended).state == S.SUCCEEDED
    assert out.read_text().strip() == "hello world; $(not run)|t-6-0-env"


def test_stop_signals_the_script_which_stops_gracefully(adapter, tmp_path):
    marker = tmp_path / "saved"
    command = (
        f"trap 'echo checkpoint > {marker}; exit 0' TERM; echo ready > {marker}; sleep 300 & wait"
    )
    adapter.start(start_request("t-7-0-grace", {"gpu04": 2}, command=command))
    wait_for(adapter, "t-7-0-grace", running)
    # the trap is set (RUNNING in Slurm comes before the script's first line)
    wait_until(lambda: marker.exists(), what="the script's trap")
    adapter.stop("t-7-0-grace", 30)
    adapter.stop("t-7-0-grace", 29)  # resent by the next cycle: idempotent
    job = wait_for(adapter, "t-7-0-grace", ended)
    assert job.state == S.STOPPED, job
    assert marker.read_text().strip() == "checkpoint"  # the command's own trap ran


def test_stop_ends_a_job_that_ignores_sigterm_once_the_grace_is_over(adapter, client, tmp_path):
    log = tmp_path / "log"
    # the script notes the SIGTERM, carries on, and ticks every second
    command = f"trap 'echo term >> {log}' TERM; while true; do echo tick >> {log}; sleep 1; done"
    adapter.start(start_request("t-8-0-stubborn", {"gpu05": 1}, command=command))
    running_job = wait_for(adapter, "t-8-0-stubborn", running)
    # a first tick: the trap is set (RUNNING in Slurm comes before the script's first line)
    wait_until(lambda: log.exists(), what="the script's first tick")
    adapter.stop("t-8-0-stubborn", 60)
    # the signal reached the script, and the script ticked again after it: it outlived it
    wait_until(
        lambda: "term\ntick" in (log.read_text() if log.exists() else ""),
        what="the script's SIGTERM and a tick after it",
    )
    shown = client.job(running_job.external_id)
    assert shown["job_state"] == "RUNNING"  # not cancelled: the grace period is not over
    job = wait_for(adapter, "t-8-0-stubborn", lambda j: True)
    assert job.state == S.STOPPING  # asked to stop, still holding its GPUs
    adapter.stop("t-8-0-stubborn", 0)  # the grace period is over
    job = wait_for(adapter, "t-8-0-stubborn", ended, timeout_s=30)
    assert job.state == S.STOPPED


def test_stopping_a_job_that_has_not_started_yet_cancels_it(adapter, client):
    adapter.start(start_request("t-9-0-early", {"gpu06": 8}))
    adapter.start(start_request("t-9-1-queued", {"gpu06": 8}))  # waits for gpu06
    wait_for(adapter, "t-9-0-early", running)
    adapter.stop("t-9-1-queued", 30)
    assert wait_for(adapter, "t-9-1-queued", ended).state == S.STOPPED
    adapter.stop("t-9-unknown", 30)  # a job Slurm never had: nothing happens


def test_a_submit_that_timed_out_after_slurm_queued_it_is_adopted_not_repeated(slurm):
    client = TimingOutClient(slurm_conf=slurm.conf_path)
    adapter = SlurmAdapter(client)
    started = adapter.start(start_request("t-10-0-late", {"gpu09": 2}))
    assert started.state == S.STARTING and "adopted" in started.detail
    job = wait_for(adapter, "t-10-0-late", running)
    assert [p.host for p in job.placements] == ["gpu09"]
    # a later start of the same attempt (another cycle, another adapter) adopts too
    again = SlurmAdapter(SlurmClient(slurm_conf=slurm.conf_path)).start(
        start_request("t-10-0-late", {"gpu09": 2})
    )
    assert again.state == S.RUNNING and again.external_id == job.external_id
    assert len(slurm_jobs_of(client, "t-10-0-late")) == 1


def test_a_refused_start_submits_nothing(adapter, client):
    with pytest.raises(AdapterError) as refused:
        adapter.start(start_request("t-11-0-nonode", {"gpu99": 1}))
    assert not refused.value.retryable and "Invalid node name" in str(refused.value)
    with pytest.raises(AdapterError) as no_command:
        adapter.start(start_request("t-11-1-nocmd", {"gpu01": 1}, command=""))
    assert not no_command.value.retryable and "no command" in str(no_command.value)
    assert not slurm_jobs_of(client, "t-11-")


def test_a_job_cancelled_outside_allot_shows_as_cancelled_with_that_reason(adapter, slurm):
    adapter.start(start_request("t-12-0-cancel", {"gpu10": 1}))
    job = wait_for(adapter, "t-12-0-cancel", running)
    subprocess.run(["scancel", job.external_id], env=slurm.client_env, check=True)
    job = wait_for(adapter, "t-12-0-cancel", ended)
    assert job.state == S.CANCELLED
    assert "cancelled in Slurm outside Allot" in job.detail


def test_jobs_without_an_attempt_id_are_reported_as_foreign_and_left_alone(
    adapter, client, slurm, tmp_path
):
    foreign_marker, allot_marker = tmp_path / "foreign-term", tmp_path / "allot-term"
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--gres=gpu:3",
            "-w",
            "gpu11",
            "-o",
            "/dev/null",
            "--wrap",
            f"trap 'echo term > {foreign_marker}; exit 0' TERM; sleep 300 & wait",
        ],
        env=slurm.client_env,
        capture_output=True,
        text=True,
        check=True,
    )
    slurm_id = out.stdout.strip()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        foreign = [j for j in adapter.jobs() if j.external_id == slurm_id]
        if foreign and foreign[0].state == S.RUNNING:
            break
        time.sleep(0.2)
    assert foreign[0].attempt_id == ""
    assert (
        foreign[0].placements[0].host == "gpu11" and len(foreign[0].placements[0].gpu_indices) == 3
    )
    graceful = (
        f"trap 'echo term > {allot_marker}; exit 0' TERM; echo ready > {allot_marker}; "
        "sleep 300 & wait"
    )
    adapter.start(start_request("t-13-0-allot", {"gpu12": 1}, command=graceful))
    wait_until(lambda: allot_marker.exists(), what="Allot's job's trap set")
    before = client.job(slurm_id)
    adapter.stop("", 0)  # nothing may reach a job Allot did not start
    # a stop of Allot's own job, sent after it, has reached its script and ended it:
    # a signal the first stop sent would have arrived by now too
    adapter.stop("t-13-0-allot", 30)
    assert wait_for(adapter, "t-13-0-allot", ended).state == S.STOPPED
    assert allot_marker.read_text().strip() == "term"
    after = client.job(slurm_id)
    assert after["job_state"] == "RUNNING" and after["comment"] == before["comment"]
    assert not foreign_marker.exists()  # its script never got a SIGTERM
    assert [j.state for j in adapter.jobs() if j.external_id == slurm_id] == [S.RUNNING]


def test_jobs_survive_a_slurmctld_restart(adapter, slurm):
    adapter.start(start_request("t-14-0-restart", {"gpu14": 2}))
    before = wait_for(adapter, "t-14-0-restart", running)
    slurm.restart_ctld()
    after = wait_for(adapter, "t-14-0-restart", running)
    assert after.external_id == before.external_id and after.placements == before.placements
    # (slurmctld down: tests/adapters/slurm/test_cycle.py, the cycle records it as unreachable)


def test_a_missing_configuration_is_unavailable_at_once(tmp_path):
    client = SlurmClient(slurm_conf=tmp_path / "none" / "slurm.conf")
    with pytest.raises(AdapterUnavailable, match="not found"):
        SlurmAdapter(client).jobs()


def test_drain_in_allot_drains_the_node_in_slurm_and_slurms_drains_show(adapter, client):
    adapter.set_host_health("gpu15", HostHealthState.DRAINING, "allot: fan failure")
    node = next(n for n in client.nodes() if n["name"] == "gpu15")
    assert "DRAIN" in node["state_flags"] and node["reason"] == "allot: fan failure"
    adapter.set_host_health("gpu15", HostHealthState.HEALTHY, "allot: drain ended")
    adapter.set_host_health("gpu15", HostHealthState.HEALTHY, "again")  # idempotent
    node = next(n for n in client.nodes() if n["name"] == "gpu15")
    assert "DRAIN" not in node["state_flags"]

    client.update_node("gpu16", "drain", "bad DIMM")  # an operator, in Slurm
    host = next(h for h in adapter.hosts() if h.name == "gpu16")
    assert host.health == HostHealthState.DRAINING and host.reason == "bad DIMM"
    client.update_node("gpu16", "down", "power supply")
    host = next(h for h in adapter.hosts() if h.name == "gpu16")
    assert host.health == HostHealthState.DOWN and host.reason == "power supply"


def test_a_draining_node_keeps_its_jobs_and_takes_no_new_one(adapter, client):
    adapter.start(start_request("t-15-0-keep", {"gpu01": 2}))
    wait_for(adapter, "t-15-0-keep", running)
    adapter.set_host_health("gpu01", HostHealthState.DRAINING, "allot: repair")
    host = next(h for h in adapter.hosts() if h.name == "gpu01")
    assert host.health == HostHealthState.DRAINING
    new = adapter.start(start_request("t-15-1-new", {"gpu01": 1}))
    # Slurm's scheduler has looked at the job since its release (a held job's
    # EligibleTime is Unknown; the scheduler's first look after the release sets it)
    # and kept it waiting for gpu01
    wait_until(
        lambda: (
            "EligibleTime=Unknown" not in client.run("scontrol", "show", "job", new.external_id)
        ),
        what="Slurm's scheduler looking at the released job",
    )
    # and again in a later pass: one that started a job released after that first look
    adapter.start(start_request("t-15-2-later", {"gpu02": 1}))
    wait_for(adapter, "t-15-2-later", running)
    shown = client.job(new.external_id)
    assert shown["job_state"] == "PENDING"
    assert shown["state_reason"] == "ReqNodeNotAvail,_UnavailableNodes:gpu01"
    assert wait_for(adapter, "t-15-1-new", lambda j: True).state == S.STARTING
    assert wait_for(adapter, "t-15-0-keep", lambda j: True).state == S.RUNNING


def test_the_version_and_call_times_are_reported(client):
    assert "22." in client.version() or "slurm" in client.version()
    assert client.stats.calls >= 1 and client.stats.seconds > 0
    assert Path(client.slurm_conf).is_file()


def test_one_scontrol_writes_every_comment_of_a_batch_whatever_the_text_or_a_job_that_ended(
    adapter, client, slurm
):
    held = SubmitOptions(
        name="comments", comment="x", nodelist=["gpu02"], gpus_per_node=1, gpus_total=1
    )
    ids = [client.submit("#!/bin/bash\nsleep 300\n", held) for _ in range(4)]
    ended = ids.pop()
    client.cancel(ended)
    never = str(int(ended) + 100_000)  # a job Slurm never had (or has purged)
    texts = {
        ids[0]: 'allot-job:1 #1 waiting: project "a1" is over its share ETA 2026-12-06 18:00',
        ids[1]: "it's ünïcödé → 東京\twith  tabs, 'quotes' and = signs",
        ids[2]: "plain",
    }
    before = client.stats.by_command.get("scontrol", [0])[0]
    writes = adapter.annotate({ids[0]: texts[ids[0]], ended: "too late", **texts, never: "no"})
    assert client.stats.by_command["scontrol"][0] == before + 1  # one process for all
    assert sorted(writes.written) == sorted(texts)
    assert sorted(writes.gone) == sorted([ended, never]) and writes.failed == {}
    shown = client.comments()  # squeue
    for slurm_id, text in texts.items():
        assert shown[slurm_id] == ("PENDING", scontrol_word(text))
        assert shown[slurm_id][1].split() == text.translate(TYPOGRAPHIC_QUOTES).split()
        out = subprocess.run(
            ["scontrol", "show", "job", slurm_id],
            env=slurm.client_env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"Comment={scontrol_word(text)}" in [line.strip(" ") for line in out.splitlines()]
    assert shown[ended] == ("CANCELLED", "x")  # left as it was


def test_withdraw_takes_back_a_start_slurm_keeps_pending_and_leaves_a_running_one(adapter, client):
    client.update_node("gpu07", "drain", "drained in Slurm only")  # after Allot's plan
    waiting = adapter.start(start_request("t-21-0-wait", {"gpu07": 8}))
    assert wait_for(adapter, "t-21-0-wait", lambda j: True).state == S.STARTING
    assert adapter.withdraw("t-21-0-wait") is True
    gone = wait_for(adapter, "t-21-0-wait", ended)
    assert gone.state == S.STOPPED and gone.detail.startswith("stopped by Allot")
    assert client.job(waiting.external_id)["job_state"] == "CANCELLED"  # Allot's own job
    assert adapter.withdraw("t-21-0-wait") is True  # again: nothing more happens

    adapter.start(start_request("t-21-1-runs", {"gpu08": 1}))
    wait_for(adapter, "t-21-1-runs", running)
    assert adapter.withdraw("t-21-1-runs") is False  # it runs already: left running
    assert wait_for(adapter, "t-21-1-runs", lambda j: True).state == S.RUNNING
    assert adapter.withdraw("t-21-unknown") is True  # a job Slurm never had
