"""Budget services against PostgreSQL: changes, audit, conflicts, validation, import."""

import datetime as dt
import json
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from budgets import selectors, services
from budgets.models import (
    BudgetEvent,
    BudgetEventItem,
    BudgetNode,
    EventKind,
    Membership,
    ScheduledChange,
    ScheduledStatus,
)
from config.errors import Conflict, PermissionDenied, ValidationFailed
from scheduler.selectors.translate import engine_tree

pytestmark = pytest.mark.django_db


def entitled(name: str) -> float:
    index = selectors.tree_index()
    node = BudgetNode.objects.get(name=name)
    return index.shares[node.pk].entitled


def snapshot():
    """Everything a failed write must leave untouched."""
    return (
        sorted(BudgetNode.objects.values_list("name", "weight", "parent_id")),
        BudgetEvent.objects.count(),
        selectors.tree_version(),
    )


def test_import_builds_the_tree_with_the_spec_shares(tree):
    assert entitled("a1") == pytest.approx(0.35)
    assert tree.node("org").kind == "organisation"
    assert tree.node("prog-a").kind == "program"
    assert tree.node("a1").kind == "project"
    assert selectors.tree_index().path(tree.node("a1").pk) == "org/prog-a/a1"
    assert Membership.objects.filter(user__username="ann", node__name="a1", role="member").exists()
    from django.contrib.auth import get_user_model

    assert not get_user_model().objects.get(username="bob").has_usable_password()


def test_weight_change_applies_now_and_records_old_and_new_values(tree):
    version = selectors.tree_version()
    event = services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="Q4 review: a2 ships the eval suite",
        changes=[
            {"node": tree.node("a1").pk, "weight": "30"},
            {"node": tree.node("a2").pk, "weight": 70},
        ],
        base_version=version,
    )
    assert event.kind == EventKind.APPLIED
    assert selectors.tree_version() == version + 1
    assert entitled("a1") == pytest.approx(0.15)
    items = {i.node_path: i for i in event.items.all()}
    assert items["org/prog-a/a1"].old_weight == Decimal(70)
    assert items["org/prog-a/a1"].new_weight == Decimal(30)
    assert items["org/prog-a/a1"].old_entitled_share == pytest.approx(0.35)
    assert items["org/prog-a/a1"].new_entitled_share == pytest.approx(0.15)
    assert "org/prog-b" not in items  # unaffected nodes are not listed
    assert event.actor_name == "lead-a"


def test_stale_base_version_is_a_conflict_and_changes_nothing(tree):
    version = selectors.tree_version()
    a1 = tree.node("a1").pk
    services.budget_change_create(
        actor=tree.user("ceo"),
        reason="first",
        changes=[{"node": a1, "weight": 10}],
        base_version=version,
    )
    before = snapshot()
    with pytest.raises(Conflict) as exc:
        services.budget_change_create(
            actor=tree.user("lead-a"),
            reason="second",
            changes=[{"node": a1, "weight": 20}],
            base_version=version,
        )
    assert exc.value.status_code == 409
    assert exc.value.field == "base_version"
    assert snapshot() == before


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        ({"weight": "-1"}, "changes[0].weight", "negative"),
        ({"weight": "lots"}, "changes[0].weight", "not a number"),
        ({"weight": "NaN"}, "changes[0].weight", "finite"),
        ({"weight": ""}, "changes[0].weight", "required"),
        ({"weight": "1.00001"}, "changes[0].weight", "decimal places"),
        ({"node": 999999}, "changes[0].node", "no node"),
        ({"node": "abc"}, "changes[0].node", "not a node id"),
    ],
)
def test_bad_weight_changes_name_the_field_and_change_nothing(tree, change, field, fragment):
    payload = {"node": tree.node("a1").pk, "weight": "5"} | change
    before = snapshot()
    with pytest.raises(ValidationFailed) as exc:
        services.budget_change_create(actor=tree.user("ceo"), reason="r", changes=[payload])
    assert exc.value.field == field
    assert fragment in exc.value.message
    assert snapshot() == before


