from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerSplitView

from accounts.views import SignInView
from config import access
from config.schema_view import SchemaView
from ops import views as ops_views

# The API first, under one prefix: most requests are API calls, and Django tries the
# patterns in order (each page's and the admin's patterns before it cost a job read
# ~40 failed matches). No page pattern starts with "api/", so none is shadowed.
# The scheduler's first: its job reads, submissions and queue pages are most of the API's
# requests, and each pattern tried before the one that matches costs (the prefixes are
# disjoint, so the order changes nothing else).
API = [
    path("", include("scheduler.api.urls")),
    path("", include("accounts.api.urls")),
    path("", include("budgets.api.urls")),
    path("", include("ledger.api_urls")),
    path("", include("dashboards.api_urls")),
]

urlpatterns = [
    path("api/v1/", include(API)),
    path("", access.home, name="home"),
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("budgets/", include("budgets.urls")),
    path("", include("scheduler.urls")),
    path("", include("dashboards.urls")),
    path("", include("accounts.urls")),
    path("admin/", admin.site.urls),
    path("healthz", ops_views.healthz, name="healthz"),
    path("healthz/web", ops_views.healthz_web, name="healthz-web"),
    path("favicon.ico", ops_views.favicon, name="favicon"),
    path("metrics", ops_views.metrics, name="metrics"),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    # The split view serves its script as a file, so the CSP needs no inline script.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
]

handler404 = "config.api_errors.handler404"
handler500 = "config.api_errors.handler500"
