"""Settings shared by every environment. Configuration comes from the environment.

DATABASE_URL, REDIS_URL -> the PostgreSQL and Redis to use. Each environment's module
    calls `backing_services`: development and tests start the embedded servers
    (config.embedded) for a missing URL; production refuses to start, naming the variable.
CELERY_BROKER_URL   -> defaults to REDIS_URL.
ALLOT_VAR_DIR       -> state of this machine's processes (default <project>/var): the
    embedded servers, beat's schedule, the metrics files.
"""

import contextlib
import datetime as dt
import ipaddress
import os
from pathlib import Path

import environ
import plotly
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from config import embedded, logs, proxy

BASE_DIR = Path(__file__).resolve().parent.parent.parent
DEFAULT_SECRET_KEY = "allot-insecure-development-key-never-use-it-in-production"

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env("ALLOT_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()

SECRET_KEY = env("SECRET_KEY", default=DEFAULT_SECRET_KEY)
DEBUG = env.bool("DEBUG", default=False)
# Mail to job owners (their idle GPUs reclaimed, `Cluster.idle_notify_owner`): Django's
# backend setting (e.g. django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST); by
# default the mails are written to the log of the process that sends them.
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="allot@localhost")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # WhiteNoise serves static files under runserver too (compressed, with cache headers),
    # not Django's development handler (the 4.8 MB Plotly bundle uncompressed every time)
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "axes",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "csp",
    "tree_queries",
    "pgtrigger",
    "pghistory",
    "accounts",
    "ops",
    "budgets",
    "scheduler",
    "ledger",
    "dashboards",
]

MIDDLEWARE = [
    "config.middleware.ForwardedHeadersMiddleware",  # first: nothing reads an untrusted one
    "config.middleware.RequestIdMiddleware",
    "ops.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.csp.CSPMiddleware",  # django-csp's, the header built once where it is fixed
    "config.middleware.RejectNulBytesMiddleware",
    "config.middleware.ApiJsonNotFoundMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.middleware.RolesReadOnceMiddleware",  # one read of the user's roles per GET
    "config.middleware.PageMessageMiddleware",  # Django's, for pages only
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.HistoryMiddleware",  # pghistory's, for the views that need it
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out sign-in into a 429
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "ops.context_processors.page_banners",
                "scheduler.context_processors.navigation",
            ],
        },
    },
]


def backing_services(*, embedded_fallback: bool) -> dict[str, object]:
    """DATABASES, REDIS_URL, CACHES and the Celery URLs from DATABASE_URL and REDIS_URL.

    A missing URL starts the embedded server when `embedded_fallback` (development,
    tests); otherwise it is refused with ImproperlyConfigured naming the variable, so
    that data is never written to a throwaway server."""
    for name in ("DATABASE_URL", "REDIS_URL"):
        if not embedded_fallback and not env(name, default=""):
            raise ImproperlyConfigured(
                f"{name} is not set. Production settings need an explicit {name} "
                f"(e.g. {_URL_EXAMPLES[name]}); the embedded servers are for development only."
            )
        _check_url_scheme(name)
    database_url = env("DATABASE_URL", default="")
    databases = {
        "default": env.db("DATABASE_URL") if database_url else embedded.postgres_settings()
    }
    databases["default"]["ATOMIC_REQUESTS"] = False
    # Fail fast while the database restarts: requests answer 503 (config.api_errors)
    # instead of waiting for the operating system's connect timeout.
    databases["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env.int("ALLOT_DB_CONNECT_TIMEOUT_S", default=5)
    )
    # Persistent connections: a request reuses its worker's connection instead of paying a
    # new PostgreSQL connection (and its authentication) each time. The health check, run
    # when a request starts on a reused connection, replaces one that a PostgreSQL restart
    # or failover broke, so the request after a restart works (bench/db_restart.py).
    # ALLOT_DB_CONN_MAX_AGE=0 closes each connection at the end of its request.
    databases["default"]["CONN_MAX_AGE"] = env.int("ALLOT_DB_CONN_MAX_AGE", default=600)
    databases["default"]["CONN_HEALTH_CHECKS"] = True
    # The few statements every submission or API request runs are prepared once per
    # connection (config/postgres/base.py); false for a pooler that cannot keep them.
    databases["default"]["PREPARED_STATEMENTS"] = env.bool("ALLOT_DB_PREPARED", default=True)
    # The check costs no statement on a quiet connection (config/postgres/base.py).
    if databases["default"].get("ENGINE") == "django.db.backends.postgresql":
        databases["default"]["ENGINE"] = "config.postgres"
    redis_url = env("REDIS_URL", default="") or embedded.redis_url()
    return {
        "DATABASES": databases,
        "REDIS_URL": redis_url,
        "CACHES": {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": env("CACHE_URL", default=redis_url),
                "KEY_PREFIX": env("ALLOT_CACHE_PREFIX", default="allot"),
            }
        },
        "CELERY_BROKER_URL": env("CELERY_BROKER_URL", default=redis_url),
        "CELERY_RESULT_BACKEND": env("CELERY_RESULT_BACKEND", default=redis_url),
    }


