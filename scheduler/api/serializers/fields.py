"""The reference fields every resource's inputs share: an id or a name, bounded so that
it fits a query string."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

MAX_ID = 2**63 - 1  # PostgreSQL bigint


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1, "maximum": MAX_ID},
            {"type": "string", "minLength": 1, "maxLength": 1000},
        ]
    }
)
class IdOrNameField(serializers.JSONField):
    """An id (integer) or a name/path (string); the service resolves and checks it."""


CLUSTER_NAME_MAX_LENGTH = 100  # Cluster.name


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1, "maximum": MAX_ID},
            {"type": "string", "minLength": 1, "maxLength": CLUSTER_NAME_MAX_LENGTH},
        ]
    }
)
class ClusterRefField(IdOrNameField):
    """A cluster's id or name in a query string: bounded by the longest name, so that even
    percent-encoded (12 bytes a character) it fits gunicorn's 8 KiB request line."""

    default_error_messages = {
        "blank": "Give an id or a name; this is empty.",
        "too_long": "A cluster name has at most {max_length} characters; this has {length}.",
    }

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value == "":  # the schema's minLength 1: an empty filter is refused, not ignored
            self.fail("blank")
        if isinstance(value, str) and len(value) > CLUSTER_NAME_MAX_LENGTH:
            self.fail("too_long", max_length=CLUSTER_NAME_MAX_LENGTH, length=len(value))
        return value


PROJECT_REF_MAX_LENGTH = 400  # a path, even percent-encoded, fits the 8 KiB request line


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1, "maximum": MAX_ID},
            {"type": "string", "minLength": 1, "maxLength": PROJECT_REF_MAX_LENGTH},
        ]
    }
)
class ProjectRefField(IdOrNameField):
    """A budget node's id or slug path (`org/program/project`) in a query string."""

    default_error_messages = {
        "blank": "Give an id or a path; this is empty.",
        "too_long": "A path has at most {max_length} characters; this has {length}.",
    }

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value == "":
            self.fail("blank")
        if isinstance(value, str) and len(value) > PROJECT_REF_MAX_LENGTH:
            self.fail("too_long", max_length=PROJECT_REF_MAX_LENGTH, length=len(value))
        return value
