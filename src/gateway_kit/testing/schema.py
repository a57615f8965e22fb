"""goose's own OpenAPI document (goosed 1.41.0) and JSON Schema validators built from it.

The document is OpenAPI 3.0, whose schema objects are JSON Schema draft 4 plus `nullable`.
`nullable: true` is rewritten into draft 4 (`null` added to the allowed types) before
validating; `discriminator` only names the tag the `oneOf` branches already pin with `enum`.
None of goose's event schemas forbids additional properties, so an event validates with the
`chat_request_id`/`request_id` fields goose adds to it.

`jsonschema` is a test dependency, imported only when a validator is asked for.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
from importlib import resources
from typing import Any, Protocol

from gateway_kit.types import JSONObject

OPENAPI_RESOURCE = "goose-openapi-1.41.0.json"
OPENAPI_URI = "urn:goose:openapi:1.41.0"


class SchemaValidator(Protocol):
    def validate(self, instance: Any) -> None: ...

    def is_valid(self, instance: Any) -> bool: ...

    def iter_errors(self, instance: Any) -> Any: ...


@functools.cache
def _document() -> JSONObject:
    text = resources.files(__package__).joinpath(OPENAPI_RESOURCE).read_text(encoding="utf-8")
    document: JSONObject = json.loads(text)
    return document


def goose_openapi() -> JSONObject:
    """A copy of goose's OpenAPI document, as shipped in this package."""
    return copy.deepcopy(_document())


def _without_nullable(node: Any) -> Any:
    """Rewrite OpenAPI 3.0 `nullable: true` into plain JSON Schema, recursively."""
    if isinstance(node, list):
        return [_without_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    schema = {key: _without_nullable(value) for key, value in node.items()}
    if schema.pop("nullable", None) is not True:
        return schema
    if "type" in schema:
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
        return schema
    if any(key in schema for key in ("$ref", "allOf", "anyOf", "oneOf", "enum")):
        return {"anyOf": [{"type": "null"}, schema]}
    return schema  # no type constraint: null is already allowed


@functools.cache
def _registry() -> Any:
    referencing = importlib.import_module("referencing.jsonschema")
    document = _document()
    schemas = _without_nullable(document["components"]["schemas"])
    resource = referencing.DRAFT4.create_resource({**document, "components": {"schemas": schemas}})
    return importlib.import_module("referencing").Registry().with_resource(OPENAPI_URI, resource)


def goose_validator(schema_name: str = "MessageEvent") -> SchemaValidator:
    """A draft 4 validator for one of goose's `components/schemas`, `$ref`s resolved."""
    if schema_name not in _document()["components"]["schemas"]:
        raise KeyError(f"goose's OpenAPI document has no schema {schema_name!r}")
    jsonschema = importlib.import_module("jsonschema")
    reference = {"$ref": f"{OPENAPI_URI}#/components/schemas/{schema_name}"}
    validator: SchemaValidator = jsonschema.Draft4Validator(reference, registry=_registry())
    return validator
