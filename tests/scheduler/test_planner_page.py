"""The window planner page: signed-in users only; fifo, fast and full side by side."""

import pytest

from scheduler.core.planner.views_data import list_scenarios
from tests.roles import participant


@pytest.mark.django_db
def test_planner_pages_need_sign_in(client):
    assert client.get("/planner/").status_code == 302
    assert client.get("/planner/training-heavy/").status_code == 302


@pytest.mark.django_db
def test_planner_list_and_detail(client):
    client.force_login(participant("viewer"))
    html = client.get("/planner/").content.decode()
    names = [s["name"] for s in list_scenarios()]
    assert len(names) == 7 and all(name in html for name in names)
    # solved in ~0.3 s (training-heavy ran the solver to the page's 2 s limit)
    detail = client.get("/planner/mixed-control/")
    assert detail.status_code == 200
    body = detail.content.decode()
    for mode in ("fifo", "fast", "full"):
        assert f'id="heatmap-{mode}"' in body
    assert "/static/plotly/plotly.min.js" in body
    assert client.get("/planner/no-such-scenario/").status_code == 404