def test_empty_or_too_long_reason_is_refused(tree):
    a1 = tree.node("a1").pk
    for reason in ["", "   ", "x" * 2001]:
        with pytest.raises(ValidationFailed) as exc:
            services.budget_change_create(
                actor=tree.user("ceo"), reason=reason, changes=[{"node": a1, "weight": 1}]
            )
        assert exc.value.field == "reason"


def test_empty_change_list_and_duplicate_nodes_are_refused(tree):
    with pytest.raises(ValidationFailed) as exc:
        services.budget_change_create(actor=tree.user("ceo"), reason="r", changes=[])
    assert exc.value.field == "changes"
    a1 = tree.node("a1").pk
    with pytest.raises(ValidationFailed) as exc:
        services.budget_change_create(
            actor=tree.user("ceo"),
            reason="r",
            changes=[{"node": a1, "weight": 1}, {"node": a1, "weight": 2}],
        )
    assert exc.value.field == "changes[1].node"


def test_root_weight_cannot_be_changed(tree):
    with pytest.raises(ValidationFailed):
        services.budget_change_create(
            actor=tree.user("ceo"), reason="r", changes=[{"node": tree.node("org").pk, "weight": 3}]
        )


@pytest.mark.parametrize(
    ("actor", "node", "allowed"),
    [
        ("ceo", "prog-a", True),
        ("ceo", "a1", True),
        ("lead-a", "a1", True),
        ("lead-a", "prog-a", False),  # a program's weight is set by the manager above it
        ("lead-a", "b1", False),
        ("lead-b", "a2", False),
        ("pi-a1", "a1", False),  # a project lead decides inside the project, not its share
        ("ann", "a1", False),
        ("bob", "a2", False),
    ],
)
def test_weight_permission_matrix(tree, actor, node, allowed):
    call = lambda: services.budget_change_create(  # noqa: E731
        actor=tree.user(actor), reason="r", changes=[{"node": tree.node(node).pk, "weight": 2}]
    )
    if allowed:
        assert call().kind == EventKind.APPLIED
    else:
        before = snapshot()
        with pytest.raises(PermissionDenied) as exc:
            call()
        assert exc.value.status_code == 403
        assert snapshot() == before


def test_one_forbidden_node_rejects_the_whole_change(tree):
    before = snapshot()
    with pytest.raises(PermissionDenied) as exc:
        services.budget_change_create(
            actor=tree.user("lead-a"),
            reason="r",
            changes=[
                {"node": tree.node("a1").pk, "weight": 1},
                {"node": tree.node("b1").pk, "weight": 9},
            ],
        )
    assert exc.value.field == "changes[1].node"
    assert snapshot() == before


def test_superuser_may_change_anything(tree, admin_user):
    event = services.budget_change_create(
        actor=admin_user, reason="r", changes=[{"node": tree.node("prog-b").pk, "weight": 150}]
    )
    assert event.kind == EventKind.APPLIED
    assert entitled("b1") == pytest.approx(0.75)


def test_future_change_waits_then_applies_at_its_effective_time(tree):
    now = timezone.now()
    a1 = tree.node("a1").pk
    event = services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="from Monday",
        changes=[{"node": a1, "weight": 30}],
        effective_at=now + dt.timedelta(hours=2),
        now=now,
    )
    assert event.kind == EventKind.SCHEDULED
    assert entitled("a1") == pytest.approx(0.35)  # not yet
    assert services.budget_apply_due_changes(now=now + dt.timedelta(hours=1)) == []
    applied = services.budget_apply_due_changes(now=now + dt.timedelta(hours=2, seconds=1))
    assert len(applied) == 1 and applied[0].scheduled_event_id == event.pk
    assert entitled("a1") == pytest.approx(0.25)
    assert ScheduledChange.objects.get(event=event).status == ScheduledStatus.APPLIED


