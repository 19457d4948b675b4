"""The base of every API view (`ApiView`): each operation refuses a query parameter it
does not take, the same way everywhere.

The parameters an operation takes are the ones its schema documents (`@extend_schema`'s
`parameters`: a filter serializer's fields, the page's `limit` and `offset`), read from
the same declaration (`config.api_schema.documented_query_parameters`), so what is
accepted and what is documented cannot drift apart; an operation that documents none
takes none. Anything else (a typo such as `?stat=pending`, which once listed every job,
or `DELETE tokens/?keep_curent=true`, which would have revoked the token in use) is a 400
naming each unknown parameter and the ones the operation accepts
(`config.query.refuse_unknown_parameters`), after authentication and permission checks
and before the operation does anything. `format` is accepted everywhere (content
negotiation reads it)."""

from __future__ import annotations

from rest_framework.views import APIView

from config.api_schema import documented_query_parameters
from config.query import refuse_unknown_parameters

# The methods of the schema's operations; any other (TRACE, OPTIONS) is answered as
# before, whatever its query (a method the view does not serve: 405, not this 400)
OPERATION_METHODS = frozenset({"get", "post", "put", "patch", "delete"})


class ApiView(APIView):
    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        method = request.method.lower()
        if request.query_params and method in OPERATION_METHODS and hasattr(self, method):
            refuse_unknown_parameters(
                request.query_params, documented_query_parameters(self, request.method)
            )
