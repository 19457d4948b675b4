"""`allot tokens`: your live API tokens (never their secrets), and `allot tokens revoke`:
revoke some of them by key, or every one but the token this CLI signs in with."""

from __future__ import annotations

import sys
from typing import Any

from allot_cli import render
from allot_cli.app import (
    Context,
    Parser,
    api,
    argument,
    flag,
    help_option,
    json_flag,
    short_help,
)
from allot_cli.client import EXIT_BAD_INPUT, CliError


def add_tokens(commands: Any) -> Parser:
    """`allot tokens` (the list) with its one sub-command, `allot tokens revoke`."""
    doc = " ".join((tokens.__doc__ or "").split())
    parser: Parser = commands.add_parser(
        "tokens",
        help=short_help(doc),
        description=doc,
        usage="%(prog)s [OPTIONS] [revoke KEYS... | revoke --all-others]",
        prog="allot tokens",
    )
    parser.set_defaults(func=tokens)
    json_flag(parser)
    actions = parser.add_subparsers(title="Commands", metavar="COMMAND")
    revoking = actions.add_parser(
        "revoke",
        help="Revoke tokens of yours by key, or all but this one.",
        description=" ".join((revoke.__doc__ or "").split()),
        usage="%(prog)s [OPTIONS] [KEYS]...",
        prog="allot tokens revoke",
    )
    revoking.set_defaults(func=revoke)
    argument(revoking, "keys", nargs="*", help="Keys as `allot tokens` lists them.")
    flag(revoking, "--all-others", help="Every token of yours but the one this CLI uses.")
    flag(
        revoking,
        "--json",
        help="Print the revoked tokens as `tokens --json` lists them.",
        dest="as_json",
    )
    help_option(revoking)
    return parser


def tokens(ctx: Context, as_json: bool = False) -> None:
    """List your live API tokens; `allot tokens revoke` ends them. Newest first: key (the
    first characters; the secret is never shown again), name, when made, when they
    expire, and CURRENT: the one this CLI signs in with."""
    rows = api(ctx).get("auth/tokens/")
    if as_json:
        render.print_json(rows)
        return
    if not rows:
        render.line("No live API tokens.")
        return
    render.table(
        ["KEY", "NAME", "CREATED", "EXPIRES", "CURRENT"],
        (
            [
                t["token_key"],
                t["name"] or "-",
                render.when(t["created"]),
                render.when(t["expiry"]) if t["expiry"] else "never",
                "yes" if t["current"] else "",
            ]
            for t in rows
        ),
        wrap=("NAME",),
    )


def revoke(ctx: Context, keys: list[str], all_others: bool = False, as_json: bool = False) -> None:
    """Revoke tokens of yours by key (whatever signs in with one stops at once; another
    user's key, or one you do not hold, is an error), or with `--all-others` every one
    but the token this CLI uses."""
    keys = list(dict.fromkeys(k.rstrip("….") for k in keys))  # as listed, "…" or not
    if bool(keys) == all_others:
        raise CliError(
            "give the keys of the tokens to revoke, or --all-others", code=EXIT_BAD_INPUT
        )
    client = api(ctx)
    listed = {t["token_key"]: t for t in client.get("auth/tokens/")}
    if all_others:
        client.request("DELETE", "auth/tokens/", params={"keep_current": True})
        gone = [t for t in listed.values() if not t["current"]]
        if as_json:
            render.print_json(gone)
            return
        kept = next((k for k, t in listed.items() if t["current"]), None)
        render.line(f"{render.plural(len(gone), 'token')} revoked; {kept}… (this one) kept.")
        return
    _revoke_keys(client, keys, listed, as_json)


def _revoke_keys(client: Any, keys: list[str], listed: dict[str, Any], as_json: bool) -> None:
    """DELETE each key; a failure is said and the others still revoked (exit 1 after)."""
    gone, failed = [], None
    for key in keys:
        try:
            client.request("DELETE", f"auth/tokens/{key}/")
        except CliError as exc:
            render.error(f"error: token {key}: {exc}")
            failed = exc
            continue
        row = listed.get(key, {"token_key": key})
        gone.append(row)
        if not as_json:
            note = " (the one this CLI used: run `allot login` again)" if row.get("current") else ""
            render.line(f"token {key}…: revoked{note}", markup=False)
    if as_json:
        render.print_json(gone)
    if failed is not None:
        sys.exit(failed.code)
