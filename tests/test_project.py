"""Project-wide rules: settings refuse unsafe production, the pure packages stay pure."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOOD_KEY = secrets.token_urlsafe(50)


def _import_production(
    env_overrides: dict[str, str], code: str = "import django; django.setup()"
) -> subprocess.CompletedProcess:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.production", **env_overrides)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set for the browser tests; never in deployment
    for name in [k for k, v in env_overrides.items() if v is None]:
        env.pop(name)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"DEBUG": "true", "SECRET_KEY": GOOD_KEY}, "DEBUG must be off"),
        ({"DEBUG": "false", "SECRET_KEY": ""}, "SECRET_KEY must be set"),
        ({"DEBUG": "false", "SECRET_KEY": "short"}, "SECRET_KEY must be set"),
        ({"DEBUG": "false", "SECRET_KEY": "ab" * 40}, "SECRET_KEY must be set"),  # 2 characters
        # unset: the default key, refused by its own branch (it is long and varied enough
        # for the length rule, so only the equality check can refuse it)
        ({"DEBUG": "false", "SECRET_KEY": None}, "SECRET_KEY is the development default"),
        (
            {
                "DEBUG": "false",
                "SECRET_KEY": "allot-insecure-development-key-never-use-it-in-production",
            },
            "SECRET_KEY is the development default",
        ),
    ],
)
def test_production_settings_refuse_unsafe_configuration(overrides, message):
    result = _import_production(overrides)
    assert result.returncode != 0
    assert message in result.stderr


def test_production_settings_start_when_configured():
    result = _import_production({"DEBUG": "false", "SECRET_KEY": GOOD_KEY})
    assert result.returncode == 0, result.stderr


def test_default_secret_key_is_long_enough_that_only_the_equality_check_refuses_it():
    from config.settings.base import DEFAULT_SECRET_KEY

    # long enough for the length rule, so only the equality check refuses it
    assert len(DEFAULT_SECRET_KEY) >= 50 and len(set(DEFAULT_SECRET_KEY)) >= 5


def test_deploy_check_passes_with_no_warning_under_production_settings():
    result = _import_production(
        {"DEBUG": "false", "SECRET_KEY": GOOD_KEY, "ALLOWED_HOSTS": "allot.example.org"},
        code="import django, sys; from django.core.management import call_command; django.setup(); "
        "call_command('check', deploy=True, fail_level='WARNING')",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout + result.stderr


def test_production_serves_https_only_with_hsts_and_secure_cookies():
    result = _import_production(
        {"DEBUG": "false", "SECRET_KEY": GOOD_KEY},
        code="import django; django.setup(); from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_HSTS_SECONDS, s.STORAGES['staticfiles']['BACKEND'])",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "True",
        "True",
        "True",
        "31536000",
        "whitenoise.storage.CompressedManifestStaticFilesStorage",
    ]


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


def test_pure_packages_type_check_strictly():
    """mypy --strict on the engine, simulator, planner and ledger accounting (the
    configuration in pyproject.toml, as `make lint` runs it)."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "mypy")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout
