"""Server-rendered pages: who sees what, and what a manager can do."""

import datetime as dt
import html

import pytest
from django.utils import timezone
from django.utils.html import escape

from budgets import services
from budgets.models import BudgetEvent, BudgetNode, EventKind, ScheduledChange, ScheduledStatus

pytestmark = pytest.mark.django_db

PAGES = ["/budgets/", "/budgets/history/", "/budgets/nodes/{prog_a}/edit/"]


@pytest.mark.parametrize("url", [*PAGES, "/budgets/nodes/{prog_a}/preview/"])
def test_anonymous_users_are_sent_to_sign_in(tree, client, url):
    response = client.get(url.format(prog_a=tree.node("prog-a").pk))
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")


def test_tree_page_shows_shares_and_gpu_hours(tree, client):
    from tests.factories import ClusterFactory

    ClusterFactory(name="h100", host_count=10, gpus_per_host=8)
    client.force_login(tree.user("bob"))
    html = client.get("/budgets/").content.decode()
    assert "35.00%" in html  # a1's entitled share
    assert ">4704<" in html  # 0.35 x 80 GPUs x 168 h
    assert "Edit weights" not in html  # bob manages nothing


def test_edit_links_only_where_the_user_governs_every_child(tree, client):
    client.force_login(tree.user("lead-a"))
    html = client.get("/budgets/").content.decode()
    assert f"/budgets/nodes/{tree.node('prog-a').pk}/edit/" in html
    assert f"/budgets/nodes/{tree.node('prog-b').pk}/edit/" not in html
    assert f"/budgets/nodes/{tree.node('org').pk}/edit/" not in html


@pytest.mark.parametrize(
    ("user", "node", "status"),
    [
        ("lead-a", "prog-a", 200),
        ("ceo", "prog-a", 200),
        ("ceo", "org", 200),
        ("lead-a", "org", 403),
        ("lead-a", "prog-b", 403),
        ("ann", "prog-a", 403),
        ("pi-a1", "prog-a", 403),
        ("root", "org", 200),
    ],
)
def test_edit_page_permission_matrix(tree, admin_user, client, user, node, status):
    client.force_login(admin_user if user == "root" else tree.user(user))
    url = f"/budgets/nodes/{tree.node(node).pk}/edit/"
    assert client.get(url).status_code == status
    preview = client.post(url.replace("edit", "preview"), {})
    assert preview.status_code == status


def test_forbidden_post_changes_nothing(tree, client):
    client.force_login(tree.user("lead-b"))
    a1 = tree.node("a1")
    response = client.post(
        f"/budgets/nodes/{tree.node('prog-a').pk}/edit/", {f"weight-{a1.pk}": "1", "reason": "x"}
    )
    assert response.status_code == 403
    assert BudgetNode.objects.get(pk=a1.pk).weight == 70


def test_preview_shows_new_entitled_shares_of_affected_nodes(tree, client):
    client.force_login(tree.user("lead-a"))
    a1, a2 = tree.node("a1"), tree.node("a2")
    html = client.post(
        f"/budgets/nodes/{tree.node('prog-a').pk}/preview/",
        {f"weight-{a1.pk}": "30", f"weight-{a2.pk}": "30"},
    ).content.decode()
    assert "org/prog-a/a1" in html and "35.00%" in html and "25.00%" in html
    assert "org/prog-b" not in html
    bad = client.post(
        f"/budgets/nodes/{tree.node('prog-a').pk}/preview/", {f"weight-{a1.pk}": "-2"}
    ).content.decode()
    # named as a refused save names it ("Weight of a1: ..."), not "A weight cannot be
    # negative" beside four weights
    assert "Weight of a1: A weight cannot be negative (got -2)." in bad


