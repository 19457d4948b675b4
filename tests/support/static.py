"""WhiteNoise's table of the static files found by Django's finders, made once per test
process instead of once per test client.

Every Django test client (`Client()`, `APIClient()`, the `client` fixture) loads the
middleware again on its first request, and `WhiteNoiseMiddleware` (settings: finders on,
no autorefresh) then stats and describes each of the ~240 files the finders list: 12 ms
of CPU per client, and the permission matrix alone makes ~500 clients. A server keeps
that table for its life (autorefresh off), as the live servers of the tests do; here each
new middleware gets the table the first one made under the same settings (the finders'
folders, the apps, the headers' settings), so a test that changes those settings gets a
table of its own. A plugin of tests/conftest.py."""

from __future__ import annotations

import pytest
from django.conf import settings
from whitenoise.middleware import WhiteNoiseMiddleware


def _settings_key(middleware: WhiteNoiseMiddleware) -> tuple:
    """What the finders' table depends on: where the finders look and how each file's
    headers are made."""
    return (
        repr(settings.STATICFILES_DIRS),
        tuple(settings.STATICFILES_FINDERS),
        tuple(settings.INSTALLED_APPS),
        middleware.static_prefix,
        middleware.max_age,
        middleware.allow_all_origins,
        middleware.charset,
        middleware.add_headers_function,
        middleware.index_file,
        repr(getattr(settings, "WHITENOISE_MIMETYPES", None)),
        repr(getattr(settings, "WHITENOISE_IMMUTABLE_FILE_TEST", None)),
    )


@pytest.fixture(autouse=True, scope="session")
def _static_files_found_once():
    found: dict[tuple, dict] = {}
    scan = WhiteNoiseMiddleware.add_files_from_finders

    def add_files_from_finders(self: WhiteNoiseMiddleware) -> None:
        key = _settings_key(self)
        if key not in found:
            before = dict(self.files)
            scan(self)
            found[key] = {
                url: entry for url, entry in self.files.items() if before.get(url) is not entry
            }
        self.files.update(found[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(WhiteNoiseMiddleware, "add_files_from_finders", add_files_from_finders)
        yield