_URL_EXAMPLES = {
    "DATABASE_URL": "postgres://allot@db.example.org:5432/allot",
    "REDIS_URL": "redis://redis.example.org:6379/0",
}
# PostgreSQL only (the audit's triggers, advisory locks); Redis over TCP, or TLS
_URL_SCHEMES = {
    "DATABASE_URL": ("postgres", "postgresql", "pgsql"),
    "REDIS_URL": ("redis", "rediss"),
}


def _check_url_scheme(name: str) -> None:
    """Refuse a set URL whose scheme Allot cannot use, naming the variable (else
    dj-database-url only warns, and Celery fails later importing the host as a module)."""
    value = env(name, default="")
    scheme = value.partition("://")[0] if "://" in value else ""
    if value and scheme.lower() not in _URL_SCHEMES[name]:
        raise ImproperlyConfigured(
            f"{name} must be a URL starting with "
            + " or ".join(f"{s}://" for s in _URL_SCHEMES[name])
            + f" (e.g. {_URL_EXAMPLES[name]}), not {scheme + '://...' if scheme else 'a bare value'}"
        )


DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The runtime database role that `migrate` (run as the owner of the tables) grants what the
# application needs, audited tables read and insert only (ops/dbroles.py); unset: no grants.
ALLOT_DB_RUNTIME_ROLE = env("ALLOT_DB_RUNTIME_ROLE", default="")

CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Two queues: "celery" (the default) holds the scheduling cycles and the short periodic
# tasks; "background" holds the tasks that may take seconds to minutes (a what-if
# preview replays 14 days, an ETA refresh simulates the queue, a utilization collection
# reads Prometheus, the rollups and the cycle-record pruning scan hours of rows). A solo
# worker runs one task at a time: on a worker of both queues a preview holds up the
# cycles behind it, so `make run` and production run a worker of their own for
# "background" (docs/operations.md#queues). A worker of both queues still runs them all.
CELERY_TASK_DEFAULT_QUEUE = "celery"
BACKGROUND_QUEUE = "background"
BACKGROUND_TASKS = (
    "scheduler.preview_run",
    "scheduler.refresh_etas",
    "scheduler.collect_utilization",
    "scheduler.prune_cycle_records",
    "ledger.refresh_recent_rollups",
)
CELERY_TASK_ROUTES = {name: {"queue": BACKGROUND_QUEUE} for name in BACKGROUND_TASKS}
# Scheduling cycles: beat looks every ALLOT_CYCLE_TICK_S seconds for clusters whose last
# cycle is `Cluster.cycle_s` old; a STARTING attempt the cluster does not list counts
# as failed after ALLOT_START_CONFIRM_S; one the cluster keeps waiting (Slurm: PENDING)
# for ALLOT_START_TIMEOUT_S is taken back and its job requeued; cycle records are kept
# ALLOT_CYCLE_RETENTION_DAYS.
ALLOT_CYCLE_TICK_S = env.float("ALLOT_CYCLE_TICK_S", default=2.0)
ALLOT_START_CONFIRM_S = env.float("ALLOT_START_CONFIRM_S", default=15.0)
ALLOT_START_TIMEOUT_S = env.float("ALLOT_START_TIMEOUT_S", default=300.0)
# A job whose start was taken back is kept off the hosts the cluster refused it on for
# ALLOT_REFUSAL_AVOID_S, doubled with each refusal there up to ALLOT_REFUSAL_AVOID_MAX_S
# (scheduler.core.refusals).
ALLOT_REFUSAL_AVOID_S = env.float("ALLOT_REFUSAL_AVOID_S", default=900.0)
ALLOT_REFUSAL_AVOID_MAX_S = env.float("ALLOT_REFUSAL_AVOID_MAX_S", default=14400.0)
ALLOT_CYCLE_RETENTION_DAYS = env.int("ALLOT_CYCLE_RETENTION_DAYS", default=30)
# Scheduling health (ops.selectors): beat and every worker record a heartbeat every
# ALLOT_HEARTBEAT_S seconds; a cluster with no cycle for ALLOT_STALE_CYCLES of its cycle
# periods is stale (/healthz 503 naming the cause, a banner on every page).
ALLOT_HEARTBEAT_S = env.float("ALLOT_HEARTBEAT_S", default=5.0)
ALLOT_STALE_CYCLES = env.float("ALLOT_STALE_CYCLES", default=3.0)
# Beat keeps its schedule under ALLOT_VAR_DIR (never in the working directory) and beats
# from its own loop (ops.heartbeat). Celery leaves logging to Django's LOGGING
# (config.celery), so worker lines are structured like the web's.
CELERY_BEAT_SCHEDULER = "ops.heartbeat:HeartbeatScheduler"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# What-if previews replay the last ALLOT_PREVIEW_DAYS days of a cluster's jobs by default
# (a request may ask for 1..ALLOT_PREVIEW_MAX_DAYS).
ALLOT_PREVIEW_DAYS = env.int("ALLOT_PREVIEW_DAYS", default=14)
ALLOT_PREVIEW_MAX_DAYS = env.int("ALLOT_PREVIEW_MAX_DAYS", default=30)
# `make run`: the demo organisation, its simulated cluster, load and back-filled history
# (ALLOT_DEMO=off: the same processes on an empty database).
ALLOT_DEMO = env.bool("ALLOT_DEMO", default=True)
ALLOT_DEMO_BACKFILL_DAYS = env.float("ALLOT_DEMO_BACKFILL_DAYS", default=14.0)
# GPU utilization (docs/concepts.md#utilization): collected every ALLOT_UTILIZATION_EVERY_S
# seconds; a Prometheus read has samples every ALLOT_UTILIZATION_STEP_S seconds.
ALLOT_UTILIZATION_EVERY_S = env.float("ALLOT_UTILIZATION_EVERY_S", default=30.0)
ALLOT_UTILIZATION_STEP_S = env.float("ALLOT_UTILIZATION_STEP_S", default=15.0)
CELERY_BEAT_SCHEDULE = {
    "apply-due-budget-changes": {
        "task": "budgets.tasks.apply_due_budget_changes",
        "schedule": 30.0,
    },
    "scheduler-due-cycles": {
        "task": "scheduler.enqueue_due_cycles",
        "schedule": ALLOT_CYCLE_TICK_S,
    },
    "scheduler-demo-load": {
        "task": "scheduler.demo_load_tick",
        "schedule": 30.0,
    },
    "scheduler-prune-cycle-records": {
        "task": "scheduler.prune_cycle_records",
        "schedule": 3600.0,
    },
    "scheduler-prune-idempotency-keys": {
        "task": "scheduler.prune_idempotency_keys",
        "schedule": 3600.0,
    },
    "accounts-prune-expired-tokens": {
        "task": "accounts.prune_expired_tokens",
        "schedule": 3600.0,
    },
    "scheduler-collect-utilization": {
        "task": "scheduler.collect_utilization",
        "schedule": ALLOT_UTILIZATION_EVERY_S,
    },
    "ledger-refresh-recent-rollups": {
        "task": "ledger.refresh_recent_rollups",
        "schedule": 60.0,
    },
}

