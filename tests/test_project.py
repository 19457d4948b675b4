"""Project-wide rules: settings refuse unsafe production, the pure packages stay pure."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _import_production(env_overrides: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.production", **env_overrides)
    code = "import django; django.setup()"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"DEBUG": "true", "SECRET_KEY": "x" * 50}, "DEBUG must be off"),
        ({"DEBUG": "false", "SECRET_KEY": ""}, "SECRET_KEY must be set"),
        ({"DEBUG": "false", "SECRET_KEY": "short"}, "SECRET_KEY must be set"),
    ],
)
def test_production_settings_refuse_unsafe_configuration(overrides, message):
    result = _import_production(overrides)
    assert result.returncode != 0
    assert message in result.stderr


def test_production_settings_start_when_configured():
    result = _import_production({"DEBUG": "false", "SECRET_KEY": "k" * 50})
    assert result.returncode == 0, result.stderr


def test_pure_packages_do_not_import_django():
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KEPT" in result.stdout
