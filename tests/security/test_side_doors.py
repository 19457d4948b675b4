"""Issue 30's findings 1, 3 and 5, each by its effect (finding 2: test_admin_audit.py;
finding 4 belongs to the client-address work)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from accounts.services import token_create
from budgets import services
from budgets.models import BudgetEvent, BudgetNode, EventKind, Membership, ScheduledChange
from config.errors import PermissionDenied
from scheduler.services.jobs import job_submit
from tests.factories import ClusterFactory, UserFactory
from tests.roles import token_for

pytestmark = pytest.mark.django_db


def api_as(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    return client


# ---------------------------------------------------------------- 1: no 500 on paging


@pytest.mark.parametrize(
    "path",
    ["/api/v1/jobs/", "/api/v1/hosts/", "/api/v1/budget-changes/", "/api/v1/memberships/",
     "/api/v1/usage/", "/api/v1/occupancy/?cluster=gpu", "/api/v1/waits/?cluster=gpu", "/api/v1/queue/?cluster=gpu"],
)  # fmt: skip
@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=99999999999999999999", "limit"), ("offset=99999999999999999999", "offset"),
     ("limit=0", "limit"), ("limit=-1", "limit"), ("offset=x", "offset"), ("limit=1001", "limit")],
)  # fmt: skip
def test_paging_out_of_range_is_a_400_naming_the_parameter(tree, path, query, field):
    ClusterFactory(name="gpu")
    joiner = "&" if "?" in path else "?"
    response = api_as(tree.user("ann")).get(f"{path}{joiner}{query}")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["field"] == field


def test_paging_walks_every_row_to_the_last_page(tree):
    for n in range(5):
        services.node_create(actor=None, parent_id=tree.node("prog-b").pk, name=f"p{n}", reason="r")
    client = api_as(tree.user("ann"))
    url, seen = "/api/v1/budget-changes/?limit=2&offset=0", []
    while url:
        body = client.get(url).json()
        seen += [e["id"] for e in body["results"]]
        url = body["next"]
    assert seen == list(
        BudgetEvent.objects.order_by("-created_at", "-id").values_list("pk", flat=True)
    )


# ---------------------------------------------------------------- 3: power after demotion


def schedule(tree, author: str, weight: int = 9) -> BudgetEvent:
    return services.budget_change_create(
        actor=tree.user(author),
        reason="next quarter",
        changes=[{"node": tree.node("a1").pk, "weight": weight}],
        effective_at=timezone.now() + dt.timedelta(hours=1),
    )


def demote(tree, username: str, node: str) -> None:
    role = Membership.objects.get(user__username=username, node__name=node, role="manager")
    services.membership_remove(actor=tree.user("ceo"), membership_id=role.pk, reason="moved on")


def test_a_demoted_author_can_no_longer_cancel_their_scheduled_change(tree):
    event = schedule(tree, "lead-a")
    demote(tree, "lead-a", "prog-a")
    response = api_as(tree.user("lead-a")).post(
        f"/api/v1/budget-changes/{event.pk}/cancel/", {"reason": "never mind"}, format="json"
    )
    assert response.status_code == 403, response.json()
    assert ScheduledChange.objects.get(event=event).status == "pending"
    assert not BudgetEvent.objects.filter(kind=EventKind.CANCELLED).exists()
    # whoever may change that weight now still may cancel it
    services.budget_change_cancel(
        actor=tree.user("ceo"), scheduled_event_id=event.pk, reason="review"
    )
    assert ScheduledChange.objects.get(event=event).status == "cancelled"


def test_a_demoted_authors_scheduled_change_is_not_applied_and_the_history_says_why(tree):
    event = schedule(tree, "lead-a", weight=9)
    kept = schedule(tree, "ceo", weight=11)  # by someone who keeps the right
    demote(tree, "lead-a", "prog-a")
    applied = services.budget_apply_due_changes(now=timezone.now() + dt.timedelta(hours=2))
    assert [e.scheduled_event_id for e in applied] == [kept.pk]
    assert BudgetNode.objects.get(name="a1").weight == 11
    assert ScheduledChange.objects.get(event=event).status == "cancelled"
    lapse = BudgetEvent.objects.get(kind=EventKind.CANCELLED, scheduled_event=event)
    assert lapse.actor is None and lapse.actor_name == ""
    assert "lead-a may no longer change the weight of org/prog-a/a1" in lapse.reason
    assert not BudgetEvent.objects.filter(kind=EventKind.APPLIED, scheduled_event=event).exists()


# ---------------------------------------------------------------- 5: the documented rules


def test_project_leads_manage_their_projects_members_and_nothing_more(tree):
    UserFactory(username="carol")
    lead = api_as(tree.user("pi-a1"))  # manages the project a1
    a1, a2 = tree.node("a1").pk, tree.node("a2").pk
    added = lead.post("/api/v1/memberships/", {"user": "carol", "node": a1, "role": "member"}, format="json")  # fmt: skip
    assert added.status_code == 201, added.json()
    ann = Membership.objects.get(user__username="ann", node_id=a1)
    assert lead.delete(f"/api/v1/memberships/{ann.pk}/").status_code == 204
    assert set(
        Membership.objects.filter(node_id=a1, role="member").values_list(
            "user__username", flat=True
        )
    ) == {"carol"}
    assert BudgetEvent.objects.filter(kind__in=["role_granted", "role_removed"], actor_name="pi-a1").count() == 2  # fmt: skip
    # no co-lead, no removing the lead, nothing in another project
    before = list(Membership.objects.order_by("pk").values_list())
    for body in ({"user": "carol", "node": a1, "role": "manager"}, {"user": "carol", "node": a2, "role": "member"}):  # fmt: skip
        assert lead.post("/api/v1/memberships/", body, format="json").status_code == 403
    itself = Membership.objects.get(user__username="pi-a1", node_id=a1)
    assert lead.delete(f"/api/v1/memberships/{itself.pk}/").status_code == 403
    assert list(Membership.objects.order_by("pk").values_list()) == before


@pytest.mark.parametrize(
    "path",
    ["/api/v1/jobs/", "/api/v1/memberships/", "/api/v1/usage/", "/api/v1/nodes/",
     "/api/v1/tree/", "/api/v1/budget-changes/", "/api/v1/clusters/", "/api/v1/hosts/",
     "/api/v1/fairshare/?cluster=gpu", "/api/v1/queue/?cluster=gpu"],
)  # fmt: skip
def test_a_user_without_a_role_reads_nothing_of_the_organisation(tree, path):
    ClusterFactory(name="gpu")
    response = api_as(UserFactory(username="newcomer")).get(path)
    assert response.status_code == 403
    assert "no role" in response.json()["detail"]


def test_a_user_without_a_role_keeps_their_tokens_and_own_page(tree):
    newcomer = UserFactory(username="newcomer")
    assert api_as(newcomer).get("/api/v1/auth/tokens/").status_code == 200
    pages = Client()
    pages.force_login(newcomer)
    assert pages.get("/me/").status_code == 200
    assert pages.get("/budgets/").status_code == 403
    assert pages.get("/")["Location"] == "/me/"  # the home page sends them to theirs
    # a role opens the organisation
    services.membership_add(actor=None, node_id=tree.node("a1").pk, username="newcomer", role="member")  # fmt: skip
    assert pages.get("/budgets/").status_code == 200
    assert pages.get("/")["Location"] == "/budgets/"


def test_signing_out_of_the_pages_ends_the_session_not_the_api_tokens(tree):
    ann = tree.user("ann")
    token = token_for(ann)
    pages = Client()
    pages.force_login(ann)
    assert pages.get("/api/v1/jobs/").status_code == 200
    pages.post("/accounts/logout/")
    assert pages.get("/api/v1/jobs/").status_code == 401
    assert pages.get("/budgets/").status_code == 302
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/v1/jobs/").status_code == 200


@pytest.mark.parametrize(
    ("path", "body"),
    [("/api/v1/memberships/", {"user": "ann", "node": "{a1}", "role": "member", "rol": "x"}),
     ("/api/v1/budget-changes/", {"reason": "r", "changes": [{"node": "{a1}", "weight": 5, "wieght": 6}]}),
     ("/api/v1/nodes/", {"parent": "{a1}", "name": "x", "reason": "r", "colour": "red"}),
     ("/api/v1/jobs/", {"project": "org/prog-a/a1", "cluster": "gpu", "gpus": 1, "min_runtime_s": 0, "prio": 5})],
)  # fmt: skip
def test_unknown_fields_are_refused_everywhere_naming_the_field(tree, path, body):
    ClusterFactory(name="gpu")
    a1 = tree.node("a1").pk
    body = {k: a1 if v == "{a1}" else v for k, v in body.items()}
    if "changes" in body:
        body["changes"] = [{**c, "node": a1} for c in body["changes"]]
    before = (Membership.objects.count(), BudgetEvent.objects.count(), BudgetNode.objects.count())
    response = api_as(tree.user("ceo")).post(path, body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["field"].split(".")[-1] in {"rol", "wieght", "colour", "prio"}
    assert (Membership.objects.count(), BudgetEvent.objects.count(), BudgetNode.objects.count()) == before  # fmt: skip


def test_a_job_cancellation_refuses_the_fields_it_does_not_take(tree):
    """Cancelling a job takes no fields: a body with any (a `reason` a client believes
    recorded) is a 400 naming it and the job keeps running, as every other write refuses
    an unknown field; no body or `{}` cancels."""
    ClusterFactory(name="gpu", host_count=1, gpus_per_host=8)
    submit = {"cluster": "gpu", "name": "j", "gpus": 1, "min_runtime_s": 0}
    first, second = job_submit(
        actor=tree.user("ann"), project="org/prog-a/a1", array=2, **submit
    ).jobs
    ann = api_as(tree.user("ann"))
    refused = ann.post(f"/api/v1/jobs/{first.pk}/cancel/", {"reason": "wrong data"}, format="json")
    assert refused.status_code == 400, refused.json()
    assert refused.json()["field"] == "reason"
    assert "no fields" in refused.json()["detail"]
    first.refresh_from_db()
    assert first.state == "pending" and not first.events.filter(to_state="cancelled").exists()
    assert ann.post(f"/api/v1/jobs/{first.pk}/cancel/").json()["state"] == "cancelled"
    assert ann.post(f"/api/v1/jobs/{second.pk}/cancel/", {}, format="json").json()["state"] == (
        "cancelled"
    )


def test_every_write_without_a_body_refuses_one_with_a_field_and_changes_nothing(tree):
    """The writes that take no body (cancelling a job, removing a role, revoking tokens)
    refuse one with a field, as every other write refuses an unknown field: a `reason`
    sent with a role's removal was dropped and the removal audited without it. The
    schema documents the 400 (and the 415 of a body that is not JSON) on each."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    without_body = {
        f"{method.upper()} {path}"
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in {"post", "put", "patch", "delete"} and "requestBody" not in operation
    }
    ClusterFactory(name="gpu", host_count=1, gpus_per_host=8)
    ann = tree.user("ann")
    job = job_submit(
        actor=ann, project="org/prog-a/a1", cluster="gpu", name="j", gpus=1, min_runtime_s=0
    ).jobs[0]
    token, secret = token_create(user=ann, name="laptop")
    role = Membership.objects.get(user=ann, node=tree.node("a1"))
    urls = {
        "POST /api/v1/jobs/{job_id}/cancel/": f"/api/v1/jobs/{job.pk}/cancel/",
        "DELETE /api/v1/memberships/{membership_id}/": f"/api/v1/memberships/{role.pk}/",
        "DELETE /api/v1/auth/tokens/": "/api/v1/auth/tokens/",
        "DELETE /api/v1/auth/tokens/{token_key}/": f"/api/v1/auth/tokens/{token.token_key}/",
    }
    assert without_body == set(urls)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")  # ann's own: she may do each
    lead = api_as(tree.user("pi-a1"))  # who may remove ann's role
    for operation, url in urls.items():
        method, path = operation.split(" ")
        responses = schema["paths"][path][method.lower()]["responses"]
        assert {"400", "415"} <= set(responses), operation
        caller = lead if "memberships" in url else client
        refused = getattr(caller, method.lower())(url, {"reason": "moved"}, format="json")
        assert refused.status_code == 400, (operation, refused.content)
        assert refused.json()["field"] == "reason", operation
    job.refresh_from_db()
    assert job.state == "pending"
    assert Membership.objects.filter(pk=role.pk).exists()
    assert not BudgetEvent.objects.filter(kind=EventKind.ROLE_REMOVED).exists()
    assert client.get("/api/v1/auth/tokens/").status_code == 200  # not revoked
    assert lead.delete(f"/api/v1/memberships/{role.pk}/").status_code == 204  # no body: done


def test_the_history_page_offers_cancel_only_to_who_may_cancel(tree):
    schedule(tree, "lead-a")
    shown = {}
    for username in ("ceo", "lead-a", "lead-b", "ann", "pi-a1"):
        client = Client()
        client.force_login(tree.user(username))
        shown[username] = ">Cancel</button>" in client.get("/budgets/history/").content.decode()
    assert shown == {"ceo": True, "lead-a": True, "lead-b": False, "ann": False, "pi-a1": False}


def test_the_service_refuses_a_demoted_manager_whatever_the_caller(tree):
    """Services check, views do not: the same refusal without any view."""
    event = schedule(tree, "lead-a")
    demote(tree, "lead-a", "prog-a")
    with pytest.raises(PermissionDenied):
        services.budget_change_cancel(
            actor=tree.user("lead-a"), scheduled_event_id=event.pk, reason="x"
        )
