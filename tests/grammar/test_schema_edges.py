"""Schemas from an adversarial review of the JSON Schema front door (session 19): each was a silent
wrong answer or a raw traceback; now gad agrees with ``jsonschema`` or refuses at the keyword."""

from __future__ import annotations

import itertools
import json
import random
import warnings

import pytest

from gad.errors import UnsupportedSchemaError
from gad.grammar import Grammar
from gad.testing.schemas import SchemaChecker, schema_oracle

D7 = "http://json-schema.org/draft-07/schema#"
D4 = "http://json-schema.org/draft-04/schema#"


def agree(schema: dict, texts: list[str]) -> None:
    c = SchemaChecker(schema)
    for t in texts:
        assert c.accepts(t) is schema_oracle(schema, json.loads(t)), t


@pytest.mark.parametrize("schema, texts", [
    # one side's items beside the other side's prefix: items bounds every element of its own side
    ({"allOf": [{"type": "array", "items": {"type": "integer"}}, {"prefixItems": [{"minimum": 0}]}]},
     ['["x"]', "[1]", "[-1]", "[1,2]", '[1,"a"]']),
    ({"allOf": [{"prefixItems": [{"type": "integer"}], "items": False}, {"items": {"type": "string"}}]},
     ["[1]", "[]", '["a"]']),
    ({"$ref": "#/$defs/d", "$defs": {"d": {"items": {"type": "integer"}}}, "prefixItems": [True]}, ['["x"]', "[1]"]),
    ({"allOf": [{"prefixItems": [{"type": "integer"}, {"type": "string"}]},
                {"prefixItems": [{"minimum": 3}], "items": {"type": "string"}}]},
     ['[3,"a"]', '[2,"a"]', "[3,1]", '[3,"a",1]', '[3,"a","b"]']),
    # additionalItems means something only beside an array items in its own schema object
    ({"$schema": D7, "allOf": [{"items": [{"type": "integer"}]}, {"additionalItems": False}]}, ["[1,1]", '["a"]', "[1]"]),
    ({"$schema": D7, "additionalItems": False}, ["[1,1]", "[]"]),
    ({"$schema": D4, "definitions": {"d": {"items": [{"type": "string"}], "additionalItems": {"type": "integer"}}},
      "allOf": [{"$ref": "#/definitions/d"}, {"items": {"maxLength": 2}}]},
     ['["ab"]', '["abc"]', '["ab",1]', '["ab","x"]', "[]", "[1]"]),
])
def test_merged_array_items_agree_with_jsonschema(schema: dict, texts: list[str]) -> None:
    agree(schema, texts)


@pytest.mark.parametrize("schema", [
    {"allOf": [{"patternProperties": {"^a": {"type": "integer"}}}, {"additionalProperties": False}]},
    {"$ref": "#/$defs/d", "$defs": {"d": {"additionalProperties": False}}, "patternProperties": {"^a": {}}},
    {"allOf": [{"properties": {"b": {}}, "additionalProperties": False},
               {"patternProperties": {"^a": {"type": "integer"}}}]},
])
def test_pattern_properties_beside_another_schemas_additional_properties_are_refused(schema: dict) -> None:
    with pytest.raises(UnsupportedSchemaError) as ei:
        SchemaChecker(schema)
    assert ei.value.keyword in ("patternProperties", "additionalProperties")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        SchemaChecker(schema, lenient=True)  # (dropped with a warning)


def test_pattern_properties_beside_plain_properties_still_merge() -> None:
    agree({"allOf": [{"properties": {"b": {}}}, {"patternProperties": {"^a": {"type": "integer"}}}]},
          ['{"a":1}', '{"a":"x"}', '{"b":1}'])


def test_a_ref_inside_a_subschema_with_its_own_id_is_refused() -> None:
    schema = {"$defs": {"y": {"type": "string"},
                        "x": {"$id": "http://e.com/sub", "$defs": {"y": {"type": "integer"}}, "$ref": "#/$defs/y"}},
              "type": "object", "properties": {"b": {"$ref": "#/$defs/x"}}}
    with pytest.raises(UnsupportedSchemaError) as ei:
        SchemaChecker(schema)
    # (named at the $ref gad cannot follow, the $id's place in the reason; lenient drops that $ref)
    assert ei.value.keyword == "$ref" and ei.value.pointer == "/$defs/x" and "#/$defs/x" in ei.value.reason
    # a $ref from the root to a subschema with an $id resolves as before
    agree({"$defs": {"y": {"$id": "http://e.com/y", "type": "string"}}, "properties": {"b": {"$ref": "#/$defs/y"}}},
          ['{"b":"x"}', '{"b":1}'])


