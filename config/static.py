"""Cache headers for static files served by WhiteNoise outside production (where file
names carry their content hash and everything is cached for a year)."""

from __future__ import annotations

VENDORED = ("/plotly/", "/vendor/")  # bundles that change only when a dependency does
VENDORED_MAX_AGE_S = 86400


def cache_vendored_files(headers, path: str, url: str) -> None:
    """WHITENOISE_ADD_HEADERS_FUNCTION: let browsers keep the vendored bundles a day."""
    if any(part in url for part in VENDORED):
        headers["Cache-Control"] = f"public, max-age={VENDORED_MAX_AGE_S}"
