"""The window planner page: signed-in users only; fifo, fast and full side by side."""

import pytest

import scheduler.services.planner as planner
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


@pytest.mark.django_db
def test_a_scenario_is_solved_once_then_read_from_the_cache(client, monkeypatch):
    """A page view ran the solver afresh (up to 2 s of CP-SAT per GET for any signed-in
    user); the plans depend only on the scenario file, so the second view solves nothing."""
    solved = []

    def counting_run_mode(scenario, mode, time_limit_s):
        solved.append(mode)
        return real_run_mode(scenario, mode, time_limit_s)

    real_run_mode = planner.run_mode
    monkeypatch.setattr(planner, "run_mode", counting_run_mode)
    client.force_login(participant("viewer"))
    first = client.get("/planner/mixed-control/")
    assert solved == ["fifo", "fast", "full"]
    second = client.get("/planner/mixed-control/")
    assert solved == ["fifo", "fast", "full"]  # nothing solved again
    assert first.context["plans"] == second.context["plans"]
    assert all(f'id="heatmap-{mode}"' in second.content.decode() for mode in solved)
