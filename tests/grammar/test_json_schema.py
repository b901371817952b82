"""JSON Schema -> grammar (gad.grammar.json_schema): exact acceptance checked against the
``jsonschema`` package on hand-picked and hypothesis-drawn schemas, with gad's own engine (a
byte-level vocabulary, so every byte string is tested through the masks' lexer and parser)."""

from __future__ import annotations

import datetime
import json
import re
import warnings

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gad
from gad.errors import GrammarError, InvalidSchemaError, UnsupportedSchemaError
from gad.grammar import Grammar
from gad.grammar.json_schema import FORMATS, LENIENT_HINT, convert, pattern_regex
from gad.testing.schemas import BYTES, agree_with_jsonschema, refused_then_widened
from gad.testing.schemas import SchemaChecker as Checker
from gad.testing.schemas import schema_oracle as oracle


def test_object_order_required_additional():
    s = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["b"]}
    c = Checker(s)
    cases = {
        '{"b":"x"}': True, '{"a":1,"b":"x"}': True, '{"b":"x","a":1}': True,  # a after the last required
        '{"b":"x","a":"s"}': False, '{"b":"x","zz":[1,{}],"a":2}': True, '{"b":"x","zz":1,"a":"q"}': False,
        '{"b":"x","\\u0061":"q"}': False,  # an escaped spelling of "a" is not an additional key
        '{"a":1}': False, "{}": False, '{"b":1}': False, '{"b":"x","b":"y"}': True,
    }
    for text, want in cases.items():
        assert c.accepts(text) is want, text
        assert oracle(s, json.loads(text)) is want, text
    strict = Checker(s, strict=True)
    assert strict.accepts('{"a":1,"b":"x"}') and not strict.accepts('{"b":"x","zz":1}')


def _ordered_subsets(keys: list[str]) -> list[list[str]]:
    return [[k for i, k in enumerate(keys) if mask >> i & 1] for mask in range(1 << len(keys))]


@pytest.mark.parametrize("variant", ["closed", "closed, first required", "closed, last required", "open, last required",
                                     "closed, at least one"])
def test_long_optional_runs_exact(variant):
    """Runs of optional properties long enough to be written as a balanced tree (build_object's
    optional_runs) accept exactly the ordered subsets the chain accepted: every subset of 10 keys in
    the schema's order, and each with two keys swapped, against jsonschema."""
    keys = [f"k{i}" for i in range(10)]
    s: dict = {"type": "object", "properties": {k: {"type": "integer"} for k in keys}}
    if variant.startswith("closed"):
        s["additionalProperties"] = False
    if variant == "closed, first required":
        s["required"] = ["k0"]
    elif variant.endswith("last required"):
        s["required"] = ["k9"]
    elif variant == "closed, at least one":
        s["minProperties"] = 1
    c = Checker(s)
    assert re.search(r"_l[01]_[89]\b", c.sg.lark_text)  # (the tree is in the grammar)
    is_open = variant.startswith("open")
    for sub in _ordered_subsets(keys):
        value = {k: i for i, k in enumerate(sub)}
        text = json.dumps(value, separators=(",", ":"))
        assert c.accepts(text) is oracle(s, value), text
        if len(sub) >= 2:
            swapped = sub[1:2] + sub[:1] + sub[2:]
            text = "{" + ",".join(f'"{k}":1' for k in swapped) + "}"
            # valid JSON, but out of the grammar's property order (unless after the last required key,
            # where an open object takes its keys in any order)
            assert c.accepts(text) is (is_open and sub[1] == "k9" and oracle(s, dict.fromkeys(sub, 1))), text
    assert c.accepts('{"k9":1,"x":[]}') is is_open
    flexible = Checker(s, whitespace="flexible")
    assert flexible.accepts('{ "k1" : 1 ,\n "k4":2 , "k9" : 3 }') is oracle(s, {"k1": 1, "k4": 2, "k9": 3})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(8, 13), st.data())
def test_long_optional_runs_random(n, data):
    """Objects of 8-13 properties, some required (so runs of optional ones start, end and stand
    between required ones), open or closed, with or without ``minProperties: 1``: gad accepts a value
    iff jsonschema validates it, over values drawn from every subset of the keys."""
    keys = [f"k{i}" for i in range(n)]
    req = data.draw(st.lists(st.sampled_from(keys), unique=True, max_size=3))
    s: dict = {"type": "object", "properties": {k: {"type": "integer"} for k in keys}, "required": req,
               "additionalProperties": data.draw(st.booleans()), "minProperties": data.draw(st.sampled_from([0, 1]))}
    c = Checker(s)
    for _ in range(40):
        sub = [k for k in keys if data.draw(st.booleans())]
        value = {k: data.draw(st.sampled_from([1, "x"])) for k in sub}
        text = json.dumps(value, separators=(",", ":"))
        assert c.accepts(text) is oracle(s, value), (s, text)


