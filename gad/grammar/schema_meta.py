"""Checking a schema against its draft's meta-schema: drafts 4, 6, 7, and 2020-12 flattened into one document.

The 2020-12 meta-schema (https://json-schema.org/draft/2020-12/schema) is an ``allOf`` of seven
vocabulary meta-schemas tied together by ``$dynamicRef: "#meta"``; ``jsonschema`` resolves those
references dynamically at every subschema, which made its ``check_schema`` ~7x slower than draft-07's
and the largest single cost of :func:`gad.grammar.json_schema.convert` on a typical request.  The
vocabularies define disjoint keywords, all on ``type: [object, boolean]``, so their conjunction is one
schema whose ``properties`` are the union of theirs; with no extension meta-schema in play,
``$dynamicRef: "#meta"`` means this same document, ``$ref: "#"``.  :data:`FLAT_2020_12` is that
document (``$ref`` siblings inlined, since a draft-07 ``$ref`` hides its siblings), validated with
``jsonschema``'s draft-07 machinery and the 2020-12 format checker (``regex`` patterns, URIs).

:func:`check_schema` raises where ``cls.check_schema`` raises (2020-12: where the flattened document
refuses; tested on MaskBench and on random schemas), but reads most schemas without ``jsonschema``:
:class:`_MetaReading` compiles each meta-schema once into nested checks that only ever pass what
``jsonschema`` passes (:func:`plainly_valid`); the rest go through ``jsonschema``, which words the error.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable
from typing import Any, cast

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


def check_schema(cls: type, schema: Any) -> None:
    """``cls.check_schema(schema)`` for a ``jsonschema`` validator class: raise
    ``jsonschema.exceptions.SchemaError`` (the first error found) if ``schema`` is not a valid schema
    of that draft.  2020-12 is checked against :data:`FLAT_2020_12`.

    A schema that :func:`plainly_valid` accepts is taken at once (1,413 of MaskBench's 1,414 schemas:
    median 0.06-0.15 ms per draft against 1.2-4.8 ms for ``jsonschema``'s own check, by
    ``benchmarks/bench_schema_check.py``); every other one goes through ``jsonschema``, which finds the
    error and words it."""
    if plainly_valid(cls, schema):
        return
    if cls is jsonschema.Draft202012Validator:
        for error in _VALIDATOR.iter_errors(schema):
            raise jsonschema.exceptions.SchemaError.create_from(error)
        return
    cls.check_schema(schema)  # type: ignore[attr-defined]


def plainly_valid(cls: type, schema: Any) -> bool:
    """True only if ``schema`` is valid under the meta-schema of validator class ``cls`` (drafts 4, 6,
    7 and 2020-12, the last as :data:`FLAT_2020_12`), read by :class:`_MetaReading`; False where it is
    invalid **or** where the reading is unsure (nesting over 48 levels, a format check that raises),
    and for every other draft."""
    reading = _READINGS.get(cls)
    if reading is None:
        if cls not in _READABLE:
            return False
        if cls is jsonschema.Draft202012Validator:  # (the flattened document, with _VALIDATOR's formats)
            reading = _MetaReading(FLAT_2020_12, _VALIDATOR.format_checker)
        else:  # (cls.check_schema's own meta-schema and formats)
            meta = cls.META_SCHEMA  # type: ignore[attr-defined]
            reading = _MetaReading(meta, jsonschema.validators.validator_for(meta, default=cls).FORMAT_CHECKER)
        _READINGS[cls] = reading
    try:
        return reading.root(schema, 0)
    except Exception:  # noqa: BLE001 - unsure: a format check's own error (re's OverflowError), a deep schema's RecursionError
        return False


_READABLE = (jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator,
             jsonschema.Draft202012Validator)
_READINGS: dict[type, _MetaReading] = {}

_Check = Callable[[Any, int], bool]
_MAX_DEPTH = 48  # deeper: left to jsonschema (each level takes several Python frames here)
_TYPES: dict[str, Callable[[Any], bool]] = {
    # jsonschema's draft types, narrowed where drafts differ or the reading would guess: an integral
    # float is an integer from draft 6 on, a tuple is no array (both left to jsonschema)
    "object": lambda x: type(x) is dict, "array": lambda x: type(x) is list,
    "string": lambda x: type(x) is str, "boolean": lambda x: type(x) is bool, "null": lambda x: x is None,
    "integer": lambda x: type(x) is int, "number": lambda x: type(x) is int or type(x) is float,
}
_ANNOTATIONS = frozenset(["default", "title", "description", "$schema", "id", "$id", "definitions", "$comment"])


def _distinct(items: list) -> bool:
    """True only if the items are pairwise unequal to ``jsonschema`` (Python's equality, where
    ``1 == 1.0 == True``, is coarser: distinct here is distinct there); containers and NaN: unsure."""
    for v in items:
        if not (v is None or type(v) in (str, int, bool) or (type(v) is float and v == v)):
            return False
    return len(set(items)) == len(items)


class _MetaReading:
    """A meta-schema compiled into nested checks (closures) for the keywords the meta-schemas use
    (``$ref`` to ``#`` or ``#/definitions/…``, ``type``, ``enum`` of strings, ``properties``,
    ``additionalProperties``, ``propertyNames``, ``items``, ``minItems``, ``uniqueItems``, ``minimum``
    and ``exclusiveMinimum``, ``pattern``, ``format``, ``allOf``, ``anyOf``, ``dependencies``), each
    one only ever saying True of an instance ``jsonschema`` finds valid.  Any other keyword raises
    ``NotImplementedError`` when the meta-schema is compiled.  ``root(schema, depth)`` reads a schema."""

    def __init__(self, meta: dict, formats: Any) -> None:
        self.meta, self.formats = meta, formats
        self.defs: dict[str, _Check] = {}
        self._root: _Check | None = None
        self._root = self.compile(meta)

    def root(self, x: Any, depth: int) -> bool:
        return depth <= _MAX_DEPTH and cast(_Check, self._root)(x, depth)

    def ref(self, ref: str) -> _Check:
        if ref == "#":
            return self.root
        prefix = "#/definitions/"
        if not ref.startswith(prefix):
            raise NotImplementedError(ref)
        name = ref[len(prefix):]
        if name not in self.defs:
            self.defs[name] = lambda x, d: False  # (a cycle through definitions alone: never taken)
            self.defs[name] = self.compile(self.meta["definitions"][name])
        return self.defs[name]

    def compile(self, sub: Any) -> _Check:  # noqa: C901 - one branch per keyword
        if sub is True or sub == {}:
            return lambda x, d: True
        if sub is False:
            return lambda x, d: False
        if "$ref" in sub:  # (drafts 4-7: a $ref's siblings are ignored)
            return self.ref(sub["$ref"])
        checks: list[Callable[..., bool]] = []  # (each called with (x, depth))
        for k, v in sub.items():
            if k in _ANNOTATIONS:
                continue
            if k == "type":
                tests = [_TYPES[t] for t in ([v] if isinstance(v, str) else v)]
                checks.append(lambda x, d, tests=tests: any(t(x) for t in tests))
            elif k == "enum":
                if not all(isinstance(e, str) for e in v):
                    raise NotImplementedError("enum of non-strings")
                names = frozenset(v)
                checks.append(lambda x, d, names=names: type(x) is str and x in names)
            elif k == "properties" or k == "additionalProperties":
                if k == "additionalProperties" and "properties" in sub:
                    continue  # (read with "properties")
                props = {name: self.compile(ps) for name, ps in sub.get("properties", {}).items()}
                extra = self.compile(sub["additionalProperties"]) if "additionalProperties" in sub else None
                checks.append(lambda x, d, props=props, extra=extra: self._object(x, d, props, extra))
            elif k == "patternProperties":
                raise NotImplementedError(k)
            elif k == "propertyNames":
                name_ok = self.compile(v)
                checks.append(lambda x, d, ok=name_ok: type(x) is not dict or all(ok(n, d + 1) for n in x))
            elif k == "items":
                if isinstance(v, list):
                    raise NotImplementedError("items as an array")
                item = self.compile(v)
                checks.append(lambda x, d, item=item: type(x) is not list or all(item(e, d + 1) for e in x))
            elif k == "minItems":
                checks.append(lambda x, d, n=v: type(x) is not list or len(x) >= n)
            elif k == "uniqueItems":
                if v:
                    checks.append(lambda x, d: type(x) is not list or _distinct(x))
            elif k in ("minimum", "exclusiveMinimum"):
                if k == "exclusiveMinimum" and isinstance(v, bool):
                    continue  # (draft 4: read with "minimum")
                strict = k == "exclusiveMinimum" or sub.get("exclusiveMinimum") is True
                checks.append(lambda x, d, lo=v, strict=strict: self._at_least(x, lo, strict))
            elif k == "pattern":
                rx = re.compile(v)
                checks.append(lambda x, d, rx=rx: type(x) is not str or rx.search(x) is not None)
            elif k == "format":
                checks.append(lambda x, d, f=v: self.formats.conforms(x, f))
            elif k in ("allOf", "anyOf"):
                parts = [self.compile(p) for p in v]
                if k == "allOf":
                    checks.append(lambda x, d, parts=parts: all(p(x, d) for p in parts))
                else:
                    checks.append(lambda x, d, parts=parts: any(p(x, d) for p in parts))
            elif k == "dependencies":
                if not all(isinstance(r, list) for r in v.values()):
                    raise NotImplementedError("dependencies on schemas")
                deps = dict(v)
                checks.append(lambda x, d, deps=deps: type(x) is not dict
                              or all(r in x for key, rs in deps.items() if key in x for r in rs))
            else:
                raise NotImplementedError(k)
        if len(checks) == 1:
            return checks[0]
        return lambda x, d: all(c(x, d) for c in checks)

    @staticmethod
    def _object(x: Any, d: int, props: dict[str, _Check], extra: _Check | None) -> bool:
        if type(x) is not dict:
            return True
        e = d + 1
        for name, value in x.items():
            c = props.get(name, extra)
            if c is not None and not c(value, e):
                return False
        return True

    @staticmethod
    def _at_least(x: Any, lo: Any, strict: bool) -> bool:
        if type(x) is bool or not isinstance(x, numbers.Number):
            return True
        if type(x) is not int and type(x) is not float:
            return False  # (another kind of number: unsure)
        return x > lo if strict else x >= lo
