"""Production settings: refuse to start when misconfigured."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import DEBUG, DEFAULT_SECRET_KEY, SECRET_KEY

if DEBUG:
    raise ImproperlyConfigured("DEBUG must be off in production (unset DEBUG or set DEBUG=false).")
if SECRET_KEY == DEFAULT_SECRET_KEY or len(SECRET_KEY) < 32:
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a unique value of at least 32 characters in production."
    )

SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