def test_long_optional_runs_keep_the_lalr_table_small():
    """An object's optional properties in fixed order: the parser's nonterminal transitions grow as
    n log n (the balanced tree), not as n^2 (a chain of skips predicts every later property after each
    member: 400 properties took seconds to build)."""

    def gotos(n: int) -> int:
        s = {"type": "object", "additionalProperties": False,
             "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}
        table = Grammar.from_json_schema(s).tables.parse_table
        return sum(1 for acts in table.states.values() for sym in acts if not sym.isupper())

    small, large = gotos(64), gotos(256)
    assert large < 6 * small  # (n^2: 16x; n log n: 5.3x)


def test_text_has_no_unit_or_unreachable_rules():
    """The converter names what a one-symbol rule stands for in its place (``v3: o4`` goes) and writes
    only the rules and terminals the start symbol reaches; values still dump and check as before."""
    s = {"type": "object", "properties": {"d": {"type": "object", "properties": {"n": {"type": "number"}},
                                                 "required": ["n"]}, "s": {"type": "string"}},
         "required": ["s", "d"]}
    c = Checker(s)
    rules: dict[str, list[list[str]]] = {}
    cur = ""
    for line in c.sg.lark_text.splitlines():
        m = re.match(r"([a-z_][a-z0-9_]*):(.*)", line)
        if m:
            cur = m.group(1)
            rules[cur] = [m.group(2).split()]
        elif line.startswith("    |"):
            rules[cur].append(line[5:].split())
    terms = {m.group(1) for m in re.finditer(r"^([A-Z][A-Z0-9_]*)(?:\.\d+)?:", c.sg.lark_text, re.M)}
    assert not [r for r, alts in rules.items() if r != "start" and len(alts) == 1 and len(alts[0]) == 1]
    used = {sym for alts in rules.values() for a in alts for sym in a}
    assert set(rules) - {"start"} <= used and terms <= used
    for value in ({"s": "x", "d": {"n": 1.5}}, {"d": {"n": 2}, "s": "y", "q": [1]}, {"s": "x"}, {"s": 1, "d": {"n": 1}}):
        assert c.accepts(c.sg.dumps(value)) is oracle(s, value), value


def test_property_admitting_no_value_stays_in_the_text():
    """A listed property whose schema admits nothing (MaskBench Github_medium---o30959: an enum of
    strings under type object) may not appear; ``dumps`` keeps it, so such a value is rejected."""
    s = {"type": "object", "properties": {"a": {"enum": ["x", "y"], "type": "object"}, "b": {"type": "integer"}}}
    c = Checker(s)
    for value in ({"a": {"x": 1}, "b": 1}, {"b": 1, "a": "x"}, {"b": 2}, {"zz": 1, "b": 3}, {}):
        text = c.sg.dumps(value)
        assert json.loads(text) == value
        assert c.accepts(text) is oracle(s, value), value
    assert not c.accepts_value({"b": 1, "a": {}})


def test_property_found_empty_by_pruning_is_not_an_additional_one():
    """A property whose schema admits nothing only as a grammar (an object requiring a property it
    forbids: known once the grammar is pruned) may not appear either, not even read as an additional
    property (hypothesis found ``{"b": null}`` accepted here)."""
    empty_obj = {"type": "object", "properties": {}, "required": ["a"], "additionalProperties": False}
    s = {"type": "object", "properties": {"ab": {"type": "integer"}, "a": {"type": "integer"}, "b": empty_obj}}
    c = Checker(s)
    for value in ({"b": None}, {"b": {}}, {"b": {"a": 1}}, {"a": 1, "b": 2}, {"a": 1}, {"ab": 2, "zz": [1]}, {}):
        assert c.accepts_value(value) is oracle(s, value), value
    nested = {"type": "object", "properties": {"x": {"type": "object", "properties": {"b": empty_obj}}}}
    c = Checker(nested)
    for value in ({"x": {"b": 1}}, {"x": {"c": 1}}, {"x": {}}):
        assert c.accepts_value(value) is oracle(nested, value), value


def test_integer_ranges_exhaustive():
    for lo, hi, xlo, xhi in [(-13, 27, False, False), (0, 100, True, True), (-1005, -7, False, True),
                             (None, 12, False, False), (98, None, False, False)]:
        s = {"type": "integer"}
        if lo is not None:
            s["exclusiveMinimum" if xlo else "minimum"] = lo
        if hi is not None:
            s["exclusiveMaximum" if xhi else "maximum"] = hi
        c = Checker(s)
        for v in range(-1100, 1100):
            assert c.accepts(str(v)) is oracle(s, v), (s, v)
        assert c.accepts("-0") is oracle(s, 0)
        assert not c.accepts("01") and not c.accepts("1.0")


@settings(max_examples=300, deadline=None)
@given(st.from_regex(r"-?(0|[1-9][0-9]{0,2})(\.[0-9]{1,3})?", fullmatch=True))
def test_number_range_against_python(text):
    s = {"type": "number", "minimum": -90, "exclusiveMaximum": 180}
    c = _cached(json.dumps(s))
    assert c.accepts(text) is (-90 <= float(text) < 180), text


_CACHE: dict = {}


def _cached(key: str) -> Checker:
    if key not in _CACHE:
        _CACHE[key] = Checker(json.loads(key))
    return _CACHE[key]


def test_formats_against_definitions():
    c = Checker({"type": "string", "format": "date"})
    d = datetime.date(1999, 12, 25)
    for _ in range(900):  # every day of 1999..2001 and around leap days
        assert c.accepts(f'"{d.isoformat()}"')
        d += datetime.timedelta(days=1)
    for bad in ["2023-02-29", "1900-02-29", "2024-04-31", "2024-13-01", "2024-1-01"]:
        assert not c.accepts(f'"{bad}"'), bad
    assert c.accepts('"2000-02-29"') and c.accepts('"2024-02-29"')
    ip = Checker({"type": "string", "format": "ipv4"})
    assert ip.accepts('"255.0.10.1"') and not ip.accepts('"256.1.1.1"') and not ip.accepts('"01.1.1.1"')
    v6 = Checker({"type": "string", "format": "ipv6"})
    for good in ["::", "::1", "fe80::1:2", "2001:db8::ff00:42:8329", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4"]:
        assert v6.accepts(f'"{good}"'), good
    for bad in ["1:2:3:4:5:6:7:8:9", "1::2::3", ":1"]:
        assert not v6.accepts(f'"{bad}"'), bad
    dt = Checker({"type": "string", "format": "date-time"})
    assert dt.accepts('"2024-02-29T23:59:60.5+05:30"') and not dt.accepts('"2024-02-29 23:59:00Z"')
    for name, rx in FORMATS.items():  # the Python form of each format regex compiles
        re.compile(rx.replace("\\/", "/")), name


def test_pattern_is_a_search():
    c = Checker({"type": "string", "pattern": "ab+c"})
    for text, want in [("abc", True), ("xxabbbcyy", True), ("ac", False), ("", False)]:
        assert c.accepts(json.dumps(text)) is want
        assert (re.search("ab+c", text) is not None) is want
    anchored = Checker({"type": "string", "pattern": "^[a-z]{2}$"})
    assert anchored.accepts('"ab"') and not anchored.accepts('"abc"') and not anchored.accepts('"a"')


def test_whitespace_modes():
    s = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    v = {"a": [1, 2]}
    compact = Checker(s)
    assert compact.accepts('{"a":[1,2]}') and not compact.accepts('{"a": [1,2]}')
    flex = Checker(s, whitespace="flexible")
    assert flex.accepts(flex.sg.dumps(v, indent=2)) and flex.accepts(' {\n "a" : [ 1 ,2 ] }\n')
    two = Checker(s, whitespace=2)
    assert two.accepts('{  "a":[1,  2]}') and not two.accepts('{   "a":[1,2]}')
    assert two.accepts("{  }") and not two.accepts("{   }")  # an empty object is one run too
    with pytest.raises(gad.errors.InvalidArgumentError):
        convert(s, whitespace="lots")


def test_refs_recursive_and_unions():
    s = {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["v"], "additionalProperties": False}},
        "anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}, {"enum": ["x", 3]}]}
    c = Checker(s)
    for v in [None, "x", 3, {"v": 1}, {"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]},
              {"v": 1, "kids": [{"v": 2}, {"v": 3}, {"v": 4}]}, {"kids": []}, "y", 4, {"v": 1, "w": 2}]:
        assert c.accepts_value(v) is oracle(s, v), v


def test_one_of_disjoint_and_overlapping():
    ok = Checker({"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, {"type": "integer"}]})
    assert ok.accepts('"abc"') and ok.accepts('"b"') and ok.accepts("7") and not ok.accepts('"c"')
    # overlapping patterns: split into "this branch and no other one" (a not of a pattern, session 25)
    over = {"oneOf": [{"type": "string", "pattern": "a"}, {"type": "string", "pattern": "b"}]}
    assert agree_with_jsonschema(over, ["a", "b", "ab", "ba", "c", "", "xax", 1]) is not None
    with pytest.raises(UnsupportedSchemaError) as e:  # (a length bound has no negation gad writes)
        convert({"oneOf": [{"type": "string", "minLength": 2}, {"type": "string", "pattern": "b"}]})
    assert e.value.keyword == "oneOf" and e.value.pointer == ""


@pytest.mark.parametrize("schema,pointer,keyword", [
    ({"type": "object", "patternProperties": {"^x": {}, "y": {}}}, "", "patternProperties"),
    ({"properties": {"a": {"type": "integer", "multipleOf": 1001}}}, "/properties/a", "multipleOf"),
    ({"properties": {"a": {"not": {"minimum": 3}}}}, "/properties/a", "not"),
    ({"properties": {"a": {"not": {"type": "integer"}}}}, "/properties/a", "not"),  # (non-integer numbers: no type)
    ({"items": {"type": "array", "uniqueItems": True}}, "/items", "uniqueItems"),
    ({"$defs": {"s": {"type": "string", "pattern": "(?=a)b"}}, "$ref": "#/$defs/s"}, "/$defs/s", "pattern"),
    ({"type": "string", "format": "iri"}, "", "format"),
    ({"type": "string", "maxLength": 10 ** 6}, "", "maxLength"),
    ({"$schema": "http://json-schema.org/draft-03/schema#", "type": "string", "format": "color"}, "", "format"),
    ({"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"type": "object", "properties": {"a": {"minimum": 3}}, "required": ["a"]}]}, "", "anyOf"),
    ({"anyOf": [{"type": "object", "patternProperties": {"^x": {}}, "required": ["b"]},
                {"type": "object", "required": ["b"]}]}, "", "anyOf"),
    ({"oneOf": [{"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}},
                {"type": "object", "required": ["b"]}]}, "", "oneOf"),
    ({"oneOf": [{"type": "object", "properties": {"k": {"enum": [1, 2]}}, "required": ["k"]},
                {"type": "object", "properties": {"k": {"enum": [2, 3]}}, "required": ["k"]}]}, "", "oneOf"),
    ({"if": {"minimum": 3}, "else": {"type": "string"}}, "", "if"),  # (a bound's negation: not written)
    ({"type": "array", "contains": {"type": "integer"}}, "", "contains"),
])
def test_unsupported_keywords_name_pointer(schema, pointer, keyword):
    with pytest.raises(UnsupportedSchemaError) as e:
        convert(schema)
    assert (e.value.pointer, e.value.keyword) == (pointer, keyword)
    assert isinstance(e.value, GrammarError) and f"#{pointer}" in str(e.value)
    assert str(e.value).endswith(f"({LENIENT_HINT})") and e.value.droppable  # (the way round it, named)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sg = convert(schema, lenient=True)
    assert any(d.keyword == keyword and d.pointer == pointer for d in sg.dropped)
    assert any(keyword in str(x.message) for x in w)
    Grammar.from_string(sg.lark_text)


def test_limits_lenient_cannot_lift_are_refused_without_the_hint():
    # more listed names than a grammar may have terminals: refused at the object listing them, not by the
    # grammar loader's "fold keyword alternatives" (a Lark author's advice), even under lenient
    names = {f"field_{i}": {"type": "integer"} for i in range(1_200)}
    schema = {"type": "object", "properties": {"small": {"type": "object", "properties": {"a": {}}},
                                               "big": {"type": "object", "properties": names}}}
    for lenient in (False, True):
        with pytest.raises(UnsupportedSchemaError) as e:
            convert(schema, lenient=lenient)
        assert (e.value.pointer, e.value.keyword, e.value.droppable) == ("/properties/big", "properties", False)
        assert "1,200 are listed here" in str(e.value) and "lenient" not in str(e.value)
    # just under the limit: converted (the loader's own limit is the same number)
    few = {"type": "object", "properties": dict(list(names.items())[:900])}
    assert convert(few).lark_text.count('"\\"field_') == 900
    # nesting past the limit: named, no hint
    deep: dict = {"type": "integer"}
    for _ in range(200):
        deep = {"type": "array", "items": deep}
    with pytest.raises(UnsupportedSchemaError) as e:
        convert(deep, lenient=True)
    assert not e.value.droppable and "lenient" not in str(e.value)


def test_unknown_formats_and_keywords_are_annotations():
    # draft 2020-12 section 7.2: a format no draft defines is an annotation; so is any unknown key
    for schema in ({"type": "string", "format": "password"}, {"type": "string", "format": "topic", "x-ui": 3},
                   {"type": "string", "markdownDescription": "x", "extends": {"type": "integer"}}):
        c = Checker(schema)
        assert not c.sg.dropped
        for text in ['""', '"hunter2"', '"\\u0001"', '"a\\"b"', '"é"']:
            assert c.accepts(text) is oracle(schema, json.loads(text)) is True, (schema, text)
        assert not c.accepts("1") and not oracle(schema, 1)
    # merging two different annotations is no conflict
    c = Checker({"allOf": [{"type": "integer", "x-a": 1}, {"x-a": 2, "maximum": 3}]})
    assert c.accepts("3") and not c.accepts("4")


@pytest.mark.parametrize("lo,hi", [(0, 65), (3, 200), (130, 130), (100, None), (64, 128), (0, 129)])
def test_long_length_bounds_as_chunk_chains(lo, hi):
    s = {"type": "string", "minLength": lo}
    if hi is not None:
        s["maxLength"] = hi
    c = Checker(s)
    assert not c.sg.dropped and "ls_" in c.sg.lark_text  # spelled as a chain of chunk terminals
    top = (hi if hi is not None else lo + 70) + 3
    for n in sorted({0, 1, lo - 1, lo, lo + 1, 63, 64, 65, 127, 128, 129, top - 4, top - 3, top} - {-1}):
        for fill in ("a", "é", "\\n", "\\u0001", "\\\\", "\\/"):  # JSON spellings of one character
            text = '"' + fill * n + '"'
            # canonical spelling only: "\/" (an escaped "/") is not how gad spells "/"
            want = oracle(s, json.loads(text)) and (fill != "\\/" or n == 0)
            assert c.accepts(text) is want, (s, n, fill)
    # a chunk boundary inside an escape or a multi-byte character
    for n in (63, 64, 65):
        text = '"' + "a" * (n - 1) + "\\u0002" + "€" + '"'
        assert c.accepts(text) is oracle(s, json.loads(text)), (s, n)
    assert not c.accepts('"' + "a" * (lo + 1)) and not c.accepts("1")


def test_long_length_bound_in_unions():
    s = {"anyOf": [{"type": "string", "maxLength": 100}, {"type": "integer"}]}
    c = Checker(s)
    assert c.accepts('"' + "x" * 100 + '"') and not c.accepts('"' + "x" * 101 + '"') and c.accepts("5")
    c = Checker({"anyOf": [{"type": "string", "maxLength": 100}, {"type": "string"}]})  # widened
    assert c.accepts('"' + "x" * 101 + '"')
    with pytest.raises(UnsupportedSchemaError) as e:
        convert({"anyOf": [{"type": "string", "maxLength": 100}, {"type": "string", "pattern": "^a"}]})
    assert e.value.keyword == "anyOf"
    with pytest.raises(UnsupportedSchemaError):
        convert({"oneOf": [{"type": "string", "maxLength": 100}, {"type": "string", "minLength": 101}]})


_TOOLS = {"anyOf": [  # BFCL-style tool calls: one closed object per tool, told apart by the first key
    {"type": "object", "properties": {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}},
                                                      "required": ["city"], "additionalProperties": False}},
     "required": ["get_weather"], "additionalProperties": False},
    {"type": "object", "properties": {"add": {"type": "object", "properties": {"a": {"type": "integer"},
                                                                              "b": {"type": "integer"}},
                                              "required": ["a"], "additionalProperties": False}},
     "required": ["add"], "additionalProperties": False}]}
_TAGGED = {"oneOf": [  # a discriminator: the same required first key, disjoint const values
    {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"]},
    {"type": "object", "properties": {"kind": {"enum": ["rect", "square"]}, "w": {"type": "integer"}},
     "required": ["kind"]},
    {"type": "object", "properties": {"kind": {"const": 7}}, "required": ["kind"], "additionalProperties": False}]}
_OPEN = {"anyOf": [{"type": "object", "required": ["a"]},
                   {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}, "required": ["b"]}]}
_CLOSED_ONE_OF = {"oneOf": [
    {"type": "object", "properties": {"x": {"type": "integer"}, "y": {}}, "required": ["x"], "additionalProperties": False},
    {"type": "object", "properties": {"z": {"type": "integer"}}, "required": ["z"], "additionalProperties": False}]}


@pytest.mark.parametrize("schema,values", [
    (_TOOLS, [{"get_weather": {"city": "Oslo"}}, {"add": {"a": 1, "b": 2}}, {"add": {"a": 1}}, {"add": {"b": 1}},
              {"get_weather": {"city": 3}}, {"get_weather": {"city": "x"}, "add": {"a": 1}}, {}, {"other": 1},
              {"add": {"a": 1, "c": 2}}, [], "x"]),
    (_TAGGED, [{"kind": "circle", "r": 1.5}, {"kind": "circle"}, {"kind": "rect"}, {"kind": "square", "w": 2, "q": 1},
               {"kind": "rect", "w": "x"}, {"kind": 7}, {"kind": 7, "r": 1}, {"kind": "tri"}, {"r": 1}, {}, 7]),
    (_OPEN, [{"a": 1}, {"b": "s"}, {"b": "s", "a": "not an int"}, {"a": "x", "b": "s"}, {"a": 1, "b": 2},
             {"b": 2}, {"c": 1}, {}, {"a": None, "z": [1]}]),
    (_CLOSED_ONE_OF, [{"x": 1}, {"x": 1, "y": [2]}, {"z": 3}, {"x": 1, "z": 3}, {"y": 1}, {"z": "a"}, {}]),
])
def test_object_unions_exact(schema, values):
    c = Checker(schema)
    assert not c.sg.dropped
    for v in values:
        want = oracle(schema, v)
        assert c.accepts_value(v) is want, (v, c.sg.dumps(v))
    # the same key order as jsonschema sees it: a text in the other branch's order is its own test
    flex = Checker(schema, whitespace="flexible")
    for v in values:
        if isinstance(v, dict) and v:
            assert flex.accepts_value(v, indent=2) is oracle(schema, v), v


def test_object_union_key_order_and_nesting():
    c = Checker(_OPEN)
    # each branch keeps its own order: {"b":"s","a":"x"} is valid (branch 0) but only in branch 0's
    # order, which writes "a" first; dumps picks the first branch that validates the value
    assert oracle(_OPEN, {"b": "s", "a": "x"}) and c.sg.dumps({"b": "s", "a": "x"}) == '{"a":"x","b":"s"}'
    assert c.accepts('{"a":"x","b":"s"}') and not c.accepts('{"b":"s","a":"x"}') and c.accepts('{"b":"s","a":1}')
    nested = {"type": "object", "properties": {"call": _TOOLS, "n": {"type": "integer"}}, "required": ["call"]}
    c = Checker(nested)
    for v in [{"call": {"add": {"a": 1}}, "n": 2}, {"call": {"add": {"a": "1"}}}, {"call": {}}, {"n": 1}]:
        assert c.accepts_value(v) is oracle(nested, v), v
    # a union inside a union's branch is flattened into one union
    deep = {"anyOf": [_TOOLS, {"type": "object", "properties": {"z": {}}, "required": ["z"], "additionalProperties": False}]}
    c = Checker(deep)
    for v in [{"z": 1}, {"add": {"a": 1}}, {"z": 1, "add": {"a": 1}}]:
        assert c.accepts_value(v) is oracle(deep, v), v


_KEYS_U = ["k", "a", "b"]
_val = st.sampled_from([{"type": "integer"}, {"type": "string"}, {"const": "p"}, {"const": "q"}, {"enum": [1, 2]},
                        {"enum": [3]}, {}])
_branch = st.builds(
    lambda props, req, addl: {"type": "object", "properties": props, "required": req,
                              **({} if addl is None else {"additionalProperties": addl})},
    st.dictionaries(st.sampled_from(_KEYS_U), _val, max_size=3),
    st.lists(st.sampled_from(_KEYS_U), min_size=1, max_size=2, unique=True),
    st.sampled_from([None, False, {"type": "integer"}]))
_obj_json = st.dictionaries(st.sampled_from(_KEYS_U + ["z"]),
                            st.sampled_from([0, 1, 2, 3, "p", "q", "s", None, [1]]), max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["anyOf", "oneOf"]), st.lists(_branch, min_size=2, max_size=3),
       st.lists(_obj_json, min_size=8, max_size=8))
def test_random_object_unions_accept_iff_jsonschema_validates(kw, branches, values):
    agree_with_jsonschema({kw: branches}, values, refusable=(kw,))


@pytest.mark.parametrize("schema", [
    {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}},
    {"type": "object", "properties": {"a": {"type": "integer"}, "x-b": {"minimum": 2}}, "required": ["a"],
     "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "patternProperties": {".*": {"type": "string"}}, "properties": {"n": {"maxLength": 1}}},
    {"type": "object", "patternProperties": {"^[a-z]+$": {"type": "boolean"}, "^[0-9]+$": {"type": "null"}},
     "additionalProperties": {"type": "integer"}},
    {"type": "object", "patternProperties": {"^k": {"type": "string"}}, "required": ["k1", "z"]},
])
def test_pattern_properties_exact(schema):
    c = Checker(schema)
    assert not c.sg.dropped
    keys = ["a", "x-b", "x-é", "n", "k1", "z", "12", "A", ""]
    vals = [1, 3, "s", "", True, None, 2.5]
    for i, k1 in enumerate(keys):  # every pair of keys, values varied
        for j, k2 in enumerate(keys[i:]):
            v1, v2 = vals[(i + j) % 7], vals[(2 * i + j + 3) % 7]
            for obj in ({k1: v1, k2: v2}, {k1: v2}, {k2: v1}):
                assert c.accepts_value(obj) is oracle(schema, obj), (schema, obj, c.sg.dumps(obj))
    for v in vals:
        assert c.accepts_value({"k1": v, "z": v}) is oracle(schema, {"k1": v, "z": v})
    assert c.accepts_value({}) is oracle(schema, {})


def test_pattern_properties_refused_when_overlapping():
    with pytest.raises(UnsupportedSchemaError) as e:
        convert({"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "string"}}})
    assert e.value.keyword == "patternProperties"
    # lenient: dropped, and the keys it governed are then free (never narrower)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sg = convert({"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "string"}},
                      "additionalProperties": False}, lenient=True)
    c = gad.compile(Grammar.from_string(sg.lark_text), BYTES, cache_dir=False).matcher()
    assert c.accept_bytes(b'{"ab":[]}') and c.is_accepting()


def test_merged_properties_keep_their_own_schemas():
    # both objects merge base's properties with their own "value": the merged properties carry
    # base's pointer, so rules memoised by pointer alone gave the second "value" the first's schema
    # (MaskBench JsonSchemaStore---coffeelint.json)
    s = {"$schema": "http://json-schema.org/draft-04/schema#",
         "definitions": {"base": {"type": "object", "properties": {"level": {"enum": ["warn", "error"]}}}},
         "properties": {
             "a": {"allOf": [{"$ref": "#/definitions/base"}], "properties": {"value": {"type": "integer"}}},
             "b": {"allOf": [{"$ref": "#/definitions/base"}], "properties": {"value": {"enum": ["x", "y"]}}}}}
    c = Checker(s)
    for v in [{"a": {"level": "warn", "value": 4}, "b": {"value": "x"}}, {"b": {"value": 4}}, {"a": {"value": "x"}},
              {"a": {"level": "no"}}, {"b": {"level": "error", "value": "y"}}]:
        assert c.accepts_value(v) is oracle(s, v), v


def test_unsupported_keyword_on_other_kind_is_ignored():
    # multipleOf constrains numbers only: on a string schema it is a no-op and nothing is dropped
    c = Checker({"type": "string", "multipleOf": 3, "minLength": 1})
    assert c.accepts('"x"') and not c.accepts('""') and not c.sg.dropped


def test_bad_input_is_typed(tmp_path):
    with pytest.raises(InvalidSchemaError):
        convert("{not json")
    with pytest.raises(InvalidSchemaError):
        convert(tmp_path / "missing.json")
    with pytest.raises(InvalidSchemaError):
        convert({"$ref": "#/$defs/nope"})
    with pytest.raises(InvalidSchemaError):
        convert({"type": 12})
    p = tmp_path / "s.json"
    p.write_text('{"type": "boolean"}')
    assert Checker(p).accepts("true") and Grammar.from_json_schema(str(p)).parses("false")


# ------------------------------------------------------------------------------ hypothesis
_leaf = st.one_of(
    st.just({"type": "integer"}),
    st.builds(lambda a, b: {"type": "integer", "minimum": min(a, b), "maximum": max(a, b)},
              st.integers(-30, 30), st.integers(-30, 30)),
    st.builds(lambda a: {"type": "number", "exclusiveMinimum": a}, st.integers(-5, 5)),
    st.just({"type": "string"}),
    st.builds(lambda a, b: {"type": "string", "minLength": min(a, b), "maxLength": max(a, b)},
              st.integers(0, 3), st.integers(0, 3)),
    st.sampled_from([{"type": "string", "pattern": p} for p in ["^a", "b$", "a[bc]*d", "^(ab|c)+$", "x?y"]]),
    st.lists(st.sampled_from(["a", "b", 1, 2.5, None, True]), min_size=1, max_size=3).map(lambda v: {"enum": v}),
    st.sampled_from([{"type": "null"}, {"type": "boolean"}, {}, {"const": "k"}, {"type": ["string", "null"]}]),
)
_KEYS = ["a", "b", "ab"]


def _extend(children):
    obj = st.builds(
        lambda props, req, addl: {"type": "object", "properties": props, "required": req,
                                  **({} if addl is None else {"additionalProperties": addl})},
        st.dictionaries(st.sampled_from(_KEYS), children, max_size=3),
        st.lists(st.sampled_from(_KEYS), max_size=2, unique=True),
        st.sampled_from([None, False, {"type": "integer"}]))
    arr = st.builds(lambda it, lo, n: {"type": "array", "items": it, "minItems": lo, "maxItems": lo + n},
                    children, st.integers(0, 2), st.integers(0, 2))
    tup = st.builds(lambda pre, rest: {"type": "array", "prefixItems": pre, "items": rest},
                    st.lists(children, min_size=1, max_size=2), st.sampled_from([False, {"type": "string"}]))
    any_of = st.builds(lambda a, b: {"anyOf": [a, b]}, children, children)
    return st.one_of(obj, arr, tup, any_of)


_schemas = st.recursive(_leaf, _extend, max_leaves=6)
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-40, 40), st.sampled_from([2.5, -0.5, 7.0]),
              st.sampled_from(["", "a", "ab", "abd", "k", "xy", "ba", "é\n\""])),
    lambda ch: st.one_of(st.lists(ch, max_size=4), st.dictionaries(st.sampled_from(_KEYS + ["z"]), ch, max_size=4)),
    max_leaves=8)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas, st.lists(_json, min_size=6, max_size=6))
