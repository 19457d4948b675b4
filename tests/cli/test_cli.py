"""The `allot` CLI run as a user runs it (a subprocess) against a live server whose
cycles run on an in-memory cluster: login, submit, queue, show, cancel, clusters,
hosts; errors name the flag and field, exit code 2 for bad input, 1 otherwise."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.utils import timezone

from accounts.models import ApiToken, TokenEvent
from accounts.services import token_create
from allot_common.figures import usage_window_text
from scheduler import adapters
from scheduler.models import Cluster, Job, JobState
from tests.factories import ClusterFactory, HostFactory
from tests.roles import token_for
from tests.support.cli import Cli
from tests.support.memcluster import MemoryCluster

pytestmark = pytest.mark.django_db(transaction=True)

MEMORY: dict[int, MemoryCluster] = {}
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # rich's styles on a terminal (a bold header)


def memory_adapter(cluster):
    return MEMORY[cluster.pk]


@pytest.fixture
def server(live_server, tree, monkeypatch, tmp_path):
    """A live server, the example tree and cluster `gpu` (2 x 8 GPUs) in memory."""
    monkeypatch.setitem(adapters.ADAPTER_FACTORIES, "memory", f"{__name__}:memory_adapter")
    cluster = ClusterFactory(name="gpu", adapter="memory", host_count=2, gpus_per_host=8)
    for i in range(2):
        HostFactory(cluster=cluster, name=f"node{i:02d}", gpus=8)
    MEMORY[cluster.pk] = MemoryCluster.of(2, 8, timezone.now())
    yield live_server
    MEMORY.clear()


@pytest.fixture
def ann(server, tree, tmp_path):
    return Cli(server.url, tmp_path, token_for(tree.user("ann")))


def test_login_stores_a_private_token_that_later_commands_use(server, tree, tmp_path):
    tree.user("ann")  # password "pw"
    cli = Cli(server.url, tmp_path, token=None)
    assert cli("queue").returncode == 1  # no token yet
    result = cli("login", "--username", "ann", "--password", "pw")
    assert result.returncode == 0, result.stderr
    path = tmp_path / ".config" / "allot" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["url"] == server.url
    submitted = cli("submit", "--project", "org/prog-a/a1", "--min-runtime", "15m")
    assert submitted.returncode == 0, submitted.stderr
    assert Job.objects.get().submitter.username == "ann"
    wrong = cli("login", "--username", "ann", "--password", "nope")
    assert wrong.returncode == 2 and "Unable to sign in" in wrong.stderr
    # signing in again replaces the stored token and revokes it: logins on one machine
    # do not pile up tokens toward the per-user limit
    first = json.loads(path.read_text())["token"]
    again = cli("login", "--username", "ann", "--password", "pw")
    assert again.returncode == 0 and "revoked" in again.stdout, again.stderr
    kept = ApiToken.objects.get(user__username="ann")
    assert json.loads(path.read_text())["token"].startswith(kept.token_key)
    revoked = TokenEvent.objects.get(kind="revoked")
    assert first.startswith(revoked.token_key) and revoked.actor_name == "ann"


def test_submit_like_sbatch(ann):
    result = ann(
        "submit", "--project", "org/prog-a/a1", "--gpus", "8", "--min-runtime", "1h30m",
        "--kind", "training", "--resumable", "--priority", "3", "--name", "llm",
        "--duration", "2h", "--image", "pytorch:2.5", "--env", "SEED=1", "--env", "LR=3e-4",
        "--", "python", "train.py", "--steps", "100",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job = Job.objects.get()
    assert "Submitted job" in result.stdout and str(job.pk) in result.stdout
    assert (job.gpus, job.min_runtime_s, job.duration_s, job.priority) == (8, 5400, 7200, 3)
    assert job.resumable and job.name == "llm" and job.cluster.name == "gpu"
    assert job.spec == {
        "image": "pytorch:2.5",
        "command": "python train.py --steps 100",
        "env": {"SEED": "1", "LR": "3e-4"},
    }
    assert job.state == JobState.RUNNING  # the cycle after commit started it


def test_submit_with_command_and_url_flags(ann, server):
    """`--command` (not the words after `--`) and `--url` before the command, which wins
    over ALLOT_URL."""
    ann.env["ALLOT_URL"] = "http://127.0.0.1:9"  # nothing listens there
    result = ann(
        "--url", server.url, "submit", "-A", "org/prog-a/a1", "-t", "0",
        "--command", "python eval.py --all", "-J", "eval",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job = Job.objects.get()
    assert job.spec == {"command": "python eval.py --all"} and job.name == "eval"
    both = ann("--url", server.url, "submit", "-A", "org/prog-a/a1", "-t", "0",
               "--command", "a", "--", "b")  # fmt: skip
    assert both.returncode == 2 and "either with --command or after --" in both.stderr


def test_submit_takes_sbatchs_long_names(ann):
    """`--account`, `--time-min` and `--job-name`, as a Slurm user types them."""
    result = ann(
        "submit", "--account", "org/prog-a/a1", "--time-min", "20m", "--job-name", "habit",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job = Job.objects.get()
    assert (job.project.name, job.min_runtime_s, job.name) == ("a1", 1200, "habit")
    # and an error names the flag as typed
    unknown = ann("submit", "--account", "org/nope", "--time-min", "20m")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: --account (project): "), (
        unknown.stderr
    )
    too_long = ann("submit", "--account", "org/prog-a/a1", "--time-min=9h")
    assert too_long.returncode == 2 and too_long.stderr.startswith(
        "error: --time-min (min_runtime_s)"
    )
    assert Job.objects.count() == 1


def test_submit_an_array_as_json(ann):
    result = ann("submit", "-A", "org/prog-a/a1", "-t", "0", "--array", "5", "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["count"] == 5 and len({j["id"] for j in answer["jobs"]}) == 5
    assert Job.objects.filter(array_id=answer["array_id"]).count() == 5


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--gpus", "3"], "--gpus (gpus)"),
        (["--gpus", "24"], "--gpus (gpus)"),
        (["--array", "10001"], "--array (array)"),
        (["--kind", "party"], "--kind (kind)"),
        (["--min-runtime", "soon"], "--min-runtime"),
        (["--min-runtime", "9h"], "--min-runtime (min_runtime_s)"),
        (["--duration", "-5m"], "--duration"),
        (["--env", "NOEQUALS"], "--env"),
        (["--env", "1BAD=x"], "--env (spec.env)"),
        (["--project", "org/prog-a"], "--project (project)"),
        (["--project", "org/nowhere/x"], "--project (project)"),
        (["--cluster", "nope"], "--cluster (cluster)"),
    ],
)
def test_bad_input_names_the_flag_and_exits_2(ann, args, names):
    base = {"--project": "org/prog-a/a1", "--min-runtime": "10m"}
    for flag in args[::2]:
        base.pop(flag, None)
    flat = [x for pair in base.items() for x in pair]
    result = ann("submit", *flat, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert names in result.stderr
    assert not Job.objects.exists()


def test_a_wrong_type_is_refused_by_the_cli_itself(ann):
    result = ann("submit", "-A", "org/prog-a/a1", "-t", "0", "--gpus", "eight")
    assert result.returncode == 2 and "--gpus" in result.stderr


def test_forbidden_and_unauthenticated_are_other_failures(server, tree, tmp_path):
    bob = Cli(server.url, tmp_path, token_for(tree.user("bob")))
    result = bob("submit", "-A", "org/prog-a/a1", "-t", "0")
    assert result.returncode == 1 and "may not submit" in result.stderr
    bad_token = Cli(server.url, tmp_path, "not-a-token")
    assert bad_token("queue").returncode == 1
    unreachable = Cli("http://127.0.0.1:9", tmp_path, "x")
    result = unreachable("show", "1")
    assert result.returncode == 1 and "cannot reach" in result.stderr


def test_dry_run_says_where_it_would_stand(ann):
    result = ann("submit", "-A", "org/prog-a/a1", "-t", "10m", "--gpus", "8", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "nothing was submitted" in result.stdout and "next cycle" in result.stdout
    assert not Job.objects.exists()


def test_one_gpu_and_one_job_are_singular(ann):
    dry = ann("submit", "-A", "org/prog-a/a1", "-t", "10m", "--gpus", "1", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Valid: 1 job of 1 GPU for org/prog-a/a1" in dry.stdout, dry.stdout
    one = ann("submit", "-A", "org/prog-a/a1", "-t", "0", "--gpus", "1", "--array", "2")
    assert one.returncode == 0, one.stderr
    assert "each 1 GPU, min runtime 0" in one.stdout, one.stdout


def test_queue_show_and_cancel(ann, tree):
    for _ in range(4):  # 2 run (the cluster is 2 x 8 GPUs), 2 wait
        assert ann("submit", "-A", "org/prog-a/a1", "-t", "1h", "-G", "8").returncode == 0
    waiting = list(Job.objects.filter(state=JobState.PENDING).order_by("id"))
    assert len(waiting) == 2
    queue = ann("queue")
    assert queue.returncode == 0, queue.stderr
    assert "2 pending" in queue.stdout and "REASON" in queue.stdout
    lines = [line for line in queue.stdout.splitlines() if "org/prog-a/a1" in line]
    assert [line.split()[:2] for line in lines] == [
        ["1", str(waiting[0].pk)],
        ["2", str(waiting[1].pk)],
    ]
    as_json = json.loads(ann("queue", "--json").stdout)
    assert [r["job"] for r in as_json["results"]] == [w.pk for w in waiting]

    shown = ann("show", str(waiting[1].pk))
    assert shown.returncode == 0, shown.stderr
    assert "2 of 2" in shown.stdout and "reason" in shown.stdout and "pending" in shown.stdout
    # the estimate and every blocker, as the job page shows them
    detail = json.loads(ann("show", str(waiting[1].pk), "--json").stdout)
    assert detail["eta"]["start"] and detail["blockers"]
    assert "estimated start" in shown.stdout and "reservation-only estimate" in shown.stdout
    assert "blockers" in shown.stdout and detail["blockers"][0]["kind"] in shown.stdout
    running = Job.objects.filter(state=JobState.RUNNING).first()
    shown = ann("show", str(running.pk))
    assert "attempts" in shown.stdout and "node0" in shown.stdout

    # a job named twice is cancelled and reported once
    cancelled = ann("cancel", str(waiting[0].pk), str(running.pk), str(waiting[0].pk))
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.count(f"job {waiting[0].pk}: cancelled") == 1
    assert f"job {running.pk}: stopping" in cancelled.stdout
    assert ann("cancel", "999999").returncode == 1
    assert ann("show", "999999").returncode == 1


def test_queue_me_and_narrow_terminals(ann, server, tree, tmp_path):
    """`--me` like `squeue --me`; on an 80-column terminal every table keeps one line per
    row (the reason is cut, `show` has it whole), into a pipe every reason is whole, and
    times carry their zone."""
    bob = Cli(server.url, tmp_path, token_for(tree.user("bob")))
    for _ in range(3):
        assert ann("submit", "-A", "org/prog-a/a1", "-t", "1h", "-G", "8").returncode == 0
    assert bob("submit", "-A", "org/prog-a/a2", "-t", "1h", "-G", "8").returncode == 0
    ann.env["COLUMNS"] = "80"
    piped = ann("queue")
    reasons = [r["reason"] for r in json.loads(ann("queue", "--json").stdout)["results"]]
    rows = [line for line in piped.stdout.splitlines()[2:] if line.strip()]
    assert [row.rstrip().endswith(r) for row, r in zip(rows, reasons, strict=True)] == [True] * 2
    ann.env["TTY_COMPATIBLE"] = "1"  # a terminal, as rich judges one
    everyone, mine = ann("queue"), ann("queue", "--me")
    assert everyone.returncode == 0 and mine.returncode == 0, mine.stderr
    everyone.stdout, mine.stdout = ANSI.sub("", everyone.stdout), ANSI.sub("", mine.stdout)
    assert "2 pending" in everyone.stdout and "1 of your jobs pending" in mine.stdout
    assert "bob" in everyone.stdout and "bob" not in mine.stdout
    rows = [line for line in everyone.stdout.splitlines()[2:] if line.strip()]
    assert len(rows) == 2 and all(len(line) <= 80 for line in everyone.stdout.splitlines())
    assert [r.split()[0] for r in rows] == ["1", "2"]  # one line per job
    assert all(r.rstrip().endswith("…") for r in rows)  # the reason cut, with an ellipsis
    assert ann("queue", "--me", "--long").returncode == 0
    # -t like squeue -t: the running jobs with their start, or both tables
    running = ann("queue", "-t", "running")
    assert running.returncode == 0, running.stderr
    assert "Running on gpu: 2 running, the earliest started first" in running.stdout
    started = [line for line in running.stdout.splitlines() if "org/prog-a/a1" in line]
    assert len(started) == 2 and all(line.rstrip().endswith(("ago", "now")) for line in started)
    both = ann("queue", "--state", "all", "--me")
    both.stdout = ANSI.sub("", both.stdout)
    assert "1 of your jobs pending" in both.stdout and "2 of your jobs running" in both.stdout
    assert all(len(line) <= 80 for line in both.stdout.splitlines()), both.stdout
    as_json = json.loads(ann("queue", "-t", "all", "--json").stdout)
    assert (as_json["pending"]["count"], as_json["running"]["count"]) == (2, 2)
    bad = ann("queue", "-t", "done")
    assert (
        bad.returncode == 2 and "--state: state must be one of pending, running, all" in bad.stderr
    )
    assert " UTC" in everyone.stdout.splitlines()[0]  # `as of <time> <zone>`
    for command in (["clusters"], ["hosts"], ["shares"]):
        out = ann(*command)
        assert out.returncode == 0, out.stderr
        assert all(len(line) <= 80 for line in ANSI.sub("", out.stdout).splitlines()), out.stdout
    clusters = ANSI.sub("", ann("clusters").stdout).splitlines()
    assert len(clusters) == 2 and clusters[1].split()[0] == "gpu"  # no name folded


def test_a_min_runtime_over_the_cap_and_an_unknown_kind_say_what_is_allowed(ann):
    over = ann("submit", "-A", "org/prog-a/a1", "-t", "100h")
    assert over.returncode == 2
    assert "-t (min_runtime_s)" in over.stderr  # the flag as typed
    assert "100h is 4 d 4 h" in over.stderr and "at most 8 h" in over.stderr
    assert "360000" not in over.stderr
    kind = ann("submit", "-A", "org/prog-a/a1", "-t", "10m", "--kind", "foo")
    assert kind.returncode == 2 and "--kind (kind)" in kind.stderr
    assert "debug, training, interactive, inference, batch, sweep" in kind.stderr
    assert not Job.objects.exists()


def test_an_unknown_cluster_is_bad_input_on_every_command(ann):
    """`queue`/`hosts` read the cluster from a filter the API answers 404 for; it is the
    same typo as `submit -M nope` or `shares -M nope`: exit 2, naming the flag."""
    for command in (["queue"], ["hosts"], ["shares"]):
        result = ann(*command, "--cluster", "nope")
        assert result.returncode == 2, (command, result.stderr)
        assert "--cluster (cluster)" in result.stderr and "no cluster 'nope'" in result.stderr


def test_clusters_and_hosts(ann):
    clusters = ann("clusters")
    assert clusters.returncode == 0 and "gpu" in clusters.stdout and "memory" in clusters.stdout
    hosts = json.loads(ann("hosts", "--cluster", "gpu", "--json").stdout)
    assert sorted(h["name"] for h in hosts) == ["node00", "node01"]


def test_shares_like_sshare(ann):
    result = ann("shares")
    assert result.returncode == 0, result.stderr
    assert "Fair share on gpu" in result.stdout and "LEVEL" in result.stdout  # LEVEL_FS, 2 lines
    # sshare's RawUsage is TRES-seconds; the window in the queue reasons' words
    assert "(RAW USAGE in GPU-hours over 7 days)" in result.stdout
    a1 = next(line.split() for line in result.stdout.splitlines() if line.split()[:1] == ["a1"])
    # no usage yet: level FS "∞" as the glossary and the page write it (sshare's "inf" was
    # here); the factor with 2 decimals, as the page
    assert a1[6:8] == ["∞", "1.00"], a1
    assert "inf" not in result.stdout.split()
    org = next(line.split() for line in result.stdout.splitlines() if line.split()[:1] == ["org"])
    assert org[1] == "–", org  # the root has no weight: RAW SHARES as the tree page shows it
    nodes = json.loads(ann("shares", "--json").stdout)["nodes"]
    assert {n["name"] for n in nodes} >= {"org", "prog-a", "a1", "a2", "b1"}


def test_shares_says_when_usage_is_decayed(ann):
    """With a half-life, RAW USAGE is decayed usage: the title says so in the words the
    queue reasons and the fair-share dashboard use (allot_common.figures)."""
    Cluster.objects.filter(name="gpu").update(half_life_s=7200)
    result = ann("shares")
    assert result.returncode == 0, result.stderr
    said = usage_window_text(7 * 86400, 7200)
    assert said == "over a decayed window (half-life 2.0 h)"
    assert f"(RAW USAGE in GPU-hours {said})" in " ".join(result.stdout.split())


def test_usage_per_project(ann, tree):
    from scheduler.models import Cluster
    from tests.dashboards.data import project_hours

    gpu = Cluster.objects.get(name="gpu")
    project_hours(
        gpu, tree.node("a1"), 3, allocated_gpu_h=3.5, entitled_gpu_h=2.0,
        measured_gpu_h=2.0, utilized_gpu_h=1.0,
    )  # fmt: skip
    project_hours(gpu, tree.node("b1"), 1, unallocated_gpu_h=8.0)
    result = ann("usage", "--project", "org/prog-a/a1", "--step", "hour")
    assert result.returncode == 0, result.stderr
    assert "DELIVERED" in result.stdout and " ALLOC " not in result.stdout
    steps, period = result.stdout.split("over the period")
    lines = [line for line in steps.splitlines() if "org/prog-a/a1" in line]
    assert len(lines) == 3 and "org/prog-b" not in result.stdout
    # the period's row: 3 x 3.5 delivered of 3 x 2.0 entitled, the dashboard's ratio
    assert period.splitlines()[2].split() == [
        "org/prog-a/a1",
        "10.5",
        "6.0",
        "175.0%",
        "0.0",
        "0.0",
    ]
    assert "GPU UTIL" in result.stdout and all(
        "50.0%" in line and "50.00%" not in line for line in lines
    )
    rows = json.loads(ann("usage", "--json").stdout)  # every cluster and project, per day
    assert sum(r["delivered_gpu_h"] for r in rows) == pytest.approx(3 * 3.5)
    assert all("allocated_gpu_h" not in r for r in rows)  # one figure, one name
    assert sum(r["unallocated_gpu_h"] for r in rows) == pytest.approx(8.0)
    assert {r["project_path"] for r in rows} == {"org/prog-a/a1", "org/prog-b/b1"}
    by_path = {r["project_path"]: r for r in rows}
    assert by_path["org/prog-a/a1"]["utilization"] == pytest.approx(0.5)
    assert by_path["org/prog-b/b1"]["utilization"] is None  # nothing measured: unknown
    ann.env["COLUMNS"] = "80"
    piped = ann("usage", "--step", "hour").stdout  # into a pipe the heading is one line
    assert "GPU-hours on gpu per hour, last 7 days of complete hours, to " in piped
    ann.env["TTY_COMPATIBLE"] = "1"  # an 80-column terminal, as rich judges one
    narrow = ann("usage", "--step", "hour")
    assert narrow.returncode == 0, narrow.stderr
    narrow.stdout = ANSI.sub("", narrow.stdout)
    assert "GPU-hours on gpu per hour" in narrow.stdout  # one cluster: named once, no column
    assert "…" not in narrow.stdout, narrow.stdout  # no figure and no path cut at 80 columns
    assert all(len(line) <= 80 for line in narrow.stdout.splitlines()), narrow.stdout
    del ann.env["TTY_COMPATIBLE"]
    day = ann("usage", "--project", "org/prog-b/b1").stdout
    assert "DAY (UTC)" in day and "org/prog-b/b1" in day
    bad = ann("usage", "--step", "week")
    assert bad.returncode == 2 and "--step (step)" in bad.stderr and "hour, day" in bad.stderr


def test_tokens_lists_mine_and_revokes_by_key_or_all_but_the_one_in_use(server, tree, tmp_path):
    ann, bob = tree.user("ann"), tree.user("bob")
    cli = Cli(server.url, tmp_path, token_for(ann))  # its token is named "test"
    laptop, laptop_secret = token_create(user=ann, name="laptop-" + "x" * 90)
    ci, ci_secret = token_create(user=ann, name="CI")
    bobs, bobs_secret = token_create(user=bob, name="bob's")
    listed = cli("tokens")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split("\n")[0].split() == ["KEY", "NAME", "CREATED", "EXPIRES", "CURRENT"]
    rows = json.loads(cli("tokens", "--json").stdout)
    assert [(t["name"][:7], t["current"]) for t in rows] == [
        ("CI", False), ("laptop-", False), ("test", True),
    ]  # fmt: skip
    current = rows[2]["token_key"]
    assert laptop_secret not in listed.stdout and bobs.token_key not in listed.stdout
    line = next(line for line in listed.stdout.splitlines() if line.startswith(current))
    assert line.split()[-1] == "yes"

    # another user's key, or one nobody holds: an error naming it, exit 1, nothing revoked
    events = TokenEvent.objects.count()
    refused = cli("tokens", "revoke", bobs.token_key)
    assert refused.returncode == 1 and f"You have no token with key '{bobs.token_key}'" in (
        refused.stderr
    )
    assert ApiToken.objects.filter(pk=bobs.pk).exists() and TokenEvent.objects.count() == events

    # by key (as listed, with its "…" too): at once, recorded as revoked by ann
    revoked = cli("tokens", "revoke", f"{laptop.token_key}…")
    assert revoked.returncode == 0 and f"token {laptop.token_key}…: revoked" in revoked.stdout
    event = TokenEvent.objects.latest("id")
    assert (event.kind, event.actor_name, event.token_key) == ("revoked", "ann", laptop.token_key)
    assert Cli(server.url, tmp_path, laptop_secret)("tokens").returncode == 1  # refused at once

    # every other one: the CLI's own is kept and works on; bob's is not touched
    others = cli("tokens", "revoke", "--all-others")
    assert others.returncode == 0 and f"1 token revoked; {current}… (this one) kept" in (
        others.stdout
    )
    assert [t.token_key for t in ApiToken.objects.filter(user=ann)] == [current]
    assert TokenEvent.objects.latest("id").token_key == ci.token_key
    assert Cli(server.url, tmp_path, ci_secret)("tokens").returncode == 1
    assert Cli(server.url, tmp_path, bobs_secret)("tokens").returncode == 0
    assert [t["token_key"] for t in json.loads(cli("tokens", "--json").stdout)] == [current]

    # its own token: revoked, and it says how to sign in again
    own = cli("tokens", "revoke", current)
    assert own.returncode == 0 and "run `allot login` again" in own.stdout
    assert cli("tokens").returncode == 1 and not ApiToken.objects.filter(user=ann).exists()


def test_the_console_script_is_installed():
    script = Path(sys.executable).parent / "allot"
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "submit" in result.stdout


# A call of the CLI that reports, on standard error as it exits, which of the modules that
# cost start-up time it loaded (`bench/cli_start.py` measures what they cost).
HEAVY = (
    "django", "scheduler", "budgets", "ledger", "config", "httpx", "rich", "pytimeparse",
    "typer", "click", "ssl", "urllib.request", "dataclasses",
)  # fmt: skip
LOADED = (
    "import atexit, sys\n"
    f"atexit.register(lambda: print(sorted({{m.split('.')[0] for m in sys.modules"
    f" if m.startswith({HEAVY!r})}}), file=sys.stderr))\n"
    "sys.argv = ['allot', *sys.argv[1:]]\n"
    "from allot_cli.main import main\n"
    "main()\n"
)


def test_each_call_loads_only_what_it_needs(ann):
    """`--help` loads none of the server, rich or pytimeparse; a table or a line into a
    pipe no rich either (allot_cli/plain.py); a duration like 15m loads pytimeparse. No
    call loads typer or click (argparse parses), nor ssl or urllib.request for a plain-http
    server (http.client alone asks it), nor dataclasses (start-up time); an error's line
    into a pipe no rich either."""
    ann("submit", "-A", "org/prog-a/a1", "-t", "1h")
    for args, code, loads in [
        (["--help"], 0, "[]"),
        (["queue"], 0, "[]"),
        (["queue", "--json"], 0, "[]"),
        (["submit", "-A", "org/prog-a/a1", "-t", "3600"], 0, "[]"),
        (["submit", "-A", "org/prog-a/a1", "-t", "15m"], 0, "['pytimeparse']"),
        (["queue", "--state", "done"], 2, "[]"),
    ]:
        done = subprocess.run(
            [sys.executable, "-c", LOADED, *args],
            env=ann.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == code, done.stderr
        assert done.stderr.strip().splitlines()[-1] == loads, args
    assert done.stderr.startswith("error: --state: state must be one of pending, running, all")


def test_a_reader_that_leaves_early_ends_the_call_quietly(ann):
    """`allot clusters | head`: the pipe is closed before the table is written; the call
    ends with the shell's SIGPIPE code and no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to the pipe now fails (EPIPE)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "allot_cli", "clusters"],
            env=ann.env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 141


def test_submit_without_a_command_is_refused_on_slurm_only(ann):
    """A Slurm job needs a command (nothing to run otherwise): the service's 400 naming
    `spec.command`, shown with the flag, exit 2, nothing stored; a simulated cluster
    runs a job for its duration without one."""
    slurm = ClusterFactory(name="hpc", adapter="slurm", host_count=2, gpus_per_host=8)
    for i in range(2):
        HostFactory(cluster=slurm, name=f"hpc{i:02d}", gpus=8)
    refused = ann("submit", "-A", "org/prog-a/a1", "-t", "10m", "--cluster", "hpc")
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert "--command (spec.command)" in refused.stderr and "Slurm" in refused.stderr
    assert not Job.objects.exists()
    simulated = ClusterFactory(name="sim", host_count=2, gpus_per_host=8)
    HostFactory(cluster=simulated, name="sim00", gpus=8)
    accepted = ann("submit", "-A", "org/prog-a/a1", "-t", "10m", "--cluster", "sim")
    assert accepted.returncode == 0, accepted.stderr
    assert Job.objects.get().cluster.name == "sim" and Job.objects.get().spec == {}
