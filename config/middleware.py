"""Request guards that apply to every endpoint and page, present and future."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse


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
            if request.path.startswith("/api/"):
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
        if is_form and not request.path.startswith("/api/"):
            sources.append(request.POST)
        for params in sources:
            for key, values in params.lists():
                if "\x00" in key or any("\x00" in v for v in values):
                    return key.replace("\x00", "\\x00")
        return None
