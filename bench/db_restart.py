"""PostgreSQL restarted under load: requests fail fast with 503, never 500, and every
submission that got 201 is in the database afterwards. Prints JSON.

Starts a private PostgreSQL (the `pgserver` wheel's binaries, its own data directory
and TCP port) and gunicorn (production settings, 4 workers) on it; `--clients` threads
post jobs to `POST /api/v1/jobs/` (each with its own Idempotency-Key) for `--seconds`;
after a third of the time the database is restarted (`pg_ctl restart -m fast`). Then
it counts the answers by status, the longest answer, and checks that every job id
answered with 201 is stored.
Usage: ``python bench/db_restart.py [--clients 16] [--seconds 30] [--port 8611]``
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._server import gunicorn, member_token, post_job, production_env  # noqa: E402

JOB = {"project": "org/team/work", "cluster": "c", "gpus": 1, "min_runtime_s": 60}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivatePostgres:
    """A throwaway PostgreSQL on 127.0.0.1:<port> (trust auth), from pgserver's binaries."""

    def __init__(self, datadir: Path) -> None:
        import pgserver._commands as commands

        self.bin = Path(commands.POSTGRES_BIN_PATH)
        self.datadir = datadir
        self.port = free_port()
        # PostgreSQL refuses to run as root: then it runs as pgserver's system user
        self.user: str | None = None
        if os.geteuid() == 0:
            import pwd

            from pgserver.utils import ensure_user_exists

            self.user = "pgserver"
            ensure_user_exists(self.user)
            datadir.parent.chmod(0o755)
            datadir.mkdir()
            entry = pwd.getpwnam(self.user)
            os.chown(datadir, entry.pw_uid, entry.pw_gid)

    def pg_ctl(self, *args: str) -> None:
        options = f"-p {self.port} -h 127.0.0.1 -k {self.datadir}"
        subprocess.run(
            [str(self.bin / "pg_ctl"), "-D", str(self.datadir), "-o", options, "-w", *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=self.user,
        )

    def start(self) -> PrivatePostgres:
        subprocess.run(
            [str(self.bin / "initdb"), "-D", str(self.datadir), "-U", "postgres", "-A", "trust"],
            check=True,
            stdout=subprocess.DEVNULL,
            user=self.user,
        )
        self.pg_ctl("-l", str(self.datadir / "log"), "start")
        subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U"]
            + ["postgres", "allot"],
            check=True,
        )
        return self

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/allot"


def timed_post(port: int, token: str) -> tuple[int, float, int | None]:
    """(status, seconds, job id) of one submission; status 0 when the connection failed."""
    started = time.perf_counter()
    try:
        status, body = post_job(port, token, JOB, timeout=30)
    except OSError:
        return 0, time.perf_counter() - started, None
    job_id = json.loads(body)["jobs"][0]["id"] if status == 201 else None
    return status, time.perf_counter() - started, job_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--port", type=int, default=8611)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        pg = PrivatePostgres(workdir / "pg").start()
        try:
            print(json.dumps(run(pg, workdir, args), indent=2))
        finally:
            pg.pg_ctl("stop", "-m", "immediate")


def run(pg: PrivatePostgres, workdir: Path, args) -> dict:
    os.environ["DATABASE_URL"] = pg.url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from scheduler.models import Cluster, Host, Job

    call_command("migrate", verbosity=0)
    token = member_token("team", "work")
    # no cluster process: submissions only need the cluster's row and hosts
    cluster = Cluster.objects.create(name="c", host_count=4, gpus_per_host=8)
    Host.objects.bulk_create(Host(cluster=cluster, name=f"h{i}", gpus=8) for i in range(4))
    connection.close()
    env = production_env(
        pg.url, port=args.port, workers=4, var_dir=workdir / "var", redis_url=settings.REDIS_URL
    )
    answers: list[tuple[float, int, float, int | None]] = []
    lock = threading.Lock()

    def client() -> None:
        while time.monotonic() < stop_at:
            status, seconds, job_id = timed_post(args.port, token)
            with lock:
                answers.append((time.monotonic(), status, seconds, job_id))

    with gunicorn(env, workdir / "gunicorn.log"):
        stop_at = time.monotonic() + args.seconds
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        time.sleep(args.seconds / 3)
        restart_started = time.monotonic()
        pg.pg_ctl("restart", "-m", "fast")
        restart_s = time.monotonic() - restart_started
        for thread in threads:
            thread.join()
    accepted = {job_id for _, status, _, job_id in answers if status == 201}
    stored = set(Job.objects.filter(pk__in=accepted).values_list("pk", flat=True))
    statuses = collections.Counter(status for _, status, _, _ in answers)
    failed = [seconds for _, status, seconds, _ in answers if status != 201]
    return {
        "scenario": {
            "clients": args.clients,
            "seconds": args.seconds,
            "server": "gunicorn, 4 workers, production settings",
            "restart": "pg_ctl restart -m fast after a third of the run",
        },
        "restart_s": round(restart_s, 2),
        "requests": len(answers),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "server_errors_500": statuses.get(500, 0),
        "slowest_failed_answer_s": round(max(failed), 2) if failed else None,
        "accepted": len(accepted),
        "accepted_and_stored": len(stored),
        "lost": len(accepted - stored),
    }


if __name__ == "__main__":
    main()
