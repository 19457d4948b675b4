"""The `allot` commands (typer). Each one is a REST call and a table; `--json` prints
the server's answer as it is, for scripts. Exit codes: 0 done, 2 bad input (the error
names the flag and the field), 1 any other failure."""

from __future__ import annotations

import getpass
import shlex
import socket
import sys
from typing import Annotated, Any

import typer

from allot_cli import queue as queue_views
from allot_cli import render
from allot_cli.client import EXIT_BAD_INPUT, Api, CliError, save_config, settings
from allot_cli.options import capped_min_runtime, cluster_row, duration_s, only_cluster

app = typer.Typer(
    help="Submit and follow GPU jobs on Allot (like sbatch/squeue/scancel/sshare).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the server's JSON answer.")]
ClusterOpt = Annotated[
    str | None,
    typer.Option("--cluster", "-M", help="Cluster name or id (default: the only cluster)."),
]


class State:
    url: str | None = None


def api() -> Api:
    return Api(settings(State.url))


@app.callback()
def _root(
    url: Annotated[
        str | None,
        typer.Option("--url", help="Server URL (default: ALLOT_URL, then `allot login`'s)."),
    ] = None,
) -> None:
    State.url = url


# ---------------------------------------------------------------- login


@app.command()
def login(
    username: Annotated[str | None, typer.Option("--username", "-u")] = None,
    password: Annotated[
        str | None, typer.Option("--password", help="Prompted (hidden) when not given.")
    ] = None,
) -> None:
    """Sign in and store a token in your config file (readable by you only)."""
    conf = settings(State.url)
    username = username or input("User name: ")
    password = password if password is not None else getpass.getpass("Password: ")
    client = Api(conf, need_token=False)
    answer = client.request(
        "POST",
        "auth/token/",
        json_body={
            "username": username,
            "password": password,
            "name": f"allot CLI on {socket.gethostname()}"[:100],
        },
    )
    path = save_config({"url": conf.url, "token": answer["token"]})
    render.out.print(f"Signed in to {conf.url} as {username}; token stored in {path}.")


# ---------------------------------------------------------------- submit


@app.command()
def submit(
    project: Annotated[str, typer.Option("--project", "-A", help="Project path or id.")],
    min_runtime: Annotated[
        str,
        typer.Option(
            "--min-runtime",
            "-t",
            help="Protected runtime (15m, 2h, ...); 0 submits unallocated work (free, "
            "preemptible at any time).",
        ),
    ],
    cluster: ClusterOpt = None,
    gpus: Annotated[int, typer.Option("--gpus", "-G", help="1, 2, 4, 8 or whole hosts.")] = 1,
    kind: Annotated[
        str,
        typer.Option(help="debug, training, interactive, inference, batch or sweep."),
    ] = "training",
    array: Annotated[int, typer.Option("--array", "-a", help="Submit N identical jobs.")] = 1,
    resumable: Annotated[
        bool, typer.Option("--resumable", help="Resumes from a checkpoint when preempted.")
    ] = False,
    priority: Annotated[int, typer.Option(help="Orders it among your project's jobs.")] = 0,
    name: Annotated[str, typer.Option("--name", "-J")] = "job",
    duration: Annotated[
        str | None,
        typer.Option(help="Expected run time (the simulated cluster runs it this long)."),
    ] = None,
    image: Annotated[str | None, typer.Option(help="Container image.")] = None,
    command: Annotated[str | None, typer.Option(help="Command line to run.")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", "-e", help="K=V, repeatable.")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check it and say where it would stand.")
    ] = False,
    as_json: JsonFlag = False,
    args: Annotated[
        list[str] | None, typer.Argument(help="The command, after `--` (instead of --command).")
    ] = None,
) -> None:
    """Submit a job (like sbatch)."""
    if args and command:
        raise CliError("give the command either with --command or after --", code=EXIT_BAD_INPUT)
    spec: dict[str, Any] = {}
    if image:
        spec["image"] = image
    if command or args:
        spec["command"] = command or shlex.join(args or [])
    if env:
        spec["env"] = _env(env)
    client = api()
    target = cluster_row(client, cluster)
    body: dict[str, Any] = {
        "project": int(project) if project.isdigit() else project,
        "cluster": target["name"],
        "name": name,
        "gpus": gpus,
        "min_runtime_s": capped_min_runtime(min_runtime, target),
        "resumable": resumable,
        "priority": priority,
        "kind": kind,
        "spec": spec,
        "duration_s": duration_s(duration, flag="--duration") if duration else None,
        "array": array,
    }
    answer = client.submit(body, dry_run=dry_run)
    if as_json:
        render.print_json(answer)
    elif dry_run:
        _print_estimate(answer)
    else:
        _print_submitted(answer)


