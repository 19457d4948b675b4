"""Every API token made or ended leaves one append-only `TokenEvent` (who, which token by
its key, never its secret, when and why), on every path: sign-in, revoke by its owner,
the admin, a password change, expiry, the user's deletion. A refused request leaves
none. And a user holds at most MAX_LIVE_TOKENS_PER_USER live tokens: a sign-in past it
revokes the oldest."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken, TokenEvent, TokenEventKind
from accounts.services import MAX_LIVE_TOKENS_PER_USER, token_create, tokens_prune_expired
from tests.factories import SuperUserFactory, UserFactory

pytestmark = pytest.mark.django_db


def sign_in(client, username, name=""):
    body = {"username": username, "password": "pw", "name": name}
    return client.post("/api/v1/auth/token/", body, format="json")


def events() -> list[tuple]:
    return list(
        TokenEvent.objects.order_by("id").values_list("kind", "actor_name", "username", "token_key")
    )


def admin_client() -> Client:
    client = Client()
    client.force_login(SuperUserFactory(username="root"))
    return client


def test_a_sign_in_records_the_token_made_by_its_owner_and_never_its_secret(api_client):
    ann = UserFactory(username="ann")
    made = sign_in(api_client, "ann", name="laptop").json()
    event = TokenEvent.objects.get()
    assert (event.kind, event.actor, event.user_id) == ("created", ann, ann.pk)
    assert (event.token_key, event.token_name) == (made["token_key"], "laptop")
    assert event.reason == "signed in" and event.at is not None
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(e)::text FROM accounts_tokenevent e")
        assert made["token"] not in cursor.fetchone()[0]
    assert sign_in(api_client, "ann").status_code == 200
    assert TokenEvent.objects.count() == 2
    bad = api_client.post(
        "/api/v1/auth/token/", {"username": "ann", "password": "no"}, format="json"
    )
    assert bad.status_code == 400 and TokenEvent.objects.count() == 2


def test_revoking_records_each_token_by_its_owner_and_a_refused_revoke_nothing(api_client):
    UserFactory(username="ann")
    UserFactory(username="bob")
    first, second, third = (sign_in(api_client, "ann").json() for _ in range(3))
    bobs = sign_in(api_client, "bob").json()
    made = TokenEvent.objects.count()
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {first['token']}")
    assert api_client.delete(f"/api/v1/auth/tokens/{bobs['token_key']}/").status_code == 404
    assert api_client.delete("/api/v1/auth/tokens/nosuchkey/").status_code == 404
    assert TokenEvent.objects.count() == made  # refused: nothing recorded
    assert api_client.delete(f"/api/v1/auth/tokens/{second['token_key']}/").status_code == 204
    assert events()[made:] == [("revoked", "ann", "ann", second["token_key"])]
    assert api_client.delete("/api/v1/auth/tokens/").status_code == 204  # the other two
    assert sorted(events()[made + 1 :]) == sorted(
        [
            ("revoked", "ann", "ann", first["token_key"]),
            ("revoked", "ann", "ann", third["token_key"]),
        ]
    )
    assert ApiToken.objects.get().token_key == bobs["token_key"]


def test_the_admin_revokes_through_the_service_one_event_per_token():
    ann = UserFactory(username="ann")
    one, two, three = (token_create(user=ann, name=f"t{i}")[0] for i in range(3))
    client = admin_client()
    before = TokenEvent.objects.count()
    client.post(f"/admin/accounts/apitoken/{one.pk}/delete/", {"post": "yes"})
    assert events()[before:] == [("revoked_by_staff", "root", "ann", one.token_key)]
    client.post(
        "/admin/accounts/apitoken/",
        {"action": "delete_selected", "_selected_action": [two.pk, three.pk], "post": "yes"},
    )
    assert not ApiToken.objects.exists()
    assert sorted(events()[before + 1 :]) == sorted(
        ("revoked_by_staff", "root", "ann", t.token_key) for t in (two, three)
    )
    assert TokenEvent.objects.order_by("id").last().reason == "revoked in the admin by root"
    listed = client.get("/admin/accounts/tokenevent/")
    assert listed.status_code == 200 and one.token_key.encode() in listed.content
    assert (
        client.get(
            f"/admin/accounts/tokenevent/{TokenEvent.objects.first().pk}/delete/"
        ).status_code
        == 403
    )


def test_a_password_change_records_who_changed_it_or_the_system():
    ann = UserFactory(username="ann")
    token = token_create(user=ann, name="laptop")[0]
    client = admin_client()
    before = TokenEvent.objects.count()
    changed = client.post(
        f"/admin/auth/user/{ann.pk}/password/",
        {"password1": "a-new-long-passphrase", "password2": "a-new-long-passphrase"},
    )
    assert changed.status_code == 302
    assert events()[before:] == [("password_changed", "root", "ann", token.token_key)]
    again = token_create(user=ann, name="laptop")[0]
    ann.set_password("another-long-passphrase")  # a shell or manage.py changepassword
    ann.save()
    last = TokenEvent.objects.order_by("id").last()
    assert (last.kind, last.actor, last.token_key) == ("password_changed", None, again.token_key)


def test_expiry_is_recorded_by_the_prune_and_when_an_expired_token_is_tried(api_client):
    ann = UserFactory(username="ann")
    pruned = token_create(user=ann, name="old")[0]
    tried, secret = token_create(user=ann, name="cli")
    ApiToken.objects.filter(pk=pruned.pk).update(expiry=timezone.now() - dt.timedelta(hours=1))
    before = TokenEvent.objects.count()
    assert tokens_prune_expired() == 1
    assert events()[before:] == [("expired", "", "ann", pruned.token_key)]
    ApiToken.objects.filter(pk=tried.pk).update(expiry=timezone.now() - dt.timedelta(seconds=1))
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert api_client.get("/api/v1/auth/tokens/").status_code == 401
    assert events()[before + 1 :] == [("expired", "", "ann", tried.token_key)]
    assert api_client.get("/api/v1/auth/tokens/").status_code == 401  # gone: nothing more
    assert TokenEvent.objects.count() == before + 2


def test_deleting_a_user_in_the_admin_records_their_tokens():
    ann = UserFactory(username="ann")
    token = token_create(user=ann, name="laptop")[0]
    client = admin_client()
    before = TokenEvent.objects.count()
    client.post(f"/admin/auth/user/{ann.pk}/delete/", {"post": "yes"})
    assert not ApiToken.objects.exists()
    assert events()[before:] == [("user_deleted", "root", "ann", token.token_key)]


def test_token_events_are_append_only():
    token_create(user=UserFactory(username="ann"))
    with pytest.raises(Exception, match="Cannot update or delete"):
        TokenEvent.objects.update(reason="nothing happened")


def test_a_sign_in_past_the_limit_revokes_the_oldest_token_and_records_it(api_client):
    ann = UserFactory(username="ann")
    made = [token_create(user=ann, name=f"t{i}")[0] for i in range(MAX_LIVE_TOKENS_PER_USER)]
    oldest = made[0]
    recorded = TokenEvent.objects.count()
    signed_in = sign_in(api_client, "ann", name="one more")
    assert signed_in.status_code == 200  # never refused: a client that signs in on 401 goes on
    live = set(ApiToken.objects.filter(user=ann).values_list("token_key", flat=True))
    assert len(live) == MAX_LIVE_TOKENS_PER_USER
    assert oldest.token_key not in live and signed_in.json()["token_key"] in live
    events = list(TokenEvent.objects.order_by("id")[recorded:])
    assert [(e.kind, e.token_key, e.actor_id) for e in events] == [
        (TokenEventKind.REVOKED_OLDEST, oldest.token_key, ann.pk),
        (TokenEventKind.CREATED, signed_in.json()["token_key"], ann.pk),
    ]
    # an expired token does not count: the next sign-in revokes nothing live
    second = ApiToken.objects.get(pk=made[1].pk)
    ApiToken.objects.filter(pk=second.pk).update(expiry=timezone.now() - dt.timedelta(hours=1))
    sign_in(api_client, "ann")
    assert ApiToken.objects.filter(pk=made[2].pk).exists()
    # another user is not concerned
    UserFactory(username="bob")
    assert sign_in(api_client, "bob").status_code == 200
    assert ApiToken.objects.filter(user=ann).count() >= MAX_LIVE_TOKENS_PER_USER
