"""Local development: DEBUG on unless the environment says otherwise; the embedded
PostgreSQL and Redis start for a missing DATABASE_URL or REDIS_URL."""

from .base import *  # noqa: F403
from .base import backing_services, env

DEBUG = env.bool("DEBUG", default=True)
globals().update(backing_services(embedded_fallback=True))
