"""The Content-Security-Policy header, built once per process where it cannot vary.

django-csp builds the header string from the settings for every response (copying the
configuration into a dataclass, then copying each directive). A response for which no
nonce was asked (every API answer, most pages' redirects) and no view changed the policy
gets the same string each time, so it is built once per settings object and reused;
anything else goes through django-csp itself, nonce included."""

from __future__ import annotations

from typing import Any

from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.middleware import CheckableLazyObject
from csp.middleware import CSPMiddleware as BaseCSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

_PER_VIEW = ("_csp_config", "_csp_update", "_csp_replace")
_PER_VIEW += ("_csp_config_ro", "_csp_update_ro", "_csp_replace_ro")
_BUILT: dict[tuple[int, int], tuple[Any, Any, str, str]] = {}


def fixed_policies() -> tuple[str, str]:
    """(enforced, report-only) header values without a nonce, for the current settings
    (override_settings in tests gives new objects, hence a new entry)."""
    enforced = getattr(settings, "CONTENT_SECURITY_POLICY", None)
    report_only = getattr(settings, "CONTENT_SECURITY_POLICY_REPORT_ONLY", None)
    key = (id(enforced), id(report_only))
    kept = _BUILT.get(key)
    if kept is None or kept[0] is not enforced or kept[1] is not report_only:
        kept = (enforced, report_only, build_policy(), build_policy(report_only=True))
        _BUILT[key] = kept
    return kept[2], kept[3]


def _excluded(request: HttpRequest, policy: Any) -> bool:
    prefixes = (policy or {}).get("EXCLUDE_URL_PREFIXES", None) or ()
    return request.path_info.startswith(tuple(prefixes))


class CSPMiddleware(BaseCSPMiddleware):
    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        per_view = any(getattr(response, name, None) is not None for name in _PER_VIEW)
        if per_view or getattr(request, "_csp_nonce", None) is not None or settings.DEBUG:
            return super().process_response(request, response)
        enforced, report_only = fixed_policies()
        for header, value, exempt, setting in (
            (HEADER, enforced, "_csp_exempt", "CONTENT_SECURITY_POLICY"),
            (
                HEADER_REPORT_ONLY,
                report_only,
                "_csp_exempt_ro",
                "CONTENT_SECURITY_POLICY_REPORT_ONLY",
            ),
        ):
            if not value or header in response or getattr(response, exempt, False) is not False:
                continue
            if not _excluded(request, getattr(settings, setting, None)):
                response[header] = value
        # As django-csp does: a nonce asked for after the header is written is an error.
        request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)
        return response
