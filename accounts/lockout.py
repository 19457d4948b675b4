"""What a locked-out sign-in gets (django-axes calls this): the API error shape with a
429 and Retry-After for API paths, the sign-in page with a clear message otherwise."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def cooloff_seconds() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds())


def lockout_message() -> str:
    minutes = max(1, round(cooloff_seconds() / 60))
    return (
        f"Too many failed sign-ins. Wait {minutes} minute{'s' if minutes != 1 else ''} "
        "and try again."
    )


def lockout_response(
    request: HttpRequest, original_response=None, credentials=None
) -> HttpResponse:
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(
            {"code": "throttled", "detail": lockout_message()}, status=429
        )
    else:
        response = render(
            request, "registration/login.html", {"lockout_message": lockout_message()}, status=429
        )
    response["Retry-After"] = str(cooloff_seconds())
    return response
