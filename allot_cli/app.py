"""The `allot` application: the typer app, the options every command shares, and the
API client built from `--url`, `ALLOT_URL` / `ALLOT_TOKEN` or `allot login`'s config.
The commands live one group per module and are registered in `allot_cli/main.py`."""

from typing import Annotated

import typer

from allot_cli.client import Api, settings

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


def api(ctx: typer.Context) -> Api:
    """The API client of the command `ctx` runs (its `--url`, kept on the context)."""
    return Api(settings(ctx.obj))


@app.callback()
def _root(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option("--url", help="Server URL (default: ALLOT_URL, then `allot login`'s)."),
    ] = None,
) -> None:
    ctx.obj = url
