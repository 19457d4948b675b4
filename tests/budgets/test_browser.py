"""A real browser (Debian's chromium driven by Playwright): a manager edits a weight,
sees the live preview, saves with a reason and finds the change in the history."""

from budgets.models import BudgetEvent, BudgetNode
from budgets.services import node_create
from tests.browser import BROWSER_MARKS, CUT_CELLS, sign_in
from tests.factories import ClusterFactory

pytestmark = BROWSER_MARKS


def test_manager_edits_a_weight_and_sees_it_in_the_history(tree, live_server, page):
    from playwright.sync_api import expect

    tree.user("lead-a")  # password "pw"
    sign_in(page, live_server.url, "lead-a")
    expect(page.locator("h1")).to_contain_text("Budget tree")

    page.click(f"a[href='/budgets/nodes/{tree.node('prog-a').pk}/edit/']")
    # htmx listens for the input once the page has loaded: typing earlier (a busy
    # machine) goes unheard and no preview comes
    page.wait_for_load_state("load")
    page.fill("input[aria-label='weight of a1']", "30")
    preview = page.locator("#preview table.preview")
    expect(preview).to_contain_text("org/prog-a/a1")
    expect(preview).to_contain_text("25.00%")  # 50% x 30/60 after the edit

    page.fill("textarea[name=reason]", "Quarterly review: a2 ships the evaluation suite")
    page.click("button:has-text('Save change')")
    expect(page.locator("h1")).to_contain_text("Budget history")
    first = page.locator("article.event").first
    expect(first).to_contain_text("Quarterly review: a2 ships the evaluation suite")
    expect(first).to_contain_text("lead-a")
    expect(first).to_contain_text("org/prog-a/a1")
    expect(first).to_contain_text("70 → 30")


def test_the_tree_reads_as_cards_on_a_phone(tree, live_server, page):
    """At 390 px the tree scrolled sideways (inside itself: eight columns and one per
    cluster); now each node is a card, indented by its depth, every figure under its
    column's name and a long name folded: nothing lies right of the tree's box and the
    page does not scroll sideways. On a desktop it is still one table with its header."""
    from playwright.sync_api import expect

    ClusterFactory(name="demo-h100", host_count=16, gpus_per_host=8)
    ClusterFactory(name="demo-a100-with-a-long-name", host_count=4, gpus_per_host=8)
    long_name = "multilingual-pretraining-and-evaluation-of-very-large-language-models-2027"
    lead = tree.user("lead-a")
    node_create(actor=lead, parent_id=tree.node("prog-a").pk, name=long_name, weight=5, reason="r")
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, live_server.url, "lead-a")
    expect(page.locator("table.tree")).to_contain_text(long_name)
    assert page.evaluate(CUT_CELLS, "table.tree") == []
    table = page.locator("table.tree")
    assert table.evaluate("t => t.scrollWidth <= t.clientWidth"), table.evaluate(
        "t => [t.scrollWidth, t.clientWidth]"
    )
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert not page.locator("table.tree thead").is_visible()
    labels = page.evaluate(
        "() => [...document.querySelectorAll('table.tree tr.kind-project td')]"
        ".filter(td => td.offsetWidth > 0)"
        ".map(td => getComputedStyle(td, '::before').content)"
    )
    assert '"Entitled GPU-h/week demo-h100"' in labels and '"Weight"' in labels
    # a node's card is indented by its depth: a project's right of the root's
    root, project = (
        page.locator(f"tr[data-path='{path}']").bounding_box()["x"]
        for path in ("org", "org/prog-a/a1")
    )
    assert project > root

    page.set_viewport_size({"width": 1440, "height": 900})
    page.reload()
    expect(page.locator("table.tree thead th").first).to_be_visible()
    heights = page.evaluate(
        "() => [...document.querySelectorAll('table.tree thead th')]"
        ".map(th => th.getBoundingClientRect().height)"
    )
    line = page.evaluate(
        "() => parseFloat(getComputedStyle(document.querySelector('table.tree th')).lineHeight)"
        " || 20"
    )
    assert max(heights) <= 3 * line, (heights, line)  # a title and the cluster's line


