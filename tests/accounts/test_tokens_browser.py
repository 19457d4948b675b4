"""My API tokens (`/me/tokens/`) in a real browser (Debian's chromium): a revoke asks
first (static/js/confirm.js; the CSP allows no inline handler), "Cancel" sends nothing,
"OK" revokes; a name of one 100-character word folds inside its card on a phone."""

from __future__ import annotations

import pytest

from accounts.models import ApiToken
from accounts.services import token_create
from tests.browser import BROWSER_MARKS, sign_in
from tests.factories import UserFactory

pytestmark = BROWSER_MARKS

LONG = "x" * 100  # TOKEN_NAME_MAX_LENGTH characters, no place to break


@pytest.mark.parametrize("width", [1440, 390])
def test_a_revoke_asks_first_and_a_long_name_never_widens_the_page(live_server, page, width):
    ann = UserFactory(username="ann")
    ann.set_password("pw")
    ann.save()
    laptop, _ = token_create(user=ann, name=LONG)
    ci, _ = token_create(user=ann, name="CI")
    page.set_viewport_size({"width": width, "height": 844})
    sign_in(page, live_server.url, "ann")
    page.goto(f"{live_server.url}/me/tokens/")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    name = page.locator("td.name", has_text=LONG)
    assert name.bounding_box()["width"] < width

    asked: list[str] = []

    def answer(dialog, accept: bool) -> None:
        asked.append(dialog.message)
        if accept:
            dialog.accept()
        else:
            dialog.dismiss()

    page.once("dialog", lambda d: answer(d, accept=False))
    page.click(f"button[aria-label='Revoke the token {laptop.token_key}…']")
    page.wait_for_timeout(300)  # a form sent would navigate; none does
    assert asked and laptop.token_key in asked[0]
    assert ApiToken.objects.filter(pk=laptop.pk).exists()

    page.once("dialog", lambda d: answer(d, accept=True))
    with page.expect_navigation():
        page.click(f"button[aria-label='Revoke the token {laptop.token_key}…']")
    assert f"Token {laptop.token_key}… revoked" in page.locator("p.flash").inner_text()
    assert not ApiToken.objects.filter(pk=laptop.pk).exists()
    assert list(ApiToken.objects.filter(user=ann)) == [ci]
