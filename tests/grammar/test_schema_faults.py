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
    for addl in (True, {"type": "string"}):  # the additional keys: "(?!P")..." (a lookahead difference)
        schema = {"type": "object", "patternProperties": {"^z": empty}, "additionalProperties": addl}
        c = agree_with_jsonschema(schema, VALUES)
        assert c is not None and not c.sg.dropped and not c.accepts('{"zz":"s"}') and c.accepts('{"a":"s"}')
    # the same below other keywords, through $ref, in a union branch
    for wrap in ({"items": {"$ref": "#/$defs/o"}, "$defs": {"o": closed}},
                 {"properties": {"p": closed}},
                 {"anyOf": [closed, {"type": "integer"}]}):
        agree_with_jsonschema(wrap, [[v] for v in VALUES] + [{"p": v} for v in VALUES] + VALUES)


def test_listed_names_admitting_no_value_are_taken_out_of_pattern_keys():
    # beside patternProperties such a name used to be refused (the key terminals would need a difference)
    for schema in ({"type": "object", "properties": {"zq": False, "a": {"type": "integer"}},
                    "patternProperties": {"^z": {"type": "string"}, "^x": {}}},
                   {"type": "object", "properties": {"b": False}, "patternProperties": {"^z": {"type": "string"}},
                    "additionalProperties": {"type": "string"}},
                   {"type": "object", "properties": {"zq": {"type": "integer"}},
                    "patternProperties": {"^z": LATE_EMPTY[2]}, "additionalProperties": False}):
        c = agree_with_jsonschema(schema, VALUES + [{"zq": 1}, {"zq": "s"}, {"b": "s"}, {"xa": 1}, {"zz": "s", "b": "t"}])
        assert c is not None and not c.sg.dropped


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


def test_number_discriminators_the_lexer_cannot_tell_apart_are_refused():
    # "2" starts "2.5": two number terminals side by side after one key; the lexer (as Lark's) took
    # the first that matched and rejected {"a": 2.5}, a valid value
    for schema in ({"type": "object", "anyOf": [{"properties": {"a": {"const": 2}}, "required": ["a"]},
                                                {"properties": {"a": {"const": 2.5}}, "required": ["a"]}]},
                   {"type": "object", "oneOf": [{"properties": {"k": {"const": 1}, "x": {"type": "string"}}, "required": ["k"]},
                                                {"properties": {"k": {"const": 10}}, "required": ["k"]}]}):
        with pytest.raises(UnsupportedSchemaError) as e:
            convert(schema)
        assert e.value.keyword in ("anyOf", "oneOf") and "numbers" in e.value.reason
    # numbers no spelling of which starts another's stay discriminators
    ok = {"type": "object", "anyOf": [{"properties": {"a": {"const": 2}}, "required": ["a"]},
                                      {"properties": {"a": {"const": 3}, "b": {"type": "string"}}, "required": ["a"]}]}
    c = agree_with_jsonschema(ok, [{"a": 2}, {"a": 3}, {"a": 3, "b": "s"}, {"a": 2, "b": "s"}, {"a": 2.5}, {}])
    assert c is not None and not c.sg.dropped


def test_dumps_depends_on_the_schema_alone_and_writes_floats_exactly():
    # dumps asked a process-wide registry whether a number was an int32 / int64 one: after an integer
    # range was converted elsewhere, 1.0 under {"minimum": 1} came out "1.0", which the grammar refuses
    convert({"type": "integer", "minimum": 1, "maximum": 9})
    assert convert({"type": "integer", "minimum": 1}).dumps(1.0) == "1"
    assert convert({"type": "number", "format": "int32"}).dumps(1.0) == "1.0"  # (a float: the format leaves it)
    # whole floats past 1e16 were written by their shortest repr, another integer: 2.0 ** 63 as
    # 9223372036854776000, which passes exclusiveMinimum 2 ** 63 where the float does not
    for schema in ({"type": "integer", "exclusiveMinimum": 2 ** 63}, {"type": "integer", "minimum": -(2 ** 63)},
                   {"type": "number", "format": "int64"}):
        c = Checker(schema)
        for v in (float(2 ** 63), float(-(2 ** 63)), 1e20, 2 ** 63, 2.0):
            assert c.accepts_value(v) is oracle(schema, v), (schema, v)


def test_too_many_definitions_is_refused_at_the_largest_count():
    # the grammar loader used to refuse it ("<json-schema>: the grammar has 6,037 rule and terminal
    # definitions"), a Lark-level message naming no place of the schema (MaskBench: 2 files)
    schema = {"type": "object", "properties": {k: {"type": "array", "items": {"type": "integer"}, "maxItems": 1000}
                                               for k in "abcdef"}}
    schema["properties"]["d"]["maxItems"] = 1010
    for lenient in (False, True):
        with pytest.raises(UnsupportedSchemaError) as e:
            convert(schema, lenient=lenient)
        assert (e.value.pointer, e.value.keyword, e.value.droppable) == ("/properties/d", "maxItems", False)
        assert "maxItems 1,010" in e.value.reason


