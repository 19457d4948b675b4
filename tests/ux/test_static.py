"""Static files outside production: collected with gzip and Brotli copies made once per
change of a file, served compressed by WhiteNoise, the vendored bundles cached a day."""

from __future__ import annotations

import os
from importlib.util import find_spec

import pytest
from django.core.management import call_command
from django.test import Client

from config.static import cache_vendored_files

BUNDLE = "var plotly = {};\n" + "function f(a, b) { return a + b; }\n" * 20000


@pytest.fixture
def dev_static(tmp_path, settings):
    """The dev settings' static files, from a small stand-in for Plotly's bundle."""
    source = tmp_path / "src"
    (source / "plotly").mkdir(parents=True)
    (source / "plotly" / "plotly.min.js").write_text(BUNDLE)
    (source / "css").mkdir()
    (source / "css" / "app.css").write_text("body { margin: 0; }\n" * 200)
    settings.STATIC_ROOT = tmp_path / "collected"
    settings.STATICFILES_DIRS = [str(source)]
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "config.storage.IncrementalCompressedStaticFilesStorage"},
    }
    settings.WHITENOISE_USE_FINDERS = False
    settings.WHITENOISE_AUTOREFRESH = False
    settings.WHITENOISE_ADD_HEADERS_FUNCTION = cache_vendored_files
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    return settings.STATIC_ROOT


def test_collected_files_are_compressed_once_and_served_compressed(dev_static):
    call_command("collectstatic", interactive=False, verbosity=0)
    bundle = dev_static / "plotly" / "plotly.min.js"
    gz, br = (bundle.with_name(bundle.name + s) for s in (".gz", ".br"))
    assert gz.stat().st_size < bundle.stat().st_size / 5
    assert br.exists() == bool(find_spec("brotli"))
    made = gz.stat().st_mtime_ns
    marked = gz.read_bytes() + b"marker"
    gz.write_bytes(marked)
    os.utime(gz, ns=(made, made))
    call_command("collectstatic", interactive=False, verbosity=0)
    assert gz.read_bytes() == marked  # an unchanged file is not compressed again
    gz.write_bytes(marked[: -len(b"marker")])
    os.utime(gz, ns=(made, made))

    client = Client()  # a new handler: WhiteNoise reads the settings above
    response = client.get("/static/plotly/plotly.min.js", HTTP_ACCEPT_ENCODING="gzip, br")
    assert response.status_code == 200
    # Brotli where the brotli package is installed (the dev extras bring it), else gzip
    assert response["Content-Encoding"] == ("br" if find_spec("brotli") else "gzip")
    assert response["Cache-Control"] == "public, max-age=86400"
    own = client.get("/static/css/app.css", HTTP_ACCEPT_ENCODING="gzip")
    assert own["Content-Encoding"] == "gzip" and "86400" not in own.get("Cache-Control", "")
