"""Issue 30, finding 2: no admin view or action writes an audited model (budget nodes,
memberships, clusters and their operators, hosts, API tokens) without its audit event.

The test walks the admin as a superuser, for every registered model of `AUDITED`: every
bulk action on every row, the delete page of a row, the add page and the change page
posted with a field changed. Whatever the admin offers now or later is covered."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.contrib import admin
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client, RequestFactory
from django.urls import reverse

from accounts.models import ApiToken, TokenEvent, UserAuthorityEvent
from accounts.services import token_create
from budgets.models import BudgetEvent, BudgetNode, Membership
from scheduler.models import Cluster, ClusterPolicyEvent, Host, HostEvent
from tests.factories import ClusterFactory, HostFactory, SuperUserFactory, UserFactory

pytestmark = pytest.mark.django_db

# audited model -> the append-only event model its changes must write
AUDITED = {
    BudgetNode: BudgetEvent,
    Membership: BudgetEvent,
    Cluster: ClusterPolicyEvent,
    Host: HostEvent,
    ApiToken: TokenEvent,
}


def fingerprint(model) -> list:
    rows = [tuple(sorted(r.items())) for r in model.objects.order_by("pk").values()]
    if model is Cluster:
        rows.append(tuple(Cluster.operators.through.objects.order_by("pk").values_list()))
    return rows


def snapshot() -> dict:
    return {model: (fingerprint(model), event.objects.count()) for model, event in AUDITED.items()}


def assert_audited(before: dict, what: str) -> None:
    after = snapshot()
    for model, (rows, events) in before.items():
        if after[model][0] != rows:
            assert after[model][1] > events, f"{what} changed {model.__name__} without an event"


class FormReader(HTMLParser):
    """The fields of the page's main form as a browser would post them."""

    def __init__(self):
        super().__init__()
        self.data: dict[str, list[str]] = {}
        self.texts: list[str] = []
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            default = "on" if a.get("type") in ("checkbox", "radio") else ""  # as browsers send
            self.data.setdefault(name, []).append(a.get("value") or default)
            if a.get("type", "text") == "text" and "-" not in name:
                self.texts.append(name)
        elif tag == "select" and name:
            self._select = name
            self.data.setdefault(name, [])
        elif tag == "option" and self._select and "selected" in a:
            self.data[self._select].append(a.get("value") or "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.data[name] = [""]

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        if tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea:
            self.data[self._textarea][0] += data


def read_form(client: Client, url: str) -> FormReader | None:
    response = client.get(url)
    if response.status_code != 200:
        return None
    reader = FormReader()
    reader.feed(response.content.decode())
    return reader


def world(tree) -> tuple[Client, object]:
    root = SuperUserFactory(username="root")
    for user in (UserFactory(username="carol"), tree.user("ann")):
        token_create(user=user, name="laptop")
    cluster = ClusterFactory(name="gpu")
    HostFactory(cluster=cluster, name="node0")
    client = Client()
    client.force_login(root)
    return client, root


def admin_url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.mark.parametrize("model", list(AUDITED), ids=lambda m: m.__name__)
def test_admin_actions_write_audited_models_only_with_an_event(tree, model):
    client, root = world(tree)
    model_admin = admin.site._registry[model]
    request = RequestFactory().get("/")
    request.user = root
    assert client.get(admin_url(model, "changelist")).status_code == 200  # still signed in
    for action in model_admin.get_actions(request):
        before = snapshot()
        client.post(
            admin_url(model, "changelist"),
            {
                "action": action,
                "_selected_action": [str(pk) for pk in model.objects.values_list("pk", flat=True)],
                "post": "yes",
            },
        )
        assert_audited(before, f"the admin action {action!r} on {model.__name__}")


@pytest.mark.parametrize("model", list(AUDITED), ids=lambda m: m.__name__)
def test_admin_pages_write_audited_models_only_with_an_event(tree, model):
    client, _ = world(tree)
    obj = model.objects.order_by("-pk").first()
    # the delete page, confirmed
    before = snapshot()
    client.post(admin_url(model, "delete", obj.pk), {"post": "yes"})
    assert_audited(before, f"the delete page of {model.__name__}")
    # the change page, posted with each text field changed and one more choice selected
    form = read_form(client, admin_url(model, "change", obj.pk))
    if form is not None:
        data = dict(form.data)
        for name in form.texts:
            data[name] = [(data[name][0] or "x") + "-changed"]
        if model is Cluster:
            data["operators"] = [str(UserFactory(username="dave").pk)]
        before = snapshot()
        client.post(admin_url(model, "change", obj.pk), data)
        assert_audited(before, f"the change page of {model.__name__}")
        if model is Cluster:  # the one change the admin makes here, through the service
            assert ClusterPolicyEvent.objects.get().changes == {"operators": [[], ["dave"]]}
    # the add page
    form = read_form(client, admin_url(model, "add"))
    if form is not None:
        data = dict(form.data)
        extra = {
            BudgetNode: {"name": ["a9"], "parent": [str(tree.node("prog-a").pk)]},
            Membership: {
                "user": [str(UserFactory(username="erin").pk)],
                "node": [str(tree.node("a1").pk)],
                "role": ["member"],
            },
        }.get(model, {})
        data.update(extra)
        before = snapshot()
        client.post(admin_url(model, "add"), data)
        assert_audited(before, f"the add page of {model.__name__}")


def test_bulk_removal_of_roles_is_audited_and_keeps_the_rules(tree):
    """The reported case: 'delete selected' on memberships left no role_removed event,
    and a staff user's bulk delete skipped the subtree check."""
    client, _ = world(tree)
    ann = Membership.objects.get(user__username="ann", node__name="a1")
    response = client.post(
        admin_url(Membership, "changelist"),
        {"action": "delete_selected", "_selected_action": [str(ann.pk)], "post": "yes"},
    )
    assert Membership.objects.filter(pk=ann.pk).exists(), "Django's bulk delete is not offered"
    assert response.status_code in (200, 302)
    client.post(
        admin_url(Membership, "changelist"),
        {"action": "remove_roles", "_selected_action": [str(ann.pk)]},
    )
    assert not Membership.objects.filter(pk=ann.pk).exists()
    event = BudgetEvent.objects.filter(kind="role_removed").get()
    assert (event.actor_name, event.reason) == ("root", "removed in the admin by root")
    # a staff user who manages nothing removes nothing, in bulk or not
    staff = UserFactory(username="ops", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__endswith="membership"))
    ops = Client()
    ops.force_login(staff)
    bob = Membership.objects.get(user__username="bob")
    for action in ("delete_selected", "remove_roles"):
        ops.post(
            admin_url(Membership, "changelist"),
            {"action": action, "_selected_action": [str(bob.pk)], "post": "yes"},
        )
    assert Membership.objects.filter(pk=bob.pk).exists()
    assert BudgetEvent.objects.filter(kind="role_removed").count() == 1


