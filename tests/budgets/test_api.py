"""REST API: every endpoint, allowed and forbidden, and every bad-input case."""

import datetime as dt

import pytest
from django.utils import timezone

from budgets import selectors
from budgets.models import BudgetEvent, BudgetNode, Membership
from budgets.services import MAX_SCHEDULE_AHEAD

pytestmark = pytest.mark.django_db


def as_user(client, user):
    client.force_authenticate(user)
    return client


def weights():
    return dict(BudgetNode.objects.values_list("name", "weight"))


def test_token_auth_flow(tree, api_client):
    tree.user("lead-a")  # sets password "pw"
    response = api_client.post(
        "/api/v1/auth/token/", {"username": "lead-a", "password": "pw"}, format="json"
    )
    assert response.status_code == 200
    token = response.json()["token"]
    wrong = api_client.post(
        "/api/v1/auth/token/", {"username": "lead-a", "password": "no"}, format="json"
    )
    assert wrong.status_code == 400 and "token" not in wrong.json()
    assert wrong.json()["code"] == "invalid"
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    tree_response = api_client.get("/api/v1/tree/").json()
    assert tree_response["tree"]["name"] == "org"
    assert [c["name"] for c in tree_response["tree"]["children"]] == ["prog-a", "prog-b"]
    assert token.startswith(api_client.get("/api/v1/auth/tokens/").json()[0]["token_key"])


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/api/v1/nodes/"),
        ("get", "/api/v1/nodes/1/"),
        ("get", "/api/v1/tree/"),
        ("get", "/api/v1/budget-changes/"),
        ("post", "/api/v1/budget-changes/"),
        ("post", "/api/v1/budget-changes/1/cancel/"),
        ("get", "/api/v1/memberships/"),
        ("post", "/api/v1/memberships/"),
        ("delete", "/api/v1/memberships/1/"),
        ("post", "/api/v1/nodes/"),
        ("patch", "/api/v1/nodes/1/"),
    ],
)
def test_anonymous_requests_are_refused(tree, api_client, method, url):
    before = (BudgetEvent.objects.count(), weights(), Membership.objects.count())
    url = url.replace("/1/", f"/{tree.node('a1').pk}/")
    response = getattr(api_client, method)(
        url,
        {"reason": "r", "changes": [{"node": tree.node("a1").pk, "weight": 5}], "name": "x"},
        format="json",
    )
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == "Token"
    assert "results" not in response.json() and "tree" not in response.json()
    assert (BudgetEvent.objects.count(), weights(), Membership.objects.count()) == before


def test_every_signed_in_user_reads_nodes_and_tree(tree, api_client):
    as_user(api_client, tree.user("bob"))
    nodes = api_client.get("/api/v1/nodes/").json()
    a1 = next(n for n in nodes if n["name"] == "a1")
    assert a1["path"] == "org/prog-a/a1"
    assert a1["entitled_share"] == pytest.approx(0.35)
    assert a1["share"] == pytest.approx(0.7)
    assert a1["managers"] == ["pi-a1"] and a1["members"] == ["ann"]
    assert a1["kind"] == "project" and a1["parent"] == tree.node("prog-a").pk
    detail = api_client.get(f"/api/v1/nodes/{a1['id']}/").json()
    assert detail == a1
    assert api_client.get("/api/v1/nodes/999999/").status_code == 404
    body = api_client.get("/api/v1/tree/").json()
    assert body["version"] == selectors.tree_version()
    prog_a = body["tree"]["children"][0]
    assert prog_a["name"] == "prog-a" and prog_a["children"][0]["entitled_share"] == pytest.approx(
        0.35
    )
    assert "id" in prog_a and prog_a["weight"] == "50"


def test_the_root_has_no_weight_on_the_api(tree, api_client):
    """docs/concepts.md gives weights to the nodes below the root: the API says null for
    the root (the tree page shows '–'), never the stored 1.0000."""
    as_user(api_client, tree.user("bob"))
    root = next(n for n in api_client.get("/api/v1/nodes/").json() if n["parent"] is None)
    assert root["weight"] is None and root["entitled_share"] == 1.0
    assert api_client.get(f"/api/v1/nodes/{root['id']}/").json()["weight"] is None
    body = api_client.get("/api/v1/tree/").json()["tree"]
    assert "weight" not in body and body["children"][0]["weight"] == "50"  # import format


