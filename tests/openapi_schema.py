"""The published OpenAPI document's schemas as JSON Schema validators, to check real bodies against it."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from app.openapi import document


def openapi30_to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema objects as JSON Schema 2020-12: `nullable: true` becomes a `null` alternative."""
    if isinstance(node, list):
        return [openapi30_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: openapi30_to_json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is True:
        if isinstance(converted.get("type"), str):
            converted["type"] = [converted["type"], "null"]
            if "enum" in converted:
                converted["enum"] = [*converted["enum"], None]
        else:
            converted = {"anyOf": [{"type": "null"}, converted]}
    return converted


_OPENAPI_URI = "urn:attribution-adapter:openapi"
_COMPONENTS = openapi30_to_json_schema(document()["components"]["schemas"])
_REGISTRY = Registry().with_resource(
    _OPENAPI_URI, DRAFT202012.create_resource({"components": {"schemas": _COMPONENTS}})
)


def openapi_validator(component: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": f"{_OPENAPI_URI}#/components/schemas/{component}"},
        registry=_REGISTRY,
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )
