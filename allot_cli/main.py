"""The `allot` commands (typer). Each one is a REST call and a table; `--json` prints
the server's answer as it is, for scripts. Exit codes: 0 done, 2 bad input (the error
names the flag and the field), 1 any other failure.

One module per command group: `login`, `submit`, `queue`, `jobs` (show, cancel),
`clusters` (clusters, hosts), `usage` (usage, shares); the app and the options they
share are in `allot_cli/app.py`. This module registers them and runs the app.

Start-up time counts (scripts call `allot` in loops; `bench/cli_start.py`): the command
modules do not use `from __future__ import annotations`, since typer would evaluate
every annotation string of every command at each call (~5 ms); rich and the HTTP stack
are imported only when a command prints or asks the server (render.py, client.py)."""

from __future__ import annotations

import sys

from allot_cli import clusters, jobs, login, queue, render, submit, usage
from allot_cli.app import app
from allot_cli.client import CliError

# In the order `allot --help` lists them.
COMMANDS = (
    login.login,
    submit.submit,
    queue.queue,
    jobs.show,
    jobs.cancel,
    clusters.clusters,
    clusters.hosts,
    usage.usage,
    usage.shares,
)
for command in COMMANDS:
    app.command()(command)


def main() -> None:
    """Console entry point: run a command; report a failure as one line and an exit code."""
    try:
        app()
    except CliError as exc:
        render.err().print(f"error: {exc}", markup=False)
        sys.exit(exc.code)
    except KeyboardInterrupt:
        sys.exit(130)
