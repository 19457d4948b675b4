"""Local development: DEBUG on unless the environment says otherwise; the embedded
PostgreSQL and Redis start for a missing DATABASE_URL or REDIS_URL."""

from config.static import cache_vendored_files

from .base import *  # noqa: F403
from .base import backing_services, env

DEBUG = env.bool("DEBUG", default=True)
globals().update(backing_services(embedded_fallback=True))

# `make run` collects the static files into STATIC_ROOT with gzip and Brotli copies
# (config/launch.py), which WhiteNoise then serves to browsers that accept them (Plotly:
# 4.8 MB -> 1.1 MB). Until something was collected (runserver by hand), WhiteNoise finds
# the files in the apps, uncompressed. Vendored bundles (Plotly, htmx) change only with a
# dependency and are cached for a day; the app's own files are revalidated.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "config.storage.IncrementalCompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = not (STATIC_ROOT / "plotly" / "plotly.min.js.gz").exists()  # noqa: F405
WHITENOISE_AUTOREFRESH = WHITENOISE_USE_FINDERS
WHITENOISE_ADD_HEADERS_FUNCTION = cache_vendored_files