def test_a_past_effective_time_is_refused_not_written_into_the_history(tree):
    """The ledger rebuilds past hours from the history's effective times
    (`selectors.shares_as_of`): a change applied now but recorded as effective last year
    would rewrite every hour since. A time a moment ago (a client's clock) means now."""
    now = timezone.now()
    a1 = tree.node("a1").pk
    with pytest.raises(ValidationFailed) as refused:
        services.budget_change_create(
            actor=tree.user("lead-a"),
            reason="backdated",
            changes=[{"node": a1, "weight": 30}],
            effective_at=now - dt.timedelta(days=400),
            now=now,
        )
    assert refused.value.field == "effective_at" and "in the past" in refused.value.message
    assert entitled("a1") == pytest.approx(0.35)
    event = services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="now, by a clock a little behind",
        changes=[{"node": a1, "weight": 30}],
        effective_at=now - dt.timedelta(seconds=20),
        now=now,
    )
    assert event.kind == EventKind.APPLIED and event.effective_at == now
    assert entitled("a1") == pytest.approx(0.25)


def test_pending_change_can_be_cancelled_by_its_author_but_not_by_outsiders(tree):
    event = services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="later",
        changes=[{"node": tree.node("a1").pk, "weight": 1}],
        effective_at=timezone.now() + dt.timedelta(days=1),
    )
    with pytest.raises(PermissionDenied):
        services.budget_change_cancel(
            actor=tree.user("lead-b"), scheduled_event_id=event.pk, reason="no"
        )
    with pytest.raises(ValidationFailed):
        services.budget_change_cancel(
            actor=tree.user("lead-a"), scheduled_event_id=event.pk, reason=""
        )
    cancelled = services.budget_change_cancel(
        actor=tree.user("lead-a"), scheduled_event_id=event.pk, reason="dropped"
    )
    assert cancelled.kind == EventKind.CANCELLED
    assert services.budget_apply_due_changes(now=timezone.now() + dt.timedelta(days=2)) == []
    assert entitled("a1") == pytest.approx(0.35)
    with pytest.raises(Conflict):
        services.budget_change_cancel(
            actor=tree.user("lead-a"), scheduled_event_id=event.pk, reason="again"
        )


def test_history_rows_cannot_be_updated_or_deleted_even_with_raw_sql(tree):
    services.budget_change_create(
        actor=tree.user("ceo"), reason="r", changes=[{"node": tree.node("a1").pk, "weight": 5}]
    )
    event = BudgetEvent.objects.filter(kind=EventKind.APPLIED).first()
    item = BudgetEventItem.objects.filter(event=event).first()
    attempts = [
        lambda: BudgetEvent.objects.filter(pk=event.pk).update(reason="rewritten"),
        lambda: BudgetEvent.objects.filter(pk=event.pk).delete(),
        lambda: BudgetEventItem.objects.filter(pk=item.pk).update(new_weight=1),
        lambda: connection.cursor().execute("UPDATE budgets_budgetevent SET reason = 'x'"),
        lambda: connection.cursor().execute("DELETE FROM budgets_budgeteventitem"),
        lambda: connection.cursor().execute("UPDATE budgets_budgetnodeevent SET weight = 0"),
    ]
    for attempt in attempts:
        with pytest.raises(DatabaseError, match="(?i)cannot|append"), transaction.atomic():
            attempt()
    event.refresh_from_db()
    assert event.reason == "r"


def test_node_weight_changes_are_also_tracked_by_pghistory(tree):
    from budgets.models import BudgetNodeEvent

    a1 = tree.node("a1")
    services.budget_change_create(
        actor=tree.user("ceo"), reason="tracked", changes=[{"node": a1.pk, "weight": 9}]
    )
    last = BudgetNodeEvent.objects.filter(pgh_obj=a1).order_by("-pgh_id").first()
    assert last.weight == Decimal(9)
    assert last.pgh_context.metadata["reason"] == "tracked"


def test_move_under_own_descendant_is_refused(tree):
    before = snapshot()
    with pytest.raises(ValidationFailed) as exc:
        services.node_update(
            actor=tree.user("ceo"),
            node_id=tree.node("prog-a").pk,
            parent_id=tree.node("a1").pk,
            reason="r",
        )
    assert exc.value.field == "parent"
    assert "descendant" in exc.value.message
    assert snapshot() == before


