"""The CLI's wording of times (allot_cli/render.py): what a researcher reads in a column."""

import datetime as dt

from allot_cli import render
from allot_cli.jobs import _eta_text
from allot_cli.queue import waited

NOW = dt.datetime(2026, 12, 6, 9, 0, tzinfo=dt.UTC)


def _iso(seconds_before_now: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_before_now)).isoformat()


def test_a_wait_reads_as_a_span_even_under_a_minute():
    assert render.since(_iso(10), NOW) == "10 s"
    assert render.since(_iso(3 * 3600 + 600), NOW) == "3 h 10 min"
    # a queue time a little ahead of this machine's clock is no wait yet, not a negative one
    assert render.since(_iso(-5), NOW) == "0 s"


def test_the_waited_column_never_says_now():
    queued = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)).isoformat()
    assert waited(queued) in {"5 s", "6 s", "7 s"}
    assert waited(None) == "-"


def test_show_words_an_overtaken_estimate_as_the_job_page_does():
    eta = {
        "start": _iso(180),
        "earliest": _iso(400),
        "latest": _iso(-3600),
        "method": "forward-simulation",
        "overdue": True,
    }
    assert _eta_text(eta).startswith("due now (it was expected by ")
    assert "likely between" not in _eta_text(eta)
    eta["overdue"] = False
    assert "likely between" in _eta_text(eta)