def _env(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{item!r} is not K=V", code=EXIT_BAD_INPUT).with_flag("--env")
        env[key] = value
    return env


def _print_submitted(answer: dict) -> None:
    jobs = answer["jobs"]
    first = jobs[0]
    runtime = render.seconds(first["min_runtime_s"])
    what = f"{render.plural(first['gpus'], 'GPU')}, min runtime {runtime}, " + (
        "allocated" if first["allocated"] else "unallocated (free, preemptible)"
    )
    again = " (an earlier identical request)" if answer.get("replayed") else ""
    if len(jobs) == 1:
        render.out.print(
            f"Submitted job {first['id']}{again} to {first['project_path']} on "
            f"{first['cluster_name']}: {what}; {first['state']}."
        )
    else:
        render.out.print(
            f"Submitted {len(jobs)} jobs{again} (array {answer['array_id']}, ids "
            f"{jobs[0]['id']}-{jobs[-1]['id']}) to {first['project_path']} on "
            f"{first['cluster_name']}: each {what}."
        )


def _print_estimate(answer: dict) -> None:
    job, estimate = answer["job"], answer["estimate"]
    render.out.print(
        f"Valid: {render.plural(answer['count'], 'job')} of {render.plural(job['gpus'], 'GPU')} "
        f"for {job['project_path']} on "
        f"{job['cluster_name']}; nothing was submitted."
    )
    if estimate["starts_now"]:
        render.out.print("It would start in the next cycle (free GPUs fit it).")
    elif estimate["position"] is not None:
        render.out.print(
            f"It would wait at position {estimate['position']} of {estimate['queue_length']} "
            f"({estimate['project_position']} in its project; fair-share factor "
            f"{render.number(estimate['fairshare_factor'])}): {estimate['reason']}"
        )
    else:
        render.out.print(estimate["reason"])


# ---------------------------------------------------------------- queue, show, cancel


@app.command()
def queue(
    cluster: ClusterOpt = None,
    me: Annotated[bool, typer.Option("--me", help="Only your jobs (like squeue --me).")] = False,
    state: Annotated[
        str,
        typer.Option(
            "--state", "-t", help="pending, running or all (like squeue -t).", show_default=True
        ),
    ] = "pending",
    long: Annotated[
        bool, typer.Option("--long", "-l", help="Name, kind, priority, factor; whole reasons.")
    ] = False,
    limit: Annotated[int, typer.Option(help="Rows to show (per state).")] = 50,
    all_rows: Annotated[bool, typer.Option("--all", help="Every job.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Pending jobs in the order they will start, with position and reason; running jobs
    with their start (like squeue)."""
    state = queue_views.check_state(state)
    client = api()
    name = only_cluster(client, cluster)
    mine = "true" if me else None
    rows = None if all_rows else max(1, limit)
    found: dict[str, Any] = {}
    if state in ("pending", "all"):
        found["pending"] = queue_views.read_pending(client, name, mine=mine, limit=rows)
    if state in ("running", "all"):
        found["running"] = queue_views.read_running(client, name, mine=mine, limit=rows)
    if as_json:
        render.print_json(found if state == "all" else found[state])
        return
    if "pending" in found:
        queue_views.print_pending(name, found["pending"], me=me, long=long)
    if "running" in found:
        if "pending" in found:
            render.out.print()
        queue_views.print_running(name, found["running"], me=me)


@app.command()
def show(job_id: int, as_json: JsonFlag = False) -> None:
    """One job: its state, where it stands in the queue and why, attempts and events."""
    job = api().get(f"jobs/{job_id}/")
    if as_json:
        render.print_json(job)
        return
    render.pairs(_job_facts(job) + _queue_facts(job) + _eta_facts(job))
    if job.get("blockers"):
        render.table(
            ["#", "KIND", "WHY"],
            ([i, b["kind"], b["text"]] for i, b in enumerate(job["blockers"], 1)),
            title="blockers (most pressing first)",
            wrap=("WHY",),
        )
    if job["attempts"]:
        _attempts_table(job["attempts"])
    _events_table(job["events"])


def _job_facts(job: dict[str, Any]) -> list[tuple[str, Any]]:
    """The job's own fields (state, project, shape, submission, array, spec)."""
    items: list[tuple[str, Any]] = [
        ("job", f"{job['id']} {job['name']}"),
        (
            "state",
            f"{job['state']} ({job['state_reason']})" if job["state_reason"] else job["state"],
        ),
        ("project", job["project_path"]),
        ("cluster", job["cluster_name"]),
        ("submitter", job["submitter"]),
        ("gpus", job["gpus"]),
        ("kind", job["kind"]),
        (
            "min runtime",
            render.seconds(job["min_runtime_s"])
            + (" (allocated)" if job["allocated"] else " (unallocated)"),
        ),
        ("resumable", "yes" if job["resumable"] else "no"),
        ("priority", job["priority"]),
        ("submitted", render.when(job["submitted_at"], seconds=True)),
    ]
    if job["array_id"]:
        items.append(("array", f"{job['array_id']} [{job['array_index']}]"))
    if job.get("spec"):
        spec = job["spec"]
        items += [(k, spec[k]) for k in ("image", "command") if spec.get(k)]
        if spec.get("env"):
            items.append(("env", " ".join(f"{k}={v}" for k, v in spec["env"].items())))
    return items


def _queue_facts(job: dict[str, Any]) -> list[tuple[str, Any]]:
    """Where the job stands in the queue and why (none once it left the queue)."""
    items: list[tuple[str, Any]] = []
    q = job.get("queue")
    if q:
        where = (
            f"{q['position']} of {q['queue_length']} ({q['project_position']} in its project)"
            if q["position"]
            else "not placed yet"
        )
        items += [
            ("position", where),
            ("fair-share factor", render.number(q["fairshare_factor"])),
            ("reason", q["reason"]),
        ]
    return items


def _eta_facts(job: dict[str, Any]) -> list[tuple[str, Any]]:
    """The estimated start, when it last moved and why, and the backfill estimate."""
    items: list[tuple[str, Any]] = []
    if job.get("eta"):
        items.append(("estimated start", _eta_text(job["eta"])))
        moved = job["eta"].get("moved")
        if moved:
            items.append(
                (
                    "estimate moved",
                    f"from {render.when(moved['previous_start'])} at "
                    f"{render.when(moved['at'])}: {moved['because']}",
                )
            )
        if job["eta"].get("baseline_start"):
            baseline = job["eta"]["baseline_start"]
            items.append(("backfill estimate", f"{render.when(baseline)} ({render.ago(baseline)})"))
    return items


def _attempts_table(attempts: list[dict[str, Any]]) -> None:
    """One row an attempt: its state, hosts and GPUs, start, end and why it ended."""
    render.table(
        ["#", "ATTEMPT", "STATE", "HOSTS", "STARTED", "ENDED", "END"],
        (
            [
                a["number"],
                a["attempt_id"],
                a["state"],
                " ".join(
                    f"{p['host']}:{','.join(map(str, p['gpu_indices']))}" for p in a["placements"]
                ),
                render.when(a["started_at"]),
                render.when(a["ended_at"]),
                a["end_reason"] or a["stop_intent"] or "",
            ]
            for a in attempts
        ),
        title="attempts",
        crop=("HOSTS", "ATTEMPT"),
    )


def _events_table(events: list[dict[str, Any]]) -> None:
    """The job's state changes, who made them and why."""
    render.table(
        ["AT", "FROM", "TO", "BY", "REASON"],
        (
            [
                render.when(e["at"], seconds=True),
                e["from_state"] or "-",
                e["to_state"],
                e["actor"] or "allot",
                f"{e['rule_label']}: {e['reason']}" if e.get("rule_label") else e["reason"],
            ]
            for e in events
        ),
        title="events",
        wrap=("REASON",),
    )


def _eta_text(eta: dict[str, Any]) -> str:
    """The estimate as the job page words it."""
    if eta["method"] == "victims-stopping":
        return "now: the jobs it preempts are exiting"
    if eta["method"] == "estimating":
        return "being computed; ask again in a few seconds"
    if not eta["start"]:
        return "not within the next 30 days at the current queue"
    text = f"{render.when(eta['start'])} ({render.ago(eta['start'])})"
    low, high = render.when(eta["earliest"]), render.when(eta["latest"])
    if eta["earliest"] and eta["latest"] and low != high:
        text += f" (likely between {low} and {high})"
    elif eta["earliest"] and not eta["latest"]:
        text += f" (not before {low})"
    return text


@app.command()
def cancel(
    job_ids: Annotated[list[int], typer.Argument(help="One or more job ids.")],
    as_json: JsonFlag = False,
) -> None:
    """Cancel jobs (pending: at once; running: stopped with the cluster's grace period)."""
    client = api()
    answers = []
    failed: CliError | None = None
    for job_id in job_ids:
        try:
            job = client.request("POST", f"jobs/{job_id}/cancel/")
        except CliError as exc:
            render.err.print(f"error: job {job_id}: {exc}", markup=False)
            failed = exc
            continue
        answers.append(job)
        if not as_json:
            render.out.print(f"job {job['id']}: {job['state']}", markup=False)
    if as_json:
        render.print_json(answers)
    if failed is not None:
        raise typer.Exit(failed.code)


# ---------------------------------------------------------------- clusters, hosts


@app.command()
def clusters(as_json: JsonFlag = False) -> None:
    """Clusters with their GPUs, hosts by health and jobs."""
    rows = api().get("clusters/")
    if as_json:
        render.print_json(rows)
        return
    render.table(
        [
            "NAME",
            "ADAPTER",
            "HOSTS",
            "GPUS",
            "HEALTHY",
            "DRAIN",
            "DOWN",
            "PEND",
            "RUN",
            "LAST_CYCLE",
        ],
        (
            [
                c["name"],
                c["adapter"],
                c["hosts"],
                c["gpus"],
                c["healthy_gpus"],
                c["draining_hosts"],
                c["down_hosts"],
                c["pending_jobs"],
                c["running_jobs"],
                render.ago(c["last_cycle"]["started_at"]) if c["last_cycle"] else "never",
            ]
            for c in rows
        ),
        crop=("NAME",),
    )


@app.command()
def hosts(cluster: ClusterOpt = None, as_json: JsonFlag = False) -> None:
    """Hosts with their health and GPUs in use (like sinfo -N)."""
    rows = api().get_all("hosts/", cluster=cluster)
    if as_json:
        render.print_json(rows)
        return
    render.table(
        ["CLUSTER", "HOST", "GPUS", "IN_USE", "HEALTH", "SINCE", "REASON"],
        (
            [
                h["cluster_name"],
                h["name"],
                h["gpus"],
                h["gpus_in_use"],
                h["health"],
                render.when(h["health_changed_at"]),
                h["health_reason"],
            ]
            for h in rows
        ),
        wrap=("REASON",),
    )


# ---------------------------------------------------------------- usage, shares


@app.command()
def usage(
    cluster: Annotated[
        str | None, typer.Option("--cluster", "-M", help="Cluster name or id (default: all).")
    ] = None,
    project: Annotated[
        str | None,
        typer.Option("--project", "-A", help="Project, program or organisation path or id."),
    ] = None,
    since: Annotated[str | None, typer.Option(help="ISO time or date, e.g. 2026-11-01")] = None,
    until: Annotated[str | None, typer.Option(help="ISO time or date")] = None,
    step: Annotated[str, typer.Option(help="hour or day")] = "day",
    as_json: JsonFlag = False,
) -> None:
    """GPU-hours per project and step: delivered, unallocated, demand, entitled, and the
    GPU utilization of its runs (unknown: '-'), over whole hours that are over (by
    default the last 7 days of complete hours)."""
    head, rows = api().get_all_with_head(
        "usage/", cluster=cluster, project=project, since=since, until=until, step=step
    )
    if as_json:
        render.print_json(rows)
        return
    clusters = sorted({r.get("cluster_name", "") for r in rows})
    one = len(clusters) == 1
    if head.get("window_end"):
        render.out.print(
            f"GPU-hours{f' on {clusters[0]}' if one else ''} per {step}, "
            f"{render.report_window(head.get('window_start'), head['window_end'])}",
            markup=False,
        )
    render.table(
        [
            "DAY (UTC)" if step == "day" else f"HOUR ({render.zone()})",
            *([] if one else ["CLUSTER"]),
            "PROJECT",
            "DELIVERED",
            "UNALLOC",
            "DEMAND",
            "ENTITLED",
            "GPU UTIL",
        ],
        (
            [
                render.step_start(r.get("start"), step),
                *([] if one else [r.get("cluster_name", "")]),
                r.get("project_path", ""),
                *(r.get(f"{k}_gpu_h") for k in ("delivered", "unallocated", "demand", "entitled")),
                render.known_share(r.get("utilization")),
            ]
            for r in rows
        ),
        crop_left=("PROJECT",),
    )


SHARE_COLUMNS = (
    "raw_shares",
    "norm_shares",
    "raw_usage",
    "norm_usage",
    "effective_usage",
    "level_fs",
    "fairshare",
    "rank",
)
# the columns that are shares, shown in the pages' format (12.50%)
SHARE_FRACTIONS = frozenset({"norm_shares"})


@app.command()
def shares(cluster: ClusterOpt = None, as_json: JsonFlag = False) -> None:
    """Fair share of every node of the budget tree (like sshare -l)."""
    client = api()
    answer = client.get("fairshare/", cluster=only_cluster(client, cluster))
    if as_json:
        render.print_json(answer)
        return
    render.out.print(
        f"Fair share on {answer.get('cluster_name', '?')} (RAW USAGE in GPU-hours), "
        + render.cycle_as_of(answer.get("as_of"), from_cycle=answer.get("from_cycle", True)),
        markup=False,
    )
    nodes = answer.get("nodes", []) if isinstance(answer, dict) else answer
    render.table(
        ["NODE", *(SHARE_HEADERS.get(c, c.upper().replace("_", "\n", 1)) for c in SHARE_COLUMNS)],
        ([_share_name(n), *(_share_cell(n, c) for c in SHARE_COLUMNS)] for n in nodes),
        crop=("NODE",),
    )
    unentitled = [n["path"] for n in nodes if _no_entitlement(n)]
    if unentitled:
        render.out.print(
            f"No entitlement (weight 0 on the path): {', '.join(unentitled)}; "
            "runs only unallocated work, not ranked.",
            markup=False,
        )


# shorter than EFFECTIVE / FAIRSHARE, so that the table fits 80 columns (sshare's own
# header spells EffectvUsage)
SHARE_HEADERS = {"effective_usage": "EFFECTV\nUSAGE", "fairshare": "FAIR\nSHARE"}


def _no_entitlement(node: dict[str, Any]) -> bool:
    return node.get("depth", 0) > 0 and not node.get("entitled_share")


def _share_name(node: dict[str, Any]) -> str:
    return "  " * int(node.get("depth") or 0) + str(node.get("name", node.get("path", "")))


def _share_cell(node: dict[str, Any], column: str) -> str:
    """One figure of the fair-share table in the dashboard's format (usage in GPU-hours
    with one decimal, level FS and factor with two); '-' where there is none, and for
    a node without entitlement."""
    value = node.get(column)
    if column in SHARE_FRACTIONS:
        return render.share(value)
    if column == "level_fs" and node.get("level_fs_infinite"):
        return "inf"
    if value is None or (_no_entitlement(node) and column in ("level_fs", "fairshare")):
        return "-"
    if column == "raw_usage":
        return render.gpu_hours(value)
    if column in ("level_fs", "fairshare"):
        return f"{float(value):.2f}"
    return render.number(value)


def main() -> None:
    """Console entry point: run a command; report a failure as one line and an exit code."""
    try:
        app()
    except CliError as exc:
        render.err.print(f"error: {exc}", markup=False)
        sys.exit(exc.code)
    except KeyboardInterrupt:
        sys.exit(130)