def test_duplicate_sibling_name_is_refused_on_create_rename_and_move(tree):
    ceo = tree.user("ceo")
    with pytest.raises(ValidationFailed) as exc:
        services.node_create(actor=ceo, parent_id=tree.node("prog-a").pk, name="a2", reason="r")
    assert exc.value.field == "name"
    with pytest.raises(ValidationFailed):
        services.node_update(actor=ceo, node_id=tree.node("a1").pk, name="a2", reason="r")
    services.node_create(actor=ceo, parent_id=tree.node("prog-b").pk, name="a1", reason="r")
    with pytest.raises(ValidationFailed):
        services.node_update(
            actor=ceo,
            node_id=tree.node("b1").pk,
            parent_id=tree.node("prog-a").pk,
            name="a1",
            reason="r",
        )


def test_move_is_audited_and_changes_shares(tree):
    ceo = tree.user("ceo")
    services.node_update(
        actor=ceo, node_id=tree.node("b1").pk, parent_id=tree.node("prog-a").pk, reason="merge"
    )
    event = BudgetEvent.objects.filter(kind=EventKind.STRUCTURE).get()
    assert event.items.get().node_path == "org/prog-a/b1"
    assert entitled("b1") == pytest.approx(0.5 * 1 / 101)


def test_node_create_permissions(tree):
    with pytest.raises(PermissionDenied):
        services.node_create(
            actor=tree.user("lead-b"), parent_id=tree.node("prog-a").pk, name="x", reason="r"
        )
    node = services.node_create(
        actor=tree.user("lead-a"),
        parent_id=tree.node("prog-a").pk,
        name="a3",
        weight="0",
        reason="new",
    )
    assert node.kind == "project"
    with pytest.raises(ValidationFailed):
        services.node_create(
            actor=tree.user("ceo"), parent_id=tree.node("a1").pk, name="sub", reason="r"
        )


def test_membership_rules(tree):
    membership = services.membership_add(
        actor=tree.user("lead-a"), node_id=tree.node("a2").pk, username="ann", role="member"
    )
    with pytest.raises(PermissionDenied):
        services.membership_add(
            actor=tree.user("lead-a"), node_id=tree.node("b1").pk, username="ann", role="member"
        )
    with pytest.raises(PermissionDenied):
        services.membership_remove(actor=tree.user("ann"), membership_id=membership.pk)
    with pytest.raises(ValidationFailed) as exc:
        services.membership_add(
            actor=tree.user("lead-a"), node_id=tree.node("a2").pk, username="nobody", role="member"
        )
    assert exc.value.field == "user"
    services.membership_remove(actor=tree.user("lead-a"), membership_id=membership.pk)
    assert not Membership.objects.filter(pk=membership.pk).exists()


def test_import_is_atomic_and_names_the_bad_node_and_field(tree, tmp_path):
    before = snapshot()
    bad = json.loads(
        json.dumps(
            {
                **{"name": "org"},
                "children": [
                    {
                        "name": "prog-a",
                        "weight": 80,
                        "children": [{"name": "a1", "weight": 10}, {"name": "a9", "weight": -3}],
                    },
                ],
            }
        )
    )
    with pytest.raises(ValidationFailed) as exc:
        services.budget_tree_import(data=bad)
    assert "a9" in exc.value.message and "weight" in exc.value.message
    assert snapshot() == before
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(CommandError, match="a9"):
        call_command("budget_import", str(path))
    assert snapshot() == before


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"children": []}, "name"),
        ({"name": "o", "children": [{"name": "x", "weight": "abc"}]}, "not a number"),
        (
            {"name": "o", "children": [{"name": "x", "weight": 1}, {"name": "X", "weight": 2}]},
            "unique among siblings",
        ),
        ({"name": "o", "children": [{"name": "x"}]}, "weight"),
        ({"name": "o", "children": [{"name": "x/y", "weight": 1}]}, "cannot contain '/'"),
        ({"name": "o", "children": [{"name": "x", "weight": 0.00001}]}, "4 decimal places"),
        ({"name": "o", "children": {"name": "x"}}, "must be a list"),
        ({"name": "o", "children": [{"name": "x", "members": "ann"}]}, "list of user names"),
        ([], "object"),
    ],
)
def test_import_rejects_malformed_documents(db, document, fragment):
    with pytest.raises(ValidationFailed) as exc:
        services.budget_tree_import(data=document)
    assert fragment in exc.value.message
    assert BudgetNode.objects.count() == 0


