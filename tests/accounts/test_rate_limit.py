"""Sign-in rate limit (django-axes on the Redis cache): a burst of wrong passwords gets
429 (API) or a clear message (page), and sign-in works again after the cool-off."""

import time

import pytest

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def short_cooloff(settings):
    import datetime as dt

    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = dt.timedelta(seconds=2)


def token_request(client, password):
    return client.post(
        "/api/v1/auth/token/", {"username": "ann", "password": password}, format="json"
    )


def test_api_burst_of_wrong_passwords_gets_429_then_works_after_the_window(
    api_client, short_cooloff
):
    UserFactory(username="ann")
    statuses = [token_request(api_client, "wrong").status_code for _ in range(4)]
    assert statuses == [400, 400, 429, 429]
    locked = token_request(api_client, "pw")  # even the right password, while locked out
    assert locked.status_code == 429 and locked.json()["code"] == "throttled"
    assert "Too many failed sign-ins" in locked.json()["detail"]
    assert locked["Retry-After"] == "2"
    time.sleep(2.2)
    response = token_request(api_client, "pw")
    assert response.status_code == 200 and response.json()["token"]


def test_page_burst_of_wrong_passwords_shows_a_message_then_works_after_the_window(
    client, short_cooloff
):
    UserFactory(username="ann")
    for _ in range(2):
        response = client.post("/accounts/login/", {"username": "ann", "password": "wrong"})
        assert response.status_code == 200 and "did not match" in response.content.decode()
    response = client.post("/accounts/login/", {"username": "ann", "password": "wrong"})
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.content.decode()
    assert client.post("/accounts/login/", {"username": "ann", "password": "pw"}).status_code == 429
    time.sleep(2.2)
    response = client.post("/accounts/login/", {"username": "ann", "password": "pw"})
    assert response.status_code == 302 and response.url == "/budgets/"


def test_lockout_is_per_user_name(api_client, short_cooloff):
    UserFactory(username="ann")
    UserFactory(username="bob")
    for _ in range(3):
        token_request(api_client, "wrong")
    response = api_client.post(
        "/api/v1/auth/token/", {"username": "bob", "password": "pw"}, format="json"
    )
    assert response.status_code == 200


def test_failures_are_counted_in_redis(api_client, short_cooloff, settings):
    from django.core.cache import cache

    UserFactory(username="ann")
    token_request(api_client, "wrong")
    client = cache._cache.get_client()
    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    assert settings.CACHES["default"]["BACKEND"].endswith("RedisCache")
    assert list(client.scan_iter(f"{prefix}:*"))  # the failure count lives in Redis
