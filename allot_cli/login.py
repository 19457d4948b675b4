"""`allot login`: sign in and store a token in the user's config file."""

import getpass
from typing import Any

from allot_cli import render
from allot_cli.app import Context, Parser, command, option
from allot_cli.client import Api, save_config, settings


def add_login(commands: Any) -> Parser:
    parser = command(commands, login)
    option(parser, "--username", "-u")
    option(parser, "--password", help="Prompted (hidden) when not given.")
    return parser


def login(ctx: Context, username: str | None = None, password: str | None = None) -> None:
    """Sign in and store a token in your config file (readable by you only)."""
    conf = settings(ctx.url)
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