def test_budget_change_created_returns_the_stored_event(tree, api_client):
    as_user(api_client, tree.user("lead-a"))
    version = api_client.get("/api/v1/tree/").json()["version"]
    response = api_client.post(
        "/api/v1/budget-changes/",
        {
            "reason": "review",
            "effective_at": None,
            "base_version": version,
            "changes": [{"node": tree.node("a1").pk, "weight": "60"}],
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    event = response.json()
    assert (
        event["kind"] == "applied"
        and event["actor"] == "lead-a"
        and event["tree_version"] == version + 1
    )
    item = next(i for i in event["items"] if i["node_path"] == "org/prog-a/a1")
    assert item["old_weight"] == "70.0000" and item["new_weight"] == "60.0000"
    assert api_client.get("/api/v1/tree/").json()["version"] == version + 1


def test_budget_change_outside_subtree_is_403_and_changes_nothing(tree, api_client):
    as_user(api_client, tree.user("lead-a"))
    before = weights()
    response = api_client.post(
        "/api/v1/budget-changes/",
        {"reason": "grab", "changes": [{"node": tree.node("b1").pk, "weight": "60"}]},
        format="json",
    )
    assert response.status_code == 403
    assert response.json()["field"] == "changes[0].node"
    assert weights() == before


def test_researchers_cannot_change_weights(tree, api_client):
    as_user(api_client, tree.user("ann"))
    response = api_client.post(
        "/api/v1/budget-changes/",
        {"reason": "mine", "changes": [{"node": tree.node("a1").pk, "weight": 99}]},
        format="json",
    )
    assert response.status_code == 403


def test_stale_base_version_is_409(tree, api_client):
    as_user(api_client, tree.user("ceo"))
    version = selectors.tree_version()
    payload = {
        "reason": "r",
        "base_version": version,
        "changes": [{"node": tree.node("a1").pk, "weight": 1}],
    }
    assert api_client.post("/api/v1/budget-changes/", payload, format="json").status_code == 201
    before = weights()
    payload["changes"][0]["weight"] = 2
    response = api_client.post("/api/v1/budget-changes/", payload, format="json")
    assert response.status_code == 409
    assert response.json()["current_version"] == version + 1
    assert weights() == before


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"reason": "", "changes": [{"node": "A1", "weight": 1}]}, "reason"),
        ({"reason": "r", "changes": [{"node": "A1", "weight": -5}]}, "changes[0].weight"),
        ({"reason": "r", "changes": [{"node": "A1", "weight": "ten"}]}, "changes[0].weight"),
        ({"reason": "r", "changes": [{"node": 123456, "weight": 1}]}, "changes[0].node"),
        ({"reason": "r", "changes": []}, "changes"),
        (
            {"reason": "r", "changes": [{"node": "A1", "weight": 1}], "base_version": "x"},
            "base_version",
        ),
        (
            {"reason": "r", "changes": [{"node": "A1", "weight": 1}], "effective_at": "tomorrow"},
            "effective_at",
        ),
        ({"reason": "r", "changes": [{"weight": 1}]}, "changes"),
        ({"changes": [{"node": "A1", "weight": 1}]}, "reason"),
    ],
)
def test_bad_budget_changes_are_400_with_the_field(tree, api_client, payload, field):
    as_user(api_client, tree.user("ceo"))
    for change in payload["changes"]:
        if change.get("node") == "A1":
            change["node"] = tree.node("a1").pk
    before = weights()
    response = api_client.post("/api/v1/budget-changes/", payload, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body.get("field", "").startswith(field) or field in body, body
    assert weights() == before


def test_history_filters(tree, api_client):
    as_user(api_client, tree.user("ceo"))
    api_client.post(
        "/api/v1/budget-changes/",
        {"reason": "ceo move", "changes": [{"node": tree.node("prog-b").pk, "weight": 10}]},
        format="json",
    )
    between = timezone.now().isoformat()
    as_user(api_client, tree.user("lead-a"))
    api_client.post(
        "/api/v1/budget-changes/",
        {"reason": "lead move", "changes": [{"node": tree.node("a2").pk, "weight": 10}]},
        format="json",
    )
    as_user(api_client, tree.user("bob"))  # anyone signed in reads history
    by_actor = api_client.get("/api/v1/budget-changes/?actor=lead-a").json()["results"]
    assert [e["reason"] for e in by_actor] == ["lead move"]
    by_node = api_client.get(
        f"/api/v1/budget-changes/?node={tree.node('b1').pk}&kind=applied"
    ).json()["results"]
    assert [e["reason"] for e in by_node] == ["ceo move"]  # b1's entitled share changed
    future = (timezone.now() + dt.timedelta(days=1)).isoformat()
    everything = api_client.get("/api/v1/budget-changes/", {"since": "2000-01-01T00:00:00Z"})
    assert [e["reason"] for e in everything.json()["results"]] == [
        "lead move",
        "ceo move",
        "Imported budget tree",
    ]
    since_between = api_client.get("/api/v1/budget-changes/", {"since": between}).json()
    assert [e["reason"] for e in since_between["results"]] == ["lead move"]
    assert api_client.get("/api/v1/budget-changes/", {"since": future}).json()["results"] == []
    assert api_client.get("/api/v1/budget-changes/?since=yesterday").status_code == 400
    assert api_client.get("/api/v1/budget-changes/?node=x").json()["field"] == "node"


def test_scheduled_change_and_cancel_over_api(tree, api_client):
    as_user(api_client, tree.user("lead-a"))
    when = (timezone.now() + dt.timedelta(hours=3)).isoformat()
    event = api_client.post(
        "/api/v1/budget-changes/",
        {
            "reason": "next week",
            "effective_at": when,
            "changes": [{"node": tree.node("a1").pk, "weight": 1}],
        },
        format="json",
    ).json()
    assert event["kind"] == "scheduled"
    as_user(api_client, tree.user("lead-b"))
    refused = api_client.post(
        f"/api/v1/budget-changes/{event['id']}/cancel/", {"reason": "no"}, format="json"
    )
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert not BudgetEvent.objects.filter(kind="cancelled").exists()
    as_user(api_client, tree.user("lead-a"))
    response = api_client.post(
        f"/api/v1/budget-changes/{event['id']}/cancel/", {"reason": "not needed"}, format="json"
    )
    assert response.status_code == 201 and response.json()["kind"] == "cancelled"
    missing = api_client.post(
        "/api/v1/budget-changes/999999/cancel/", {"reason": "x"}, format="json"
    )
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


def test_node_create_rename_and_move_permissions(tree, api_client):
    as_user(api_client, tree.user("lead-b"))
    refused = api_client.post(
        "/api/v1/nodes/",
        {"parent": tree.node("prog-a").pk, "name": "x", "reason": "r"},
        format="json",
    )
    assert refused.status_code == 403 and refused.json()["field"] == "parent"
    assert not BudgetNode.objects.filter(name="x").exists()
    response = api_client.post(
        "/api/v1/nodes/",
        {"parent": tree.node("prog-b").pk, "name": "b2", "weight": "3", "reason": "new project"},
        format="json",
    )
    assert response.status_code == 201 and response.json()["path"] == "org/prog-b/b2"
    b2 = response.json()["id"]
    taken = api_client.patch(f"/api/v1/nodes/{b2}/", {"name": "b1", "reason": "r"}, format="json")
    assert taken.status_code == 400 and taken.json()["field"] == "name"
    assert "already exists" in taken.json()["detail"]
    outside = api_client.patch(
        f"/api/v1/nodes/{b2}/", {"parent": tree.node("prog-a").pk, "reason": "r"}, format="json"
    )
    assert outside.status_code == 403 and outside.json()["field"] == "parent"
    assert BudgetNode.objects.get(pk=b2).name == "b2"
    assert BudgetNode.objects.get(pk=b2).parent_id == tree.node("prog-b").pk
    as_user(api_client, tree.user("ceo"))
    response = api_client.patch(
        f"/api/v1/nodes/{tree.node('prog-a').pk}/",
        {"parent": tree.node("a1").pk, "reason": "r"},
        format="json",
    )
    assert response.status_code == 400 and response.json()["field"] == "parent"
    events_before = BudgetEvent.objects.count()
    no_reason = api_client.patch(
        f"/api/v1/nodes/{b2}/", {"parent": tree.node("prog-a").pk, "reason": ""}, format="json"
    )
    assert no_reason.status_code == 400 and no_reason.json()["field"] == "reason"
    assert BudgetNode.objects.get(pk=b2).parent_id == tree.node("prog-b").pk
    assert BudgetEvent.objects.count() == events_before
    assert (
        api_client.patch(
            f"/api/v1/nodes/{b2}/",
            {"parent": tree.node("prog-a").pk, "reason": "merge"},
            format="json",
        ).json()["path"]
        == "org/prog-a/b2"
    )


def test_membership_endpoints(tree, api_client):
    a1 = tree.node("a1")
    as_user(api_client, tree.user("ann"))
    refused = api_client.post(
        "/api/v1/memberships/", {"user": "bob", "node": a1.pk, "role": "member"}, format="json"
    )
    assert refused.status_code == 403 and refused.json()["field"] == "node"
    assert not Membership.objects.filter(user__username="bob", node=a1).exists()
    as_user(api_client, tree.user("lead-a"))
    response = api_client.post(
        "/api/v1/memberships/", {"user": "bob", "node": a1.pk, "role": "member"}, format="json"
    )
    assert response.status_code == 201
    created = response.json()
    assert {k: created[k] for k in ("user", "node", "role")} == {
        "user": "bob",
        "node": a1.pk,
        "role": "member",
    }
    assert Membership.objects.filter(pk=created["id"], user__username="bob", role="member").exists()
    bad_role = api_client.post(
        "/api/v1/memberships/", {"user": "bob", "node": a1.pk, "role": "boss"}, format="json"
    )
    assert bad_role.status_code == 400 and bad_role.json()["field"] == "role"
    assert not Membership.objects.filter(user__username="bob", role="boss").exists()
    rows = api_client.get(f"/api/v1/memberships/?node={a1.pk}").json()["results"]
    assert sorted((r["user"], r["role"]) for r in rows) == [
        ("ann", "member"),
        ("bob", "member"),
        ("pi-a1", "manager"),
    ]
    as_user(api_client, tree.user("bob"))
    forbidden = api_client.delete(f"/api/v1/memberships/{created['id']}/")
    assert forbidden.status_code == 403 and forbidden.json()["code"] == "permission_denied"
    assert Membership.objects.filter(pk=created["id"]).exists()
    as_user(api_client, tree.user("lead-a"))
    assert api_client.delete(f"/api/v1/memberships/{created['id']}/").status_code == 204
    assert not Membership.objects.filter(pk=created["id"]).exists()
    assert api_client.delete(f"/api/v1/memberships/{created['id']}/").status_code == 404


def test_openapi_schema_and_docs_are_served_locally(tree, api_client):
    as_user(api_client, tree.user("bob"))
    schema = api_client.get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/budget-changes/" in paths and "/api/v1/tree/" in paths
    docs = api_client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "cdn" not in html.lower() and "/static/drf_spectacular_sidecar/" in html


def test_history_events_are_listed_newest_first(tree, api_client):
    as_user(api_client, tree.user("ceo"))
    for weight in (1, 2, 3):
        api_client.post(
            "/api/v1/budget-changes/",
            {"reason": f"w{weight}", "changes": [{"node": tree.node("a1").pk, "weight": weight}]},
            format="json",
        )
    reasons = [
        e["reason"]
        for e in api_client.get("/api/v1/budget-changes/?kind=applied").json()["results"]
    ]
    assert reasons == ["w3", "w2", "w1"]
    assert BudgetEvent.objects.count() == 4  # 3 changes + the import


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/v1/memberships/?node=abc", "node"),
        ("/api/v1/memberships/?node=99999999999999999999999", "node"),
        ("/api/v1/budget-changes/?node=99999999999999999999999", "node"),
        ("/api/v1/budget-changes/?actor=%00", "actor"),
        ("/api/v1/budget-changes/?kind=nope", "kind"),
        # the history page's bad filters (tests/budgets/test_pages.py) answer the same
        ("/api/v1/budget-changes/?node=abc", "node"),
        ("/api/v1/budget-changes/?node=424242", "node"),
        ("/api/v1/budget-changes/?since=2026-13-01", "since"),
        ("/api/v1/budget-changes/?since=", "since"),
    ],
)
def test_bad_query_parameters_are_400_naming_the_parameter(tree, api_client, url, field):
    as_user(api_client, tree.user("bob"))
    response = api_client.get(url)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and body["field"] == field and body["detail"]