def test_random_schemas_accept_iff_jsonschema_validates(schema, values):
    # only unions of two object / array schemas are refused
    c = agree_with_jsonschema(schema, values, refusable=("anyOf", "oneOf"))
    for v in values if c is not None else ():
        assert c.grammar.parses(c.sg.dumps(v)) is oracle(schema, v) or not oracle(schema, v), (schema, v)


def test_builtin_json_compact():
    g = Grammar.builtin("json_compact")
    cg = gad.compile(g, BYTES, cache_dir=False)
    for text, want in [('{"a":[1,2.5e3,"x\\n",true,null,{}]}', True), ('{"a": 1}', False), ("[1 ]", False),
                       ("[]", True), ("01", False)]:
        m = cg.matcher()
        assert (m.accept_bytes(text.encode()) and m.is_accepting()) is want, text
        assert g.parses(text) is want, text


def test_large_string_enum_is_budgeted_by_its_trie():
    """An enum of 1,500 codes (MaskBench Github_medium---o20234) has 13,500 characters but a trie of
    ~3,000 states: under the automaton budget (it counted characters, and refused it)."""
    codes = [f"{a:03d}-{b:03d}" for a in range(1, 16) for b in range(1, 101)]
    s = {"type": "object", "properties": {"code": {"enum": codes}}, "required": ["code"]}
    c = Checker(s)
    for value in ({"code": "005-017"}, {"code": "015-100"}, {"code": "016-001"}, {"code": "005-17"}, {"code": 5}):
        assert c.accepts_value(value) is oracle(s, value), value


