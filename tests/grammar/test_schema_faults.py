"""Regressions from an adversarial run against ``jsonschema`` (session 25): each schema here once gave
a wrong grammar, a lenient grammar narrower than the schema, a refusal that was not needed, or an
error without its place.  Every verdict is checked against ``jsonschema`` (gad's canonical spelling,
``SchemaGrammar.dumps``)."""

from __future__ import annotations

import warnings

import pytest

from gad.errors import InvalidSchemaError, UnsupportedSchemaError
from gad.grammar.json_schema import convert
from gad.testing.schemas import SchemaChecker as Checker
from gad.testing.schemas import agree_with_jsonschema
from gad.testing.schemas import schema_oracle as oracle

# schemas that admit no value, found so only when the grammar is pruned (an object or array rule
# with no members), not at once as `false` or an empty length range is
LATE_EMPTY = [
    {"type": "array", "minItems": 2, "maxItems": 1},
    {"type": "object", "required": ["c"], "additionalProperties": False},
    {"type": "object", "minProperties": 1, "additionalProperties": False},
    {"type": "array", "prefixItems": [False], "minItems": 1},
    {"type": "object", "required": ["a"], "properties": {"a": False}},
]
VALUES = [{}, {"zz": 1}, {"z": []}, {"zz": {}}, {"a": 1}, {"a": "s"}, {"zz": "s", "a": 1}, 1, "zz", None]


def _lenient(schema):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Checker(schema, lenient=True)


@pytest.mark.parametrize("empty", LATE_EMPTY)
def test_pattern_property_admitting_no_value_never_falls_to_additional_properties(empty):
    # the pattern's keys used to reach the additional-key terminal, with any value (a silent widening)
    closed = {"type": "object", "patternProperties": {"^z": empty}, "additionalProperties": False}
    c = agree_with_jsonschema(closed, VALUES)
    assert c is not None and not c.accepts('{"zz":1}')
    for addl in (True, {"type": "string"}):
        schema = {"type": "object", "patternProperties": {"^z": empty}, "additionalProperties": addl}
        with pytest.raises(UnsupportedSchemaError) as e:  # (the difference of the key sets: not written)
            convert(schema)
        assert (e.value.pointer, e.value.keyword) == ("", "patternProperties")
        c = _lenient(schema)  # lenient: the pattern dropped, its keys additional ones (wider only)
        assert [d.keyword for d in c.sg.dropped] == ["patternProperties"]
        for v in VALUES:
            if oracle(schema, v):
                assert c.accepts_value(v), (schema, v)
    # the same below other keywords, through $ref, in a union branch
    for wrap in ({"items": {"$ref": "#/$defs/o"}, "$defs": {"o": closed}},
                 {"properties": {"p": closed}},
                 {"anyOf": [closed, {"type": "integer"}]}):
        agree_with_jsonschema(wrap, [[v] for v in VALUES] + [{"p": v} for v in VALUES] + VALUES)


def test_refusals_that_knowing_the_empty_places_lifts_are_not_made():
    # the strict pass used to stop at a union before pruning found a property admitting no value
    # (which, banned, makes the union exact); lenient built it with nothing dropped
    dep = {"dependentSchemas": {"a": {"properties": {"zz": LATE_EMPTY[0]}}}}
    c = agree_with_jsonschema(dep, [{}, {"a": 1}, {"a": 1, "zz": [1]}, {"zz": [1]}, {"zz": []}, 3])
    assert c is not None and not c.sg.dropped
    # a split oneOf whose branches as written make no union, but split do
    one = {"oneOf": [{"type": "object"}, {"not": {"properties": {"c": {"const": "x"}, "a": {"const": "y"}}}}],
           "properties": {"a": {}}}
    c = agree_with_jsonschema(one, [{}, {"a": 1}, {"c": "x", "a": "y"}, {"c": "x"}, {"a": "y"}, 3, "s", None, [1]])
    assert c is not None and not c.sg.dropped