# every other model of the admin: its deletions must not reach an audited model either
# (deleting a user cascaded into their memberships, with no event and no rule checked)
OTHERS = [m for m in admin.site._registry if m not in AUDITED]


@pytest.mark.parametrize("model", OTHERS, ids=lambda m: f"{m._meta.app_label}.{m.__name__}")
def test_deleting_anything_in_the_admin_writes_audited_models_only_with_an_event(tree, model):
    client, root = world(tree)
    rows = [pk for pk in model.objects.order_by("pk").values_list("pk", flat=True)[:20]]
    rows = [pk for pk in rows if not (model is type(root) and pk == root.pk)]  # not oneself
    for pk in rows[: len(rows) // 2]:
        before = snapshot()
        client.post(admin_url(model, "delete", pk), {"post": "yes"})
        assert_audited(before, f"the delete page of {model.__name__} {pk}")
    before = snapshot()
    client.post(
        admin_url(model, "changelist"),
        {"action": "delete_selected", "_selected_action": [str(pk) for pk in rows], "post": "yes"},
    )
    assert_audited(before, f"'delete selected' on {model.__name__}")


def test_deleting_a_user_removes_their_roles_through_the_service(tree):
    """A superuser's deletion records a `role_removed` per role; a staff user allowed to
    delete users but who manages nothing deletes no one who holds a role."""
    client, _ = world(tree)
    User = get_user_model()
    staff = UserFactory(username="ops", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__in=["view_user", "delete_user"]))
    ops = Client()
    ops.force_login(staff)
    bob = User.objects.get(username="bob")
    ops.post(admin_url(User, "delete", bob.pk), {"post": "yes"})
    ops.post(
        admin_url(User, "changelist"),
        {"action": "delete_selected", "_selected_action": [str(bob.pk)], "post": "yes"},
    )
    assert Membership.objects.filter(user=bob).exists() and User.objects.filter(pk=bob.pk).exists()
    assert not BudgetEvent.objects.filter(kind="role_removed").exists()
    ann = User.objects.get(username="ann")
    client.post(admin_url(User, "delete", ann.pk), {"post": "yes"})
    assert not User.objects.filter(username="ann").exists()
    event = BudgetEvent.objects.get(kind="role_removed")
    assert event.actor_name == "root" and "ann" not in event.reason  # the admin's reason
    assert [i.node_path for i in event.items.all()] == ["org/prog-a/a1"]


