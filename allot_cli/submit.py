"""`allot submit` (like sbatch): a job, an array, or a dry run that says where it would
stand; the answer in words or, with `--json`, as the server gave it."""

import shlex
from typing import Any

from allot_cli import render
from allot_cli.app import (
    Context,
    Parser,
    api,
    argument,
    cluster_option,
    command,
    flag,
    json_flag,
    option,
)
from allot_cli.client import EXIT_BAD_INPUT, CliError
from allot_cli.options import capped_min_runtime, cluster_row, duration_s


def add_submit(commands: Any) -> Parser:
    parser = command(commands, submit, usage=" [args]...")
    argument(parser, "args", nargs="*", help="The command, after `--` (instead of --command).")
    # sbatch's own long names too: --account, --time-min, --job-name
    option(
        parser, "--project", "-A", "--account", required=True, dest="project",
        help="Project path, id, or its name alone when one project has it.",
    )  # fmt: skip
    option(
        parser,
        "--min-runtime",
        "-t",
        "--time-min",
        dest="min_runtime",
        help="Protected runtime (15m, 2h, ...); 0 submits unallocated work (free, "
        "preemptible at any time).",
        required=True,
    )
    cluster_option(parser)
    option(parser, "--gpus", "-G", help="1, 2, 4, 8 or whole hosts.", type=int, default=1)
    option(
        parser,
        "--kind",
        help="debug, training, interactive, inference, batch or sweep.",
        default="training",
    )
    option(parser, "--array", "-a", help="Submit N identical jobs.", type=int, default=1)
    flag(parser, "--resumable", help="Resumes from a checkpoint when preempted.")
    option(parser, "--priority", help="Orders it among your project's jobs.", type=int, default=0)
    option(parser, "--name", "-J", "--job-name", default="job", dest="name")
    option(
        parser,
        "--duration",
        help="Expected run time (the simulated cluster runs it this long).",
    )
    option(parser, "--image", help="Container image.")
    option(parser, "--command", help="Command line to run.")
    option(parser, "--env", "-e", help="K=V, repeatable.", action="append")
    flag(parser, "--dry-run", help="Check it and say where it would stand.")
    json_flag(parser)
    return parser


def submit(
    ctx: Context,
    project: str,
    min_runtime: str,
    cluster: str | None = None,
    gpus: int = 1,
    kind: str = "training",
    array: int = 1,
    resumable: bool = False,
    priority: int = 0,
    name: str = "job",
    duration: str | None = None,
    image: str | None = None,
    command: str | None = None,
    env: list[str] | None = None,
    dry_run: bool = False,
    as_json: bool = False,
    args: list[str] | None = None,
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
    client = api(ctx)
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
    runtime = render.runtime(first["min_runtime_s"])
    what = f"{render.plural(first['gpus'], 'GPU')}, min runtime {runtime}, " + (
        "allocated" if first["allocated"] else "unallocated (free, preemptible)"
    )
    again = " (an earlier identical request)" if answer.get("replayed") else ""
    if len(jobs) == 1:
        render.line(
            f"Submitted job {first['id']}{again} to {first['project_path']} on "
            f"{first['cluster_name']}: {what}; {first['state']}."
        )
    else:
        render.line(
            f"Submitted {len(jobs)} jobs{again} (array {answer['array_id']}, ids "
            f"{jobs[0]['id']}-{jobs[-1]['id']}) to {first['project_path']} on "
            f"{first['cluster_name']}: each {what}."
        )


def _print_estimate(answer: dict) -> None:
    job, estimate = answer["job"], answer["estimate"]
    render.line(
        f"Valid: {render.plural(answer['count'], 'job')} of {render.plural(job['gpus'], 'GPU')} "
        f"for {job['project_path']} on "
        f"{job['cluster_name']}; nothing was submitted."
    )
    if estimate["starts_now"]:
        render.line("It would start in the next cycle (free GPUs fit it).")
    elif estimate["position"] is not None:
        render.line(
            f"It would wait at position {estimate['position']} of {estimate['queue_length']} "
            f"({estimate['project_position']} in its project; fair-share factor "
            f"{render.factor(estimate['fairshare_factor'])}): "
            + render.local_times(estimate["reason"])
        )
    else:
        render.line(render.local_times(estimate["reason"]))