def test_string_enum_over_one_terminals_budget_is_split_into_several():
    """An enum of 2,358 names whose one terminal would be over gad's budget of 10,000 automaton states
    (a trie of 13,385) is spelled by several terminals (disjoint runs of the sorted names): each
    name, and nothing else (prefixes, extensions, other strings), is accepted, escapes and non-ASCII
    included; one over every budget is refused at its pointer and dropped by ``lenient``."""
    import random

    rng = random.Random(7)
    names = sorted({"".join(rng.choice('abcxyzé"\\ .') for _ in range(rng.randint(2, 12))) for _ in range(2500)})
    s = {"type": "object", "properties": {"city": {"enum": names}}, "required": ["city"], "additionalProperties": False}
    c = Checker(s)
    assert sum(line.startswith('S_') for line in c.sg.lark_text.splitlines()) >= 2  # (split, not one terminal)
    probes = [names[0], names[-1], names[700], names[700][:-1], names[700] + "a", "é" * 13, "", 3]
    for v in probes + rng.sample(names, 20):
        assert c.accepts_value({"city": v}) is oracle(s, {"city": v}), v
    assert not c.accepts('{"city":"' + names[3] + '","x":1}')
    # the empty string and U+007F (which the escaped alternation writes \x7f) among them
    odd = {"type": "object", "properties": {"city": {"enum": names + ["", "a\x7fb"]}}, "required": ["city"]}
    c = Checker(odd)
    for v in ["", "a\x7fb", "a\x7f", names[5], "zz"]:
        assert c.accepts_value({"city": v}) is oracle(odd, {"city": v}), v
    # emoji are 4 bytes each: refused at the enum by the lexer context's budget, not late by the grammar
    pick = random.Random(3)
    emoji = sorted({"".join(chr(0x1F300 + pick.randrange(700)) for _ in range(5)) for _ in range(13_000)})
    with pytest.raises(UnsupportedSchemaError) as e:
        convert({"properties": {"e": {"enum": emoji}}})
    assert (e.value.pointer, e.value.keyword) == ("/properties/e", "enum")
    huge = {"type": "object", "properties": {"city": {"enum": [f"{i:07d}-{i * 7919 % 10 ** 7:07d}" for i in range(12_000)]},
                                             "n": {"type": "integer"}}}
    lenient = _refused_then_dropped(huge, "/properties/city", "enum")
    assert lenient.accepts('{"city":"anything","n":1}') and not lenient.accepts('{"city":1}')


