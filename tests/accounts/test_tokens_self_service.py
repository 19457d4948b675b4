"""A user sees and revokes their own API tokens, and only theirs: the API (`current`,
`keep_current`), the page `/me/tokens/` (list, revoke one, revoke all) and the one
service under both. Another user's token is a 404 everywhere (staff included: they
revoke in the admin), a revoked token is refused at once, and each revocation is one
`TokenEvent` by its owner."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import ApiToken, TokenEvent, TokenEventKind
from accounts.services import token_create
from tests.factories import SuperUserFactory, UserFactory

pytestmark = pytest.mark.django_db


def _events(since: int = 0) -> list[tuple]:
    return list(
        TokenEvent.objects.filter(pk__gt=since)
        .order_by("id")
        .values_list("kind", "actor_name", "username", "token_key", "reason")
    )


def _last_event_id() -> int:
    last = TokenEvent.objects.order_by("-id").first()
    return last.pk if last else 0


def _status_with(api_client, secret: str) -> int:
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return api_client.get("/api/v1/auth/tokens/").status_code


def test_the_list_marks_the_token_in_use_and_never_shows_a_secret(api_client):
    ann = UserFactory(username="ann")
    laptop, laptop_secret = token_create(user=ann, name="laptop")
    ci, ci_secret = token_create(user=ann, name="CI")
    token_create(user=UserFactory(username="bob"), name="bob's")
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {laptop_secret}")
    listed = api_client.get("/api/v1/auth/tokens/").json()
    assert [(t["token_key"], t["name"], t["current"]) for t in listed] == [
        (ci.token_key, "CI", False),
        (laptop.token_key, "laptop", True),
    ]
    assert set(listed[0]) == {"token_key", "name", "created", "expiry", "current"}
    assert ci_secret not in str(listed) and laptop_secret not in str(listed)


def test_keep_current_revokes_every_other_token_and_records_each_by_its_owner(api_client):
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    in_use, secret = token_create(user=ann, name="this shell")
    others = [token_create(user=ann, name=f"old {i}") for i in range(3)]
    bobs = token_create(user=bob, name="bob's")[1]
    since = _last_event_id()
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert api_client.delete("/api/v1/auth/tokens/?keep_current=true").status_code == 204
    assert list(ApiToken.objects.filter(user=ann)) == [in_use]
    assert sorted(_events(since)) == sorted(
        ("revoked", "ann", "ann", row.token_key, "revoked all but the token in use")
        for row, _ in others
    )
    assert _status_with(api_client, secret) == 200  # the one in use works on
    for _, old in others:  # the others are refused at once
        assert _status_with(api_client, old) == 401
    assert _status_with(api_client, bobs) == 200  # nobody else's is touched


def test_keep_current_on_a_session_keeps_none_and_a_bad_value_is_a_400(client):
    ann = UserFactory(username="ann")
    for i in range(2):
        token_create(user=ann, name=f"t{i}")
    client.force_login(ann)
    refused = client.delete("/api/v1/auth/tokens/?keep_current=maybe")
    assert refused.status_code == 400 and refused.json()["field"] == "keep_current"
    assert ApiToken.objects.filter(user=ann).count() == 2  # refused: nothing revoked
    assert client.delete("/api/v1/auth/tokens/?keep_current=true").status_code == 204
    assert not ApiToken.objects.filter(user=ann).exists()  # a session sends no token


def test_staff_revoke_no_one_elses_token_through_the_api_only_in_the_admin(api_client):
    ann = UserFactory(username="ann")
    token, secret = token_create(user=ann, name="laptop")
    root = SuperUserFactory(username="root")
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=root)[1]}")
    since = _last_event_id()
    gone = api_client.delete(f"/api/v1/auth/tokens/{token.token_key}/")
    assert gone.status_code == 404 and gone.json()["code"] == "not_found"
    listed = [t["token_key"] for t in api_client.get("/api/v1/auth/tokens/").json()]
    assert len(listed) == 1 and token.token_key not in listed  # root's own only
    assert _events(since) == [] and _status_with(api_client, secret) == 200


# --- the page ----------------------------------------------------------------------


def _page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_page_lists_only_my_tokens_with_their_keys_names_and_a_revoke_button():
    ann = UserFactory(username="ann")
    mine, secret = token_create(user=ann, name="a-very-long-name-" * 5)
    theirs, _ = token_create(user=UserFactory(username="bob"), name="bobs-laptop")
    html = _page_client(ann).get("/me/tokens/").content.decode()
    assert mine.token_key in html and "a-very-long-name-" in html
    assert f'action="/me/tokens/{mine.token_key}/revoke/"' in html
    assert theirs.token_key not in html and "bobs-laptop" not in html
    assert secret not in html and mine.digest not in html
    assert 'href="/me/tokens/"' in _page_client(ann).get("/me/").content.decode()


def test_the_page_says_so_when_there_is_no_token_and_asks_anonymous_to_sign_in(client):
    newcomer = UserFactory(username="newcomer")  # no role: their tokens are theirs to manage
    page = _page_client(newcomer).get("/me/tokens/")
    assert page.status_code == 200 and "You have no live API tokens" in page.content.decode()
    assert "Revoke all" not in page.content.decode()
    anonymous = client.get("/me/tokens/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")


def test_revoking_on_the_page_ends_the_token_at_once_and_records_its_owner(api_client):
    ann = UserFactory(username="ann")
    token, secret = token_create(user=ann, name="laptop")
    kept, kept_secret = token_create(user=ann, name="CI")
    since = _last_event_id()
    page = _page_client(ann)
    assert page.get(f"/me/tokens/{token.token_key}/revoke/").status_code == 405  # POST only
    answer = page.post(f"/me/tokens/{token.token_key}/revoke/", follow=True)
    assert answer.redirect_chain == [("/me/tokens/", 302)]
    assert f"Token {token.token_key}… revoked" in answer.content.decode()
    assert _events(since) == [("revoked", "ann", "ann", token.token_key, "revoked by owner")]
    assert _status_with(api_client, secret) == 401
    assert _status_with(api_client, kept_secret) == 200


def test_another_users_token_on_the_page_is_a_404_and_nothing_changes():
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    theirs, _ = token_create(user=bob, name="bob's")
    since = _last_event_id()
    for user in (ann, SuperUserFactory(username="root")):
        refused = _page_client(user).post(f"/me/tokens/{theirs.token_key}/revoke/")
        assert refused.status_code == 404
    assert ApiToken.objects.filter(pk=theirs.pk).exists() and _events(since) == []
    unknown = _page_client(ann).post("/me/tokens/000000000000000/revoke/")
    assert unknown.status_code == 404


def test_revoke_all_on_the_page_ends_mine_only_and_keeps_the_session(api_client):
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    mine = [token_create(user=ann, name=f"t{i}") for i in range(3)]
    bobs = token_create(user=bob)[1]
    since = _last_event_id()
    page = _page_client(ann)
    answer = page.post("/me/tokens/revoke-all/", follow=True)
    assert "3 tokens revoked." in answer.content.decode()
    assert not ApiToken.objects.filter(user=ann).exists()
    assert sorted(_events(since)) == sorted(
        (TokenEventKind.REVOKED.value, "ann", "ann", row.token_key, "revoked all")
        for row, _ in mine
    )
    assert page.get("/me/tokens/").status_code == 200  # still signed in
    assert all(_status_with(api_client, secret) == 401 for _, secret in mine)
    assert _status_with(api_client, bobs) == 200
