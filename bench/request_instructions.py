"""Instructions and database round trips per request, deterministic where
`bench/request_cost.py`'s CPU figures are noisy: requests run in-process through
`config.wsgi.application` (every middleware, production settings) under valgrind's
callgrind, counting only the measured requests. Prints JSON.

    .venv/bin/python bench/request_cost.py --keep   # once: fills <name>_cost
    .venv/bin/python bench/request_instructions.py [--requests 20] [--only job_get queue]

Needs DATABASE_URL (the database `<name>_cost` next to it, as `request_cost.py --keep`
left it: 10,000 jobs, 3 cycles, the stored queue), REDIS_URL, valgrind (with its headers)
and a C compiler. First the ETAs of every pending job are computed and cached without
expiry (`--keep-etas`: not; the test suite run with `-n 0` flushes REDIS_URL's database),
so a pending job's read finds them current, and the cycle's debounce key is held. Then
the script starts itself again under `valgrind --tool=callgrind --instr-atstart=no`
(PYTHONHASHSEED=0, one BLAS thread). Inside, it makes a token for `bench` and a session
for `admin`; for each request kind it sends `--requests` warm-up requests (imports,
connections, per-process copies), freezes the collector, then sends `--requests`
measured ones between CALLGRIND_ZERO_STATS and CALLGRIND_DUMP_STATS_AT(kind) (a C helper
loaded with ctypes). One more request of each kind counts its SQL statements (each one
PostgreSQL round trip) and Redis commands, outside the measurement.

Keys: `<kind>_instructions` (per request, in millions), `<kind>_statements`,
`<kind>_redis_commands`. Kinds: `job_get` (`GET /api/v1/jobs/{id}/`, a pending job's,
as request_cost.py picks it), `queue` (`GET /api/v1/queue/?cluster=bench&limit=50`),
`submit` (`POST /api/v1/jobs/`, one job with an Idempotency-Key), `tokens` (`GET
/api/v1/auth/tokens/`), `job_page` (`/jobs/{id}/`). Two runs of the same code agree
within 0.1%.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._server import manage, production_env  # noqa: E402
from bench.request_cost import BODY  # noqa: E402

HELPER_C = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""

KINDS = ("job_get", "queue", "submit", "tokens", "job_page")

# The ETAs of every pending job computed afresh and kept without expiry (they live 10
# minutes), so a pending job's read finds them current as a worker would keep them.
FRESH_ETAS = """
from django.core.cache import cache
from scheduler.models import Cluster
from scheduler.selectors.eta import stamp_key
from scheduler.services.eta import cluster_etas
cluster = Cluster.objects.get(name="bench")
cluster_etas(cluster=cluster, fresh=True)
client = cache._cache.get_client(write=True)
prefix = cache.make_key(stamp_key(cluster.pk)).removesuffix(":stamp")
print(sum(client.persist(key) for key in client.scan_iter(match=f"{prefix}*", count=1000)))
"""

# A cycle queued already (its debounce key held for an hour), as under a stream of
# submissions: each asks Redis and sends no task (otherwise the one in 30 s that sends
# one through the broker lands in a run or not).
CYCLE_QUEUED = """
from scheduler.cycle_requests import QUEUED_KEY, redis_client
from scheduler.models import Cluster
client = redis_client()
client.set(QUEUED_KEY.format(cluster_id=Cluster.objects.get(name="bench").pk), 1, ex=3600)
"""


def cost_database_url() -> str:
    """DATABASE_URL's `<name>_cost` (what `request_cost.py --keep` leaves)."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path=f"/{parts.path.lstrip('/')}_cost"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20, help="warm-up and measured, each")
    parser.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument(
        "--keep-etas", action="store_true", help="do not recompute the cached ETAs first"
    )
    parser.add_argument("--dumps", metavar="DIR", help="copy callgrind's dumps there")
    parser.add_argument("--inner", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(Path(args.inner), args.requests, args.only)
        return
    if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
        sys.exit("Set DATABASE_URL and REDIS_URL (the database <name>_cost must exist).")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        helper = out / "cg.so"
        (out / "cg.c").write_text(HELPER_C)
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", helper, out / "cg.c"], check=True)
        env = production_env(
            cost_database_url(), port=8431, workers=2, var_dir=ROOT / "var" / "cost"
        )
        if not args.keep_etas:
            manage(env, "shell", "-c", FRESH_ETAS)
        manage(env, "shell", "-c", CYCLE_QUEUED)
        # One BLAS thread: numpy's OpenBLAS otherwise starts a thread server that waits
        # by spinning, counted with the requests in proportion to the wall time (the
        # figures moved by 5-10% between runs of the same code).
        env.update(
            PYTHONHASHSEED="0",
            ALLOT_CG_HELPER=str(helper),
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
        )
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}/cg.out",
            sys.executable,
            __file__,
            "--inner",
            str(out),
            "--requests",
            str(args.requests),
            "--only",
            *args.only,
        ]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"the measured run failed:\n{done.stderr[-4000:]}")
        result = json.loads((out / "counts.json").read_text())
        if args.dumps:
            shutil.copytree(out, args.dumps, dirs_exist_ok=True)
        for dump in sorted(out.glob("cg.out.*")):
            text = dump.read_text(errors="replace")
            kind = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
            total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
            if kind and total:
                per = int(total.group(1)) / args.requests / 1e6
                result[f"{kind.group(1)}_instructions"] = round(per, 3)
    print(json.dumps(dict(sorted(result.items())), indent=2))


