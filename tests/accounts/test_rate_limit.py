"""Sign-in rate limit (django-axes on the Redis cache): a burst of wrong passwords gets
429 (API) or a clear message (page), and sign-in works again after the cool-off.

The cool-off is long enough that no request of a test outlives it on a slow machine; its
end is not waited for: the lockout's Redis keys, whose time to live is checked to be the
cool-off, are expired as Redis would expire them when it ends (`end_of_cooloff`)."""

import datetime as dt
import time

import pytest

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
COOLOFF_S = 120


@pytest.fixture
def short_cooloff(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = dt.timedelta(seconds=COOLOFF_S)


def end_of_cooloff(settings) -> None:
    """The cool-off passes: every key of the lockout (set on the last failure to live
    COOLOFF_S seconds) expires now, as Redis expires it when the cool-off ends."""
    from django.core.cache import cache

    client = cache._cache.get_client(write=True)
    keys = list(client.scan_iter(f"{settings.CACHES['default']['KEY_PREFIX']}:*"))
    assert keys
    for key in keys:
        assert 0 < client.ttl(key) <= COOLOFF_S, key
        client.pexpire(key, 1)
    deadline = time.monotonic() + 10
    while any(client.exists(key) for key in keys):
        assert time.monotonic() < deadline, "Redis kept the expired keys"
        time.sleep(0.01)


def token_request(client, password):
    return client.post(
        "/api/v1/auth/token/", {"username": "ann", "password": password}, format="json"
    )


def test_api_burst_of_wrong_passwords_gets_429_then_works_after_the_window(
    api_client, short_cooloff, settings
):
    UserFactory(username="ann")
    statuses = [token_request(api_client, "wrong").status_code for _ in range(4)]
    assert statuses == [400, 400, 429, 429]
    locked = token_request(api_client, "pw")  # even the right password, while locked out
    assert locked.status_code == 429 and locked.json()["code"] == "throttled"
    assert "Too many failed sign-ins" in locked.json()["detail"]
    assert locked["Retry-After"] == str(COOLOFF_S)
    end_of_cooloff(settings)
    response = token_request(api_client, "pw")
    assert response.status_code == 200 and response.json()["token"]


def test_page_burst_of_wrong_passwords_shows_a_message_then_works_after_the_window(
    client, short_cooloff, settings
):
    UserFactory(username="ann")
    for _ in range(2):
        response = client.post("/accounts/login/", {"username": "ann", "password": "wrong"})
        assert response.status_code == 200 and "did not match" in response.content.decode()
    response = client.post("/accounts/login/", {"username": "ann", "password": "wrong"})
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.content.decode()
    assert client.post("/accounts/login/", {"username": "ann", "password": "pw"}).status_code == 429
    end_of_cooloff(settings)
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


def test_retrying_during_a_lockout_does_not_extend_it(api_client, short_cooloff, settings):
    """The cool-off runs from the failure that locked the account: a user who keeps
    retrying (even with the right password) gets in when it ends, not never."""
    from django.core.cache import cache

    UserFactory(username="ann")
    for _ in range(3):
        token_request(api_client, "wrong")
    client = cache._cache.get_client(write=True)
    keys = list(client.scan_iter(f"{settings.CACHES['default']['KEY_PREFIX']}:*"))
    assert keys
    # 30 s of the cool-off pass: the stored time moves, nothing sleeps (no clock margin)
    left_s = COOLOFF_S - 30
    for key in keys:
        client.expire(key, left_s)
    assert token_request(api_client, "pw").status_code == 429
    assert token_request(api_client, "wrong").status_code == 429
    # a retry that restarted the cool-off would have set COOLOFF_S again
    ttls = [client.ttl(key) for key in keys]
    assert all(0 < ttl <= left_s for ttl in ttls), ttls
