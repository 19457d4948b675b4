"""API tokens: several per user, hashed at rest, listed and revoked by their owner only."""

import pytest
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User

from accounts.models import ApiToken
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def sign_in(client, username, password="pw", name=""):
    return client.post(
        "/api/v1/auth/token/",
        {"username": username, "password": password, "name": name},
        format="json",
    )


def test_each_sign_in_makes_a_new_named_token_stored_only_hashed(api_client):
    UserFactory(username="ann")
    laptop = sign_in(api_client, "ann", name="laptop").json()
    ci = sign_in(api_client, "ann", name="CI").json()
    assert laptop["token"] != ci["token"] and laptop["token"].startswith(laptop["token_key"])
    stored = ApiToken.objects.get(token_key=laptop["token_key"])
    assert stored.name == "laptop" and stored.expiry is not None
    assert laptop["token"] not in stored.digest  # only the SHA-512 digest is kept

    api_client.credentials(HTTP_AUTHORIZATION=f"Token {laptop['token']}")
    listed = api_client.get("/api/v1/auth/tokens/").json()
    assert [(t["name"], t["token_key"]) for t in listed] == [
        ("CI", ci["token_key"]),
        ("laptop", laptop["token_key"]),
    ]
    assert all("token" not in t for t in listed)  # secrets are never listed


def test_a_revoked_token_stops_working_at_once(api_client):
    UserFactory(username="ann")
    first = sign_in(api_client, "ann").json()
    second = sign_in(api_client, "ann").json()
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {first['token']}")
    assert api_client.delete(f"/api/v1/auth/tokens/{second['token_key']}/").status_code == 204
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {second['token']}")
    response = api_client.get("/api/v1/auth/tokens/")
    assert response.status_code == 401 and response.json()["code"] == "authentication_failed"
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {first['token']}")
    assert api_client.get("/api/v1/auth/tokens/").status_code == 200
    assert api_client.delete("/api/v1/auth/tokens/").status_code == 204  # all of mine
    assert api_client.get("/api/v1/auth/tokens/").status_code == 401


def test_nobody_revokes_or_sees_another_users_token(api_client):
    UserFactory(username="ann")
    UserFactory(username="bob")
    ann = sign_in(api_client, "ann").json()
    bob = sign_in(api_client, "bob").json()
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {bob['token']}")
    assert [t["token_key"] for t in api_client.get("/api/v1/auth/tokens/").json()] == [
        bob["token_key"]
    ]
    response = api_client.delete(f"/api/v1/auth/tokens/{ann['token_key']}/")
    assert response.status_code == 404
    assert ApiToken.objects.filter(token_key=ann["token_key"]).exists()


def test_wrong_password_is_400_and_gives_no_token(api_client):
    UserFactory(username="ann")
    response = sign_in(api_client, "ann", password="wrong")
    assert response.status_code == 400 and "token" not in response.json()
    assert not ApiToken.objects.exists()


def test_expired_tokens_are_pruned_and_live_ones_kept():
    import datetime as dt

    from django.utils import timezone

    from accounts.services import token_create
    from accounts.tasks import prune_expired_tokens

    ann = UserFactory(username="ann")
    expired, _ = token_create(user=ann, name="old laptop")
    live, _ = token_create(user=ann, name="CI")
    forever, _ = token_create(user=ann, name="no expiry")
    ApiToken.objects.filter(pk=expired.pk).update(expiry=timezone.now() - dt.timedelta(hours=1))
    ApiToken.objects.filter(pk=forever.pk).update(expiry=None)
    assert prune_expired_tokens() == 1
    assert sorted(ApiToken.objects.values_list("name", flat=True)) == ["CI", "no expiry"]
    assert prune_expired_tokens() == 0
    assert live.expiry > timezone.now()


def test_a_request_reads_its_token_once_and_refuses_expired_and_inactive(api_client):
    import datetime as dt

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from accounts.services import token_create

    ann = UserFactory(username="ann")
    for i in range(5):  # other tokens of the same user are not read
        token_create(user=ann, name=f"other {i}")
    row, secret = token_create(user=ann, name="cli")
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    with CaptureQueriesContext(connection) as captured:
        assert api_client.get("/api/v1/auth/tokens/").status_code == 200
    token_reads = [q for q in captured if 'FROM "accounts_apitoken"' in q["sql"]]
    assert len(token_reads) == 2  # the authentication (with its user) and the list itself
    assert 'INNER JOIN "auth_user"' in token_reads[0]["sql"]

    ann.is_active = False
    ann.save()
    assert api_client.get("/api/v1/auth/tokens/").status_code == 401
    ann.is_active = True
    ann.save()
    ApiToken.objects.filter(pk=row.pk).update(expiry=timezone.now() - dt.timedelta(seconds=1))
    response = api_client.get("/api/v1/auth/tokens/")
    assert response.status_code == 401 and response.json()["code"] == "authentication_failed"
    assert not ApiToken.objects.filter(pk=row.pk).exists()  # deleted when tried
    assert ApiToken.objects.filter(user=ann).count() == 5
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {secret[:-1]}x")
    assert api_client.get("/api/v1/auth/tokens/").status_code == 401


def test_a_password_changed_in_the_admin_revokes_the_users_tokens(api_client, client):
    """After a reset of a stolen password, the tokens got with it kept working for up to
    ALLOT_TOKEN_TTL_DAYS; the user's other users' tokens stay."""
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    old = sign_in(api_client, "ann").json()["token"]
    kept = sign_in(api_client, "bob").json()["token"]
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    changed = client.post(
        f"/admin/auth/user/{ann.pk}/password/",
        {"password1": "a-new-long-passphrase", "password2": "a-new-long-passphrase"},
    )
    assert changed.status_code == 302
    for token, status in ((old, 401), (kept, 200)):
        api_client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        assert api_client.get("/api/v1/auth/tokens/").status_code == status
    assert not ApiToken.objects.filter(user=ann).exists()
    assert ApiToken.objects.filter(user=bob).count() == 1


def test_a_rehash_at_sign_in_or_another_change_of_the_user_keeps_the_tokens(api_client):
    """Django rehashes a password at sign-in when its hash is outdated (a hasher's cost
    raised by an upgrade; here a short salt): not a change of the password, so nothing
    is revoked; nor by a change of another field."""
    ann = UserFactory(username="ann")
    sign_in(api_client, "ann")
    outdated = make_password("pw", salt="ab", hasher="md5")  # rehashed at sign-in
    User.objects.filter(pk=ann.pk).update(password=outdated)
    assert sign_in(api_client, "ann").status_code == 200
    assert User.objects.get(pk=ann.pk).password != outdated  # it was rehashed
    assert ApiToken.objects.filter(user=ann).count() == 2
    ann.first_name = "Ann"
    ann.save()
    assert ApiToken.objects.filter(user=ann).count() == 2
