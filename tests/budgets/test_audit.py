"""A clean audit trail: requests that change nothing record nothing, free text is
printable and bounded, role changes are governance events checked under the tree lock."""

import threading

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from budgets import services
from budgets.models import BudgetEvent, BudgetEventItem, BudgetNode, EventKind, Membership
from config.errors import NothingToChange, PermissionDenied
from tests.factories import EXAMPLE_TREE

pytestmark = pytest.mark.django_db


def events() -> int:
    return BudgetEvent.objects.count()


def as_user(client, user):
    client.force_authenticate(user)
    return client


@pytest.mark.parametrize(
    "body",
    [
        {"name": "a1", "reason": "same name"},
        {"parent": "PROG_A", "reason": "same place"},
        {"name": "a1", "parent": "PROG_A", "reason": "both the same"},
        {"reason": "nothing at all"},
    ],
)
def test_node_patch_that_changes_nothing_is_refused_and_records_nothing(tree, api_client, body):
    as_user(api_client, tree.user("ceo"))
    if body.get("parent") == "PROG_A":
        body["parent"] = tree.node("prog-a").pk
    before = events()
    response = api_client.patch(f"/api/v1/nodes/{tree.node('a1').pk}/", body, format="json")
    assert response.status_code == 400
    assert (
        response.json()["code"] == "no_change"
        and "nothing was recorded" in response.json()["detail"]
    )
    assert events() == before


def test_budget_change_to_the_same_weights_is_refused_and_records_nothing(tree, api_client):
    as_user(api_client, tree.user("lead-a"))
    before = events()
    response = api_client.post(
        "/api/v1/budget-changes/",
        {"reason": "no-op", "changes": [{"node": tree.node("a1").pk, "weight": "70.0"}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "changes" and response.json()["code"] == "no_change"
    assert events() == before


def test_a_change_records_only_the_nodes_it_changes(tree):
    event = services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="one real edit",
        changes=[
            {"node": tree.node("a1").pk, "weight": 70},
            {"node": tree.node("a2").pk, "weight": 70},
        ],
    )
    paths = sorted(event.items.values_list("node_path", flat=True))
    assert paths == ["org/prog-a/a1", "org/prog-a/a2"]  # a1's weight is the same, its share not
    a1 = event.items.get(node_path="org/prog-a/a1")
    assert a1.old_weight == a1.new_weight == 70 and a1.old_entitled_share != a1.new_entitled_share


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"reason": "tab\tand newline\n are fine but not \x1b[31m", "name": "x"}, "reason"),
        ({"reason": "r", "name": "bell\x07"}, "name"),
        ({"reason": "r", "name": "right-to-left\u202eoverride"}, "name"),
        ({"reason": "r", "name": "line\nbreak"}, "name"),
        ({"reason": "r", "name": "n" * 101}, "name"),
        ({"reason": "r" * 2001, "name": "x"}, "reason"),
        ({"reason": "\x00", "name": "x"}, "reason"),
    ],
)
def test_text_fields_refuse_control_characters_and_absurd_lengths(tree, api_client, payload, field):
    as_user(api_client, tree.user("ceo"))
    before = events()
    response = api_client.post(
        "/api/v1/nodes/", {"parent": tree.node("prog-a").pk, **payload}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field
    assert events() == before


def test_multiline_reasons_keep_newlines_tabs_and_emoji(tree):
    reason = "Q4 review:\n\t- more for a1 👩‍🔬"
    event = services.budget_change_create(
        actor=tree.user("lead-a"),
        reason=reason,
        changes=[{"node": tree.node("a1").pk, "weight": 1}],
    )
    assert event.reason == reason


def test_role_grant_and_removal_are_audited_with_their_actor(tree, api_client):
    as_user(api_client, tree.user("lead-a"))
    a1 = tree.node("a1")
    response = api_client.post(
        "/api/v1/memberships/",
        {"user": "bob", "node": a1.pk, "role": "member", "reason": "bob joins a1"},
        format="json",
    )
    assert response.status_code == 201
    granted = BudgetEvent.objects.get(kind=EventKind.ROLE_GRANTED)
    assert granted.actor_name == "lead-a" and granted.reason == "bob joins a1"
    assert list(granted.items.values_list("node_path", flat=True)) == ["org/prog-a/a1"]

    assert api_client.delete(f"/api/v1/memberships/{response.json()['id']}/").status_code == 204
    removed = BudgetEvent.objects.get(kind=EventKind.ROLE_REMOVED)
    assert removed.actor_name == "lead-a"
    assert removed.reason == "member role of bob on org/prog-a/a1 removed"
    history = api_client.get("/api/v1/budget-changes/?kind=role_removed").json()["results"]
    assert [e["id"] for e in history] == [removed.pk]


def test_refused_role_changes_record_nothing(tree, api_client):
    as_user(api_client, tree.user("lead-b"))
    before = events()
    assert (
        api_client.post(
            "/api/v1/memberships/",
            {"user": "bob", "node": tree.node("a1").pk, "role": "member"},
            format="json",
        ).status_code
        == 403
    )
    as_user(api_client, tree.user("lead-a"))
    again = api_client.post(
        "/api/v1/memberships/",
        {"user": "ann", "node": tree.node("a1").pk, "role": "member"},
        format="json",
    )
    assert again.status_code == 400 and again.json()["code"] == "no_change"
    assert events() == before


def test_importing_the_same_tree_again_records_nothing(tree):
    before = events()
    services.budget_tree_import(data=EXAMPLE_TREE)
    assert events() == before


def test_an_imported_subtree_is_written_depth_first_with_its_history_and_roles(tree):
    """A re-import that adds a program with two projects (a new subtree, written at
    once): ids in the document's depth-first order, each node's and each role's insert
    in the history under the import's reason, a name given twice one role, known users
    reused, and an audit item for each new node."""
    users = get_user_model().objects.count()
    services.budget_tree_import(
        data={
            "name": "org",
            "children": [
                {
                    "name": "prog-c",
                    "weight": 20,
                    "managers": ["lead-c", "lead-c", "ceo"],
                    "children": [
                        {"name": "c2", "weight": 3, "members": ["ann"]},
                        {"name": "c1", "weight": 1, "members": ["cat"]},
                    ],
                }
            ],
        },
        reason="Program C",
    )
    new = [tree.node(name) for name in ("prog-c", "c2", "c1")]
    assert [n.pk for n in new] == sorted(n.pk for n in new)
    assert [n.parent_id for n in new] == [tree.node("org").pk, new[0].pk, new[0].pk]
    assert [n.kind for n in new] == ["program", "project", "project"]
    assert get_user_model().objects.count() == users + 2  # lead-c and cat
    roles = Membership.objects.filter(node__in=new).order_by("pk")
    assert [(m.user.username, m.node.name, m.role) for m in roles] == [
        ("lead-c", "prog-c", "manager"),
        ("ceo", "prog-c", "manager"),
        ("ann", "c2", "member"),
        ("cat", "c1", "member"),
    ]
    node_history = apps.get_model("budgets", "BudgetNodeEvent").objects.filter(pgh_obj__in=new)
    role_history = apps.get_model("budgets", "MembershipEvent").objects.filter(pgh_obj__in=roles)
    assert [e.pgh_obj_id for e in node_history.order_by("pgh_id")] == [n.pk for n in new]
    assert [e.pgh_obj_id for e in role_history.order_by("pgh_id")] == [m.pk for m in roles]
    for event in [*node_history, *role_history]:
        assert event.pgh_label == "insert"
        assert event.pgh_context.metadata["reason"] == "Program C"
    imported = BudgetEvent.objects.filter(kind=EventKind.IMPORTED).latest("pk")
    items = imported.items.filter(old_weight__isnull=True).order_by("pk")
    assert [(i.node_path, i.new_weight) for i in items] == [
        ("org/prog-c", 20),
        ("org/prog-c/c2", 3),
        ("org/prog-c/c1", 1),
    ]
    assert items[0].new_entitled_share == pytest.approx(20 / 120)
    assert BudgetNode.objects.count() == 9


@pytest.mark.django_db(transaction=True)
def test_permission_check_waits_for_a_concurrent_role_removal(tree):
    """lead-a's role on prog-a is removed in a transaction that has not committed yet;
    lead-a's grant made meanwhile must wait for it and then be refused."""
    lead_a = tree.user("lead-a")
    ceo = tree.user("ceo")
    role = Membership.objects.get(user=lead_a, node__name="prog-a", role="manager")
    removed = threading.Event()
    outcome: list[object] = []

    def remove_then_hold():
        try:
            with transaction.atomic():
                services.membership_remove(actor=ceo, membership_id=role.pk)
                removed.set()
                threading.Event().wait(1.0)  # keep the transaction open
        finally:
            connection.close()  # this thread's own connection; not left to CONN_MAX_AGE

    def grant():
        removed.wait(10)
        try:
            services.membership_add(
                actor=lead_a, node_id=tree.node("a2").pk, username="ann", role="member"
            )
            outcome.append("granted")
        except PermissionDenied as exc:
            outcome.append(exc)
        finally:
            connection.close()  # this thread's own connection; not left to CONN_MAX_AGE

    threads = [threading.Thread(target=remove_then_hold), threading.Thread(target=grant)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], PermissionDenied), outcome
    assert not Membership.objects.filter(user__username="ann", node__name="a2").exists()