def test_memberships_filter_by_node(tree, api_client):
    as_user(api_client, tree.user("bob"))
    rows = api_client.get(f"/api/v1/memberships/?node={tree.node('a1').pk}").json()["results"]
    assert sorted((r["user"], r["role"]) for r in rows) == [("ann", "member"), ("pi-a1", "manager")]


def test_memberships_are_paginated_like_every_list(tree, api_client):
    """The list took no `limit` or `offset` (it answered every row as a plain array); it
    pages as the other lists do: `{count, next, previous, results}`, by node, role and
    user name, `next` carrying `limit` and `offset`."""
    as_user(api_client, tree.user("bob"))
    every = list(
        Membership.objects.order_by("node_id", "role", "user__username").values_list(
            "user__username", "node_id", "role"
        )
    )
    assert len(every) == 6  # the example tree's roles
    first = api_client.get("/api/v1/memberships/", {"limit": 2})
    assert first.status_code == 200
    body = first.json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert body["count"] == 6 and body["previous"] is None
    assert [(r["user"], r["node"], r["role"]) for r in body["results"]] == every[:2]
    assert body["next"] == "http://testserver/api/v1/memberships/?limit=2&offset=2"
    seen, url = [], "/api/v1/memberships/?limit=2"
    while url:
        page = api_client.get(url).json()
        seen += [(r["user"], r["node"], r["role"]) for r in page["results"]]
        url = page["next"]
    assert seen == every
    last = api_client.get("/api/v1/memberships/", {"limit": 2, "offset": 4}).json()
    assert last["next"] is None
    assert last["previous"] == "http://testserver/api/v1/memberships/?limit=2&offset=2"
    a1 = tree.node("a1").pk
    filtered = api_client.get("/api/v1/memberships/", {"node": a1, "limit": 1}).json()
    assert filtered["count"] == 2 and [r["user"] for r in filtered["results"]] == ["pi-a1"]
    assert filtered["next"] == f"http://testserver/api/v1/memberships/?limit=1&node={a1}&offset=1"
    assert len(api_client.get("/api/v1/memberships/").json()["results"]) == 6  # default 100


@pytest.mark.parametrize(
    ("query", "field", "says"),
    [
        ("limit=0", "limit", "limit must be a whole number from 1 to 1000, got '0'."),
        ("limit=1001", "limit", "limit must be a whole number from 1 to 1000, got '1001'."),
        ("limit=abc", "limit", "limit must be a whole number from 1 to 1000, got 'abc'."),
        ("offset=-1", "offset", "offset must be a whole number from 0 to 1000000000"),
    ],
)
def test_memberships_bad_page_is_a_400_naming_the_parameter(tree, api_client, query, field, says):
    as_user(api_client, tree.user("bob"))
    response = api_client.get(f"/api/v1/memberships/?{query}")
    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["code"], body["field"]) == ("invalid", field) and says in body["detail"]
    assert "results" not in body


def test_the_schema_documents_the_memberships_page(tree, api_client):
    as_user(api_client, tree.user("bob"))
    schema = api_client.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/memberships/"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"node", "limit", "offset"}
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/PaginatedMembershipList"}
    page = schema["components"]["schemas"]["PaginatedMembershipList"]
    assert set(page["properties"]) == {"count", "next", "previous", "results"}
    assert page["properties"]["results"]["items"] == {
        "$ref": "#/components/schemas/MembershipOutput"
    }
    assert "400" in operation["responses"]


