"""`/healthz` (load balancers) and `/metrics` (Prometheus; operators only)."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from ops.health import run_checks
from ops.metrics import exposition


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    status, body = run_checks()
    return JsonResponse(body, status=status)


def _client_ip(request: HttpRequest) -> str:
    raw = request.META.get(settings.CLIENT_IP_HEADER) or request.META.get("REMOTE_ADDR", "")
    return raw.split(",")[0].strip()


def metrics_allowed(request: HttpRequest) -> bool:
    """From a network in ALLOT_METRICS_NETWORKS, or with `Authorization: Bearer
    <ALLOT_METRICS_TOKEN>`."""
    token = settings.METRICS_TOKEN
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if token and hmac.compare_digest(header.encode(), f"Bearer {token}".encode()):
        return True
    try:
        address = ipaddress.ip_address(_client_ip(request))
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
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
