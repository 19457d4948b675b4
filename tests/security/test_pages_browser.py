"""A real browser (Debian's chromium through Playwright) on every page: user text is
shown as text, never run, and no page breaks its content security policy."""

import contextlib

from accounts.services import token_create
from budgets import services
from tests.browser import BROWSER_MARKS, LOADED, Requests, settle, sign_in
from tests.factories import ClusterFactory

pytestmark = BROWSER_MARKS

# A planner scenario whose full (CP-SAT) plan is solved in ~0.3 s, not at the page's 2 s
# limit: the planner page's template and scripts do not depend on the scenario.
QUICK_SCENARIO = "mixed-control"
HOSTILE_NAME = '<img src=x onerror="alert(1)">'  # node names may not contain '/'
HOSTILE_REASON = '<script>alert(2)</script> budget "review"'

# Collects CSP violations as the page reports them (the securitypolicyviolation event).
CSP_LISTENER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  e.violatedDirective + ' ' + (e.blockedURI || 'inline') + ' at ' + e.sourceFile + ':' + e.lineNumber));
"""


def visit(page, requests: Requests, url: str) -> list[str]:
    """The violations the page reports once it is loaded and its requests answered."""
    page.goto(url)
    settle(page, requests, LOADED)
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
    requests = Requests(page)
    base = live_server.url
    violations = {"/accounts/login/": visit(page, requests, f"{base}/accounts/login/")}
    sign_in(page, base, "lead-a")

    violations["/budgets/"] = visit(page, requests, f"{base}/budgets/")
    expect(page.locator("table")).to_contain_text(HOSTILE_NAME)

    violations["/budgets/history/"] = visit(page, requests, f"{base}/budgets/history/")
    expect(page.locator("article.event").first).to_contain_text(HOSTILE_REASON)

    edit = f"/budgets/nodes/{tree.node('prog-a').pk}/edit/"
    violations[edit] = visit(page, requests, base + edit)
    page.fill("input[aria-label='weight of a1']", "30")  # htmx preview under the CSP
    expect(page.locator("#preview table.preview")).to_contain_text("org/prog-a/a1")
    violations[edit] += page.evaluate("window.__csp")

    violations["/dashboards/"] = visit(page, requests, f"{base}/dashboards/")
    expect(page.locator("#fairshare table.fairshare")).to_contain_text(HOSTILE_NAME)
    violations["/dashboards/"] += page.evaluate("window.__csp")
    violations["/me/"] = visit(page, requests, f"{base}/me/")
    token_create(user=lead_a, name=HOSTILE_NAME)  # a token's name is the user's own text
    violations["/me/tokens/"] = visit(page, requests, f"{base}/me/tokens/")
    expect(page.locator("table.tokens td.name")).to_contain_text(HOSTILE_NAME)

    # a scenario the page's solver settles in well under its 2 s limit (training-heavy
    # ran it to the limit on both cores): the page and its scripts are the same
    for url in ["/planner/", f"/planner/{QUICK_SCENARIO}/", "/api/docs/"]:
        violations[url] = visit(page, requests, base + url)
    expect(page.locator(".swagger-ui .info")).to_contain_text("Allot API")

    assert dialogs == []
    assert {url: v for url, v in violations.items() if v} == {}
    assert console_csp == []


# Routes of the URL conf that are no page a browser shows (the admin's and the API's
# own routes are walked separately: every registered model's list, and /api/docs/).
NOT_PAGES = {
    "logout": "POST only: signs out",
    "budgets:cancel": "POST only: cancels a scheduled weight change",
    "accounts:token-revoke": "POST only: revokes one of your API tokens",
    "accounts:tokens-revoke-all": "POST only: revokes all your API tokens",
    "healthz": "JSON for the load balancer",
    "healthz-web": "JSON for the load balancer",
    "favicon": "an icon",
    "metrics": "Prometheus text",
}
# Routes reached from a page rather than visited (htmx requests on the page, under the
# page's listener): the name of the route and the page that requests it. (The
# dashboards' sections are in their page; their own URLs, which the tables' pagers
# load, are visited like pages.)
FRAGMENTS = {
    "budgets:preview": "budgets:edit",
    "scheduler:whatif": "budgets:edit",
    "schema": "api-docs",
}


def url_conf_routes() -> dict[str, list[str]]:
    """Every named route outside the admin and the REST API: name -> its arguments."""
    from django.urls import URLResolver, get_resolver

    routes: dict[str, list[str]] = {}

    def walk(patterns, prefix: str, namespace: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                route = prefix + str(p.pattern)
                if route.startswith(("admin/", "api/v1/")):
                    continue
                ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
                walk(p.url_patterns, route, ns)
            elif p.name:
                routes[namespace + p.name] = list(p.pattern.converters)

    walk(get_resolver().url_patterns, "", "")
    return routes


def test_every_page_of_the_url_conf_keeps_to_the_csp(tree, live_server, page, admin_user):
    """The listener on every page of the URL conf (a new page is visited without a
    change here, or the test fails naming it), the job page, the what-if result and
    every model's admin list among them."""
    from django.contrib import admin
    from django.urls import Resolver404, resolve, reverse
    from django.utils import timezone
    from playwright.sync_api import expect

    from scheduler.models import Preview
    from tests.factories import HostFactory
    from tests.support.jobs import seed_jobs
    from tests.support.live import submit_job

    cluster = ClusterFactory(name="gpu", host_count=2)
    for i in range(2):
        HostFactory(cluster=cluster, name=f"node{i:02d}")
    seed_jobs(tree, cluster, n=40)
    job = submit_job(
        cluster=cluster, project=tree.node("a1"), user=tree.user("ann"), at=timezone.now()
    )
    requested: set[str] = set()  # the routes the browser asked for, documents and htmx

    def record(request) -> None:
        path = request.url.removeprefix(live_server.url).split("?")[0]
        if path.startswith("/") and not path.startswith("/static/"):
            with contextlib.suppress(Resolver404):  # not a route of ours
                requested.add(resolve(path).view_name)

    page.on("request", record)
    page.add_init_script(CSP_LISTENER)
    requests = Requests(page)
    base = live_server.url
    violations = {"/accounts/login/": visit(page, requests, f"{base}/accounts/login/")}
    sign_in(page, base, admin_user.username)

    routes = url_conf_routes()
    args = {
        "node_id": tree.node("prog-a").pk,
        "job_id": job.pk,
        "name": QUICK_SCENARIO,
        "cluster_id": cluster.pk,
    }
    later = {"scheduler:whatif-status"}  # needs the preview the edit page starts
    for name, params in routes.items():
        if name in NOT_PAGES or name in FRAGMENTS or name in later or name == "login":
            continue
        url = reverse(name, kwargs={p: args[p] for p in params})
        violations[url] = visit(page, requests, base + url)
        if name == "budgets:edit":
            page.fill("input[aria-label='weight of a2']", "90")
            expect(page.locator("#preview table.preview")).to_contain_text("org/prog-a/a2")
            page.fill("input[name=days]", "3")
            page.click("button:has-text('Preview on past jobs')")
            expect(page.locator("#whatif table.whatif-result")).to_contain_text("org/prog-a/a2")
            violations[url] += page.evaluate("window.__csp")
        elif name == "dashboards:dashboard":
            expect(page.locator("#waits h2")).to_be_visible()
            settle(page, requests, LOADED)
            violations[url] += page.evaluate("window.__csp")
    preview = Preview.objects.latest("pk")
    url = reverse("scheduler:whatif-status", kwargs={"preview_id": preview.pk})
    violations[url] = visit(page, requests, base + url)
    expect(page.locator("table.whatif-result")).to_contain_text("org/prog-a/a2")

    admin_lists = {
        f"admin:{m._meta.app_label}_{m._meta.model_name}_changelist" for m in admin.site._registry
    }
    for name in ["admin:index", *sorted(admin_lists)]:
        url = reverse(name)
        violations[url] = visit(page, requests, base + url)

    assert {url: v for url, v in violations.items() if v} == {}
    # every page and fragment of the URL conf was requested under the listener
    missing = set(routes) - set(NOT_PAGES) - requested
    assert missing == set(), f"not visited: {sorted(missing)}"
    assert admin_lists | {"admin:index"} <= requested
    assert set(FRAGMENTS) <= set(routes), "a fragment that is no longer in the URL conf"
