"""The schema endpoint (`/api/schema/`): drf-spectacular's view, which answers the
contract as OpenAPI 3.1 (config.api_schema.postprocess), or with `?oas=3.0` the same
contract as OpenAPI 3.0.3 (config.oas30). Not in config.api_schema: drf-spectacular's
views module imports DRF's DEFAULT_SCHEMA_CLASS, which is config.api_schema's."""

from __future__ import annotations

from drf_spectacular.views import SpectacularAPIView

from config.errors import ValidationFailed
from config.oas30 import to_oas30

OAS_PARAMETER = "oas"
OAS_VERSIONS = ("3.1", "3.0")  # the first is the default
JSON_MEDIA_TYPE = "application/json"


class SchemaView(SpectacularAPIView):
    """`/api/schema/`: the contract as OpenAPI 3.1, or with `?oas=3.0` the same contract
    as OpenAPI 3.0.3 (config.oas30.to_oas30) for the tools that read only 3.0. Another
    `oas` is a 400 naming it. Errors are JSON (`application/json`) in the one error shape,
    whatever format was asked (drf-spectacular's default renderer is YAML)."""

    def _get_schema_response(self, request):
        version = request.query_params.get(OAS_PARAMETER, OAS_VERSIONS[0])
        if version not in OAS_VERSIONS:
            raise ValidationFailed(
                f"There is no OpenAPI version {version[:20]!r}; choose one of: "
                f"{', '.join(OAS_VERSIONS)}.",
                field=OAS_PARAMETER,
            )
        response = super()._get_schema_response(request)
        if version == "3.0":
            response.data = to_oas30(response.data)
        return response

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        renderer = next(r for r in self.get_renderers() if r.media_type == JSON_MEDIA_TYPE)
        self.request.accepted_renderer = renderer
        self.request.accepted_media_type = renderer.media_type
        return response
