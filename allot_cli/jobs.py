"""`allot show` (one job: its state, its run's protection end and GPU utilization,
queue place and why, estimated start, blockers, attempts and events) and `allot cancel` (like scancel)."""

import sys
from typing import Any

from allot_cli import render
from allot_cli.app import Context, Parser, api, argument, command, json_flag
from allot_cli.client import CliError
from allot_common.placements import host_gpus_text


def add_show(commands: Any) -> Parser:
    parser = command(commands, show, usage=" job_id")
    argument(parser, "job_id", type=int)
    json_flag(parser)
    return parser


def show(ctx: Context, job_id: int, as_json: bool = False) -> None:
    """One job: its state, where it stands in the queue and why, attempts and events."""
    job = api(ctx).get(f"jobs/{job_id}/")
    if as_json:
        render.print_json(job)
        return
    render.pairs(_job_facts(job) + _run_facts(job) + _queue_facts(job) + _eta_facts(job))
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
            render.runtime(job["min_runtime_s"])
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


HOLDS_GPUS = ("starting", "running", "stopping")  # a job with an open attempt


def _run_facts(job: dict[str, Any]) -> list[tuple[str, Any]]:
    """Its current run's protection end and its GPU utilization, as the job page says
    them (the utilization once it started; docs/concepts.md#protection, #utilization)."""
    items: list[tuple[str, Any]] = []
    until = job.get("protected_until")
    if until:
        items.append(("protected until", f"{render.when(until)} ({render.ago(until)})"))
    elif job["state"] in HOLDS_GPUS and not job["allocated"]:
        items.append(("protected until", "never (unallocated)"))
    if job.get("first_started_at"):
        used = job["utilization"]
        text = render.known_percent(used["utilization"])
        if used["utilization"] is None:
            text += " (no GPU metrics read for its GPUs yet)"
        items.append(("GPU utilization", text))
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
            ("queue position", where),
            ("fair-share factor", render.factor(q["fairshare_factor"])),
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
            items.append(
                ("reservation-only estimate", f"{render.when(baseline)} ({render.ago(baseline)})")
            )
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
                ", ".join(host_gpus_text(p["host"], p["gpu_indices"]) for p in a["placements"]),
                render.when(a["started_at"]),
                render.when(a["ended_at"]),
                # the job page's words ("Moved to other hosts"); a server without them: the code
                a.get("end_label") or a["end_reason"] or a["stop_intent"] or render.EMPTY,
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
                e["from_state"] or render.EMPTY,
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
    if eta.get("overdue"):
        return f"due now (it was expected by {render.when(eta['start'])}; a new estimate follows)"
    text = f"{render.when(eta['start'])} ({render.ago(eta['start'])})"
    low, high = render.when(eta["earliest"]), render.when(eta["latest"])
    if eta["earliest"] and eta["latest"] and low != high:
        text += f" (likely between {low} and {high})"
    elif eta["earliest"] and not eta["latest"]:
        text += f" (not before {low})"
    return text


def add_cancel(commands: Any) -> Parser:
    parser = command(commands, cancel, usage=" job_ids...")
    argument(parser, "job_ids", nargs="+", type=int, help="One or more job ids.")
    json_flag(parser)
    return parser


def cancel(ctx: Context, job_ids: list[int], as_json: bool = False) -> None:
    """Cancel jobs (pending: at once; running: stopped with the cluster's grace period)."""
    client = api(ctx)
    answers = []
    failed: CliError | None = None
    for job_id in dict.fromkeys(job_ids):  # a job named twice is cancelled (and said) once
        try:
            job = client.request("POST", f"jobs/{job_id}/cancel/")
        except CliError as exc:
            render.error(f"error: job {job_id}: {exc}")
            failed = exc
            continue
        answers.append(job)
        if not as_json:
            render.line(f"job {job['id']}: {job['state']}", markup=False)
    if as_json:
        render.print_json(answers)
    if failed is not None:
        sys.exit(failed.code)
