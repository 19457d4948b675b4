"""The chart builders of dashboards/charts.py, without a page: what their axes say."""

import datetime as dt

from dashboards.charts import waits_figures


def test_the_wait_axis_title_does_not_contradict_its_tick_units():
    """The waits chart's log axis is labelled in s, min, h and d at its ticks; its title
    once said "minutes", which the tick labels then contradicted."""
    at = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    rows = [{"at": at, "kind": "debug", "p50_wait_s": 0.0, "p90_wait_s": 30.0}]
    axis = waits_figures(rows, [])["waits"]["layout"]["yaxis"]
    title = axis["title"]["text"]
    assert axis["type"] == "log" and {"1 s", "1 min", "1 h"} <= set(axis["ticktext"])
    assert "minutes" not in title and "log scale" in title
    assert "under 1 s drawn at 1 s" in title  # a wait of 0 s sits on the 1 s line
