"""`allot login`: sign in and store a token in the user's config file."""

import getpass
import platform
from typing import Annotated

import typer

from allot_cli import render
from allot_cli.client import Api, save_config, settings


def login(
    ctx: typer.Context,
    username: Annotated[str | None, typer.Option("--username", "-u")] = None,
    password: Annotated[
        str | None, typer.Option("--password", help="Prompted (hidden) when not given.")
    ] = None,
) -> None:
    """Sign in and store a token in your config file (readable by you only)."""
    conf = settings(ctx.obj)
    username = username or input("User name: ")
    password = password if password is not None else getpass.getpass("Password: ")
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