@pytest.mark.parametrize("schema, texts", [
    ({"type": "string", "minLength": 70.0}, ['"' + "a" * 70 + '"', '"' + "a" * 69 + '"']),
    ({"type": "array", "minItems": 1.0, "maxItems": 2.0}, ["[]", "[1]", "[1,2,3]"]),
    ({"type": "string", "minLength": 1.0}, ['""', '"a"']),
    ({"type": "integer", "minimum": 10 ** 400}, ["1" + "0" * 400, "5"]),
    ({"type": "number", "maximum": -(10 ** 400)}, ["-1" + "0" * 401, "-1" + "0" * 399, "5"]),
])
def test_whole_float_counts_and_huge_integer_bounds(schema: dict, texts: list[str]) -> None:
    agree(schema, texts)


@pytest.mark.parametrize("schema,kw", [({"type": "number", "minimum": 1e308}, "minimum"),
                                       ({"type": "integer", "minimum": 1e308}, "minimum"),
                                       # the long bound is named, not the first one present (it named minimum)
                                       ({"type": "number", "minimum": 0, "maximum": 1e23}, "maximum")])
def test_a_bound_too_long_for_an_automaton_is_refused_at_its_keyword(schema: dict, kw: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as ei:
        SchemaChecker(schema)
    assert ei.value.keyword == kw
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        SchemaChecker(schema, lenient=True)
    assert any(kw in str(x.message) for x in w)


def test_dumps_keeps_a_floats_fraction_under_an_int_format() -> None:
    for schema in ({"type": "number", "format": "int32"}, {"type": "object", "properties": {"a": {"type": "number", "format": "int64"}}}):
        c = SchemaChecker(schema)
        for v in (3e9, 7.0, 1e19, 12, 2.5):
            value = {"a": v} if schema["type"] == "object" else v
            assert c.accepts_value(value) is schema_oracle(schema, value), (schema, v, c.sg.dumps(value))


@pytest.mark.parametrize("pattern", ["^[^\\uD800]$", "^\\uD83D\\uDE00$", "(a|[\\ud800-\\udfff])", "x{2}(?:\\ud800)+"])
def test_a_pattern_naming_a_surrogate_is_refused_with_a_typed_error(pattern: str) -> None:
    """UTF-8 text holds no surrogate code point; a pattern naming one was a raw Lark GrammarError
    (its lone surrogate written into the grammar text), which ``lenient`` could not drop."""
    import gad
    from gad.errors import UnsupportedGrammarError

    with pytest.raises(UnsupportedSchemaError) as ei:
        gad.Grammar.from_json_schema({"type": "string", "pattern": pattern})
    assert ei.value.keyword == "pattern"
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        gad.Grammar.from_json_schema({"type": "string", "pattern": pattern}, lenient=True)
    with pytest.raises(UnsupportedGrammarError):
        gad.Grammar.from_regex(pattern)
    agree({"type": "string", "pattern": "^[\\u0000-\\uffff]$"}, ['"a"', '"é"', '""'])  # (a range across them is fine)


@pytest.mark.parametrize("kw", [{"strict": "yes"}, {"strict": 1}, {"lenient": "no"}, {"lenient": None}])
def test_strict_and_lenient_must_be_bools(kw: dict) -> None:
    import gad
    from gad.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        gad.Grammar.from_json_schema({"type": "string"}, **kw)


def _nested(kind: str, n: int) -> dict:
    s: dict = {"type": "string"}
    for _ in range(n):
        if kind == "items":
            s = {"type": "array", "items": s}
        elif kind == "properties":
            s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
        else:  # (anyOf: a string or null; allOf: a string and anything)
            s = {kind: [s, {"type": "null"} if kind == "anyOf" else {}]}
    return s


def test_nesting_past_the_limit_is_refused_at_its_pointer() -> None:
    """A schema nested deeper than gad's limit was an InvalidSchemaError quoting Python's recursion limit
    (from deep inside jsonschema); it is a typed refusal at the first value past the limit, and a document
    at the limit still converts (MaskBench's deepest schema nests 27 levels)."""
    import gad
    from gad.grammar.json_schema import MAX_SCHEMA_NESTING

    depth = MAX_SCHEMA_NESTING - 1
    agree(_nested("items", depth), ["[" * depth + '"x"' + "]" * depth, "[" * depth + "1" + "]" * depth])
    with pytest.raises(UnsupportedSchemaError) as ei:
        gad.Grammar.from_json_schema(_nested("items", MAX_SCHEMA_NESTING))
    assert ei.value.keyword == "items" and ei.value.pointer == "/items" * MAX_SCHEMA_NESTING
    with pytest.raises(UnsupportedSchemaError) as ei:  # (2 levels per property: properties, then "a")
        gad.Grammar.from_json_schema(_nested("properties", 150))
    assert ei.value.pointer == "/properties/a" * 64 and ei.value.keyword == "a"
    with pytest.raises(UnsupportedSchemaError):  # (no lenient way around it: nothing to drop)
        gad.Grammar.from_json_schema(_nested("properties", 150), lenient=True)


def test_deep_unions_are_not_called_reference_cycles() -> None:
    """anyOf nested past the converter's cycle guard (48) named a $ref cycle where there was none; allOf
    nested past its guard (64) is past the nesting limit first."""
    import gad

    with pytest.raises(UnsupportedSchemaError) as ei:
        gad.Grammar.from_json_schema(_nested("anyOf", 60))
    assert "nested over 48 deep" in ei.value.reason and "nesting past gad's limit" in ei.value.reason
    with pytest.raises(UnsupportedSchemaError) as ei:
        gad.Grammar.from_json_schema(_nested("allOf", 64))
    assert "levels deep (gad's limit)" in ei.value.reason
    gad.Grammar.from_json_schema(_nested("allOf", 63))


@pytest.mark.parametrize("pattern", ["^[\u4e00-\u9fa5]+$", "^[\u0800-\uffff]{2}$", "^[\u0400-\u04ff\u4e00-\u9fff]{1,3}x"])
def test_a_mid_sized_class_is_written_as_listed_and_agrees(pattern: str) -> None:
    """A class of more than 4,096 characters was written negated, over its complement of ~1.1 million,
    which interegular lists character by character: ``^[\u4e00-\u9fa5]+$`` (a Chinese name, common in
    real schemas) took 73 s to translate (session 28).  The smaller side is written now."""
    g = Grammar.from_json_schema({"type": "string", "pattern": pattern})
    assert "[^" not in g.lark_text.replace('[^\\x00-\\x1f"\\\\]', "")  # (any unit after a search's match)
    agree({"type": "string", "pattern": pattern},
          ['"\u4e2d\u6587"', '"\u4e2d"', '"a"', '""', '"\u0800\uffff"', '"\u0800"', '"\u0410x"',
           '"\u0410\u4e2dx"', '"\u4e2dxx"', '"\u00e9x"', '"\u9fa5\u9fa6"', '"\u4e00\u9fa5"'])


@pytest.mark.parametrize("pattern", [
    "^([^,]+(,|$)){3,}$",                              # MaskBench (JsonSchemaStore catalogue-entry): refused before
    "^(\\/?((\\.{2})|([a-z0-9\\-]*))($|\\/))*$",        # MaskBench (Github_hard o65011)
    "^$[a-zA-Z0-9$_]*$",                               # MaskBench (Github_medium o12562): only ""
    "a$|b", "(x|$)+y", "c(a$)?", "(ab|$){2,3}", "^(a$|b){0,2}", "x(,|$)", "(a$)*b?",
])
def test_a_dollar_inside_a_pattern_ends_the_input(pattern: str) -> None:
    """ECMA-262 ``$`` (no multiline flag) anywhere in a pattern: the matches that pass it end at the
    end of the input (``regex_ast.end_split``); it was refused (3 MaskBench files)."""
    rng = random.Random(3)
    texts = {"".join(t) for n in range(4) for t in itertools.product("ab,x/.y", repeat=n)}
    texts |= {"".join(rng.choice("abcxy,/.A-$") for _ in range(rng.randint(4, 12))) for _ in range(300)}
    agree({"type": "string", "pattern": pattern}, [json.dumps(t) for t in sorted(texts)])


def test_a_dollar_that_leaves_no_match_is_refused_at_its_keyword() -> None:
    with pytest.raises(UnsupportedSchemaError) as ei:
        Grammar.from_json_schema({"type": "string", "pattern": "(x$){2}"})
    assert ei.value.keyword == "pattern"
