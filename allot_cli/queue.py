"""`allot queue` (like squeue): the pending jobs of a cluster in the order they will start
(the API's queue), its running jobs (the API's job list), or both (`--state all`, like
`squeue -t all`). On a terminal each table keeps one line per job in the terminal's
width: a path is cut from the left, a reason after a word with an ellipsis, in what the
other columns leave (`--long`, `allot show` have reasons whole); into a pipe or a file
every value is whole, one line per job, however long (a script reads whole reasons).
Times are relative ("3 h 10 min") or carry a zone."""

from typing import Any

from allot_cli import render
from allot_cli.app import Context, Parser, api, cluster_option, command, flag, json_flag, option
from allot_cli.client import EXIT_BAD_INPUT, Api, CliError
from allot_cli.options import only_cluster

STATES = ("pending", "running", "all")
RUNNING_STATES = "starting,running,stopping"  # the states of a job with an open attempt


def check_state(state: str) -> str:
    """`--state`, or a bad-input error listing the valid ones."""
    value = state.strip().lower()
    if value not in STATES:
        raise CliError(
            f"state must be one of {', '.join(STATES)}; got {state!r}",
            code=EXIT_BAD_INPUT,
            field="state",
        ).with_flag("--state")
    return value


def read_pending(client: Api, name: str, *, mine: str | None, limit: int | None) -> dict:
    """The queue's first page (its count, cycle) with `limit` rows, or every row (None)."""
    page = client.get("queue/", cluster=name, mine=mine, limit=limit or 1)
    if limit is None:
        page = {**page, "results": client.get_all("queue/", cluster=name, mine=mine)}
    return page


def read_running(client: Api, name: str, *, mine: str | None, limit: int | None) -> dict:
    """The cluster's running jobs (count and rows), the earliest started first."""
    head, rows = client.get_all_with_head(
        "jobs/", limit=limit, cluster=name, mine=mine, state=RUNNING_STATES
    )
    rows = sorted(rows, key=lambda r: (r.get("first_started_at") or "~", r["id"]))
    return {"count": head.get("count", len(rows)), "results": rows}


def print_pending(name: str, page: dict[str, Any], *, me: bool, long: bool) -> None:
    whose = "of your jobs pending" if me else "pending"
    render.line(
        f"Queue of {name}: {page['count']} {whose}, "
        + (render.cycle_as_of(page["computed_at"]) if page["computed_at"] else "no cycle yet")
        + (f" (cycle {page['cycle']})" if page["cycle"] else ""),
        markup=False,
    )
    extra = ["NAME", "KIND", "PRIO", "FS"] if long else []
    columns = ["POS", "JOBID", "USER", "PROJECT", "GPUS", "MIN_RT", "WAITED", *extra, "REASON"]
    rows = [
        [
            r["position"],
            r["job"],
            r["submitter"],
            r["project_path"],
            r["gpus"],
            render.runtime(r["min_runtime_s"]),
            waited(r["queued_at"]),
            *(
                [r["name"], r["kind"], r["priority"], render.factor(r["fairshare_factor"])]
                if long
                else []
            ),
            r["reason"],
        ]
        for r in page["results"]
    ]
    piped = not render.to_terminal()
    if long and rows and not piped and not render.fits(columns, rows, wrap="REASON"):
        print_blocks(columns, rows)  # twelve whole columns do not fit: one block per job
    else:
        render.table(
            columns,
            rows,
            wrap=("REASON",) if long else (),
            crop=() if long else ("REASON",),
            crop_left=() if long else ("PROJECT",),
        )
    _more(page)


def print_blocks(columns: list[str], rows: list[list[Any]]) -> None:
    """Each job as its own block of `column value` lines (like `scontrol show job`), for
    `--long` on a terminal too narrow for its table: every value whole, none cut to an
    ellipsis (a job id once was)."""
    for n, row in enumerate(rows):
        if n:
            render.line()
        render.pairs([(column.lower(), value) for column, value in zip(columns, row, strict=True)])


def print_running(name: str, page: dict[str, Any], *, me: bool) -> None:
    whose = "of your jobs running" if me else "running"
    render.line(
        f"Running on {name}: {page['count']} {whose}, the earliest started first",
        markup=False,
    )
    render.table(
        ["JOBID", "USER", "PROJECT", "GPUS", "MIN_RT", "STATE", "STARTED"],
        (
            [
                r["id"],
                r["submitter"],
                r["project_path"],
                r["gpus"],
                render.runtime(r["min_runtime_s"]),
                r["state"],
                render.ago(r["first_started_at"]),
            ]
            for r in page["results"]
        ),
        crop_left=("PROJECT",),
    )
    _more(page)


def waited(queued_at: str | None) -> str:
    """How long a pending job has waited since it (last) entered the queue: '3 h 10 min'."""
    return render.since(queued_at)


def _more(page: dict[str, Any]) -> None:
    shown = len(page["results"])
    if page["count"] > shown:
        render.line(f"... {page['count'] - shown} more (--all or --limit N)")


def add_queue(commands: Any) -> Parser:
    parser = command(commands, queue)
    cluster_option(parser)
    flag(parser, "--me", help="Only your jobs (like squeue --me).")
    option(
        parser, "--state", "-t", help="pending, running or all (like squeue -t).", default="pending"
    )
    flag(
        parser,
        "--long",
        "-l",
        help="Name, kind, priority, factor; whole reasons (into a pipe they are always whole).",
    )
    option(parser, "--limit", help="Rows to show (per state).", type=int, default=50)
    flag(parser, "--all", help="Every job.", dest="all_rows")
    json_flag(parser)
    return parser


def queue(
    ctx: Context,
    cluster: str | None = None,
    me: bool = False,
    state: str = "pending",
    long: bool = False,
    limit: int = 50,
    all_rows: bool = False,
    as_json: bool = False,
) -> None:
    """Pending jobs in the order they will start, with position and reason; running jobs
    with their start (like squeue)."""
    state = check_state(state)
    client = api(ctx)
    name = only_cluster(client, cluster)
    mine = "true" if me else None
    rows = None if all_rows else max(1, limit)
    found: dict[str, Any] = {}
    if state in ("pending", "all"):
        found["pending"] = read_pending(client, name, mine=mine, limit=rows)
    if state in ("running", "all"):
        found["running"] = read_running(client, name, mine=mine, limit=rows)
    if as_json:
        render.print_json(found if state == "all" else found[state])
        return
    if "pending" in found:
        print_pending(name, found["pending"], me=me, long=long)
    if "running" in found:
        if "pending" in found:
            render.line()
        print_running(name, found["running"], me=me)
