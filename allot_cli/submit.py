"""`allot submit` (like sbatch): a job, an array, or a dry run that says where it would
stand; the answer in words or, with `--json`, as the server gave it."""

import shlex
from typing import Annotated, Any

import typer

from allot_cli import render
from allot_cli.app import ClusterOpt, JsonFlag, api
from allot_cli.client import EXIT_BAD_INPUT, CliError
from allot_cli.options import capped_min_runtime, cluster_row, duration_s


def submit(
    ctx: typer.Context,
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
    runtime = render.seconds(first["min_runtime_s"])
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
            f"{render.factor(estimate['fairshare_factor'])}): {estimate['reason']}"
        )
    else:
        render.line(estimate["reason"])
