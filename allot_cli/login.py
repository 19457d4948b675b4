"""`allot login`: sign in and store a token in the user's config file."""

import getpass
from typing import Any

from allot_cli import render
from allot_cli.app import Context, Parser, command, option
from allot_cli.client import Api, CliError, Settings, load_config, save_config, settings


def add_login(commands: Any) -> Parser:
    parser = command(commands, login)
    option(parser, "--username", "-u")
    option(parser, "--password", help="Prompted (hidden) when not given.")
    return parser


def _revoke_replaced(url: str, replaced: str, answer: dict[str, Any]) -> bool:
    """Revoke the token this sign-in replaces in the config file (each sign-in makes a
    token, and a user holds at most so many: logging in again on one machine must not use
    them up). Its key is as long as the new one's. False when it was gone already."""
    key = replaced[: len(answer["token_key"])]
    try:
        Api(Settings(url, answer["token"])).request("DELETE", f"auth/tokens/{key}/")
    except CliError:  # expired, revoked, or another user's: nothing to do
        return False
    return True


def login(ctx: Context, username: str | None = None, password: str | None = None) -> None:
    """Sign in and store a token in your config file (readable by you only); the token
    stored there before for the same server is revoked."""
    conf = settings(ctx.url)
    stored = load_config()
    username = username or input("User name: ")
    password = password if password is not None else getpass.getpass("Password: ")
    import platform  # here, not at the top: ~1-2 ms of CPU of every other command's call

    client = Api(conf, need_token=False)
    answer = client.request(
        "POST",
        "auth/token/",
        json_body={
            "username": username,
            "password": password,
            "name": f"allot CLI on {platform.node()}"[:100],
        },
    )
    path = save_config({"url": conf.url, "token": answer["token"]})
    render.line(f"Signed in to {conf.url} as {username}; token stored in {path}.")
    replaced = stored.get("token") if stored.get("url") == conf.url else None
    if replaced and replaced != answer["token"] and _revoke_replaced(conf.url, replaced, answer):
        render.line("The token stored there before was revoked.")