def test_lenient_drops_a_ref_it_cannot_follow_and_so_widens():
    # a $ref inside a subschema with its own $id: lenient dropped the $id and followed the $ref from the
    # root, which names another schema (narrower and wider at once)
    schema = {"$defs": {"q": {"const": 1}}, "type": "array",
              "items": {"$id": "x.json", "$defs": {"q": {"const": 2}}, "$ref": "#/$defs/q"}}
    with pytest.raises(UnsupportedSchemaError) as e:
        convert(schema)
    assert (e.value.pointer, e.value.keyword) == ("/items", "$ref") and "#/items" in e.value.reason
    c = _lenient(schema)
    assert [(d.pointer, d.keyword) for d in c.sg.dropped] == [("/items", "$ref")]
    assert all(c.accepts_value(v) for v in ([1], [2], [3], ["x"], []))
    # under a not, dropping the $ref alone would narrow: the not is dropped whole
    under_not = {"properties": {"a": {"$id": "http://example.com/x.json", "$defs": {"q": {"type": "string"}},
                                      "not": {"$ref": "#/$defs/q"}}}}
    with pytest.raises(UnsupportedSchemaError) as e:
        convert(under_not)
    assert (e.value.pointer, e.value.keyword) == ("/properties/a/not", "$ref")
    c = _lenient(under_not)
    assert [(d.pointer, d.keyword) for d in c.sg.dropped] == [("/properties/a", "not")]
    assert c.accepts_value({"a": 1}) and c.accepts_value({"a": "s"})


@pytest.mark.parametrize("schema,pointer,keyword", [
    ({"properties": {"\ud800": {}}}, "", "properties"),
    ({"required": ["\ud800"]}, "", "required"),
    ({"const": "\ud800"}, "", "const"),
    ({"properties": {"x": {"enum": [{"k\udc00": 1}, "a"]}}}, "/properties/x", "enum"),
])
def test_lone_surrogates_gad_must_write_are_refused_at_their_place(schema, pointer, keyword):
    # they passed the conversion, and the grammar's reading failed with an empty message
    for lenient in (False, True):
        with pytest.raises(UnsupportedSchemaError) as e:
            convert(schema, lenient=lenient)
        assert (e.value.pointer, e.value.keyword, e.value.droppable) == (pointer, keyword, False)
        assert "surrogate" in str(e.value) and "lenient" not in str(e.value)


def test_error_texts_name_their_place_and_their_limit():
    with pytest.raises(InvalidSchemaError) as e:
        convert({"$schema": 5})
    assert e.value.pointer == "/$schema" and "decode" not in str(e.value)
    with pytest.raises(UnsupportedSchemaError) as e:
        convert({"type": "object", "not": {"required": [f"n{i}" for i in range(300)]}})
    assert e.value.keyword == "not" and "300 alternatives" in e.value.reason


def test_dumps_keeps_a_float_a_float_where_the_draft_tells_them_apart():
    # draft 4: 1.0 is no integer; dumps wrote it "1", a text the grammar accepts
    d4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}
    c = Checker(d4)
    assert c.sg.dumps(1.0) == "1.0" and c.sg.dumps(1) == "1"
    for v in (1.0, 1, 2.5, 0.0, 1e20, -3):
        assert c.accepts_value(v) is oracle(d4, v), v
    c = Checker({"type": "integer"})  # 2020-12: 1.0 is an integer, spelled without its fraction
    assert c.sg.dumps(1.0) == "1" and c.accepts_value(1.0) and oracle({"type": "integer"}, 1.0)


@pytest.mark.parametrize("schema,strict,drops", [
    # (refusals and drops at places gad made for a merge or a rewrite used to name those places)
    ({"allOf": [{"additionalProperties": {"contains": {}}}]},
     ("/allOf/0/additionalProperties", "contains"), [("/allOf/0/additionalProperties", "contains")]),
    ({"allOf": [{"additionalProperties": {"patternProperties": {"^a": {}, "b": {}}}}, {"dependentRequired": {"a": ["k"]}}]},
     ("/allOf/0/additionalProperties", "patternProperties"), [("/allOf/0/additionalProperties", "patternProperties")]),
    ({"not": {"anyOf": [{"properties": {"k": {"type": "null"}, "c": {"type": "boolean"}}},
                        {"properties": {"c": {"type": "string"}}}]}}, ("/not", "anyOf"), [("", "not")]),
    ({"if": {"required": ["b"]}, "then": {"required": ["c"]}, "additionalProperties": False,
      "patternProperties": {"^x": {}}}, ("", "additionalProperties"), [("", "additionalProperties"), ("", "if")]),
    ({"oneOf": [{"required": ["b"]}, {"type": "string"}], "additionalProperties": False,
      "patternProperties": {"^x": {}}}, ("", "additionalProperties"), [("", "oneOf")]),
])
def test_refusals_and_drops_name_places_of_the_users_schema(schema, strict, drops):
    with pytest.raises(UnsupportedSchemaError) as e:
        convert(schema)
    assert (e.value.pointer, e.value.keyword) == strict
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sg = convert(schema, lenient=True)
    assert [(d.pointer, d.keyword) for d in sg.dropped] == drops