def test_the_effective_time_is_read_as_utc_as_the_label_and_the_preview_say(tree, client):
    """The field is a datetime-local (no zone) read as UTC while the pages show times in
    the reader's zone: the label says UTC, and the preview says when the change takes
    effect as the moment it was read (shown in the reader's zone by the script, with its
    UTC value), so 14:00 typed by a reader in CET reads "15:00 CET"; a time the save
    would refuse is named in the preview, as a refused weight is."""
    client.force_login(tree.user("lead-a"))
    a1, prog_a = tree.node("a1"), tree.node("prog-a")
    page = client.get(f"/budgets/nodes/{prog_a.pk}/edit/").content.decode()
    assert "Effective at, in UTC (not your own time zone" in page
    assert 'id="takes-effect"' not in page
    preview = f"/budgets/nodes/{prog_a.pk}/preview/"
    html = client.post(
        preview, {f"weight-{a1.pk}": "30", "effective_at": "2030-01-02T14:00"}
    ).content.decode()
    assert '<time datetime="2030-01-02T14:00:00Z" data-local="minutes" data-relative="1">' in html
    assert "2030-01-02 14:00 UTC" in html and ": the time typed, read as UTC." in html
    bad = client.post(preview, {f"weight-{a1.pk}": "30", "effective_at": "2030-13-02T14:00"})
    assert "Effective at: Not an ISO 8601 time" in bad.content.decode()
    assert 'id="takes-effect"' not in bad.content.decode()
    # a refused save shows the same line under the form, for the time as it was read
    refused = client.post(
        f"/budgets/nodes/{prog_a.pk}/edit/",
        {f"weight-{a1.pk}": "-1", "reason": "r", "effective_at": "2030-01-02T14:00"},
    ).content.decode()
    assert '<time datetime="2030-01-02T14:00:00Z"' in refused


def test_saving_requires_a_reason_and_valid_weights(tree, client):
    client.force_login(tree.user("lead-a"))
    a1, a2 = tree.node("a1"), tree.node("a2")
    url = f"/budgets/nodes/{tree.node('prog-a').pk}/edit/"
    response = client.post(url, {f"weight-{a1.pk}": "40", f"weight-{a2.pk}": "30", "reason": " "})
    assert response.status_code == 400 and "reason is required" in response.content.decode()
    response = client.post(
        url, {f"weight-{a1.pk}": "forty", f"weight-{a2.pk}": "30", "reason": "r"}
    )
    assert response.status_code == 400 and "not a number" in response.content.decode()
    assert BudgetNode.objects.get(pk=a1.pk).weight == 70
    response = client.post(
        url, {f"weight-{a1.pk}": "40", f"weight-{a2.pk}": "30", "reason": "rebalance"}
    )
    assert response.status_code == 302 and response.url == "/budgets/history/"
    assert BudgetNode.objects.get(pk=a1.pk).weight == 40


def test_stale_form_is_a_conflict(tree, client):
    client.force_login(tree.user("lead-a"))
    a1, a2 = tree.node("a1"), tree.node("a2")
    url = f"/budgets/nodes/{tree.node('prog-a').pk}/edit/"
    response = client.post(
        url, {f"weight-{a1.pk}": "40", f"weight-{a2.pk}": "30", "reason": "r", "base_version": "0"}
    )
    assert (
        response.status_code == 409 and "changed since you loaded it" in response.content.decode()
    )
    # about the whole form: above it, no field marked
    assert "changed since you loaded it" in response.context["form_error"]
    assert response.context["field_errors"] == {} and 'aria-invalid="true"' not in (
        response.content.decode()
    )


def test_history_page_claims_what_the_triggers_hold_not_that_nobody_can_alter_it(tree, client):
    """The page said "Nobody can alter this record", which the operations guide (the
    audit trail) says is not so for the tables' owner; it says what holds instead."""
    client.force_login(tree.user("bob"))
    page = html.unescape(client.get("/budgets/history/").content.decode())
    assert "Nobody can alter" not in page
    assert "PostgreSQL refuses to update or delete it" in page
    assert "only the tables' owner could" in page


