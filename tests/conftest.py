"""Shared fixtures. Django tests run against PostgreSQL (DATABASE_URL or the embedded one)."""

import pytest


@pytest.fixture
def api_client():
    from rest_framework.test import APIClient

    return APIClient()