def test_nothing_to_change_is_a_validation_error():
    assert issubclass(NothingToChange, services.ValidationFailed)
    assert NothingToChange("x").status_code == 400


def test_an_api_write_of_an_audited_model_carries_the_request_as_context(tree, api_client):
    """pghistory's context (config.middleware.HistoryMiddleware) is entered for views
    that change tracked models: the user DRF authenticates and the URL."""
    lead = tree.user("lead-a")
    as_user(api_client, lead)
    response = api_client.post(
        "/api/v1/memberships/",
        {"user": "bob", "node": tree.node("a1").pk, "role": "member", "reason": "bob joins"},
        format="json",
    )
    assert response.status_code == 201
    event = apps.get_model("budgets", "MembershipEvent").objects.latest("pgh_id")
    assert event.pgh_context.metadata["user"] == lead.pk
    assert event.pgh_context.metadata["url"] == "/api/v1/memberships/"


def test_the_root_has_no_weight_in_the_history_either(tree, client, api_client):
    """The tree page and API nodes/ say the root has no weight ("–", null); the history
    of the demo's import said "– → 1" for it and API budget-changes/ "1.0000"."""
    root = tree.node("org")
    item = BudgetEventItem.objects.get(event__kind=EventKind.IMPORTED, node=root)
    assert (item.old_weight, item.new_weight) == (None, None)
    assert (
        BudgetEventItem.objects.get(event__kind=EventKind.IMPORTED, node=tree.node("a1")).new_weight
        == 70
    )
    as_user(api_client, tree.user("ceo"))
    items = api_client.get("/api/v1/budget-changes/").json()["results"][-1]["items"]
    assert {i["node_path"]: i["new_weight"] for i in items}["org"] is None
    assert api_client.get("/api/v1/nodes/").json()[0]["weight"] is None
    client.force_login(tree.user("ceo"))
    page = client.get("/budgets/history/").content.decode()
    row = page[page.index("<tr><td>org</td>") :]
    weight = row.split('<td class="num">')[1]
    assert weight.split("</td>")[0] == "– → –"
