"""gad's schema check (the flattened 2020-12 meta-schema; the meta-schemas read directly) refuses exactly
the schemas jsonschema's own check of each draft refuses, and its direct reading never passes one."""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gad.errors import InvalidSchemaError
from gad.grammar import json_schema
from gad.grammar.schema_meta import FLAT_2020_12, check_schema, plainly_valid

_KEYWORDS = sorted(FLAT_2020_12["properties"]) + ["x-extension", "nullable"]
_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.sampled_from([1.5, 0.0, -0.5]),
              st.sampled_from(["", "x", "string", "integer", "^a(", "[a-z]+", "#/a", "#foo", "http://x y",
                               "https://e.com/s", "a.b", "1bad"])),
    lambda ch: st.one_of(st.lists(ch, max_size=3),
                         st.dictionaries(st.sampled_from(_KEYWORDS[:20] + ["p", "q"]), ch, max_size=3)),
    max_leaves=6)
_schemas = st.recursive(
    st.dictionaries(st.sampled_from(_KEYWORDS), _values, max_size=3),
    lambda ch: st.one_of(
        st.builds(lambda s, k: {k: s}, ch, st.sampled_from(["not", "items", "if", "additionalProperties"])),
        st.builds(lambda d: {"properties": d}, st.dictionaries(st.sampled_from(["a", "b"]), ch, max_size=2)),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(ch, max_size=2)),
        st.builds(lambda d: {"$defs": d}, st.dictionaries(st.sampled_from(["a", "b"]), ch, max_size=2))),
    max_leaves=5)


_DRAFTS = [jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator,
           jsonschema.Draft202012Validator]
D2020 = jsonschema.Draft202012Validator


def check_2020_12(schema: Any) -> None:
    check_schema(D2020, schema)


def _refused(check: Any, schema: Any) -> bool:
    try:
        check(schema)
    except jsonschema.exceptions.SchemaError:
        return True
    return False


@pytest.mark.parametrize("cls", _DRAFTS, ids=lambda c: c.__name__)
@settings(max_examples=300, deadline=None)
@given(schema=st.one_of(_schemas, st.booleans(), st.integers()))
def test_refuses_what_jsonschema_refuses(cls: Any, schema: Any) -> None:
    refused = _refused(cls.check_schema, schema)
    assert _refused(lambda s: check_schema(cls, s), schema) is refused
    # the direct reading (taken without jsonschema) never passes a schema jsonschema refuses
    assert not (plainly_valid(cls, schema) and refused)


def test_the_direct_reading_is_sure_of_plain_schemas_and_leaves_odd_ones() -> None:
    plain = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://e.com/s.json",
             "type": ["object", "null"], "required": ["a"], "additionalProperties": False,
             "properties": {"a": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3, "format": "email"},
                            "b": {"anyOf": [{"const": 1}, {"enum": [2, "x"]}], "default": None},
                            "c": {"type": "array", "prefixItems": [True], "items": {"$ref": "#/$defs/d"}}},
             "$defs": {"d": {"type": "number", "multipleOf": 0.5, "exclusiveMinimum": -1}},
             "dependencies": {"a": ["b"], "b": {"required": ["c"]}}, "x-vendor": {"anything": [1]}}
    assert plainly_valid(D2020, plain) and not _refused(jsonschema.Draft202012Validator.check_schema, plain)
    # valid, but left to jsonschema: an integral float as a count, a dict subclass
    for odd in ({"minLength": 2.0}, {"properties": OrderedDict(a={})}):
        assert not plainly_valid(D2020, odd) and not _refused(check_2020_12, odd)
    # a format check that raises (re refuses the repeat count) in a schema that is invalid anyway, and a
    # schema nested deeper than the reading goes: jsonschema's verdict, not the reading's exception
    for cls in _DRAFTS:
        assert _refused(lambda s, cls=cls: check_schema(cls, s), {"pattern": "a{4294967295}", "minLength": -1})
    deep: Any = {}
    for _ in range(66):
        deep = {"items": [deep]}
    assert not plainly_valid(jsonschema.Draft7Validator, deep)
    assert not _refused(lambda s: check_schema(jsonschema.Draft7Validator, s), deep)
    # not an array to jsonschema (its draft-7 arrays are lists): refused either way
    assert not plainly_valid(D2020, {"required": ("a",)}) and _refused(check_2020_12, {"required": ("a",)})


@pytest.mark.parametrize("schema", [
    {"type": "strin"}, {"minLength": -1}, {"pattern": "a("}, {"required": ["a", "a"]}, {"anyOf": []},
    {"properties": {"a": {"type": 3}}}, {"$defs": {"x": {"enum": 1}}}, {"items": [{"type": "string"}]},
    {"$anchor": "1x"}, {"prefixItems": [{"maximum": "9"}]}, {"dependentRequired": {"a": [1]}},
])
def test_invalid_schemas_are_refused_with_a_pointer(schema: dict) -> None:
    assert _refused(jsonschema.Draft202012Validator.check_schema, schema)
    assert not plainly_valid(D2020, schema)
    with pytest.raises(InvalidSchemaError, match="not a valid JSON Schema"):
        json_schema.convert(schema)


def _maskbench() -> Path:
    return Path(os.environ.get("GAD_MASKBENCH_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data" / "maskbench")


@pytest.mark.skipif(not _maskbench().is_dir(), reason="MaskBench not found (read in place, never copied)")
def test_maskbench_schemas_agree() -> None:
    files = sorted(_maskbench().glob("*.json"))[::25]
    sure = 0
    for f in files:
        schema = json.loads(f.read_text())["schema"]
        for cls in _DRAFTS:  # (each file under every draft's meta-schema, not only its own)
            refused = _refused(cls.check_schema, schema)
            assert _refused(lambda s, cls=cls: check_schema(cls, s), schema) is refused, (f.name, cls)
            assert not (plainly_valid(cls, schema) and refused), (f.name, cls)
        own = jsonschema.validators.validator_for(schema, default=D2020)
        sure += plainly_valid(own, schema)
    assert len(files) > 50 and sure == len(files)  # (every MaskBench schema is valid, and plain)
