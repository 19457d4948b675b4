"""The what-if part of the weight edit page (htmx partials), without a browser."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.models import Preview, PreviewState
from tests.factories import ClusterFactory
from tests.support.jobs import seed_jobs

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def form(tree, **extra):
    return {
        f"weight-{tree.node('a1').pk}": "300",
        f"weight-{tree.node('a2').pk}": "30",
        "cluster": "gpu",
        "days": "3",
        **extra,
    }


def test_the_edit_page_offers_the_preview_and_the_result_comes_back(
    tree, django_capture_on_commit_callbacks
):
    cluster = ClusterFactory(name="gpu", host_count=2)
    seed_jobs(tree, cluster, n=30)
    c = client_for(tree.user("lead-a"))
    node = tree.node("prog-a").pk
    page = c.get(f"/budgets/nodes/{node}/edit/")
    assert b"Preview on past jobs" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        started = c.post(f"/budgets/nodes/{node}/whatif/", form(tree))
    assert started.status_code == 200
    preview = Preview.objects.get()
    done = c.get(f"/budgets/whatif/{preview.pk}/")
    assert done.status_code == 200
    assert b"whatif-chart" in done.content and b"org/prog-a/a1" in done.content
    assert f'id="whatif-data-{preview.pk}"'.encode() in done.content  # json_script data
    assert b"<script>" not in done.content  # CSP: no inline scripts
    # the replayed window's end is shown beside its figures (issue 22 item 15)
    preview.refresh_from_db()
    stamp = preview.result["window_end"].replace("+00:00", "Z")
    assert f'class="window-end"><time datetime="{stamp}"'.encode() in done.content


def test_a_running_preview_polls_and_shows_progress(tree):
    cluster = ClusterFactory(name="gpu")
    preview = Preview.objects.create(
        requester=tree.user("lead-a"), node=tree.node("prog-a"), cluster=cluster,
        weights=[], state=PreviewState.RUNNING, progress=0.4,
    )  # fmt: skip
    body = client_for(tree.user("lead-a")).get(f"/budgets/whatif/{preview.pk}/").content
    assert b'hx-trigger="load delay:1s"' in body and b"40%" in body


def test_no_jobs_gives_a_clear_message(tree, django_capture_on_commit_callbacks):
    ClusterFactory(name="gpu")
    c = client_for(tree.user("lead-a"))
    with django_capture_on_commit_callbacks(execute=True):
        c.post(f"/budgets/nodes/{tree.node('prog-a').pk}/whatif/", form(tree))
    body = c.get(f"/budgets/whatif/{Preview.objects.get().pk}/").content
    assert b"No jobs were submitted to gpu" in body


def test_unchanged_or_bad_weights_say_so(tree):
    ClusterFactory(name="gpu")
    c = client_for(tree.user("lead-a"))
    node = tree.node("prog-a").pk
    same = c.post(
        f"/budgets/nodes/{node}/whatif/", form(tree, **{f"weight-{tree.node('a1').pk}": "70"})
    )
    assert b"Change at least one weight" in same.content
    bad = c.post(
        f"/budgets/nodes/{node}/whatif/", form(tree, **{f"weight-{tree.node('a1').pk}": "-2"})
    )
    assert b'class="error"' in bad.content
    assert not Preview.objects.exists()


def test_others_may_not_start_or_read(tree):
    cluster = ClusterFactory(name="gpu")
    preview = Preview.objects.create(
        requester=tree.user("lead-a"), node=tree.node("prog-a"), cluster=cluster, weights=[]
    )
    for who in ("ann", "lead-b"):
        c = client_for(tree.user(who))
        assert (
            c.post(f"/budgets/nodes/{tree.node('prog-a').pk}/whatif/", form(tree)).status_code
            == 403
        )
        assert c.get(f"/budgets/whatif/{preview.pk}/").status_code == 403


def test_idle_reclaim_alone_can_be_previewed_from_the_form(tree):
    ClusterFactory(name="gpu")
    c = client_for(tree.user("lead-a"))
    node = tree.node("prog-a").pk
    assert b'name="idle_reclaim"' in c.get(f"/budgets/nodes/{node}/edit/").content
    unchanged = {f"weight-{tree.node('a1').pk}": "70", f"weight-{tree.node('a2').pk}": "30"}
    for choice, stored in (("on", True), ("off", False)):
        c.post(f"/budgets/nodes/{node}/whatif/", form(tree, **unchanged, idle_reclaim=choice))
        preview = Preview.objects.latest("pk")
        assert (preview.idle_reclaim, preview.weights) == (stored, [])
    # the cluster's policy and no weight changed: nothing to preview, and it says how
    same = c.post(f"/budgets/nodes/{node}/whatif/", form(tree, **unchanged, idle_reclaim=""))
    assert b"choose idle-GPU reclaim on or off" in same.content
    bad = c.post(f"/budgets/nodes/{node}/whatif/", form(tree, idle_reclaim="maybe"))
    assert b"idle_reclaim must be" in bad.content
    assert Preview.objects.count() == 2


def test_opened_directly_the_preview_is_a_whole_page_and_htmx_gets_the_part(tree):
    """A what-if link opened directly (or reloaded) shows the site's layout with the
    preview and a way back to the weights; htmx's poll still gets the part alone."""
    cluster = ClusterFactory(name="gpu")
    preview = Preview.objects.create(
        requester=tree.user("lead-a"), node=tree.node("prog-a"), cluster=cluster,
        weights=[], state=PreviewState.RUNNING, progress=0.4,
    )  # fmt: skip
    c = client_for(tree.user("lead-a"))
    url = f"/budgets/whatif/{preview.pk}/"
    page = c.get(url)
    body = page.content.decode()
    assert page.status_code == 200 and body.startswith("<!doctype html>")
    assert '<nav aria-label="Main">' in body and "<title>What-if preview · org/prog-a" in body
    assert 'id="whatif"' in body and 'hx-trigger="load delay:1s"' in body and "40%" in body
    assert f'href="/budgets/nodes/{tree.node("prog-a").pk}/edit/"' in body
    assert "js/whatif.js" in body  # draws the chart once the result is in
    assert "HX-Request" in page["Vary"]
    part = c.get(url, HTTP_HX_REQUEST="true")
    assert part.status_code == 200 and "HX-Request" in part["Vary"]
    assert b"<html" not in part.content and b"<nav" not in part.content
    assert b'hx-trigger="load delay:1s"' in part.content and b"40%" in part.content


def test_a_preview_refused_or_missing_is_refused_both_ways(tree):
    cluster = ClusterFactory(name="gpu")
    preview = Preview.objects.create(
        requester=tree.user("lead-a"), node=tree.node("prog-a"), cluster=cluster, weights=[]
    )
    for who in ("ann", "lead-b"):
        c = client_for(tree.user(who))
        direct = c.get(f"/budgets/whatif/{preview.pk}/")
        assert direct.status_code == 403 and b"<h1>Not allowed</h1>" in direct.content
        assert b"Only its requester" in direct.content and b"whatif-progress" not in direct.content
        part = c.get(f"/budgets/whatif/{preview.pk}/", HTTP_HX_REQUEST="true")
        assert part.status_code == 403 and b"whatif-progress" not in part.content
    c = client_for(tree.user("lead-a"))
    assert c.get(f"/budgets/whatif/{preview.pk + 1}/").status_code == 404
    assert c.get(f"/budgets/whatif/{preview.pk + 1}/", HTTP_HX_REQUEST="true").status_code == 404