def test_the_weight_form_fits_a_phone(tree, live_server, page):
    """The edit form's inputs were 20 characters wide by default: on a phone its table
    scrolled inside itself with every weight input cut at the right edge."""
    from playwright.sync_api import expect

    from tests.factories import BudgetNodeFactory

    # a child with the demo's longest unbreakable project name beside a1 and a2
    BudgetNodeFactory(name="pretraining", parent=tree.node("prog-a"), weight=25)
    page.set_viewport_size({"width": 390, "height": 844})
    tree.user("lead-a")
    sign_in(page, live_server.url, "lead-a")
    page.goto(f"{live_server.url}/budgets/nodes/{tree.node('prog-a').pk}/edit/")
    form = page.locator("#edit-form table")
    expect(form.locator("input.weight").first).to_be_visible()

    assert form.evaluate("t => t.scrollWidth <= t.clientWidth"), form.evaluate(
        "t => [t.scrollWidth, t.clientWidth]"
    )


def test_a_refused_save_shows_each_reason_beside_its_field_and_no_console_error(
    tree, live_server, page
):
    """The server answers a refused save 400 with the form as typed and each reason
    beside its field. The page logs no console error of its own: Chromium reports every
    4xx answer in the console itself ("Failed to load resource: ... 400"), whatever a
    page does (a fetch() answered 400 is reported so too), so that one line, for the
    refused form's own answer, is the only one allowed."""
    from playwright.sync_api import expect

    tree.user("lead-a")
    a1 = tree.node("a1")
    edit_url = f"{live_server.url}/budgets/nodes/{tree.node('prog-a').pk}/edit/"
    console: list[tuple[str, str, str]] = []
    page.on("console", lambda m: console.append((m.type, m.text, m.location.get("url", ""))))
    page.on("pageerror", lambda e: console.append(("pageerror", str(e), "")))
    answers: list[int] = []
    page.on(
        "response",
        lambda r: answers.append(r.status) if r.request.is_navigation_request() else None,
    )
    sign_in(page, live_server.url, "lead-a")
    page.goto(edit_url)
    page.wait_for_load_state("load")

    page.fill("input[aria-label='weight of a1']", "forty")
    page.fill("textarea[name=reason]", "Quarterly review")
    page.click("button:has-text('Save change')")
    weight_error = page.locator(f"td:has(#field-weight-{a1.pk}) #error-weight-{a1.pk}")
    expect(weight_error).to_contain_text("not a number")
    expect(page.locator(f"#field-weight-{a1.pk}")).to_have_attribute("aria-invalid", "true")
    expect(page.locator(f"#field-weight-{a1.pk}")).to_have_value("forty")  # as typed
    expect(page.locator(".error-summary")).to_contain_text("Weight of a1: ")

    page.wait_for_load_state("load")
    page.fill("input[aria-label='weight of a1']", "40")
    page.fill("input[name=effective_at]", "2020-01-01T10:00")
    page.click("button:has-text('Save change')")
    time_error = page.locator("label:has(#field-effective_at) #error-effective_at")
    expect(time_error).to_have_text(
        "2020-01-01T10:00:00+00:00 is in the past: give no time for a change that takes "
        "effect now, or a future time."
    )
    expect(page.locator(".error-summary")).to_contain_text("Effective at: 2020-01-01T10:00")
    expect(page.locator(f"#error-weight-{a1.pk}")).to_have_count(0)  # fixed: no longer marked
    page.wait_for_load_state("load")

    assert answers.count(400) == 2, answers  # both refusals were answered 400
    chromiums_own = (
        "error",
        "Failed to load resource: the server responded with a status of 400 (Bad Request)",
        edit_url,
    )
    assert [c for c in console if c[0] in ("error", "pageerror")] == [chromiums_own] * 2
    assert BudgetNode.objects.get(pk=a1.pk).weight == 70 and BudgetEvent.objects.count() == 1