def test_history_page_filters(tree, client):
    services.budget_change_create(
        actor=tree.user("ceo"),
        reason="ceo reason",
        changes=[{"node": tree.node("prog-b").pk, "weight": 9}],
    )
    between = timezone.now()
    services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="lead reason",
        changes=[{"node": tree.node("a1").pk, "weight": 9}],
    )
    client.force_login(tree.user("bob"))
    since = client.get("/budgets/history/", {"since": between.isoformat()}).content.decode()
    assert "lead reason" in since and "ceo reason" not in since
    html = client.get("/budgets/history/?actor=lead-a").content.decode()
    assert "lead reason" in html and "ceo reason" not in html
    html = client.get(f"/budgets/history/?node={tree.node('b1').pk}&kind=applied").content.decode()
    assert "ceo reason" in html and "lead reason" not in html
    for since, says in [
        ("soon", "Not an ISO 8601 time"),
        ("2026-13-01", "Not an ISO 8601 time"),  # was a 500
        ("2026-02-30T10:00", "Not an ISO 8601 time"),  # was a 500
        ("1900-01-01", "Out of range"),  # was read as a filter
    ]:
        _assert_refused(client, {"since": since}, "since", says)
    for node in ["424242", "99999999999999999999"]:  # no such node: was a 500
        _assert_refused(client, {"node": node}, "node", "")
    # the same time as the API reads it: a date alone is its midnight UTC
    tomorrow = (timezone.now().astimezone(dt.UTC) + dt.timedelta(days=1)).date().isoformat()
    html = client.get("/budgets/history/", {"since": tomorrow}).content.decode()
    assert "lead reason" not in html and "ceo reason" not in html


def test_cancel_scheduled_from_history_page(tree, client):
    event = services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="later",
        changes=[{"node": tree.node("a1").pk, "weight": 1}],
        effective_at=timezone.now() + dt.timedelta(days=1),
    )
    client.force_login(tree.user("bob"))
    refused = client.post(f"/budgets/scheduled/{event.pk}/cancel/", {"reason": "no"})
    assert (
        refused.status_code == 403 and "outside the subtree you manage" in refused.content.decode()
    )
    assert ScheduledChange.objects.get(event=event).status == ScheduledStatus.PENDING
    assert not BudgetEvent.objects.filter(kind=EventKind.CANCELLED).exists()
    client.force_login(tree.user("lead-a"))
    response = client.post(f"/budgets/scheduled/{event.pk}/cancel/", {"reason": "dropped"})
    assert response.status_code == 302 and response.url == "/budgets/history/"
    cancelled = BudgetEvent.objects.get(kind=EventKind.CANCELLED)
    assert (cancelled.actor_name, cancelled.reason, cancelled.scheduled_event_id) == (
        "lead-a",
        "dropped",
        event.pk,
    )
    assert ScheduledChange.objects.get(event=event).status == ScheduledStatus.CANCELLED
    history = client.get("/budgets/history/").content.decode()
    assert "Scheduled change cancelled." in history and "dropped" in history