@pytest.mark.parametrize("schema", [
    {"not": {"type": "null"}}, {"not": {"type": ["array", "object", "null"]}}, {"not": {"type": "number"}},
    {"type": "object", "properties": {"image": {"type": "string"}, "n": {"type": "integer"}},
     "not": {"required": ["image"]}},
    {"not": {"required": ["image"]}}, {"not": True}, {"not": False},
    {"anyOf": [{"not": {"required": ["image"]}}, {"type": "string"}]},
    {"type": "object", "properties": {"image": {"not": {"type": ["string", "null"]}}}, "required": ["image"]},
    {"not": {"required": ["image", "n"]}}, {"not": {"allOf": [{"required": ["image"]}, {"required": ["n"]}]}},
    {"type": "object", "properties": {"image": {"type": "string"}, "n": {"type": "integer"}},
     "not": {"anyOf": [{"required": ["image", "n"]}, {"required": ["image", "x"]}]}},
    {"not": {"$ref": "#/$defs/both"}, "$defs": {"both": {"required": ["image", "n"]}}},
    {"not": {"anyOf": [{"type": "string"}, {"required": ["n"]}]}},
    {"not": {"properties": {"image": {"type": "string"}}}},
    {"not": {"const": None}}, {"not": {"enum": [True, None]}}, {"not": {"const": False}},
    {"type": "object", "properties": {"image": {"not": {"enum": [None, True, False]}}}},
    {"not": {"properties": {"image": {"type": "string"}}, "required": ["image"]}},
    {"oneOf": [{"properties": {"image": {"type": "string"}}, "required": ["image"]},
               {"properties": {"n": {"type": "number"}}, "required": ["n"]}]},
])
def test_not_of_a_type_or_one_required_name_agrees_with_jsonschema(schema):
    """``not`` of a ``type`` (the other types), of ``required`` (an object missing a name; a value that
    is not an object fails such a ``not``), of ``properties`` of such shapes (an object with a name
    whose value is outside its schema), of a local ``$ref`` to such a shape, and of ``anyOf`` /
    ``allOf`` of such shapes (De Morgan) is rewritten, not refused, and so is a ``oneOf`` of such
    branches; under draft-03, which has no ``not``, it is an annotation, as its validators read it."""
    values = [None, 0, 1, 1.5, -2, "x", "", True, False, [], [1], {}, {"image": "a"}, {"image": 1}, {"n": 1},
              {"image": None, "n": 2}, {"image": [1]}, {"x": None}, {"image": "a", "n": 1}, {"image": "a", "x": 1},
              {"n": 1, "x": 2}, {"image": "a", "n": 1, "x": 2}]
    agree_with_jsonschema(schema, values)
    if isinstance(schema, dict) and not isinstance(schema.get("required"), list):  # (draft-03's is a boolean)
        agree_with_jsonschema({"$schema": "http://json-schema.org/draft-03/schema#", **schema}, values)


def test_a_not_of_nested_unions_is_refused_not_multiplied_out():
    """``not`` of an ``anyOf`` of ``not``s of ``anyOf``s (MaskBench's Handwritten---allany19 nests three:
    27 pattern intersections by De Morgan, half a minute to build) stays a typed refusal at the
    ``not``; a union under two ``not``s is not multiplied out."""
    inner = {"not": {"anyOf": [{"pattern": "a1"}, {"pattern": "b1"}, {"pattern": "c1"}]}}
    s = {"type": "string", "$defs": {"n": {"not": {"anyOf": [inner, inner, inner]}}}, "anyOf": [{"$ref": "#/$defs/n"}]}
    with pytest.raises(UnsupportedSchemaError) as e:
        convert(s)
    assert (e.value.pointer, e.value.keyword) == ("/$defs/n", "not")
    agree_with_jsonschema({"not": {"not": {"type": "string"}}}, ["x", 1, None])


