"""PostgreSQL's client tools and connection strings for the backup and restore tests."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import psycopg
from django.db import connection


def pg_tool(name: str, server_major: int) -> str | None:
    """A client tool at least as new as the server (pg_dump refuses older ones)."""
    candidates = [shutil.which(name)]
    spec = importlib.util.find_spec("pgserver")  # the embedded server's own tools
    if spec is not None and spec.origin:
        candidates.append(str(Path(spec.origin).parent / "pginstall" / "bin" / name))
    for path in filter(None, candidates):
        if not Path(path).exists():
            continue
        version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        if int(version.split()[-1].split(".")[0]) >= server_major:
            return path
    return None


def conninfo(dbname: str) -> str:
    """libpq connection parameters of the test database's server, for database `dbname`."""
    params = connection.get_connection_params()
    params["dbname"] = dbname
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.conninfo.make_conninfo(
        **{k: v for k, v in params.items() if isinstance(v, str | int)}
    )
