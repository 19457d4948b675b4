"""gunicorn settings of the web server (deploy/allot-run web, `make serve`).

Environment: ALLOT_HOST / ALLOT_PORT (bind), WEB_CONCURRENCY (workers, default
2 x CPUs + 1), GUNICORN_TIMEOUT (s); ALLOT_TRUSTED_PROXIES / ALLOT_PROXY_NETWORKS
(config/proxy.py: the proxies whose X-Forwarded-Proto gunicorn believes are the ones
Django believes); LOG_LEVEL and ALLOT_LOG_FORMAT (config/logs.py) for gunicorn's own lines.

Metrics: each worker writes its counters under its slot (`web-<host>-<port>-<n>`,
ops.metrics), the lowest slot no live worker holds, so a replaced or restarted worker
continues the counts of the one before it; nothing is deleted at start."""

import gc
import multiprocessing
import os
import socket
import sys

from config import logs, proxy
from ops.metrics import PROCESS_IDENTITY_ENV, identity_part
from ops.worker_database import database_described, database_error

_host = os.environ.get("ALLOT_HOST", "127.0.0.1")
_port = os.environ.get("ALLOT_PORT", "8000")
bind = f"{_host}:{_port}"
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * multiprocessing.cpu_count() + 1))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
graceful_timeout = 30
max_requests = 10_000  # recycle workers now and then
max_requests_jitter = 1_000
accesslog = "-"
errorlog = "-"
# Request line, status, size, time and the request id; never headers (tokens travel in
# Authorization).
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms request=%({x-request-id}o)s'
# gunicorn's logger, the line's atoms computed when the format reads them (config/access_log.py)
logger_class = "config.access_log.AccessLogger"
# gunicorn's largest request line (the default, 4094, refused long but valid filters)
limit_request_line = 8190
# No control socket (gunicorn >= 25 opens one in $HOME, which every web instance of a
# host would share): systemd or the container manages the process.
control_socket_disable = True

if proxy.retired_variables(os.environ):
    sys.exit("gunicorn: " + "; ".join(proxy.retired_variables(os.environ)))
forwarded_allow_ips = proxy.gunicorn_forwarded_allow_ips(os.environ)

loglevel = os.environ.get("LOG_LEVEL", "INFO").lower()
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    **logs.handler_config(os.environ.get("ALLOT_LOG_FORMAT", "text")),
    "root": {"level": "INFO", "handlers": []},
    "loggers": {
        "gunicorn.error": {"level": loglevel.upper(), "handlers": ["console"], "propagate": False},
        "gunicorn.access": {"level": "INFO", "handlers": ["console"], "propagate": False},
    },
}

_METRICS_PREFIX = f"web-{identity_part(socket.gethostname())}-{identity_part(_port)}"


def pre_fork(server, worker):
    """Give the new worker the lowest metrics slot no live worker holds."""
    taken = {getattr(w, "allot_slot", None) for w in server.WORKERS.values()}
    worker.allot_slot = next(n for n in range(len(taken) + 1) if n not in taken)


def post_fork(server, worker):
    os.environ[PROCESS_IDENTITY_ENV] = f"{_METRICS_PREFIX}-{worker.allot_slot}"


def post_worker_init(worker):
    """Once per worker, before its first request: import the URLconf (every view:
    otherwise the first request's work), then move everything the worker holds into the
    collector's permanent generation (`gc.freeze`), as the set-up's objects were
    (config/startup.py), so its collections walk what requests create, not the whole
    application again."""
    from django.urls import get_resolver  # Django is set up by now (the app is loaded)

    get_resolver().url_patterns  # noqa: B018 (imports the URLconf)
    if worker.allot_slot == 0:  # once per start (and per replacement of the first worker)
        _say_if_no_database(worker.log)
    gc.collect()
    gc.freeze()


def _say_if_no_database(log) -> None:
    """One ERROR line naming DATABASE_URL (without its password) when the database cannot
    be used. The web server starts all the same: `/healthz/web` (and `/healthz`) answer
    503 naming the database, so a load balancer keeps the instance out of rotation until
    the database answers, and it serves again without a restart (a worker or beat exits
    instead: ops/worker_database.py, ops/heartbeat.py)."""
    error = database_error()
    if error is not None:
        log.error(
            "DATABASE_URL (%s) cannot be used, so pages and the API answer 503 and "
            "/healthz/web names the database until it answers: %s",
            database_described(),
            error,
        )
