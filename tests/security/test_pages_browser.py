"""A real browser (Debian's chromium through Playwright) on every page: user text is
shown as text, never run, and no page breaks its content security policy."""

from budgets import services
from tests.browser import BROWSER_MARKS, sign_in
from tests.factories import ClusterFactory

pytestmark = BROWSER_MARKS

HOSTILE_NAME = '<img src=x onerror="alert(1)">'  # node names may not contain '/'
HOSTILE_REASON = '<script>alert(2)</script> budget "review"'

# Collects CSP violations as the page reports them (the securitypolicyviolation event).
CSP_LISTENER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  e.violatedDirective + ' ' + (e.blockedURI || 'inline') + ' at ' + e.sourceFile + ':' + e.lineNumber));
"""


def visit(page, url: str) -> list[str]:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    return page.evaluate("window.__csp")


def test_user_text_is_escaped_and_every_page_keeps_to_the_csp(tree, live_server, page):
    from playwright.sync_api import expect

    ClusterFactory(name="h100")
    lead_a = tree.user("lead-a")
    services.node_create(
        actor=lead_a, parent_id=tree.node("prog-a").pk, name=HOSTILE_NAME, reason=HOSTILE_REASON
    )
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    console_csp: list[str] = []
    page.on(
        "console",
        lambda m: console_csp.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.add_init_script(CSP_LISTENER)
    base = live_server.url
    violations = {"/accounts/login/": visit(page, f"{base}/accounts/login/")}
    sign_in(page, base, "lead-a")

    violations["/budgets/"] = visit(page, f"{base}/budgets/")
    expect(page.locator("table")).to_contain_text(HOSTILE_NAME)

    violations["/budgets/history/"] = visit(page, f"{base}/budgets/history/")
    expect(page.locator("article.event").first).to_contain_text(HOSTILE_REASON)

    edit = f"/budgets/nodes/{tree.node('prog-a').pk}/edit/"
    violations[edit] = visit(page, base + edit)
    page.fill("input[aria-label='weight of a1']", "30")  # htmx preview under the CSP
    expect(page.locator("#preview table.preview")).to_contain_text("org/prog-a/a1")
    violations[edit] += page.evaluate("window.__csp")

    violations["/dashboards/"] = visit(page, f"{base}/dashboards/")
    expect(page.locator("#fairshare table.fairshare")).to_contain_text(HOSTILE_NAME)
    violations["/dashboards/"] += page.evaluate("window.__csp")
    violations["/me/"] = visit(page, f"{base}/me/")

    for url in ["/planner/", "/planner/training-heavy/", "/api/docs/"]:
        violations[url] = visit(page, base + url)
    expect(page.locator(".swagger-ui .info")).to_contain_text("Allot API")

    assert dialogs == []
    assert {url: v for url, v in violations.items() if v} == {}
    assert console_csp == []