def test_the_api_reads_json_only_so_an_empty_form_field_never_becomes_a_default(tree, api_client):
    """Found by the fuzzer: a multipart body with `weight` empty created a node with the
    default weight 1. Bodies are JSON; a form gets 415 and nothing is stored."""
    as_user(api_client, tree.user("lead-b"))
    body = {"parent": tree.node("prog-b").pk, "name": "b9", "weight": "", "reason": "new"}
    form = api_client.post("/api/v1/nodes/", body, format="multipart")
    assert form.status_code == 415 and form.json()["code"] == "unsupported_media_type"
    empty = api_client.post("/api/v1/nodes/", body, format="json")
    assert empty.status_code == 400 and empty.json()["field"] == "weight"
    assert not BudgetNode.objects.filter(name="b9").exists()


@pytest.mark.parametrize(
    ("url", "payload", "field"),
    [
        # the fuzzer's finding: a number where the schema says text was taken as text
        ("/api/v1/nodes/", {"parent": "PROG_B", "name": "b2", "reason": 0}, "reason"),
        ("/api/v1/nodes/", {"parent": "PROG_B", "name": 7, "reason": "r"}, "name"),
        ("/api/v1/nodes/", {"parent": "PROG_B", "name": "b2", "reason": True}, "reason"),
        (
            "/api/v1/nodes/",
            {"parent": "PROG_B", "name": "b2", "weight": [], "reason": "r"},
            "weight",
        ),
        ("/api/v1/budget-changes/", {"reason": 1.5, "changes": []}, "reason"),
        ("/api/v1/memberships/", {"user": 5, "node": "PROG_B", "role": "manager"}, "user"),
        (
            "/api/v1/memberships/",
            {"user": "bob", "node": "PROG_B", "role": "manager", "reason": 3},
            "reason",
        ),
    ],
)
def test_text_fields_refuse_values_of_other_json_types(tree, api_client, url, payload, field):
    as_user(api_client, tree.user("ceo"))
    payload = {k: tree.node("prog-b").pk if v == "PROG_B" else v for k, v in payload.items()}
    before = (BudgetEvent.objects.count(), BudgetNode.objects.count(), Membership.objects.count())
    response = api_client.post(url, payload, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field and "string" in response.json()["detail"]
    after = (BudgetEvent.objects.count(), BudgetNode.objects.count(), Membership.objects.count())
    assert after == before


def test_node_weight_may_be_a_number_or_numeric_text(tree, api_client):
    as_user(api_client, tree.user("ceo"))
    parent = tree.node("prog-b").pk
    for name, weight in [("b2", 3), ("b3", "2.5")]:
        response = api_client.post(
            "/api/v1/nodes/",
            {"parent": parent, "name": name, "weight": weight, "reason": "r"},
            format="json",
        )
        assert response.status_code == 201, response.json()
        assert float(response.json()["weight"]) == float(weight)


def test_schema_says_query_text_may_not_hold_nul_which_gets_400_before_sign_in(tree, api_client):
    """The fuzzer's finding: anonymous `?actor=%00...` got a 400 (the NUL guard runs before
    authentication) that a schema-valid request should not get; the schema now says NUL
    is not valid in any text query parameter."""
    import re

    schema = api_client.get("/api/schema/?format=json").json()
    parameters = {
        p["name"]: p for p in schema["paths"]["/api/v1/budget-changes/"]["get"]["parameters"]
    }
    pattern = parameters["actor"]["schema"]["pattern"]
    assert re.search(pattern, "lead-a") and not re.search(pattern, "lead\x00a")
    text_parameters = [
        p
        for path in schema["paths"].values()
        for operation in path.values()
        for p in operation.get("parameters", [])
        if p["in"] == "query"
        and p["schema"].get("type") == "string"
        and not {"enum", "format"} & set(p["schema"])
    ]
    assert text_parameters and all(p["schema"].get("pattern") for p in text_parameters)
    response = api_client.get("/api/v1/budget-changes/", {"actor": "a\x00b"})
    assert response.status_code == 400 and response.json()["field"] == "actor"
    assert "400" in schema["paths"]["/api/v1/budget-changes/"]["get"]["responses"]


def test_the_history_since_filter_takes_a_time_or_a_date_and_refuses_the_rest(tree, api_client):
    """`since` is one documented time: ISO 8601, a date alone for its midnight UTC, no
    offset for UTC, 1970 to 9000; anything else a 400 naming `since` and saying why."""
    as_user(api_client, tree.user("ceo"))
    api_client.post(
        "/api/v1/budget-changes/",
        {"reason": "ceo move", "changes": [{"node": tree.node("prog-b").pk, "weight": 10}]},
        format="json",
    )
    today = timezone.now().astimezone(dt.UTC).date()
    tomorrow = today + dt.timedelta(days=1)

    def reasons(since):
        response = api_client.get("/api/v1/budget-changes/", {"since": since})
        assert response.status_code == 200, response.json()
        return [e["reason"] for e in response.json()["results"]]

    assert reasons(today.isoformat()) == ["ceo move", "Imported budget tree"]
    assert reasons(f"{today}T00:00:00") == reasons(f"{today}T00:00:00Z")  # no offset: UTC
    assert reasons(tomorrow.isoformat()) == []  # a date is its midnight UTC, not "that day"
    assert reasons("1970-01-01T00:00:00Z") == ["ceo move", "Imported budget tree"]
    for bad, says in [
        ("1969-12-31T23:59:59Z", "Out of range"),  # was accepted: pre-1970
        ("1900-01-01", "Out of range"),
        ("9999-12-31T23:59:59-05:00", "Out of range"),
        ("0001-01-01T00:00:00+05:00", "Out of range"),
        ("yesterday", "Not an ISO 8601 time"),
        ("2026-13-01", "Not an ISO 8601 time"),
    ]:
        body = api_client.get("/api/v1/budget-changes/", {"since": bad}).json()
        assert (body["code"], body["field"]) == ("invalid", "since"), (bad, body)
        assert says in body["detail"], (bad, body)


@pytest.mark.parametrize(
    ("effective_at", "says"),
    [
        ("9999-12-31T23:59:59Z", "Out of range"),  # was scheduled: year 9999
        ("9999-12-31T23:59:59-14:00", "Out of range"),
        ("8999-01-01T00:00:00Z", "days ahead"),
        ("2026-13-01T00:00:00Z", "Not an ISO 8601 time"),
        ("2020-01-01T00:00:00Z", "in the past"),
    ],
)
def test_an_effective_time_out_of_bounds_is_a_400_naming_it_and_nothing_is_written(
    tree, api_client, effective_at, says
):
    as_user(api_client, tree.user("lead-a"))
    before, events = weights(), BudgetEvent.objects.count()
    response = api_client.post(
        "/api/v1/budget-changes/",
        {
            "reason": "far ahead",
            "effective_at": effective_at,
            "changes": [{"node": tree.node("a1").pk, "weight": 1}],
        },
        format="json",
    )
    body = response.json()
    assert response.status_code == 400 and body["field"] == "effective_at", body
    assert says in body["detail"], body
    assert weights() == before and BudgetEvent.objects.count() == events


def test_a_change_may_be_scheduled_up_to_the_documented_horizon(tree, api_client):
    as_user(api_client, tree.user("lead-a"))
    edge = timezone.now() + MAX_SCHEDULE_AHEAD - dt.timedelta(minutes=5)
    response = api_client.post(
        "/api/v1/budget-changes/",
        {
            "reason": "next fiscal year",
            "effective_at": edge.date().isoformat(),  # a date alone: its midnight UTC
            "changes": [{"node": tree.node("a1").pk, "weight": 1}],
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    scheduled = BudgetEvent.objects.get(pk=response.json()["id"])
    assert scheduled.kind == "scheduled"
    assert scheduled.effective_at == dt.datetime.combine(edge.date(), dt.time(), dt.UTC)
    assert f"{MAX_SCHEDULE_AHEAD.days} days ahead" in _schema_description(
        api_client, "BudgetChangeInputRequest", "effective_at"
    )


def _schema_description(api_client, component, field):
    schema = api_client.get("/api/schema/?format=json").json()
    return schema["components"]["schemas"][component]["properties"][field]["description"]
