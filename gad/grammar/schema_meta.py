"""Checking a schema against the JSON Schema 2020-12 meta-schema, flattened into one document.

The 2020-12 meta-schema (https://json-schema.org/draft/2020-12/schema) is an ``allOf`` of seven
vocabulary meta-schemas tied together by ``$dynamicRef: "#meta"``; ``jsonschema`` resolves those
references dynamically at every subschema, which made its ``check_schema`` ~7x slower than draft-07's
and the largest single cost of :func:`gad.grammar.json_schema.convert` on a typical request.  The
vocabularies define disjoint keywords, all on ``type: [object, boolean]``, so their conjunction is one
schema whose ``properties`` are the union of theirs; with no extension meta-schema in play,
``$dynamicRef: "#meta"`` means this same document, ``$ref: "#"``.  :data:`FLAT_2020_12` is that
document (``$ref`` siblings inlined, since a draft-07 ``$ref`` hides its siblings), validated with
``jsonschema``'s draft-07 machinery and the 2020-12 format checker (``regex`` patterns, URIs).
:func:`check_2020_12` raises where ``Draft202012Validator.check_schema`` raises (tested on
MaskBench and on random schemas).
"""

from __future__ import annotations

from typing import Any

import jsonschema

_S = {"$ref": "#"}  # a subschema: this meta-schema again
_ARRAY = {"type": "array", "minItems": 1, "items": _S}
_NNI = {"type": "integer", "minimum": 0}
_STRINGS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
_URI = {"type": "string", "format": "uri"}
_URI_REF = {"type": "string", "format": "uri-reference"}
_ANCHOR = {"type": "string", "pattern": "^[A-Za-z_][-A-Za-z0-9._]*$"}
_SIMPLE = {"enum": ["array", "boolean", "integer", "null", "number", "object", "string"]}
_MAP = {"type": "object", "additionalProperties": _S}

FLAT_2020_12: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": ["object", "boolean"],
    "properties": {
        # core
        "$id": {"type": "string", "format": "uri-reference", "pattern": "^[^#]*#?$"},
        "$schema": _URI, "$ref": _URI_REF, "$anchor": _ANCHOR, "$dynamicRef": _URI_REF,
        "$dynamicAnchor": _ANCHOR,
        "$vocabulary": {"type": "object", "propertyNames": _URI, "additionalProperties": {"type": "boolean"}},
        "$comment": {"type": "string"}, "$defs": _MAP,
        # applicator
        "prefixItems": _ARRAY, "items": _S, "contains": _S, "additionalProperties": _S, "properties": _MAP,
        "patternProperties": {"type": "object", "additionalProperties": _S, "propertyNames": {"format": "regex"}},
        "dependentSchemas": _MAP, "propertyNames": _S, "if": _S, "then": _S, "else": _S,
        "allOf": _ARRAY, "anyOf": _ARRAY, "oneOf": _ARRAY, "not": _S,
        # unevaluated
        "unevaluatedItems": _S, "unevaluatedProperties": _S,
        # validation
        "type": {"anyOf": [_SIMPLE, {"type": "array", "items": _SIMPLE, "minItems": 1, "uniqueItems": True}]},
        "const": True, "enum": {"type": "array", "items": True},
        "multipleOf": {"type": "number", "exclusiveMinimum": 0},
        "maximum": {"type": "number"}, "exclusiveMaximum": {"type": "number"},
        "minimum": {"type": "number"}, "exclusiveMinimum": {"type": "number"},
        "maxLength": _NNI, "minLength": _NNI, "pattern": {"type": "string", "format": "regex"},
        "maxItems": _NNI, "minItems": _NNI, "uniqueItems": {"type": "boolean"},
        "maxContains": _NNI, "minContains": _NNI, "maxProperties": _NNI, "minProperties": _NNI,
        "required": _STRINGS, "dependentRequired": {"type": "object", "additionalProperties": _STRINGS},
        # meta-data, format-annotation, content
        "title": {"type": "string"}, "description": {"type": "string"}, "default": True,
        "deprecated": {"type": "boolean"}, "readOnly": {"type": "boolean"}, "writeOnly": {"type": "boolean"},
        "examples": {"type": "array", "items": True}, "format": {"type": "string"},
        "contentEncoding": {"type": "string"}, "contentMediaType": {"type": "string"}, "contentSchema": _S,
        # kept from earlier drafts by the 2020-12 meta-schema itself
        "definitions": _MAP,
        "dependencies": {"type": "object", "additionalProperties": {"anyOf": [_S, _STRINGS]}},
        "$recursiveAnchor": _ANCHOR, "$recursiveRef": _URI_REF,
    },
}

_VALIDATOR = jsonschema.Draft7Validator(FLAT_2020_12, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def check_2020_12(schema: Any) -> None:
    """Raise ``jsonschema.exceptions.SchemaError`` (the first error found, as
    ``Draft202012Validator.check_schema`` does) if ``schema`` is not a valid 2020-12 schema."""
    for error in _VALIDATOR.iter_errors(schema):
        raise jsonschema.exceptions.SchemaError.create_from(error)
