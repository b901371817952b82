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

import re
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

_FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER
_VALIDATOR = jsonschema.Draft7Validator(FLAT_2020_12, format_checker=_FORMATS)


def check_2020_12(schema: Any) -> None:
    """Raise ``jsonschema.exceptions.SchemaError`` (the first error found, as
    ``Draft202012Validator.check_schema`` does) if ``schema`` is not a valid 2020-12 schema.

    A schema :func:`plainly_valid` accepts is taken at once (~10x faster than ``jsonschema`` on
    MaskBench's schemas); every other one goes through ``jsonschema``, which finds the error and
    words it."""
    if plainly_valid(schema):
        return
    for error in _VALIDATOR.iter_errors(schema):
        raise jsonschema.exceptions.SchemaError.create_from(error)


# -- a direct reading of FLAT_2020_12 for the common case ---------------------------------------------
_MAX_DEPTH = 200  # deeper: left to jsonschema


def _is_int(x: Any) -> bool:
    return type(x) is int  # (not bool; an integral float is left to jsonschema)


def _is_num(x: Any) -> bool:
    return type(x) is int or type(x) is float


def _strings(x: Any) -> bool:  # _STRINGS
    return type(x) is list and all(type(v) is str for v in x) and len(set(x)) == len(x)


def _fmt(x: Any, fmt: str) -> bool:
    return type(x) is str and _FORMATS.conforms(x, fmt)


_SIMPLE_NAMES = frozenset(_SIMPLE["enum"])
_ANCHOR_RE = re.compile(_ANCHOR["pattern"])
_STRING_KEYS = frozenset(["$comment", "title", "description", "format", "contentEncoding", "contentMediaType"])
_BOOL_KEYS = frozenset(["uniqueItems", "deprecated", "readOnly", "writeOnly"])
_NUM_KEYS = frozenset(["maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"])
_NNI_KEYS = frozenset(["maxLength", "minLength", "maxItems", "minItems", "maxContains", "minContains",
                       "maxProperties", "minProperties"])
_SCHEMA_KEYS = frozenset(["items", "contains", "additionalProperties", "propertyNames", "if", "then", "else",
                          "not", "unevaluatedItems", "unevaluatedProperties", "contentSchema"])
_MAP_KEYS = frozenset(["$defs", "properties", "dependentSchemas", "definitions"])
_ARRAY_KEYS = frozenset(["prefixItems", "allOf", "anyOf", "oneOf"])
_URI_REF_KEYS = frozenset(["$ref", "$dynamicRef", "$recursiveRef"])
_ANCHOR_KEYS = frozenset(["$anchor", "$dynamicAnchor", "$recursiveAnchor"])


def plainly_valid(schema: Any, depth: int = 0) -> bool:
    """True only if ``schema`` is valid under :data:`FLAT_2020_12` (so under
    ``Draft202012Validator.check_schema``), read keyword by keyword with the same format checker;
    False where it is invalid **or** where this reading is unsure (an integral float as a count, a
    tuple as an array, nesting over 200 levels): :func:`check_2020_12` then asks ``jsonschema``
    (tested against it on MaskBench and on random schemas)."""
    if type(schema) is bool:
        return True
    if type(schema) is not dict or depth > _MAX_DEPTH:
        return False
    d = depth + 1
    for k, v in schema.items():
        if k in _SCHEMA_KEYS:
            if not plainly_valid(v, d):
                return False
        elif k in _MAP_KEYS:
            if type(v) is not dict or not all(plainly_valid(x, d) for x in v.values()):
                return False
        elif k in _ARRAY_KEYS:
            if type(v) is not list or not v or not all(plainly_valid(x, d) for x in v):
                return False
        elif k in _STRING_KEYS:
            if type(v) is not str:
                return False
        elif k in _NNI_KEYS:
            if not _is_int(v) or v < 0:
                return False
        elif k in _NUM_KEYS:
            if not _is_num(v):
                return False
        elif k in _BOOL_KEYS:
            if type(v) is not bool:
                return False
        elif k == "type":
            if type(v) is str:
                if v not in _SIMPLE_NAMES:
                    return False
            elif type(v) is not list or not v or not all(type(x) is str and x in _SIMPLE_NAMES for x in v) \
                    or len(set(v)) != len(v):
                return False
        elif k == "required":
            if not _strings(v):
                return False
        elif k in ("enum", "examples"):
            if type(v) is not list:
                return False
        elif k == "pattern":
            if not _fmt(v, "regex"):
                return False
        elif k == "patternProperties":
            if type(v) is not dict or not all(_fmt(p, "regex") and plainly_valid(x, d) for p, x in v.items()):
                return False
        elif k in _URI_REF_KEYS:
            if not _fmt(v, "uri-reference"):
                return False
        elif k in _ANCHOR_KEYS:
            if type(v) is not str or _ANCHOR_RE.search(v) is None:
                return False
        elif k == "$schema":
            if not _fmt(v, "uri"):
                return False
        elif k == "$id":
            if not _fmt(v, "uri-reference") or "#" in v[:-1]:
                return False
        elif k == "multipleOf":
            if not _is_num(v) or v <= 0:
                return False
        elif k == "dependentRequired":
            if type(v) is not dict or not all(_strings(x) for x in v.values()):
                return False
        elif k == "dependencies":
            if type(v) is not dict or not all(_strings(x) if type(x) is list else plainly_valid(x, d)
                                              for x in v.values()):
                return False
        elif k == "$vocabulary":
            if type(v) is not dict or not all(_fmt(u, "uri") and type(x) is bool for u, x in v.items()):
                return False
        # const, default and every other keyword: anything
    return True
