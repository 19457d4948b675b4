"""Times on pages (ops/templatetags/clock.py): a time written in a reason's text shows
in the reader's zone like every other time on the page."""

from __future__ import annotations

from ops.templatetags.clock import local_times


def test_a_utc_time_in_a_reason_becomes_a_local_time_element_and_the_rest_is_escaped():
    text = (
        "2 jobs ahead <b>; the first protected minimum runtime there ends at 2026-12-05 20:01 UTC"
    )
    html = str(local_times(text))
    assert '<time datetime="2026-12-05T20:01:00Z" data-local="minutes" data-relative="1">' in html
    assert "2026-12-05 20:01 UTC" in html  # what a reader without JavaScript sees
    assert "&lt;b&gt;" in html and "<b>" not in html
    assert str(local_times("no time here")) == "no time here"
    assert str(local_times(None)) == ""
