"""The `allot` commands (argparse). Each one is a REST call and a table; `--json` prints
the server's answer as it is, for scripts. Exit codes: 0 done, 2 bad input (the error
names the flag and the field), 1 any other failure.

One module per command group: `login`, `submit`, `queue`, `jobs` (show, cancel),
`clusters` (clusters, hosts), `usage` (usage, shares), `tokens` (tokens, tokens revoke);
each says its options in an `add_*` function next to the command; the parser and the
options they share are in
`allot_cli/app.py`. This module registers them and runs the command asked for.

Start-up time counts (scripts call `allot` in loops; `bench/cli_start.py`): the parser
is argparse (typer's import was ~45-50 ms of CPU of every call), and rich and the HTTP
stack are imported only when a command prints or asks the server (render.py, client.py)."""

from __future__ import annotations

import os
import sys

from allot_cli import clusters, jobs, login, queue, render, submit, tokens, usage
from allot_cli.app import Parser, help_option, root_parser, run
from allot_cli.client import CliError

# In the order `allot --help` lists them.
COMMANDS = (
    login.add_login,
    submit.add_submit,
    queue.add_queue,
    jobs.add_show,
    jobs.add_cancel,
    clusters.add_clusters,
    clusters.add_hosts,
    usage.add_usage,
    usage.add_shares,
    tokens.add_tokens,
)


def parser() -> Parser:
    """The `allot` parser with every command."""
    root, commands = root_parser()
    for add in COMMANDS:
        help_option(add(commands))
    help_option(root)
    return root


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run a command; report a failure as one line and an exit code."""
    try:
        run(parser(), argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
    except CliError as exc:
        render.error(f"error: {exc}")
        sys.exit(exc.code)
    except (EOFError, KeyboardInterrupt):  # as typer (click) ended a call cut short
        print("\nAborted!", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:
        # the reader left (`allot queue | head`): stop quietly, as other Unix tools do;
        # stdout goes to /dev/null so the interpreter's own flush at exit cannot fail too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)  # 128 + SIGPIPE, the shell's code for a tool a pipe ended