def test_only_a_superuser_changes_authority_and_every_change_is_recorded(tree):
    """A staff user allowed to change users can neither make themselves superuser nor touch
    a superuser (password included); a superuser's grant of staff status is recorded in the
    append-only authority history with who did it."""
    client, _ = world(tree)
    User = get_user_model()
    staff = UserFactory(username="ops", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__in=["view_user", "change_user"]))
    ops = Client()
    ops.force_login(staff)
    form = read_form(ops, admin_url(User, "change", staff.pk)).data
    form.update(is_superuser=["on"], is_staff=["on"], first_name=["Ops"])
    ops.post(admin_url(User, "change", staff.pk), form)
    staff.refresh_from_db()
    assert staff.first_name == "Ops" and not staff.is_superuser  # the form was taken
    root = User.objects.get(username="root")
    form = read_form(client, admin_url(User, "change", root.pk)).data
    form["first_name"] = ["Mallory"]
    assert ops.post(admin_url(User, "change", root.pk), form).status_code == 403
    password_url = reverse("admin:auth_user_password_change", args=[root.pk])
    ops.post(password_url, {"password1": "x-Taken0ver!", "password2": "x-Taken0ver!"})
    root.refresh_from_db()
    assert root.first_name != "Mallory" and not root.check_password("x-Taken0ver!")

    bob = User.objects.get(username="bob")
    form = read_form(client, admin_url(User, "change", bob.pk)).data
    form["is_staff"] = ["on"]
    client.post(admin_url(User, "change", bob.pk), form)
    bob.refresh_from_db()
    assert bob.is_staff
    event = UserAuthorityEvent.objects.filter(
        pgh_obj_id=bob.pk, pgh_label="authority_changed"
    ).get()
    assert event.is_staff and event.pgh_context.metadata["user"] == root.pk
    with pytest.raises(Exception, match="Cannot update or delete"):
        UserAuthorityEvent.objects.filter(pk=event.pk).update(is_staff=False)


def staff_with(*codenames: str) -> Client:
    ops = UserFactory(username="ops", is_staff=True)
    ops.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(ops)
    return client


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_a_refused_admin_write_is_neither_announced_nor_logged_as_done(tree):
    """A service's refusal in the admin was followed by "... was added (changed)
    successfully" and a `django_admin_log` entry of the change that did not happen (a
    refused grant logged as an addition without an object id)."""
    client = staff_with("add_membership", "view_membership", "change_budgetnode", "view_budgetnode")
    a1 = tree.node("a1")
    granted = client.post(
        "/admin/budgets/membership/add/",
        {"user": tree.user("bob").pk, "node": a1.pk, "role": "member"},
        follow=True,
    )
    renamed = client.post(
        f"/admin/budgets/budgetnode/{a1.pk}/change/",
        {"name": "a1x", "parent": a1.parent_id},
        follow=True,
    )
    for response, action in ((granted, "grant the member role on"), (renamed, "change")):
        assert messages_of(response) == [
            f"You may not {action} 'org/prog-a/a1': it is outside the subtree you manage."
        ]
    assert not LogEntry.objects.exists()
    assert not Membership.objects.filter(user__username="bob", node=a1).exists()
    assert BudgetNode.objects.get(pk=a1.pk).name == "a1"


def test_an_admin_write_the_service_allows_is_announced_and_logged(tree):
    root = SuperUserFactory(username="root")
    client = Client()
    client.force_login(root)
    a1 = tree.node("a1")
    response = client.post(
        "/admin/budgets/membership/add/",
        {"user": tree.user("bob").pk, "node": a1.pk, "role": "member"},
        follow=True,
    )
    assert messages_of(response) == ["The membership “bob member of a1” was added successfully."]
    granted = Membership.objects.get(user__username="bob", node=a1)
    assert list(LogEntry.objects.values_list("action_flag", "object_id")) == [
        (ADDITION, str(granted.pk))
    ]