def test_admin_history_is_read_only(tree, admin_user, client):
    client.force_login(admin_user)
    event = BudgetEvent.objects.first()
    listing = client.get("/admin/budgets/budgetevent/").content.decode()
    assert "Tree imported" in listing and "Add budget event" not in listing
    detail = client.get(f"/admin/budgets/budgetevent/{event.pk}/change/").content.decode()
    assert "org/prog-a/a1" in detail and 'name="_save"' not in detail  # read-only
    assert (
        client.post(f"/admin/budgets/budgetevent/{event.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert client.get("/admin/budgets/budgetevent/add/").status_code == 403
    assert BudgetEvent.objects.filter(pk=event.pk).exists()
    # clusters are added by `manage.py cluster_add` (validated, provisioned), not the admin
    assert client.get("/admin/scheduler/cluster/add/").status_code == 403
    memberships = client.get("/admin/budgets/membership/").content.decode()
    assert "pi-a1" in memberships and "lead-a" in memberships


def test_admin_is_closed_to_non_staff(tree, client):
    client.force_login(tree.user("lead-a"))
    response = client.get("/admin/budgets/budgetevent/")
    assert response.status_code == 302 and response.url.startswith("/admin/login/")
    assert "Tree imported" not in client.get(response.url).content.decode()


@pytest.mark.parametrize(
    "url", ["/budgets/history/?actor=%00", "/budgets/history/?since=%00", "/budgets/?x%00=1"]
)
def test_nul_bytes_in_query_are_400_not_500(tree, client, url):
    client.force_login(tree.user("bob"))
    response = client.get(url)
    assert response.status_code == 400 and "NUL" in response.content.decode()


def _assert_refused(client, query: dict, field: str, says: str) -> None:
    """A 400 that names `field` and says why beside the form, with no events listed."""
    response = client.get("/budgets/history/", query)
    html = response.content.decode()
    assert response.status_code == 400, query
    assert f"<code>{field}</code>: " in html and escape(says) in html, (query, html)
    assert '<form method="get" class="filters">' in html  # the form stays, to correct it
    assert 'class="event card"' not in html and "No events match." not in html
    assert response.context["page"].paginator.count == 0


@pytest.mark.parametrize(
    ("query", "field", "says"),
    [
        ({"node": "\u00b2"}, "node", "A valid integer is required."),  # '²'.isdigit(): was a 500
        ({"node": "abc"}, "node", "A valid integer is required."),  # was ignored
        ({"node": "0"}, "node", "greater than or equal to 1"),
        ({"node": "424242"}, "node", "There is no budget node with id 424242."),
        ({"kind": "nonsense"}, "kind", '"nonsense" is not a valid choice; choose one of:'),
        ({"since": "yesterday"}, "since", "Not an ISO 8601 time"),
        ({"actor": "x" * 151}, "actor", "no more than 150 characters"),
        ({"kind": "applied", "node": "abc", "since": "2026-13-01"}, "since", "Not an ISO"),
    ],
)
def test_history_bad_filter_is_a_400_naming_the_field(client, tree, query, field, says):
    """A malformed filter was answered 200 with the filter dropped (every event listed)."""
    client.force_login(tree.user("ann"))
    events = BudgetEvent.objects.count()
    _assert_refused(client, query, field, says)
    assert BudgetEvent.objects.count() == events  # nothing else changes


def test_history_unknown_kind_names_the_kinds_as_the_select_shows_them(client, tree, api_client):
    """An unknown kind listed the codes (applied, scheduled, ...) where the form's select
    shows "Weights changed", "Change scheduled", ...: the page names each as its select
    does, with the code the URL takes; the API's 400 still lists the codes it takes."""
    import re

    client.force_login(tree.user("ann"))
    page = client.get("/budgets/history/", {"kind": "nonsense"}).content.decode()
    shown = ", ".join(f"{escape(label)} ({value})" for value, label in EventKind.choices)
    assert (
        f"<code>kind</code>: &quot;nonsense&quot; is not a valid choice; choose one of: {shown}."
        in page
    )
    select = page.split('<select name="kind">')[1].split("</select>")[0]
    options = re.findall(r"<option value=\"(\w+)\" >([^<]+)</option>", select)
    assert options and all(f"{label} ({value})" in page for value, label in options)
    api_client.force_authenticate(tree.user("ann"))
    detail = api_client.get("/api/v1/budget-changes/?kind=nonsense").json()["errors"][0]["detail"]
    assert detail.endswith(f"choose one of: {', '.join(EventKind.values)}."), detail


def test_history_good_and_blank_filters_still_filter(client, tree):
    services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="a1 up",
        changes=[{"node": tree.node("a1").pk, "weight": 9}],
    )
    client.force_login(tree.user("ann"))
    everything = client.get("/budgets/history/").context["page"].object_list
    blank = client.get("/budgets/history/", {"node": "", "kind": "", "since": "", "actor": ""})
    assert blank.status_code == 200  # the form's "any": no filter
    assert list(blank.context["page"].object_list) == list(everything)
    query = {"node": tree.node("a1").pk, "kind": "applied", "actor": "lead-a"}
    response = client.get("/budgets/history/", query)
    rows = list(response.context["page"].object_list)
    assert response.status_code == 200 and [e.reason for e in rows] == ["a1 up"]
    assert "<code>" not in response.content.decode()


@pytest.mark.parametrize(
    ("effective_at", "says"),
    [
        ("2026-13-01T09:00", "Not an ISO 8601 time"),  # no such month (was a 500)
        ("2026-02-30T09:00", "Not an ISO 8601 time"),
        ("10000-01-01T09:00", "Not an ISO 8601 time"),
        ("9999-12-31T23:59", "Out of range"),  # scheduled for year 9999 (was recorded)
        ("8999-12-31T23:59", "730 days ahead"),
        # in the page's words, not the API's field name (was "(leave effective_at out)")
        (
            "2020-01-01T10:00",
            "2020-01-01T10:00:00+00:00 is in the past: give no time for a change that takes "
            "effect now, or a future time.",
        ),
    ],
)
def test_an_effective_time_that_is_no_time_or_too_far_is_refused_and_nothing_recorded(
    tree, client, effective_at, says
):
    client.force_login(tree.user("lead-a"))
    a1, a2 = tree.node("a1"), tree.node("a2")
    events = BudgetEvent.objects.count()
    response = client.post(
        f"/budgets/nodes/{tree.node('prog-a').pk}/edit/",
        {
            f"weight-{a1.pk}": "40",
            f"weight-{a2.pk}": "30",
            "reason": "later",
            "effective_at": effective_at,
        },
    )
    html = response.content.decode()
    assert response.status_code == 400 and says in html
    assert "effective_at " not in html
    # beside the field it is about, and named by the field's label above the form
    (error,) = response.context["field_errors"].items()
    assert error[0] == "effective_at" and says in error[1]
    assert f'<span class="field-error" id="error-effective_at">{escape(error[1])}</span>' in html
    assert f'<a href="#field-effective_at">Effective at</a>: {escape(error[1])}' in html
    assert BudgetEvent.objects.count() == events and not ScheduledChange.objects.exists()
    assert BudgetNode.objects.get(pk=a1.pk).weight == 70


@pytest.mark.parametrize(
    ("typed", "field", "label", "says"),
    [
        ({"a1": "forty", "reason": "r"}, "weight-{a1}", "Weight of a1", "not a number"),
        ({"a1": "-2", "reason": "r"}, "weight-{a1}", "Weight of a1", "negative"),
        ({"a1": "40", "reason": "   "}, "reason", "Reason", "reason is required"),
        (
            {"a1": "40", "reason": "r", "effective_at": "2020-01-01T10:00"},
            "effective_at",
            "Effective at",
            "is in the past",
        ),
        (
            {"a1": "40", "reason": "r", "effective_at": "2026-13-01T09:00"},
            "effective_at",
            "Effective at",
            "Not an ISO 8601 time",
        ),
    ],
)
def test_a_refused_field_is_marked_with_its_reason_beside_it(
    tree, client, typed, field, label, says
):
    """A refusal was one line above the form (a weight's in the preview's box), in the
    API's words where a service refused it; now each refused field carries its reason,
    and the summary above the form names the field by its label."""
    client.force_login(tree.user("lead-a"))
    a1, a2 = tree.node("a1"), tree.node("a2")
    field = field.format(a1=a1.pk)
    body = {f"weight-{a1.pk}": typed.pop("a1"), f"weight-{a2.pk}": "30", **typed}
    response = client.post(f"/budgets/nodes/{tree.node('prog-a').pk}/edit/", body)
    assert response.status_code == 400
    errors = response.context["field_errors"]
    assert list(errors) == [field] and says in errors[field]
    assert response.context["error_summary"] == [
        {"field": field, "label": label, "message": errors[field]}
    ]
    assert response.context["form_error"] is None
    html = response.content.decode()
    assert f'aria-describedby="error-{field}"' in html
    assert f'<span class="field-error" id="error-{field}">{escape(errors[field])}</span>' in html
    assert f'<a href="#field-{field}">{label}</a>: {escape(errors[field])}' in html
    assert html.count('aria-invalid="true"') == 1  # only the refused field is marked
    assert BudgetNode.objects.get(pk=a1.pk).weight == 70
    assert BudgetEvent.objects.count() == 1  # the import only


def test_a_bad_weight_and_a_missing_reason_are_both_named_in_one_answer(tree, client):
    """The reason was checked only by the service, after the weights passed: a form with
    a negative weight and no reason named the weight alone, and the reason only on the
    second try."""
    client.force_login(tree.user("lead-a"))
    a1, a2 = tree.node("a1"), tree.node("a2")
    body = {f"weight-{a1.pk}": "-2", f"weight-{a2.pk}": "30", "reason": "  "}
    response = client.post(f"/budgets/nodes/{tree.node('prog-a').pk}/edit/", body)
    assert response.status_code == 400
    summary = response.context["error_summary"]
    assert [e["label"] for e in summary] == ["Weight of a1", "Reason"]
    assert "negative" in summary[0]["message"]
    assert "reason is required" in summary[1]["message"]
    assert response.content.decode().count('aria-invalid="true"') == 2
    assert BudgetEvent.objects.count() == 1  # the import only


def test_a_service_refusal_names_the_forms_field_through_an_explicit_mapping():
    """`budgets.views._form_field`: the API field a service names -> the edit form's field
    (the label comes from the form's labels), instead of rewriting the message's words."""
    from budgets.views import _field_labels, _form_field

    changes = [{"node": 5, "weight": "1"}, {"node": 7, "weight": "2"}]
    assert _form_field("effective_at", changes) == "effective_at"
    assert _form_field("reason", changes) == "reason"
    assert _form_field("changes[1].weight", changes) == "weight-7"
    assert _form_field("changes[0].node", changes) == "weight-5"
    for whole_form in ("changes[2].weight", "changes", "base_version", "node", "", None):
        assert _form_field(whole_form, changes) is None, whole_form

    class Child:
        def __init__(self, pk: int, name: str):
            self.pk, self.name = pk, name

    assert _field_labels([Child(5, "a1"), Child(7, "a2")]) == {
        "weight-5": "Weight of a1",
        "weight-7": "Weight of a2",
        "reason": "Reason",
        "effective_at": "Effective at",
    }


def test_a_projects_edit_page_says_it_has_nothing_to_weigh(tree, client, api_client):
    """The demo's manager opening /budgets/nodes/<evaluation>/edit/ (a project of the
    program they manage) read "it is outside the subtree you manage", which is false; the
    API said "is a project: it has no children to weigh". The page, its preview and the
    what-if say the API's words."""
    client.force_login(tree.user("lead-a"))
    a1 = tree.node("a1")
    said = "'org/prog-a/a1' is a project: it has no children to weigh."
    for response in (
        client.get(f"/budgets/nodes/{a1.pk}/edit/"),
        client.post(f"/budgets/nodes/{a1.pk}/preview/", {}),
        client.post(f"/budgets/nodes/{a1.pk}/whatif/", {}),
    ):
        text = html.unescape(response.content.decode())
        assert said in text and "outside the subtree" not in text
    api_client.force_authenticate(tree.user("lead-a"))
    answer = api_client.post(
        "/api/v1/previews/",
        {"node": a1.pk, "cluster": "nope", "weights": [{"node": a1.pk, "weight": 3}]},
        format="json",
    )
    assert answer.json()["detail"] == said