@pytest.mark.parametrize("schema,values,pointer", [
    # a $ref into a resource with its own $id resolves against that base: not followed under not
    ({"$defs": {"s": {"type": "null"}, "B": {"$id": "http://e.com/b", "$defs": {"s": {"type": "string"}},
                                             "properties": {"x": {"$ref": "#/$defs/s"}}}},
      "not": {"$ref": "#/$defs/B"}}, [{"x": "s"}, {"x": None}], ""),
    # an anchor ref is not followed (lenient would drop it to true, and not true is false: narrower)
    ({"$defs": {"x": {"$anchor": "s", "type": "string"}}, "properties": {"p": {"not": {"$ref": "#s"}}}}, [{"p": 1}],
     "/properties/p"),
    ({"oneOf": [{"$ref": "#s"}, {"required": ["a"]}], "$defs": {"x": {"$anchor": "s", "type": "string"}}}, [{"a": 1}, 1],
     "/oneOf/0 $ref"),
    # a recursive $ref is not negated around its cycle (the work grew as 7^depth)
    ({"$defs": {"n": {"properties": {k: {"$ref": "#/$defs/n"} for k in "abcdefg"}}}, "not": {"$ref": "#/$defs/n"}},
     [{}, 1], ""),
    # De Morgan over 8 branches of 3 names: 3^8 alternatives, refused
    ({"not": {"anyOf": [{"required": [f"k{i}", f"k{i + 1}", f"k{i + 2}"]} for i in range(8)]}}, [{}, 1], ""),
])
def test_not_rewrites_refuse_what_they_cannot_read_or_afford(schema, values, pointer):
    """Shapes an adversarial review found (session 23): the rewrite of ``not`` / ``oneOf`` refuses them
    (typed, at once), and ``lenient=True`` drops the keyword, so the grammar only gets wider."""
    pointer, _, kw = pointer.partition(" ")
    refused_then_widened(schema, pointer, kw or "not", values)


_DIMENSIONS = {"type": "object", "properties": {k: {"type": "number"} for k in ("length", "width", "radius", "base", "height")}}


@pytest.mark.parametrize("one_of", [
    [{"required": ["length", "width"]}, {"required": ["radius"]}],
    [{"required": ["length", "width"]}, {"required": ["radius"]}, {"required": ["base", "height"]}],
    [{"required": ["length"]}, {"required": ["radius"]}, {"required": ["radius", "height"]}],
    [{"not": {"required": ["base", "height"]}, "required": ["length", "width"]},
     {"not": {"required": ["length", "width"]}, "required": ["base", "height"]}],
    [{"required": ["radius"]}, {"type": "object", "not": {"required": ["width"]}}],
    [{"required": ["radius"]}, {"type": "string"}],
])
@pytest.mark.parametrize("where", ["inside", "alone"])
def test_one_of_over_required_names_is_split_into_disjoint_branches(one_of, where):
    """A ``oneOf`` whose branches overlap but can each be negated (``required``, ``type``, ``not`` of
    them: the Glaive calculate_area shapes of MaskBench) is exact as the branches "B_i and no other
    B_j": every value is checked against jsonschema, the objects with two branches' names among them."""
    s = {**_DIMENSIONS, "oneOf": one_of} if where == "inside" else {"oneOf": one_of}
    names = ["length", "width", "radius", "base", "height"]
    values: list = [None, 1, "x", [], {}]
    for mask in range(1, 32):
        values.append({k: i + 1 for i, k in enumerate(names) if mask >> i & 1})
    assert agree_with_jsonschema(s, values) is not None


_DRAFTS = {"03": "http://json-schema.org/draft-03/schema#", "04": "http://json-schema.org/draft-04/schema#",
           "06": "http://json-schema.org/draft-06/schema#", "07": "http://json-schema.org/draft-07/schema#",
           "2019": "https://json-schema.org/draft/2019-09/schema", "2020": "https://json-schema.org/draft/2020-12/schema"}


