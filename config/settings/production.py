"""Production settings: refuse to start when misconfigured; HTTPS only.

Served by gunicorn (deploy/: the systemd units and the container image; docs/operations.md),
static files by WhiteNoise from STATIC_ROOT after `manage.py collectstatic`. Without
DATABASE_URL or REDIS_URL nothing starts (never the embedded servers), and `manage.py
check --deploy` fails naming the variable; configured, it passes with no warning."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import DEBUG, DEFAULT_SECRET_KEY, SECRET_KEY, backing_services, env

globals().update(backing_services(embedded_fallback=False))

if DEBUG:
    raise ImproperlyConfigured("DEBUG must be off in production (unset DEBUG or set DEBUG=false).")
_KEY_HOWTO = "e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'."
if SECRET_KEY == DEFAULT_SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is the development default, which is public; production needs a "
        f"unique random value of at least 50 characters, {_KEY_HOWTO}"
    )
# Django's own deploy check (security.W009): at least 50 characters, 5 different ones.
if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a unique random value of at least 50 characters (5 "
        f"different ones at least) in production, {_KEY_HOWTO}"
    )

# Static files: collected, compressed, with content hashes in their names (cached forever).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = False

# HTTPS: cookies only over TLS, HSTS, redirect plain HTTP. Behind a TLS-terminating proxy
# set ALLOT_TRUSTED_PROXIES and ALLOT_PROXY_NETWORKS (config/proxy.py; the proxy must set
# X-Forwarded-Proto and append to X-Forwarded-For).
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_SSL_REDIRECT = env.bool("ALLOT_SSL_REDIRECT", default=True)
SECURE_REDIRECT_EXEMPT = [
    r"^healthz(/web)?$",
    r"^metrics$",
]  # probes and scrapers inside the network
SECURE_HSTS_SECONDS = env.int("ALLOT_HSTS_SECONDS", default=31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("ALLOT_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("ALLOT_HSTS_PRELOAD", default=True)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
X_FRAME_OPTIONS = "DENY"
