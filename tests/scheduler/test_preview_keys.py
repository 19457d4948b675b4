"""Previews stored before the p90 replay wait was renamed (`p90_wait_s_*` ->
`p90_replay_wait_s_*`) keep their figures: migration 0012_preview_keys rewrites their
result rows, and the page then shows the minutes instead of "–"."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from scheduler.models import Preview, PreviewState
from scheduler.views.whatif import _whatif_context, _whatif_row
from tests.factories import ClusterFactory

pytestmark = pytest.mark.django_db
migration = importlib.import_module("scheduler.migrations.0012_preview_keys")


def _stored(tree, projects) -> Preview:
    return Preview.objects.create(
        requester=tree.user("lead-a"),
        node=tree.node("prog-a"),
        cluster=ClusterFactory(name="gpu"),
        state=PreviewState.DONE,
        result={"jobs": 2, "projects": projects},
    )


def test_old_keys_are_renamed_and_the_page_shows_the_minutes(tree):
    old = _stored(
        tree,
        [
            {"project": "org/prog-a/a1", "p90_wait_s_before": 600.0, "p90_wait_s_after": None},
            {"project": "org/prog-a/a2", "p90_replay_wait_s_before": 120.0},
        ],
    )
    assert _whatif_row(old.result["projects"][0])["p90_before_min"] is None  # the bug: "–"
    migration.rename_preview_keys(apps, None)
    old.refresh_from_db()
    first, second = old.result["projects"]
    assert first == {
        "project": "org/prog-a/a1",
        "p90_replay_wait_s_before": 600.0,
        "p90_replay_wait_s_after": None,
    }
    assert second == {"project": "org/prog-a/a2", "p90_replay_wait_s_before": 120.0}
    assert _whatif_row(first)["p90_before_min"] == pytest.approx(10.0)
    assert old.result["jobs"] == 2


def test_a_new_key_wins_and_results_without_rows_are_left_alone():
    assert migration.renamed_rows(None) is None
    assert migration.renamed_rows({"empty": True}) is None
    assert migration.renamed_rows({"projects": [{"p90_replay_wait_s_after": 1.0}]}) is None
    both = {"projects": [{"p90_wait_s_after": 9.0, "p90_replay_wait_s_after": 1.0}]}
    assert migration.renamed_rows(both) == {"projects": [{"p90_replay_wait_s_after": 1.0}]}


capped = importlib.import_module("scheduler.migrations.0015_capped_entitled_preview_keys")


def test_the_capped_entitlement_keys_are_renamed(tree):
    """`entitled_gpu_h_*` became `capped_entitled_gpu_h_*` (the demand-capped
    entitlement, not the tree's entitled GPU-hours): stored previews keep their figures
    and the what-if chart finds them."""
    old = _stored(
        tree,
        [
            {
                "project": "org/prog-a/a1",
                "delivered_gpu_h_before": 1.0,
                "delivered_gpu_h_after": 2.0,
                "entitled_gpu_h_before": 3.0,
                "entitled_gpu_h_after": 4.0,
                "entitled_gpu_h_recorded": 5.0,
            }
        ],
    )
    capped.rename_preview_keys(apps, None)
    old.refresh_from_db()
    (row,) = old.result["projects"]
    assert not any(k.startswith("entitled_gpu_h") for k in row)
    assert (
        row["capped_entitled_gpu_h_before"],
        row["capped_entitled_gpu_h_after"],
        row["capped_entitled_gpu_h_recorded"],
    ) == (3.0, 4.0, 5.0)
    chart = _whatif_context(old)["chart"]
    assert (chart["entitled_before"], chart["entitled_after"]) == ([3.0], [4.0])
