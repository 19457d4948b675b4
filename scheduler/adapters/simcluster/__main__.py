"""`python -m scheduler.adapters.simcluster serve ...`: run the simulated cluster process."""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
from pathlib import Path

from scheduler.adapters.simcluster.app import app_for_state_dir


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.adapters.simcluster",
        description="The simulated GPU cluster process.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the simulated clusters over HTTP")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8001, help="port to listen on")
    serve.add_argument(
        "--fd", type=int, default=None, help="serve on this already bound socket (tests)"
    )
    serve.add_argument(
        "--state-dir", type=Path, required=True, help="where the clusters' state is kept"
    )
    serve.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="simulated seconds per wall second for clusters registered without one",
    )
    serve.add_argument("--log-level", default="warning")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.speed <= 0:
        print("--speed must be > 0", file=sys.stderr)
        return 2
    import uvicorn

    app = app_for_state_dir(args.state_dir, speed=args.speed)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    # A socket handed over by `--fd` is wrapped here rather than by uvicorn's `fd=`, which
    # takes every descriptor for a unix socket and so leaves Nagle's algorithm on (40 ms
    # per keep-alive request).
    sockets = [socket.socket(fileno=args.fd)] if args.fd is not None else None
    # uvicorn re-raises the Ctrl-C it has already shut down on
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run(sockets=sockets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
