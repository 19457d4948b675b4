"""`/healthz` (monitoring: the whole service), `/healthz/web` (load balancers: this web
process) and `/metrics` (Prometheus; operators only)."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from config.middleware import client_address
from ops.checks import CHECKS
from ops.collectors import STATE_COLLECTORS
from ops.health import run_checks
from ops.metrics import exposition


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """503 naming what is stale when the service cannot serve or does not schedule."""
    status, body = run_checks(CHECKS)
    return JsonResponse(body, status=status)


@never_cache
@require_GET
def healthz_web(request: HttpRequest) -> HttpResponse:
    """503 only when this web process cannot serve (database or broker)."""
    status, body = run_checks(CHECKS, web_only=True)
    return JsonResponse(body, status=status)


def metrics_allowed(request: HttpRequest) -> bool:
    """From a network in ALLOT_METRICS_NETWORKS, or with `Authorization: Bearer
    <ALLOT_METRICS_TOKEN>`."""
    token = settings.METRICS_TOKEN
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if token and hmac.compare_digest(header.encode(), f"Bearer {token}".encode()):
        return True
    try:
        address = ipaddress.ip_address(client_address(request))
    except ValueError:
        return False
    return any(address in network for network in settings.METRICS_NETWORKS)


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_allowed(request):
        return HttpResponse(
            "Metrics are for operators: scrape from a network in ALLOT_METRICS_NETWORKS or "
            "send Authorization: Bearer <ALLOT_METRICS_TOKEN>.\n",
            status=403,
            content_type="text/plain",
        )
    return HttpResponse(exposition(STATE_COLLECTORS), content_type=CONTENT_TYPE_LATEST)


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page links: send them to the icon."""
    return HttpResponsePermanentRedirect(staticfiles_storage.url("favicon.svg"))