@pytest.mark.parametrize("draft", list(_DRAFTS))
@pytest.mark.parametrize("schema", [
    {"anyOf": [{"type": "string"}, {"type": "null"}]}, {"allOf": [{"type": "integer"}, {"minimum": 2}]},
    {"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"const": 3}, {"type": "integer", "multipleOf": 2},
    {"type": "object", "minProperties": 1}, {"type": "object", "maxProperties": 1},
    {"type": "integer", "minimum": 1, "exclusiveMinimum": True}, {"type": "integer", "exclusiveMaximum": 3},
    {"minimum": 1, "exclusiveMinimum": True, "anyOf": [{"enum": [1, 2, 3]}, {"type": "string"}]},
    {"type": "array", "prefixItems": [{"type": "string"}]}, {"type": "object", "dependentRequired": {"a": ["b"]}},
    {"type": "object", "dependencies": {"a": ["b"]}}, {"type": "object", "dependencies": {"a": "b"}},
    {"type": "object", "dependencies": {"a": {"properties": {"a": {"type": "integer", "required": True}}}}},
    {"type": "object", "dependencies": {"a": {"properties": {"b": {"type": "integer", "required": True}},
                                              "additionalProperties": False}}},
    {"type": "object", "properties": {"a": {"type": "integer", "required": True}, "b": {"type": "null"}}},
    {"type": "object", "properties": {"a": {"$ref": "#/definitions/i"}}, "definitions": {"i": {"type": "integer", "required": True}}},
    {"type": "object", "properties": {"ab": {"type": "integer"}}, "patternProperties": {"^a": {"minimum": 3}},
     "additionalProperties": False},
    {"if": {"type": "string"}, "then": {"minLength": 2}}, {"type": "object", "required": ["a"]},
])
def test_each_draft_reads_only_its_own_keywords(draft, schema):
    """A keyword the schema's draft does not define is an annotation, as that draft's validator reads
    it (draft-03 has no ``anyOf`` / ``const`` / ``required`` list, draft-07 no ``dependentRequired``,
    2020-12 no ``dependencies``); draft-03's ``"required": true`` inside a property's schema and
    one-name ``dependencies`` are read as draft-03 says.  A schema the draft's meta-schema rejects is
    an InvalidSchemaError; a refusal must name ``if`` (one whose condition gad cannot negate)."""
    s = {"$schema": _DRAFTS[draft], **schema}
    cls = jsonschema.validators.validator_for(s)
    try:
        cls.check_schema(s)
    except jsonschema.SchemaError:
        with pytest.raises(InvalidSchemaError):
            convert(s)
        return
    values = [None, 0, 1, 2, 3, 4, 1.5, "x", "xy", True, [], ["a"], [1], [1, 2], {}, {"a": 1}, {"b": 1},
              {"a": 1, "b": 2}, {"a": "x"}, {"a": 1, "b": None}, {"ab": 2}, {"ab": 5}, {"a": 1, "b": "s"},
              {"c": 1}]
    agree_with_jsonschema(s, values, refusable={"if"})


@pytest.mark.parametrize("schema,values", [
    # a merged items list, checked by an older draft's validator (enum values): items: [...] + additionalItems
    ({"$schema": _DRAFTS["07"], "properties": {"ab": {"items": [{"type": "integer"}], "additionalItems": {"type": "string"}}},
      "patternProperties": {"^a": {"items": [{}], "enum": [[1], [1, "x"], ["x"]]}}},
     [{"ab": [1]}, {"ab": [1, "x"]}, {"ab": ["x"]}]),
    ({"$schema": _DRAFTS["07"], "items": [{"minimum": 0}], "anyOf": [{"items": [{}], "enum": [[-1]]}, {"type": "null"}]},
     [[-1], None, [0]]),
    ({"$schema": _DRAFTS["04"], "items": [{"minimum": 0}], "anyOf": [{"items": [{}], "enum": [[-1]]}, {"type": "null"}]},
     [[-1], None, [0]]),
    # draft-03: required inside a dependency's schema; type "any"; a meet under additionalProperties
    ({"$schema": _DRAFTS["03"], "properties": {"b": {}}, "dependencies": {"b": {"properties": {"a": {"required": True}}}}},
     [{"b": 1}, {"b": 1, "a": 2}, {}]),
    ({"$schema": _DRAFTS["03"], "dependencies": {"a": {"required": True}}}, [{"a": 1}, {}]),
    ({"$schema": _DRAFTS["03"], "type": "any"}, [1, "x", None]),
    ({"$schema": _DRAFTS["03"], "type": ["any", "string"], "minimum": 3}, [5, 1, "x"]),
    ({"$schema": _DRAFTS["03"], "properties": {"xa": {"type": "object", "additionalProperties": {"type": "integer"}}},
      "patternProperties": {"a$": {"additionalProperties": {"minimum": 0}, "enum": [{"a": -1}, {"a": 1}]}}},
     [{"xa": {"a": -1}}, {"xa": {"a": 1}}]),
    # the draft is jsonschema's reading of $schema: an unknown URI is 2020-12 ($ref's siblings apply)
    ({"$schema": "https://json-schema.org/draft-07/schema#", "definitions": {"a": {"type": "integer"}},
      "$ref": "#/definitions/a", "minimum": 5}, [1, 6]),
    # a modifier without its keyword is an annotation
    ({"$schema": _DRAFTS["07"], "then": {"minLength": 3}}, ["a"]),
    ({"type": "array", "minContains": 2}, [[1], []]),
    # a required name that is not listed takes its patterns' schemas, not additionalProperties'
    ({"additionalProperties": {"type": "integer"}, "patternProperties": {"^b": {}}, "required": ["b"]},
     [{"b": {}}, {"b": 1}, {"c": "x", "b": 1}, {}]),
    ({"additionalProperties": False, "patternProperties": {"^b": {"type": "integer"}}, "required": ["b"]},
     [{"b": 1}, {"b": "x"}, {"c": 1, "b": 1}]),
    # a listed name's value rule under patterns is keyed by its own schema too (two union branches)
    ({"properties": {"b": {}}, "patternProperties": {"^b": {}}, "dependentRequired": {"b": ["a"]}, "required": ["b"]},
     [{"b": 1}, {"b": 1, "a": 2}]),
    ({"properties": {"b": {}}, "patternProperties": {"^b": {}}, "dependentRequired": {"b": []}, "required": ["b"]},
     [{"b": 1}, {}]),
])
def test_drafts_and_patterns_agree_with_jsonschema(schema, values):
    """Shapes an adversarial review found wrong (session 23): gad's own schemas read by an older
    draft's validator, draft-03 spellings, unknown ``$schema`` URIs, modifiers alone, and required
    names that only a pattern lists."""
    assert agree_with_jsonschema(schema, values) is not None


@pytest.mark.parametrize("schema", [
    {"$schema": _DRAFTS["04"], "properties": {"a": {"$schema": _DRAFTS["2020"], "const": 1}}},
    {"properties": {"a": {"$schema": _DRAFTS["04"], "const": 1}}},
    {"properties": {"a": {"$ref": "#/definitions/x"}}, "definitions": {"x": {"$schema": _DRAFTS["04"], "const": 1,
                                                                              "properties": {"b": {"const": 2}}}}},
    {"$schema": _DRAFTS["07"], "properties": {"a": {"$schema": _DRAFTS["2020"], "$ref": "#/definitions/i", "minimum": 5}},
     "definitions": {"i": {"type": "integer"}}},
])
def test_a_subschema_with_its_own_draft_is_read_under_it(schema):
    """A ``$schema`` inside the document switches the draft for that subschema and what it holds, as
    jsonschema reads it (draft-04 has no ``const``), except whether ``$ref``'s siblings apply: the
    root's draft decides that, in jsonschema as in gad."""
    agree_with_jsonschema(schema, [{"a": 1}, {"a": 2}, {"a": {"b": 1}}, {"a": 6}, {"a": "x"}, {}])


def test_draft3_schemas_inside_type_are_refused():
    with pytest.raises(UnsupportedSchemaError) as e:
        convert({"$schema": _DRAFTS["03"], "type": [{"type": "integer"}, "string"]})
    assert (e.value.pointer, e.value.keyword) == ("", "type")


def test_a_key_close_to_a_keyword_is_ignored_with_a_warning():
    """A misspelt keyword (``maxLenght``) is an annotation, as validators read it (it constrains nothing),
    and gad says so, naming the pointer and the keyword meant; a key switched off on purpose with a
    leading underscore (``_format``, as MaskBench writes them) and an extension (``x-...``) are quiet."""
    from gad.errors import SchemaKeywordWarning

    s = {"type": "object", "properties": {"a": {"type": "string", "maxLenght": 3, "_format": "email",
                                                "x-max": 1, "markdownDescription": "m"}}}
    with pytest.warns(SchemaKeywordWarning) as ws:
        c = Checker(s)
    assert [str(w.message).split(": ", 1)[1] for w in ws] == ["#/properties/a 'maxLenght' (did you mean 'maxLength'?)"]
    assert c.accepts('{"a":"abcdef"}') and oracle(s, {"a": "abcdef"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Checker({"type": "string", "_format": "email", "x-maxLength": 3})


def test_multiple_of_compiles_exactly_where_documented():
    """docs/schema.md lists the a in 1-100 whose unbounded ``multipleOf`` gad writes as one terminal;
    every other a is refused at the keyword (never dropped silently), and the listed ones are exact."""
    listed = {1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 25, 30, 40, 50, 60, 75, 80, 100}
    for a in range(1, 101):
        s = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": a}}}
        try:
            sg = convert(s)
        except UnsupportedSchemaError as e:
            assert a not in listed and (e.pointer, e.keyword) == ("/properties/n", "multipleOf"), a
            continue
        assert a in listed and not sg.dropped, a
    c = Checker({"type": "integer", "multipleOf": 75})
    assert [v for v in range(-400, 400) if c.accepts(str(v))] == [v for v in range(-400, 400) if v % 75 == 0]


def test_pattern_over_the_automaton_budget_names_its_pointer():
    """A pattern whose automaton is over gad's budget (a search for ``a`` followed by 14 more a/b at the
    end: 2^15 states) is refused at its pointer and keyword, as every constraint gad cannot express,
    and ``lenient`` drops it with a warning (the grammar's refusal named a line of generated text)."""
    s = {"type": "object", "properties": {"x": {"type": "string", "pattern": "a[ab]{14}$"}, "n": {"type": "integer"}}}
    c = _refused_then_dropped(s, "/properties/x", "pattern")
    assert c.accepts('{"x":"zzz","n":1}') and not c.accepts('{"x":"zzz","n":"1"}')


def test_a_build_over_its_budget_is_remembered(monkeypatch):
    """The retry with ``lenient=True`` after a refusal for a pattern over the budget does not build that
    automaton again (it took seconds: 10,000 states built in Python before giving up), and a regexp
    that a new direct-build entry (an integer range) may now build is tried again."""
    from gad.grammar import automata
    builds: list[str] = []
    real = automata._build_fsm
    monkeypatch.setattr(automata, "_build_fsm", lambda rx, n: builds.append(rx) or real(rx, n))
    s = {"type": "object", "properties": {"x": {"type": "string", "pattern": "b[ab]{14}$"}}}
    with pytest.raises(UnsupportedSchemaError):
        convert(s)
    n = len(builds)
    assert n >= 1
    with pytest.warns(UserWarning, match="pattern"):
        convert(s, lenient=True)
    with pytest.raises(automata.AutomatonTooLarge):
        automata.regex_fsm('"' + pattern_regex("b[ab]{14}$") + '"')
    assert len(builds) == n
    fresh = "-?(?:0|[1-9][0-9]*)" + "(?:)" * 7  # (a regexp no grammar writes: a new entry)
    automata.note_int_range(fresh, -10**30, 10**30)
    automata._INT_RANGES.pop(fresh)
    with pytest.raises(automata.AutomatonTooLarge):
        automata.regex_fsm('"' + pattern_regex("b[ab]{14}$") + '"')
    assert len(builds) > n


def _refused_then_dropped(s: dict, pointer: str, keyword: str) -> Checker:
    """Assert ``s`` is refused at ``pointer`` / ``keyword``, and that ``lenient`` drops that alone, with
    a warning; returns the lenient grammar's checker."""
    with pytest.raises(UnsupportedSchemaError) as e:
        convert(s)
    assert (e.value.pointer, e.value.keyword) == (pointer, keyword)
    with pytest.warns(UserWarning, match=keyword):
        c = Checker(s, lenient=True)
    assert [(d.pointer, d.keyword) for d in c.sg.dropped] == [(pointer, keyword)]
    return c


def test_string_union_over_the_automaton_budget_names_the_union():
    """Two string branches that each fit the automaton budget but whose union does not: refused at the
    union's pointer and keyword; ``lenient`` drops the union: its strings become those the node admits
    without it (any string here)."""
    s = {"anyOf": [{"type": "string", "pattern": "a[ab]{11}$"}, {"type": "string", "pattern": "b[ab]{11}$"}]}
    c = _refused_then_dropped(s, "", "anyOf")
    assert c.accepts('"zz"') and c.accepts('"a"') and c.accepts('"' + "a" * 12 + '"')


@pytest.mark.parametrize("schema,values", [
    ({"enum": ['"', "a", 'q"\\']}, ['"', "a", 'q"\\', "q", '\\"']),
    ({"const": 'say "hi"'}, ['say "hi"', "say hi"]),
    ({"type": "string", "pattern": '"'}, ['a"b', "ab"]),
    ({"type": "string", "pattern": '^[a"]+$', "maxLength": 5}, ['a"a', 'a"a"a"', "b"]),
    ({"type": "object", "patternProperties": {'^k"': {"type": "integer"}}}, [{'k"x': 1}, {'k"x': "s"}, {"k": "s"}]),
])
def test_strings_holding_a_quote_agree_with_jsonschema(schema, values):
    """A regex terminal with an escaped backslash right before a quote (an enum value, a const or a
    pattern holding ``"``) is written so that Lark reads it back as written (``\\x22``): Lark's escaping
    turned ``\\\\"`` into a bare quote, and such values were never accepted."""
    agree_with_jsonschema(schema, values)


def test_enum_literals_never_cost_a_schema_its_grammar() -> None:
    """Enums as literal terminals (one per string) must not refuse what one word-set terminal per enum
    builds: past gad's limit of terminals the schema is built again with each enum one terminal (21
    properties of 48 strings: 1,043 terminals as literals); an enum too large for one terminal, cut
    into chunks, keeps its chunks as word sets (100 strings of 200 characters: 3 terminals, not 100
    literals in one lexer context)."""
    import random

    many = {"type": "object", "properties": {f"p{i}": {"enum": [f"v{i}_{j}" for j in range(48)]} for i in range(21)}}
    sg = convert(many)
    assert "|v0_47)" in sg.lark_text and '/"v0_0"/' not in sg.lark_text
    c = Checker(many)
    assert c.accepts('{"p0":"v0_47","p20":"v20_0"}') and not c.accepts('{"p0":"v1_0"}')
    few = convert({"type": "object", "properties": {f"p{i}": {"enum": [f"v{i}_{j}" for j in range(5)]}
                                                     for i in range(10)}})
    assert '/"v0_0"/' in few.lark_text  # (within the limits: literals)
    rnd = random.Random(0)
    words = ["".join(rnd.choice("abcdefghij") for _ in range(200)) for _ in range(100)]
    long = convert({"enum": words})
    assert sum(line.startswith("S_") for line in long.lark_text.splitlines()) == 3
    c = Checker({"enum": words})
    assert c.accepts(json.dumps(words[57])) and not c.accepts(json.dumps(words[57][:-1]))


def test_enum_literal_terminals_are_checked_as_literals(monkeypatch) -> None:
    """An enum value's terminal (a regexp of one string, ``/"q1"/``) is checked as a literal: no
    automaton is built for it, no ``re.compile``, and its width is its length, as Lark's sre reading
    would find (a schema of 20 enums of 20 strings: 31-38 -> 15-17 ms to read, 10 ms before they were
    literals)."""
    from gad.grammar import loader

    seen: list[str] = []
    build = loader.regex_fsm
    monkeypatch.setattr(loader, "regex_fsm", lambda rx, *a: seen.append(rx) or build(rx, *a))
    g = Grammar.from_json_schema({"type": "object", "properties": {"k": {"enum": ["q1", "q.2", "q\\3"]}}})
    assert seen and not any("q" in rx for rx in seen), seen
    widths = {t.pattern.value: t.pattern.max_width for t in g.tables.terminals if "q" in t.pattern.value}
    assert sorted(widths.values()) == [4, 5, 6], widths


def test_string_values_are_literal_terminals(smollm2_tokenizer) -> None:
    """A const or an enum of a few strings is one literal terminal ``"X"`` per string (not ``"(?:X|Y)"``):
    the lexer reads each as a literal and builds the value's context from its bytes or as the trie of
    the literals; an enum of more than ``_ENUM_LITERALS_MAX`` strings stays one word-set terminal.  The
    masks stay exact (the instances below, token by token)."""
    from gad.engine.lexer import TerminalAutomaton
    from gad.grammar.json_schema import _ENUM_LITERALS_MAX

    many = [f"w{i}" for i in range(_ENUM_LITERALS_MAX + 1)]
    schema = {"type": "object", "properties": {"kind": {"const": "Role"}, "v": {"enum": ["a.b"]},
                                               "w": {"enum": ["x", "y", ""]}, "z": {"enum": many}},
              "required": ["kind", "v", "w"]}
    sg = convert(schema)
    defs = dict(line.split(": ", 1) for line in sg.lark_text.splitlines() if line.startswith("S_"))
    by_regex = {rx.strip("/"): name for name, rx in defs.items()}
    assert {'"Role"', '"a\\.b"', '"x"', '"y"', '""', '"(?:' + "|".join(many) + ')"'} <= set(by_regex), defs
    assert not any(rx.startswith('"(?:x') for rx in by_regex), defs
    for rx in ('"Role"', '"a\\.b"', '"x"', '""'):
        assert TerminalAutomaton.build(by_regex[rx], rx).chain() is not None, rx
    cg = gad.compile(Grammar.from_json_schema(schema), smollm2_tokenizer, cache_dir=False)
    m = cg.matcher()
    assert m.accept_bytes(b'{"kind":"Role","v":"a.b","w":"')
    stack, d = m.state
    dfa = cg.ctx(cg.state_ctx[cg.top(stack)])
    assert len(dfa.terms) == 3 and dfa._trie_shape() is not None  # (built as the literals' trie)
    for text, ok in (('{"kind":"Role","v":"a.b","w":"y"}', True), ('{"kind":"Rolf","v":"a.b","w":"y"}', False),
                     ('{"kind":"Role","v":"axb","w":"x"}', False), ('{"kind":"Role","v":"a.b","w":""}', True),
                     ('{"kind":"Role","v":"a.b","w":"xy"}', False), ('{"kind":"Role","v":"a.b","w":"x","z":"w48"}', True),
                     ('{"kind":"Role","v":"a.b","w":"x","z":"w49"}', False)):
        m = cg.matcher()
        accepted = all(m.mask()[t] and m.accept_token(t) for t in smollm2_tokenizer.encode(text, add_special_tokens=False))
        assert (accepted and m.is_accepting()) == ok, text


@pytest.mark.parametrize("kw", ["const", "enum"])
def test_a_string_value_over_the_budget_is_refused_at_its_own_keyword(kw) -> None:
    """A const too large for one terminal is refused naming ``const`` (gad reads a const as an enum of
    one value, and named ``enum``), at its pointer; an enum the same way names ``enum``."""
    value = "x" * 30000
    node = {kw: value if kw == "const" else [value]}
    with pytest.raises(UnsupportedSchemaError) as e:
        convert({"type": "object", "properties": {"a": node}})
    assert (e.value.keyword, e.value.pointer) == (kw, "/properties/a")