def test_export_round_trips_through_import(tree, tmp_path, capsys):
    call_command("budget_export")
    exported = json.loads(capsys.readouterr().out)
    assert exported["children"][0]["children"][0] == {
        "name": "a1",
        "weight": 70,
        "managers": ["pi-a1"],
        "members": ["ann"],
    }
    path = tmp_path / "tree.json"
    path.write_text(json.dumps(exported))
    call_command("budget_import", str(path))
    assert entitled("a1") == pytest.approx(0.35)
    assert BudgetNode.objects.count() == 6


def test_reimport_updates_weights_and_is_audited(tree):
    services.budget_tree_import(
        data={"name": "org", "children": [{"name": "prog-a", "weight": 25}]}
    )
    assert entitled("prog-a") == pytest.approx(1 / 3)
    event = BudgetEvent.objects.filter(kind=EventKind.IMPORTED).first()
    assert event.items.get(node_path="org/prog-a").old_weight == Decimal(50)


def test_decision_tree_uses_a_scheduled_change_once_it_is_due(tree):
    from scheduler.core.engine import entitled_shares

    now = timezone.now()
    services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="from noon",
        changes=[{"node": tree.node("a1").pk, "weight": 30}],
        effective_at=now + dt.timedelta(minutes=5),
        now=now,
    )

    def tree_at(at: dt.datetime):
        services.budget_apply_due_changes(now=at)
        return engine_tree(selectors.tree_index())

    before = entitled_shares(tree_at(now))
    after = entitled_shares(tree_at(now + dt.timedelta(minutes=6)))
    assert before["org/prog-a/a1"] == pytest.approx(0.35)
    assert after["org/prog-a/a1"] == pytest.approx(0.25)
    assert set(after) == {"org/prog-a/a1", "org/prog-a/a2", "org/prog-b/b1"}


def test_an_exported_tree_loads_in_the_simulator_unchanged_with_repeated_project_names(
    db, tmp_path, capsys
):
    """One tree format: what `budget_export` writes, the simulator reads as it is, also
    when two programs each have a project called 'shared' (keyed by their paths)."""
    from scheduler.core.sim.cli import main as sim_main

    services.budget_tree_import(
        data={
            "name": "org",
            "children": [
                {
                    "name": "prog-a",
                    "weight": 60,
                    "children": [
                        {"name": "a1", "weight": 70, "members": ["ann"]},
                        {"name": "shared", "weight": 30},
                    ],
                },
                {"name": "prog-b", "weight": 40, "children": [{"name": "shared", "weight": 1}]},
            ],
        }
    )
    call_command("budget_export")
    (tmp_path / "tree.json").write_text(capsys.readouterr().out)
    (tmp_path / "cluster.json").write_text(
        json.dumps({"name": "c", "host_count": 2, "gpus_per_host": 8})
    )
    rows = [
        f"j{i},{project},u,{i * 60},4,3600,1800,1,0,training"
        for i, project in enumerate(["prog-a/shared", "prog-b/shared", "a1", "prog-a/a1"] * 3)
    ]
    (tmp_path / "trace.csv").write_text(
        "job_id,project,user,submit_s,gpus,duration_s,min_runtime_s,resumable,priority,kind\n"
        + "\n".join(rows)
        + "\n"
    )
    out = tmp_path / "report.json"
    code = sim_main(
        [
            "run",
            *("--cluster", str(tmp_path / "cluster.json")),
            *("--tree", str(tmp_path / "tree.json")),
            *("--trace", str(tmp_path / "trace.csv")),
            *("--out", str(out), "--quiet"),
        ]
    )
    assert code == 0
    projects = json.loads(out.read_text())["entitlement"]["projects"]
    assert set(projects) == {"a1", "prog-a/shared", "prog-b/shared"}
    assert projects["a1"]["entitled_share"] == pytest.approx(0.42)
    assert projects["prog-a/shared"]["entitled_share"] == pytest.approx(0.18)
    assert projects["prog-b/shared"]["entitled_share"] == pytest.approx(0.40)
    assert all(p["delivered_gpu_h"] > 0 for p in projects.values())