def test_the_lenient_probe_finds_empty_places_without_building_automata(monkeypatch):
    # a refusal runs a lenient pass that looks for empty places only (see the test above); it used to
    # build every pattern, format, string union and number product of the schema again (12 s before a
    # refusal on one MaskBench file, 47 s over the 95 refused ones): widened there, they cost nothing
    from gad.grammar import json_schema as js
    built: list[str] = []
    for name in ("regex_fsm", "_intersect_content", "_meet_of"):
        real = getattr(js, name)
        monkeypatch.setattr(js, name, lambda *a, _n=name, _f=real, **k: built.append(_n) or _f(*a, **k))
    schema = {"type": "object", "properties": {
        "p": {"type": "string", "pattern": "^[a-z]{3}-[0-9]{2}$", "maxLength": 5},
        "n": {"type": "number", "minimum": 0.5, "multipleOf": 0.25},
        "u": {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "b$"}]},
        "zz": LATE_EMPTY[0]}}
    dead = js._pruned_when_lenient(js.load_schema(schema), "compact", False, frozenset(), {})
    assert dead == {"/properties/zz"} and built == []
    assert convert(schema) is not None and built  # (the real pass builds them)


@pytest.mark.parametrize("target", [True, False, {"$ref": "#/definitions/T"}])
def test_a_draft07_dependency_ref_to_a_boolean_schema(target):
    # drafts 04-07 follow a dependency's $ref to add "required" to its target; a target that is a
    # boolean schema raised a TypeError from inside the converter (session 27's adversarial run)
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"t": {"$ref": "#/definitions/A"}},
              "definitions": {"A": target, "T": True}}
    c = agree_with_jsonschema(schema, [{}, {"t": 1}, {"t": 1, "u": 2}, {"u": 2}, 3, "s"])
    assert c is not None and not c.sg.dropped


@pytest.mark.parametrize("schema,values", [
    # the name "" admitting no value beside patternProperties: its lookahead ("off_names") was the empty
    # string, taken for "no name", so a pattern's key terminal still wrote "" (with the pattern's value)
    ({"patternProperties": {"q": {"type": "integer"}}, "properties": {"": False}},
     [{"": 1}, {}, {"q": 1}, {"aq": "x"}, {"": "s"}]),
    ({"patternProperties": {"^$": {"type": "integer"}}, "properties": {"": {"type": "string"}}},
     [{"": 5}, {"": "s"}, {}, {"a": 1}]),
    # a pattern whose keys are all listed names admitting no value: its key terminal matched no string,
    # which failed the grammar check (UnsupportedGrammarError from gad.compile)
    ({"patternProperties": {"^a$": {"type": "string"}}, "properties": {"a": {"type": "integer"}}},
     [{"a": 1}, {"a": "s"}, {}, {"b": 2}]),
    ({"patternProperties": {"^a$": {"type": "string"}}, "properties": {"a": False}, "additionalProperties": False},
     [{"a": 1}, {"a": "s"}, {}, {"b": 2}]),
])
def test_banned_names_beside_pattern_properties(schema, values):
    # (session 27's adversarial run)
    c = agree_with_jsonschema(schema, values)
    assert c is not None and not c.sg.dropped


_D3, _D4 = "http://json-schema.org/draft-03/schema#", "http://json-schema.org/draft-04/schema#"


@pytest.mark.parametrize("schema", [
    {"$schema": _D4, "type": "integer", "enum": [1]},  # 1.0 was accepted: no integer under draft 4
    {"$schema": _D3, "type": "integer", "enum": [1]},
    {"$schema": _D4, "type": "integer", "enum": [0]},  # (0.0, -0.0)
    {"$schema": _D4, "type": "integer", "enum": [1.0]},  # was EmptyLanguageError: 1 is valid
    {"$schema": _D4, "type": "integer", "enum": [2.0, 3]},  # 2 was rejected, 3.0 accepted
    {"$schema": _D4, "enum": [1, "1"]},
    {"type": "integer", "enum": [1.0]},  # (2020-12: 1.0 is an integer)
    {"$schema": _D4, "enum": [{"a": 1.0}]},  # a number inside a literal, as written (was 1 only: 1.0 rejected)
    {"enum": [{"a": 1.0}, {"a": 0}]},  # (2020-12: inside a literal too, 1 and 1.0 are one value)
])
def test_enum_numbers_under_drafts_where_a_float_is_no_integer(schema):
    # (session 27's adversarial run)
    c = agree_with_jsonschema(schema, [1, 1.0, 2, 2.0, 3, 3.0, 0, 0.0, -0.0, "1", None, {"a": 1}, {"a": 1.0}, {"a": -0.0}])
    assert c is not None and not c.sg.dropped


_D7, _D20 = "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("schema", [
    # $ref siblings below a subschema with its own $schema follow that draft, as jsonschema reads them
    # (they followed the root's: {"p": 7} accepted under the first, rejected under the second)
    {"$schema": _D7, "definitions": {"a": {"type": "integer"}},
     "properties": {"p": {"$schema": _D20, "allOf": [{"$ref": "#/definitions/a", "maximum": 5}]}}},
    {"$schema": _D20, "$defs": {"a": {"type": "integer"}},
     "properties": {"p": {"$schema": _D7, "allOf": [{"$ref": "#/$defs/a", "maximum": 5}]}}},
    # on the node that carries the $schema, the root's draft decides (unchanged)
    {"$schema": _D7, "definitions": {"a": {"type": "integer"}},
     "properties": {"p": {"$schema": _D20, "$ref": "#/definitions/a", "maximum": 5}}},
    {"$schema": _D20, "$defs": {"a": {"type": "integer"}},
     "properties": {"p": {"$schema": _D7, "$ref": "#/$defs/a", "maximum": 5}}},
])
def test_ref_siblings_under_a_nested_schema_keyword(schema):
    c = agree_with_jsonschema(schema, [{"p": 7}, {"p": 3}, {"p": "x"}, {}])
    assert c is not None and not c.sg.dropped
