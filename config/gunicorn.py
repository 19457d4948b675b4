"""gunicorn settings for `make serve` (production serving; see README).

Environment: ALLOT_HOST / ALLOT_PORT (bind), WEB_CONCURRENCY (workers, default
2 x CPUs + 1), GUNICORN_TIMEOUT (s), PROMETHEUS_MULTIPROC_DIR (shared metrics files;
default var/prometheus, emptied at start)."""

import multiprocessing
import os
import shutil
from pathlib import Path

bind = f"{os.environ.get('ALLOT_HOST', '127.0.0.1')}:{os.environ.get('ALLOT_PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * multiprocessing.cpu_count() + 1))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
graceful_timeout = 30
max_requests = 10_000  # recycle workers now and then
max_requests_jitter = 1_000
accesslog = "-"
errorlog = "-"
# Request line and status; never headers (tokens travel in Authorization).
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms'
# gunicorn's largest request line (the default, 4094, refused long but valid filters)
limit_request_line = 8190
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

_metrics_dir = Path(
    os.environ.setdefault(
        "PROMETHEUS_MULTIPROC_DIR",
        str(Path(os.environ.get("ALLOT_VAR_DIR", "var")).resolve() / "prometheus"),
    )
)


def on_starting(server):
    shutil.rmtree(_metrics_dir, ignore_errors=True)
    _metrics_dir.mkdir(parents=True, exist_ok=True)


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
