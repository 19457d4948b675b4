"""Content negotiation: the API answers JSON only, and says so.

DRF reads `?format=` (URL_FORMAT_OVERRIDE) and the Accept header. Its default answers an
unknown `format` with a bare 404 ("Not found.", as if the object did not exist) and an
Accept it cannot satisfy with a 406 naming nothing. Here both are a 406 of the error
shape that names the input (`format` or `Accept`) and the formats the operation offers;
an empty `format` is refused too (as an empty filter is, never read as "any").
"""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.negotiation import DefaultContentNegotiation

from config.errors import NotAcceptable

FORMAT_PARAMETER = "format"


def _offered(renderers) -> str:
    return " or ".join(f"format={name}" for name in dict.fromkeys(r.format for r in renderers))


def _json_first(renderers) -> tuple:
    """The renderer (and media type) an error is answered with: JSON where the operation
    offers it (DRF would take the first, the schema endpoint's YAML)."""
    renderer = next((r for r in renderers if r.format == "json"), renderers[0])
    return renderer, renderer.media_type


class StrictContentNegotiation(DefaultContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        if getattr(request, "_allot_refused", False):  # DRF's retry to render the 406
            return _json_first(renderers)
        try:
            return self._select(request, renderers, format_suffix)
        except NotAcceptable:
            request._allot_refused = True
            raise

    def _select(self, request, renderers, format_suffix):
        asked = format_suffix or request.query_params.get(FORMAT_PARAMETER)  # "" refused too
        if asked is None and len(renderers) == 1 and ";" not in renderers[0].media_type:
            # No Accept, `*/*` or exactly the one media type offered (what clients send):
            # DRF's answer is that renderer and its media type (tested); its parsing of
            # the header and the media types costs more than the rest of negotiating.
            accept = request.META.get("HTTP_ACCEPT", "*/*")
            if accept == "*/*" or accept == renderers[0].media_type:
                return renderers[0], renderers[0].media_type
        if asked is not None and not any(r.format == asked for r in renderers):
            raise NotAcceptable(
                f"There is no format {asked[:50]!r}; this operation answers "
                f"{_offered(renderers)} (or leave `format` out).",
                field=FORMAT_PARAMETER,
            )
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except exceptions.NotAcceptable as exc:  # no renderer matches the Accept header
            media = ", ".join(dict.fromkeys(r.media_type for r in renderers))
            raise NotAcceptable(
                f"The Accept header asks for none of what this operation answers ({media}).",
                field="Accept",
            ) from exc