# Sign-in rate limit (django-axes, counted in the Redis cache): after
# ALLOT_LOGIN_FAILURE_LIMIT wrong passwords for one user name from one address, that pair
# gets 429 (API) or a message (page) for ALLOT_LOGIN_COOLOFF_S seconds.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "axes.handlers.cache.AxesCacheHandler"
AXES_FAILURE_LIMIT = env.int("ALLOT_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = dt.timedelta(seconds=env.int("ALLOT_LOGIN_COOLOFF_S", default=300))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# the cool-off runs from the failure that locked the account: retries do not extend it
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "accounts.lockout.lockout_response"
AXES_VERBOSE = False
# The sign-in lockout counts failures per client address, read like everywhere else
# (config/proxy.py).
AXES_CLIENT_IP_CALLABLE = "config.middleware.client_address"

# Reverse proxies (config/proxy.py): how many stand in front of every request and where
# the nearest connects from. The pair feeds gunicorn, Django's HTTPS detection and every
# reader of client addresses.
if proxy.retired_variables(os.environ):
    raise ImproperlyConfigured("; ".join(proxy.retired_variables(os.environ)))
try:
    ALLOT_TRUSTED_PROXIES = proxy.trusted_proxies(os.environ)
    ALLOT_PROXY_NETWORKS = proxy.proxy_networks(os.environ)
except proxy.ProxyConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from None
if ALLOT_TRUSTED_PROXIES:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# API tokens (django-rest-knox): several per user, stored hashed, ALLOT_TOKEN_TTL_DAYS
# long (0: no expiry).
KNOX_TOKEN_MODEL = "accounts.ApiToken"
# knox's own migrations create its default token table even when the model is swapped;
# nothing uses that table, and its foreign key to users would block test flushes.
MIGRATION_MODULES = {"knox": None}
_TOKEN_TTL_DAYS = env.int("ALLOT_TOKEN_TTL_DAYS", default=30)
REST_KNOX = {
    "TOKEN_TTL": dt.timedelta(days=_TOKEN_TTL_DAYS) if _TOKEN_TTL_DAYS else None,
    "AUTH_HEADER_PREFIX": "Token",
    "AUTO_REFRESH": False,
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Database sessions (Django's table and rules), read with one plain statement.
SESSION_ENGINE = "config.sessions"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "budgets:tree"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# WhiteNoise serves static files from the app server: collected, compressed and with
# hashed names in production (`manage.py collectstatic`), straight from the apps otherwise.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
# WhiteNoise warns about a missing STATIC_ROOT; a read-only installation collected it at
# build time.
with contextlib.suppress(OSError):
    STATIC_ROOT.mkdir(exist_ok=True)

# Content security policy (django-csp): scripts only from this server (inline ones need
# the per-response nonce); styles may be inline because Plotly and Swagger UI
# set them from their scripts; nothing from other origins, no framing, no plugins.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "worker-src": [SELF, "blob:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# /metrics: readable from these networks (comma-separated CIDRs) or with the token.
METRICS_NETWORKS = [
    ipaddress.ip_network(n.strip())
    for n in env.list("ALLOT_METRICS_NETWORKS", default=["127.0.0.0/8", "::1/128"])
    if n.strip()
]
METRICS_TOKEN = env("ALLOT_METRICS_TOKEN", default="")
# Counters and histograms of every process on this machine (gunicorn workers of every web
# instance, Celery workers) live as files in ALLOT_METRICS_DIR, one set per process slot
# (ops.metrics): a process that restarts continues its own files, nothing deletes them.
# Off (one process's own counters) where no directory is configured, as in tests.
METRICS_DIR: Path | None = Path(
    env("ALLOT_METRICS_DIR", default="")
    or env("PROMETHEUS_MULTIPROC_DIR", default="")
    or VAR_DIR / "prometheus"
).resolve()
STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", Path(plotly.__file__).parent / "package_data")]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerOrTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Reading the organisation needs a role (budgets.permissions.is_participant); the
    # token endpoints need only a sign-in (a user without a role manages their tokens).
    "DEFAULT_PERMISSION_CLASSES": ["config.access.IsParticipant"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "config.api_schema.AutoSchema",
    "EXCEPTION_HANDLER": "config.api_errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "config.pagination.Pagination",
    "PAGE_SIZE": 100,
    # JSON only: a form field left empty would otherwise read as "not given" and take the
    # field's default (a node created with weight "" got weight 1); forms get 415.
    # (config.parsers: DRF's, refusing bodies nested past a bound with a 400, not a 500)
    "DEFAULT_PARSER_CLASSES": ["config.parsers.JSONParser"],
    # JSON only out, too: an unknown `?format=` or an Accept without JSON is a 406 of the
    # error shape naming the input (config.negotiation); Swagger UI is the browsable API.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "config.negotiation.StrictContentNegotiation",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Allot API",
    "DESCRIPTION": "GPU-time budgets and hierarchical fair-share scheduling.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": f"/{STATIC_URL}favicon.svg",
    "COMPONENT_SPLIT_REQUEST": True,
    # PATCH inputs here are explicit serializers (not partial=True model updates), so the
    # PATCH body keeps its required fields (e.g. `reason`).
    "COMPONENT_SPLIT_PATCH": False,
    # The contract a generated client lives on (config.api_schema.postprocess): OAS 3.1,
    # one operationId style, headers, closed request bodies, a bearer scheme; served as
    # OpenAPI 3.0.3 too, converted from it, with `?oas=3.0` (config.schema_view, config.oas30).
    "OAS_VERSION": "3.1.0",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.api_schema.postprocess",
    ],
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "scheduler.models.JobState",
        "JobKindEnum": "scheduler.models.JobKind",
        "AttemptStateEnum": "scheduler.models.AttemptState",
        "HostHealthEnum": "scheduler.models.HostHealth",
        "HostHealthSettableEnum": [("draining", "Draining"), ("healthy", "Healthy")],
    },
}

PGHISTORY_APPEND_ONLY = True
# The request's user and URL go with the changes of writes; a read-only request changes no
# tracked row, and tracking it wrapped each of its statements for nothing.
PGHISTORY_MIDDLEWARE_METHODS = ("POST", "PUT", "PATCH", "DELETE")

# Logs (config/logs.py): LOG_LEVEL, and ALLOT_LOG_FORMAT text (default) or json; every
# line has a UTC timestamp, the level, the logger, the request id and the cycle id.
LOG_LEVEL = env("LOG_LEVEL", default="INFO").upper()
LOG_FORMAT = env("ALLOT_LOG_FORMAT", default="text")
try:
    _log_handlers = logs.handler_config(LOG_FORMAT)
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from None
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    **_log_handlers,
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # httpx logs every request at INFO (the cluster adapters make several per cycle);
    # Celery logs every beat tick and task at INFO (a due-cycle check runs every 2 s):
    # the cycle's own one-line summary (scheduler.cycle.run) is what an operator reads.
    "loggers": {
        "pgserver": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "celery.beat": {"level": "WARNING"},
        "celery.app.trace": {"level": "WARNING"},
        "celery.worker.strategy": {"level": "WARNING"},
    },
}
