"""Request guards that apply to every endpoint and page, present and future."""

from __future__ import annotations

import contextlib
import re
import uuid

import pghistory
import pghistory.middleware
from django.conf import settings
from django.contrib.messages.middleware import MessageMiddleware
from django.core.handlers.asgi import ASGIRequest
from django.core.signals import request_finished
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve

from budgets import permissions
from config.logs import REQUEST_ID
from config.proxy import FORWARDED_HEADERS, forwarded_client, in_networks

API_PREFIX = "/api/"

# A request id a trusted proxy passes on (X-Request-ID) is kept when it looks like one.
REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{8,128}$")


def client_address(request: HttpRequest) -> str:
    """The client's address, read one way everywhere (sign-in lockout, /metrics): see
    config/proxy.py. ALLOT_TRUSTED_PROXIES and ALLOT_PROXY_NETWORKS configure it."""
    return forwarded_client(
        request.META.get("REMOTE_ADDR", ""),
        request.META.get("HTTP_X_FORWARDED_FOR", ""),
        proxies=settings.ALLOT_TRUSTED_PROXIES,
        networks=settings.ALLOT_PROXY_NETWORKS,
    )


class ForwardedHeadersMiddleware:
    """Drop X-Forwarded-* (and Forwarded, X-Real-IP) from requests that did not come
    through a trusted proxy, before anything reads them: Django's
    SECURE_PROXY_SSL_HEADER would otherwise believe a client that says it used HTTPS."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        trusted = settings.ALLOT_TRUSTED_PROXIES > 0 and in_networks(
            request.META.get("REMOTE_ADDR", ""), settings.ALLOT_PROXY_NETWORKS
        )
        if not trusted:
            for header in FORWARDED_HEADERS:
                request.META.pop(header, None)
        return self.get_response(request)


class RejectNulBytesMiddleware:
    """Refuse a query string or form field containing NUL with a 400 naming it.

    PostgreSQL text cannot hold NUL, so such input would otherwise reach the database
    and fail there as a 500. JSON bodies are checked by the serializers' fields."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        field = self._nul_field(request)
        if field is not None:
            detail = f"{field}: NUL characters are not allowed."
            if request.path.startswith(API_PREFIX):
                return JsonResponse(
                    {"code": "invalid", "detail": detail, "field": field}, status=400
                )
            return HttpResponse(detail, status=400, content_type="text/plain; charset=utf-8")
        return self.get_response(request)

    @staticmethod
    def _nul_field(request: HttpRequest) -> str | None:
        sources = [request.GET]
        # The API reads JSON only (a form there gets 415): reading request.POST here
        # would consume the body and hide the form from that check.
        is_form = request.content_type in (
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        )
        if is_form and not request.path.startswith(API_PREFIX):
            sources.append(request.POST)
        for params in sources:
            for key, values in params.lists():
                if "\x00" in key or any("\x00" in v for v in values):
                    return key.replace("\x00", "\\x00")
        return None


class RequestIdMiddleware:
    """Give every request an id: the trusted proxy's X-Request-ID when it sent a
    well-formed one, else a new one. Log lines of the request carry it (config/logs.py)
    and the response returns it in X-Request-ID."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.META.get("HTTP_X_REQUEST_ID", "")
        request_id = given if REQUEST_ID_RE.match(given) else uuid.uuid4().hex
        request.request_id = request_id
        # Kept until the response is finished (request_finished clears it), so that
        # Django's own line about a 4xx/5xx, written after the middleware, carries it.
        REQUEST_ID.set(request_id)
        response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response


@receiver(request_finished)
def _forget_request_id(**kwargs) -> None:
    REQUEST_ID.set("")


class ApiJsonNotFoundMiddleware:
    """A 404 under /api/ is the API's error object, whatever produced it.

    The URL resolver's 404 for a path no endpoint matches (`/api/v1/jobs/null/`) is
    Django's HTML page when DEBUG is on (its technical page bypasses `handler404`);
    clients and the OpenAPI contract expect `{"code": "not_found", "detail"}` there
    too. Placed above CommonMiddleware, so a path that only lacks its trailing slash
    is still redirected first."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code == 404
            and request.path.startswith(API_PREFIX)
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            return api_not_found(request)
        return response


def api_not_found(request: HttpRequest) -> JsonResponse:
    """The error object for a path under /api/ that names no endpoint (or, from a view
    that answered with a page, no object)."""
    try:
        resolve(request.path_info)
    except Resolver404:
        detail = f"There is no API endpoint at {request.path}."
    else:
        detail = "Not found."
    return JsonResponse({"code": "not_found", "detail": detail}, status=404)


class PageMessageMiddleware(MessageMiddleware):
    """django.contrib.messages' for pages: nothing under /api/ adds or shows a message, so
    an API request builds no message storage (its response stored nothing either: the
    storage writes back only what was read or added)."""

    def process_request(self, request: HttpRequest) -> None:
        if not request.path.startswith(API_PREFIX):
            super().process_request(request)


class RolesReadOnceMiddleware:
    """A read-only request (GET, HEAD, OPTIONS) reads each user's roles once, however
    many permission questions it asks (`budgets.permissions.roles_read_once`); a write
    reads them afresh at each question, so what it changes is seen at once."""

    SAFE = frozenset({"GET", "HEAD", "OPTIONS"})

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in self.SAFE:
            return self.get_response(request)
        with permissions.roles_read_once():
            return self.get_response(request)


def writes_audited(view) -> bool:
    """Whether a view may change a model pghistory tracks (the budget tree, memberships,
    the users' authority flags): every view but one whose class says
    `writes_audited = False`."""
    return getattr(getattr(view, "view_class", None), "writes_audited", True)


class HistoryMiddleware(pghistory.middleware.HistoryMiddleware):
    """pghistory's: a write's audited changes carry the request's user and URL as their
    context. The context is entered once the view is known, and not for a view that
    changes no tracked model (`writes_audited`: job submission), whose statements would
    otherwise each be prefixed with the context's `set_config` for nothing."""

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in pghistory.config.middleware_methods():
            return self.get_response(request)
        with contextlib.ExitStack() as history:
            request._history = history  # type: ignore[attr-defined]
            return self.get_response(request)

    def process_view(self, request: HttpRequest, view, view_args, view_kwargs) -> None:
        """Enter the context for a write whose view may change a tracked model."""
        history = request.__dict__.pop("_history", None)
        if history is None or not writes_audited(view):
            return
        history.enter_context(pghistory.context(**self.get_context(request)))
        # pghistory's request classes: a user set later (DRF's authentication) joins it
        request.__class__ = (
            pghistory.middleware.ASGIRequest
            if isinstance(request, ASGIRequest)
            else pghistory.middleware.WSGIRequest
        )