def inner(out: Path, requests: int, kinds: list[str]) -> None:
    """Under valgrind: send each kind's requests, dump each kind's counts."""
    import ctypes

    send = requester()
    helper = ctypes.CDLL(os.environ["ALLOT_CG_HELPER"])
    helper.cg_start()  # after Django's set-up: its imports are not instrumented
    counts = {}
    for kind in kinds:
        for _ in range(requests):
            status = send(kind)
            if status >= 300:
                sys.exit(f"{kind} answered {status}")
        # What is alive now is left out of the collector's counts (and full collections),
        # as in a gunicorn worker past its first requests: otherwise a full collection of
        # the whole heap now and then, landing in one kind's requests or another's,
        # moves a figure by 5-60% between runs of the same code.
        gc.collect()
        gc.freeze()
        helper.cg_zero()
        for _ in range(requests):
            send(kind)
        helper.cg_dump(kind.encode())
        counts[f"{kind}_statements"], counts[f"{kind}_redis_commands"] = round_trips(send, kind)
    (out / "counts.json").write_text(json.dumps(counts))


def requester():
    """Django set up on the production settings of the environment, a token for
    `bench` and a session for `admin`; `send(kind)` runs one request of `kind` through
    the WSGI application and returns its status."""
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.db import connection
    from django.utils.module_loading import import_string

    from accounts.models import ApiToken
    from accounts.services import token_create
    from config.wsgi import application
    from scheduler.models import Job

    users = get_user_model().objects
    bench = users.get(username="bench")
    ApiToken.objects.filter(user=bench, name="instructions").delete()  # an earlier run's
    token = token_create(user=bench, name="instructions")[1]
    admin = users.get(username="admin")
    session = import_string(f"{settings.SESSION_ENGINE}.SessionStore")()
    session[SESSION_KEY] = str(admin.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = admin.get_session_auth_hash()
    session.create()
    # request_cost.py's job: the middle one of the arrays' pending jobs (its submissions
    # and these add pending jobs with `env` in their spec, after the arrays)
    arrays = Job.objects.filter(state="pending", spec__env__isnull=True).order_by("pk")
    job_id = arrays[arrays.count() // 2].pk
    api = {"HTTP_AUTHORIZATION": f"Token {token}"}
    page = {"HTTP_COOKIE": f"sessionid={session.session_key}"}
    requests_by_kind = {
        "job_get": ("GET", f"/api/v1/jobs/{job_id}/", "", api),
        "queue": ("GET", "/api/v1/queue/", "cluster=bench&limit=50", api),
        "submit": ("POST", "/api/v1/jobs/", "", api),
        "tokens": ("GET", "/api/v1/auth/tokens/", "", api),
        "job_page": ("GET", f"/jobs/{job_id}/", "", page),
    }
    connection.close()

    def send(kind: str) -> int:
        method, path, query, headers = requests_by_kind[kind]
        body = json.dumps(BODY).encode() if method == "POST" else b""
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8431",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": "127.0.0.1:8431",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.version": (1, 0),
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            **headers,
        }
        if method == "POST":
            environ.update(
                CONTENT_TYPE="application/json",
                CONTENT_LENGTH=str(len(body)),
                HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
            )
        status: list[str] = []
        answer = application(environ, lambda s, h, e=None: status.append(s))
        try:
            b"".join(answer)
        finally:
            getattr(answer, "close", lambda: None)()
        return int(status[0].split()[0])

    return send


def round_trips(send, kind: str) -> tuple[int, int]:
    """(SQL statements, Redis commands) of one request of `kind`."""
    import redis
    from django.db import connection

    statements = [0]
    commands = [0]

    def count(execute, sql, params, many, context):
        statements[0] += 1
        return execute(sql, params, many, context)

    original = redis.Redis.execute_command

    def counted(self, *args, **options):
        commands[0] += 1
        return original(self, *args, **options)

    redis.Redis.execute_command = counted
    try:
        with connection.execute_wrapper(count):
            send(kind)
    finally:
        redis.Redis.execute_command = original
    return statements[0], commands[0]


if __name__ == "__main__":
    main()
