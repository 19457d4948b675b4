"""`allot usage` (the ledger's GPU-hours per project and step) and `allot shares` (the
budget tree's fair share, like sshare -l), in the dashboards' formats."""

import math
from typing import Any

from allot_cli import render
from allot_cli.app import Context, Parser, api, cluster_option, command, json_flag, option
from allot_cli.options import only_cluster
from allot_common.figures import delivery_ratio, level_fs_text


def add_usage(commands: Any) -> Parser:
    parser = command(commands, usage)
    cluster_option(parser, help="Cluster name or id (default: all).")
    option(parser, "--project", "-A", help="Project, program or organisation path or id.")
    option(parser, "--since", help="ISO time or date, e.g. 2026-11-01")
    option(parser, "--until", help="ISO time or date")
    option(parser, "--step", help="hour or day", default="day")
    json_flag(parser)
    return parser


def add_shares(commands: Any) -> Parser:
    parser = command(commands, shares)
    cluster_option(parser)
    json_flag(parser)
    return parser


def usage(
    ctx: Context,
    cluster: str | None = None,
    project: str | None = None,
    since: str | None = None,
    until: str | None = None,
    step: str = "day",
    as_json: bool = False,
) -> None:
    """GPU-hours per project and step: delivered, unallocated, demand, demand-capped
    entitlement, and the GPU utilization of its runs ("unknown" where none was measured), over whole hours
    that are over (by default the last 7 days of complete hours)."""
    head, rows = api(ctx).get_all_with_head(
        "usage/", cluster=cluster, project=project, since=since, until=until, step=step
    )
    if as_json:
        render.print_json(rows)
        return
    clusters = sorted({r.get("cluster_name", "") for r in rows})
    one = len(clusters) == 1
    if head.get("window_end"):
        render.line(
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
            "CAPPED ENT",
            "GPU UTIL",
        ],
        (
            [
                (
                    render.day_step(
                        r.get("start"), head.get("window_start"), head.get("window_end")
                    )
                    if step == "day"
                    else render.step_start(r.get("start"), step)
                ),
                *([] if one else [r.get("cluster_name", "")]),
                r.get("project_path", ""),
                *(
                    render.gpu_hours(r.get(f"{k}_gpu_h"))
                    for k in ("delivered", "unallocated", "demand", "capped_entitled")
                ),
                render.known_percent(r.get("utilization")),
            ]
            for r in rows
        ),
        crop_left=("PROJECT",),
    )
    _period_totals(rows, one)


# the figures `allot usage` adds up over the period, as the delivery dashboard shows them
TOTALED = ("delivered", "capped_entitled", "demand", "unallocated")


def _period_totals(rows: list[dict[str, Any]], one: bool) -> None:
    """Per project over the whole period: the delivery dashboard's row (delivered,
    demand-capped entitlement and the delivery ratio of the two, "Entitlement delivered",
    docs/concepts.md#delivery-ratio), so the CLI reads the figure the pages lead with."""
    totals: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        key = (r.get("cluster_name", ""), r.get("project_path", ""))
        sums = totals.setdefault(key, dict.fromkeys(TOTALED, 0.0))
        for k in TOTALED:
            sums[k] += r.get(f"{k}_gpu_h") or 0.0
    if not totals:
        return
    render.table(
        [
            *([] if one else ["CLUSTER"]),
            "PROJECT",
            "DELIVERED",
            "CAPPED ENT",
            "ENT DELIVERED",
            "DEMAND",
            "UNALLOC",
        ],
        (
            [
                *([] if one else [cluster]),
                path,
                render.gpu_hours(t["delivered"]),
                render.gpu_hours(t["capped_entitled"]),
                render.percent(delivery_ratio(t["delivered"], t["capped_entitled"])),
                render.gpu_hours(t["demand"]),
                render.gpu_hours(t["unallocated"]),
            ]
            for (cluster, path), t in sorted(totals.items())
        ),
        title="over the period",
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


def shares(ctx: Context, cluster: str | None = None, as_json: bool = False) -> None:
    """Fair share of every node of the budget tree (like sshare -l)."""
    client = api(ctx)
    answer = client.get("fairshare/", cluster=only_cluster(client, cluster))
    if as_json:
        render.print_json(answer)
        return
    render.line(
        f"Fair share on {answer.get('cluster_name', '?')} (RAW USAGE in GPU-hours "
        f"{answer.get('usage_window', 'over the usage window')}), "
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
        render.line(
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
    with one decimal, level FS and factor with two, a level FS without usage "∞" as
    `level_fs_text` writes it on every surface); '–' where there is none, and for a node
    without entitlement."""
    value = node.get(column)
    if column in SHARE_FRACTIONS:
        return render.share(value)
    if column == "level_fs" and node.get("level_fs_infinite"):
        return level_fs_text(math.inf)  # "∞" as the glossary and every page write it
    if value is None or (_no_entitlement(node) and column in ("level_fs", "fairshare")):
        return render.EMPTY
    if column == "raw_usage":
        return render.gpu_hours(value)
    if column == "level_fs":
        return level_fs_text(value)
    if column == "fairshare":
        return render.factor(value)
    return render.number(value)
