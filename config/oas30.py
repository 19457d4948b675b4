"""The contract as OpenAPI 3.0.3, for the tools that read only 3.0 (client generators,
gateways): converted from the one OpenAPI 3.1 document drf-spectacular makes
(config.api_schema.postprocess), never generated a second way. `/api/schema/?oas=3.0`
serves it (config.schema_view.SchemaView).

What 3.1 says that 3.0 cannot, and what it becomes here:

- `type: [X, "null"]` -> `type: X, nullable: true` (an enum keeps its `null`, as 3.0
  needs for null to pass it; an enum without `null` refused null: not nullable);
  `type: [X]` -> `type: X`;
- `type: "null"` (alone, or a branch of `oneOf`/`anyOf`: a nullable reference such as
  `oneOf: [{$ref}, {type: "null"}]`, a nullable scalar union) ->
  `{type: object, nullable: true, enum: [null]}`, which a strict 3.0 validator accepts
  for null and refuses for any value (the other branches take the values). drf-spectacular's
  own 3.0 form, `allOf: [{$ref}]` beside `nullable: true`, refuses null there: `nullable`
  acts only beside `type`, and the referenced object refuses null in `allOf`;
- `const: v` -> `enum: [v]`; `examples: [...]` -> `example` (the first); a numeric
  `exclusiveMinimum`/`exclusiveMaximum` -> `minimum`/`maximum` with the boolean;
  `contentEncoding: base64` -> `format: byte`, `contentMediaType:
  application/octet-stream` -> `format: binary` (the reverse of the 3.1 migration; any
  other content keyword, an annotation that validates nothing, is dropped);
- `$ref` beside other keywords (3.0 ignores them) -> `allOf: [{$ref}]` beside them;
- `$schema`, `$id`, `$comment`, `jsonSchemaDialect` and `webhooks` (3.0 has none) are
  dropped; a license's `identifier` becomes its SPDX `url`, an info `summary` the first
  paragraph of its `description`.

Anything else of 3.1 stays as it is, and the 3.0 document then fails validation:
tests/api/test_oas30.py walks the live one.
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]

OAS30_VERSION = "3.0.3"
DROPPED_KEYWORDS = ("$schema", "$id", "$comment")
SUBSCHEMA = ("items", "not", "additionalProperties")
SUBSCHEMA_LISTS = ("allOf", "oneOf", "anyOf")


def to_oas30(document: JSON) -> JSON:
    """The OpenAPI 3.0.3 form of an OpenAPI 3.1 `document` (which is left unchanged)."""
    out = {
        key: _part(value)
        for key, value in document.items()
        if key not in ("jsonSchemaDialect", "webhooks")
    }
    out["openapi"] = OAS30_VERSION
    if "info" in document:
        out["info"] = _info(document["info"])
    return out


def _info(info: JSON) -> JSON:
    info = dict(info)
    if "summary" in info:
        summary = info.pop("summary")
        info["description"] = "\n\n".join(filter(None, [summary, info.get("description")]))
    license_ = dict(info.get("license") or {})
    if "identifier" in license_:
        identifier = license_.pop("identifier")
        license_.setdefault("url", f"https://spdx.org/licenses/{identifier}.html")
        info["license"] = license_
    return info


def _part(node: Any) -> Any:
    """A part of the document outside schemas: its `schema` and `components.schemas`
    values are Schema Objects; examples and extensions are data, kept as they are."""
    if isinstance(node, list):
        return [_part(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "schema" and isinstance(value, dict):
            out[key] = schema_to_oas30(value)
        elif key == "schemas" and isinstance(value, dict):
            out[key] = {name: schema_to_oas30(schema) for name, schema in value.items()}
        elif key in ("example", "examples") or key.startswith("x-"):
            out[key] = value
        else:
            out[key] = _part(value)
    return out


def schema_to_oas30(schema: Any) -> Any:
    """One Schema Object (and its subschemas) in OpenAPI 3.0's dialect (a boolean schema
    of 3.1, which 3.0 has only as `additionalProperties`, stays as it is)."""
    if not isinstance(schema, dict):
        return schema
    out = {key: value for key, value in schema.items() if key not in DROPPED_KEYWORDS}
    for key in SUBSCHEMA:
        if key in out:
            out[key] = schema_to_oas30(out[key])
    for key in SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [schema_to_oas30(branch) for branch in out[key]]
    if isinstance(out.get("properties"), dict):
        out["properties"] = {name: schema_to_oas30(s) for name, s in out["properties"].items()}
    out = _type(out)
    out = _keywords(out)
    if "$ref" in out and len(out) > 1:
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out


def _type(schema: JSON) -> JSON:
    """A type list or the null type as 3.0's single `type` and `nullable`."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "null" not in kinds and not isinstance(kind, list):
        return schema
    others = [k for k in kinds if k != "null"]
    if not others:
        return {**schema, "type": "object", "nullable": True, "enum": [None]}
    if len(others) > 1:
        return schema  # no single 3.0 type: left for validation to refuse
    out = {**schema, "type": others[0]}
    if "null" in kinds and None in schema.get("enum", [None]):
        out["nullable"] = True  # (an enum without null refuses null: not nullable)
    return out


def _keywords(schema: JSON) -> JSON:
    """`const`, `examples`, numeric exclusive bounds and content keywords in 3.0's words."""
    out = dict(schema)
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if isinstance(out.get("examples"), list):
        examples = out.pop("examples")
        if examples:
            out.setdefault("example", examples[0])
    for exclusive, bound, stricter in (
        ("exclusiveMinimum", "minimum", max),
        ("exclusiveMaximum", "maximum", min),
    ):
        value = out.get(exclusive)
        if isinstance(value, int | float) and not isinstance(value, bool):
            if bound in out and stricter(out[bound], value) == out[bound] != value:
                del out[exclusive]  # the inclusive bound is the stricter one
            else:
                out[bound], out[exclusive] = value, True
    encoding, media = out.pop("contentEncoding", None), out.pop("contentMediaType", None)
    if encoding == "base64":
        out.setdefault("format", "byte")
    elif media == "application/octet-stream":
        out.setdefault("format", "binary")
    return out
