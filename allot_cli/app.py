"""The `allot` application: the argument parser, the options every command shares, and
the API client built from `--url`, `ALLOT_URL` / `ALLOT_TOKEN` or `allot login`'s config.
The commands live one group per module and are registered in `allot_cli/main.py`.

The parser is the standard library's argparse, not typer or click: scripts call `allot`
in loops, and typer's import was ~45-50 ms of CPU of every call, click's alone ~25-30 ms
(typer is built on it), argparse's ~2 ms (`bench/cli_start.py`). The help keeps typer's
texts: each command's docstring, each option's help with its `[default: ...]` and
`[required]`, `<str>` / `<int>` for the value it takes."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from typing import Any

from allot_cli.client import Api, settings

HELP = "Submit and follow GPU jobs on Allot (like sbatch/squeue/scancel/sshare)."
STR, INT = "<str>", "<int>"


class Context:
    """What every command gets besides its own options: the `--url` given before it."""

    def __init__(self, url: str | None):
        self.url = url


def api(ctx: Context) -> Api:
    """The API client of the command `ctx` runs (its `--url`)."""
    return Api(settings(ctx.url))


class Formatter(argparse.HelpFormatter):
    """argparse's help laid out as typer's (click's) was: `Usage:`, at most 80 columns,
    help texts from column 30 at most, an option's value named once (`-A, --project <str>`)."""

    def __init__(self, prog: str):
        width = min(shutil.get_terminal_size().columns, 80) - 2
        super().__init__(prog, max_help_position=30, width=width)

    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        return f"{', '.join(action.option_strings)} {action.metavar}"


class Parser(argparse.ArgumentParser):
    """An argparse parser as every `allot` parser is: `--help` only (no `-h`), no
    abbreviated long options (`--proj` is refused, as typer refused it), and sections
    named as typer named them (Arguments, Options)."""

    def __init__(self, **kwargs: Any):
        super().__init__(formatter_class=Formatter, add_help=False, allow_abbrev=False, **kwargs)
        # argparse leaves an empty section out of the help
        self.arguments = self.add_argument_group("Arguments")
        self.options = self.add_argument_group("Options")


def root_parser() -> tuple[Parser, Any]:
    """The `allot` parser with its `--url` and the (empty) set of commands."""
    parser = Parser(prog="allot", usage="%(prog)s [OPTIONS] COMMAND [ARGS]...", description=HELP)
    option(parser, "--url", help="Server URL (default: ALLOT_URL, then `allot login`'s).")
    commands = parser.add_subparsers(title="Commands", metavar="COMMAND")
    return parser, commands


def command(commands: Any, func: Callable[..., None], usage: str = "") -> Parser:
    """The parser of one command: its name and help from the function that runs it."""
    doc = " ".join((func.__doc__ or "").split())
    name = func.__name__
    parser: Parser = commands.add_parser(
        name,
        help=short_help(doc),
        description=doc,
        usage=f"%(prog)s [OPTIONS]{usage}",
        prog=f"allot {name}",
    )
    parser.set_defaults(func=func)
    return parser


def short_help(doc: str, limit: int = 60) -> str:
    """A command's line in `allot --help`: its docstring's first sentence, cut at a word
    with "..." beyond `limit` characters (as click cut it, at 45)."""
    first = doc.split(". ")[0].rstrip(".") + "."
    if len(first) <= limit:
        return first
    return first[: first.rfind(" ", 0, limit - 2)].rstrip(",;:") + "..."


def help_option(parser: Parser) -> None:
    """`--help`, the last option listed (main.py adds it once a command has its own)."""
    parser.options.add_argument("--help", action="help", help="Show this message and exit.")


def option(
    parser: Parser,
    *flags: str,
    help: str = "",  # noqa: A002 - argparse's name
    default: Any = None,
    required: bool = False,
    **kwargs: Any,
) -> None:
    """An option taking a value (`<str>` unless `type=int`); the help says its default
    and whether it is required, as typer's did."""
    notes = [f"[default: {default}]"] if default is not None else []
    notes += ["[required]"] if required else []
    kwargs.setdefault("metavar", INT if kwargs.get("type") is int else STR)
    parser.options.add_argument(
        *_long_first(flags),
        help="  ".join(filter(None, [help, *notes])),
        default=default,
        required=required,
        **kwargs,
    )


def argument(parser: Parser, name: str, *, help: str = "", **kwargs: Any) -> None:  # noqa: A002
    """A positional argument; the help says when it is required, as typer's did."""
    required = kwargs.get("nargs") in (None, "+")
    parser.arguments.add_argument(
        name, help="  ".join(filter(None, [help, "[required]" if required else ""])), **kwargs
    )


def flag(parser: Parser, *flags: str, help: str, dest: str | None = None) -> None:  # noqa: A002
    """An on/off flag, off unless given."""
    extra = {"dest": dest} if dest else {}
    parser.options.add_argument(*_long_first(flags), action="store_true", help=help, **extra)


def json_flag(parser: Parser) -> None:
    flag(parser, "--json", help="Print the server's JSON answer.", dest="as_json")


def cluster_option(
    parser: Parser,
    help: str = "Cluster name or id (default: the only cluster).",  # noqa: A002
) -> None:
    option(parser, "--cluster", "-M", help=help)


def _long_first(flags: tuple[str, ...]) -> tuple[str, ...]:
    """Short flags first in the help (`-A, --project`), then the long ones in the order
    given: the first names the value, sbatch's names for it follow."""
    return tuple(sorted(flags, key=lambda flag: flag.startswith("--")))


def run(parser: Parser, argv: list[str] | None = None) -> None:
    """Parse the command line and run its command; no command prints the help (exit 2)."""
    args = vars(parser.parse_args(argv))
    func = args.pop("func", None)
    if func is None:
        parser.print_help(sys.stderr)
        sys.exit(2)
    func(Context(args.pop("url")), **args)
