"""The sign-in page in a real browser (Debian's chromium): the demo's logins read whole."""

import pytest

from budgets.demo import DEMO_ROOT
from budgets.services import budget_tree_import
from tests.browser import BROWSER_MARKS

pytestmark = BROWSER_MARKS


@pytest.mark.parametrize("width", [1440, 390])
def test_the_demo_user_names_are_not_broken_over_lines(live_server, page, settings, width):
    """`code` may break anywhere (long paths in prose); a user name to type must not:
    'manag/er' and 'resea/rcher' were split over two lines at 1440 px."""
    settings.ALLOT_DEMO = True
    budget_tree_import(data={"name": DEMO_ROOT, "children": [{"name": "p", "weight": 1}]})
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/")
    names = page.evaluate(
        "() => [...document.querySelectorAll('.demo-logins th code')].map(c => "
        "[c.textContent, c.getClientRects().length, c.getBoundingClientRect().height,"
        " parseFloat(getComputedStyle(c).lineHeight) || 1.5 * parseFloat(getComputedStyle(c).fontSize)])"
    )
    assert [n[0] for n in names] == ["admin", "ceo", "manager", "researcher"]
    for name, rects, height, line in names:
        assert rects == 1 and height < 1.5 * line, (name, height, line)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
