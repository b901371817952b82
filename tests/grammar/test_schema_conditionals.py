"""``if`` / ``then`` / ``else`` and ``not`` of string enums (session 24): gad rewrites them as disjoint
unions and agrees with ``jsonschema`` on every value, or refuses at the keyword it cannot write."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gad.errors import UnsupportedSchemaError
from gad.grammar import Grammar
from gad.grammar.json_schema import convert
from gad.testing.schemas import SchemaChecker, agree_with_jsonschema, refused_then_widened, schema_oracle

D7 = "http://json-schema.org/draft-07/schema#"
D6 = "http://json-schema.org/draft-06/schema#"

_OBJECTS = [{}, {"t": "x"}, {"t": "y"}, {"t": "z"}, {"t": "w"}, {"t": 1}, {"t": None}, {"a": 1}, {"b": 1},
            {"t": "x", "a": 1}, {"t": "x", "b": 1}, {"t": "y", "a": 1}, {"t": "y", "b": 1}, {"t": "z", "a": 1, "b": 2},
            {"a": 1, "t": "x"}, {"t": "x", "a": "s"}, {"t": "", "a": 1}, {"t": "xx"}, {"name": "n", "t": "x"},
            {"name": "n", "t": "x", "a": []}, {"name": "n", "t": "y"}]
_VALUES = [None, True, False, 0, 3, 1.5, "", "x", "xy", "abc", [], [1], *_OBJECTS]

_DISCRIMINATED = {
    "type": "object", "properties": {"t": {"enum": ["x", "y", "z"]}}, "required": ["t"],
    "allOf": [{"if": {"properties": {"t": {"const": "x"}}}, "then": {"required": ["a"]}},
              {"if": {"properties": {"t": {"const": "y"}}}, "then": {"required": ["b"]}}]}


@pytest.mark.parametrize("schema", [
    {"if": {"properties": {"t": {"const": "x"}}}, "then": {"required": ["a"]}, "else": {"required": ["b"]}},
    _DISCRIMINATED,
    {**_DISCRIMINATED, "$schema": D7},
    # JSON Schema Store's shape (bigquery-table): the condition's key is not the first one written
    {"type": "object", "required": ["name", "t"], "properties": {"name": {"type": "string"}, "t": {"type": "string"}},
     "if": {"properties": {"t": {"enum": ["x", "y"]}}},
     "then": {"required": ["a"], "properties": {"name": {"type": "string"}, "a": {"type": "array"}}}},
    {"if": {"required": ["a"]}, "then": False},
    {"if": {"required": ["a"]}, "else": False},
    {"if": {"type": "string"}, "then": {"maxLength": 2}, "else": {"type": "number"}},
    {"if": {"type": "string"}},  # (an if alone constrains nothing)
    {"then": {"type": "string"}},  # (nor a then without if)
    {"if": {"minimum": 3}, "then": {"type": "integer"}, "else": False},  # (no negation needed)
    {"if": {"required": ["t"]}, "then": {"if": {"properties": {"t": {"const": "x"}}}, "then": {"required": ["a"]}}},
    {"properties": {"t": {"if": {"type": "string"}, "then": {"not": {"enum": ["x", "y"]}}}}},
    {"$schema": D6, "if": {"type": "string"}, "then": False},  # (draft-06 has no if: an annotation)
])
def test_if_then_else_agrees_with_jsonschema(schema: dict) -> None:
    """``if`` / ``then`` / ``else`` is "(if and then) or (not if and else)" (2020-12 section 10.2.2.1),
    with ``if``'s negation written by gad (``required``, ``type``, ``properties`` / ``enum`` / ``const``
    of strings, ...): compiled, and every value agrees with ``jsonschema``."""
    assert agree_with_jsonschema(schema, _VALUES) is not None


@pytest.mark.parametrize("schema", [
    {"not": {"const": "x"}},
    {"type": "string", "not": {"enum": ["x", "xy", ""]}},
    {"type": "string", "not": {"enum": ["ab"]}, "pattern": "^a"},
    {"type": "string", "not": {"enum": ["x", "abc"]}, "maxLength": 3, "minLength": 1},
    {"type": "string", "not": {"enum": ["x"]}, "format": "password"},  # (an unknown format: any string)
    {"not": {"enum": ["x", None, True]}},
    {"not": {"enum": ['q"', "b\\", "é", "\n", "x"]}},
    {"properties": {"t": {"not": {"const": "x"}}}, "required": ["t"]},
    {"not": {"properties": {"t": {"enum": ["x", "y"]}}, "required": ["t"]}},
    {"oneOf": [{"type": "string", "not": {"const": "x"}}, {"type": "integer"}]},
    {"type": "string", "allOf": [{"not": {"const": "x"}}, {"not": {"const": "xy"}}]},
])
def test_not_of_a_string_enum_agrees_with_jsonschema(schema: dict) -> None:
    """``not`` of an ``enum`` / ``const`` of strings (``null`` / ``true`` / ``false`` beside them) is
    every other value: the strings outside the set (one automaton, intersected with the string's
    pattern / length / format) and the other types."""
    values = _VALUES + ['q"', "q", "b\\", "b", "é", "e", "\n", "ab", "abd", "a"]
    assert agree_with_jsonschema(schema, values) is not None


def test_meeting_a_schema_with_itself_keeps_true_and_one_apart() -> None:
    """``allOf`` of two ``properties`` sets giving a key the same schema is that schema (a union after
    it then sees one schema for the key), while ``const: 1`` and ``const: true`` stay two schemas."""
    agree_with_jsonschema({"properties": {"a": {"const": 1}}, "allOf": [{"properties": {"a": {"const": True}}}]},
                          [{"a": 1}, {"a": True}, {}, {"a": 2}])


@pytest.mark.parametrize("schema,pointer,keyword", [
    ({"if": {"minimum": 3}, "else": {"type": "string"}}, "", "if"),  # (a bound's negation: not written)
    ({"not": {"const": 1}}, "", "not"),  # (nor a number's)
    ({"properties": {"p": {"if": {"const": 2}, "then": {"type": "integer"}}}}, "/properties/p", "if"),
    # a union of the user's inside a rewritten branch is refused where it is, not at the rewrite
    ({"if": {"required": ["k"]}, "then": {"anyOf": [{"type": "array", "items": {"type": "integer"}},
                                                     {"type": "array", "minItems": 2}]}}, "/then", "anyOf"),
])
def test_what_gad_cannot_rewrite_is_refused_at_its_keyword(schema: dict, pointer: str, keyword: str) -> None:
    """Refused with a typed error naming the pointer and keyword; ``lenient=True`` drops the keyword,
    so the grammar only gets wider (each value ``jsonschema`` validates is still accepted)."""
    refused_then_widened(schema, pointer, keyword, _VALUES)


_KEYS = ["k", "a", "b"]
_val = st.sampled_from([{"type": "integer"}, {"type": "string"}, {"const": "p"}, {"enum": ["p", "q"]}, {}])
_cond = st.one_of(
    st.builds(lambda k, v: {"properties": {k: v}}, st.sampled_from(_KEYS),
              st.sampled_from([{"const": "p"}, {"enum": ["p", "q"]}, {"type": "string"}, {"not": {"const": "q"}}])),
    st.builds(lambda ks: {"required": ks}, st.lists(st.sampled_from(_KEYS), min_size=1, max_size=2, unique=True)),
    st.sampled_from([{"type": "object"}, {"type": ["string", "null"]}]))
_case = st.one_of(st.just(True), st.just(False), st.builds(
    lambda props, req, addl: {"properties": props, "required": req, **({} if addl is None else {"additionalProperties": addl})},
    st.fixed_dictionaries({}, optional={k: _val for k in _KEYS}), st.lists(st.sampled_from(_KEYS), max_size=2, unique=True),
    st.sampled_from([None, False])))
_obj_json = st.dictionaries(st.sampled_from(_KEYS + ["z"]), st.sampled_from([0, 1, "p", "q", "s", None]), max_size=4)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cond, _case, _case, st.booleans(), st.lists(_obj_json, min_size=10, max_size=10))
def test_random_if_then_else_accepts_iff_jsonschema_validates(cond, then, other, typed, values):
    """Random conditions on an object's keys (a key's ``const`` / ``enum`` / ``type`` / ``not``,
    ``required``, ``type``), with random object schemas as ``then`` / ``else``: gad agrees with
    ``jsonschema`` on random objects, or refuses at a union it cannot build."""
    schema = {"if": cond, "then": then, "else": other, **({"type": "object"} if typed else {})}
    agree_with_jsonschema(schema, [*values, None, "p", 1], refusable=("if", "anyOf", "oneOf"))


D4 = "http://json-schema.org/draft-04/schema#"
_ENUM_OBJS = {"enum": [{"a": "x"}, {"a": "y"}, {}]}


@pytest.mark.parametrize("schema,values", [
    # gad's not of a string enum nested in its own schemas is read by jsonschema too (the enum's values
    # checked against the rest of the node; sg.dumps picks the union branch by it)
    ({"anyOf": [_ENUM_OBJS, {"type": "string"}], "not": {"properties": {"a": {"const": "x"}}}}, [{"a": "x"}, {"a": "y"}, {}]),
    ({"if": {"properties": {"a": {"const": "x"}}}, "then": {"type": "string"},
      "else": {"enum": [{"a": "x"}, {"a": "y"}]}}, [{"a": "x"}, {"a": "y"}, "s"]),
    ({"not": {"properties": {"b": {"const": "y"}, "a": {"const": "x"}}}}, [{"a": 2.5, "b": "y"}, {"a": "x"}, {"b": "y"}]),
    ({"oneOf": [{"properties": {"b": {"enum": ["x", None]}, "a": {"enum": ["y", None]}}}, {"required": ["b"]}]},
     [{"a": False, "b": None}, {"b": 1}, {}]),
    # two copies of a subschema written alike, one under draft-04 (no const there): not one schema
    ({"allOf": [{"$schema": D4, "id": "http://e/", "properties": {"a": {"const": "x"}}}, {"properties": {"a": {"const": "x"}}}]},
     [{"a": "y"}, {"a": 1}, {"a": "x"}]),
    # a user's "gad:not" / "gad:required" is an unknown keyword, under every draft
    ({"$schema": D7, "anyOf": [{"enum": [{"p": "a"}, {"p": "b"}]}, {"type": "integer"}],
      "properties": {"p": {"gad:not": {"const": "a"}, "gad:required": ["q"]}}}, [{"p": "a"}, {"p": "b"}]),
])
def test_rewrites_found_wrong_by_review_agree_with_jsonschema(schema: dict, values: list) -> None:
    """Shapes an adversarial review of this session's rewrites found answering wrongly (each a
    silent disagreement with ``jsonschema``)."""
    assert agree_with_jsonschema(schema, values) is not None


def test_a_split_one_of_is_refused_where_its_rewrite_fails() -> None:
    """A split ``oneOf`` beside a ``not`` whose rewrite makes a union gad cannot build: refused at that
    ``not`` (its own pointer), not at the ``oneOf``; ``lenient=True`` drops the ``not`` and no
    property goes missing (the first attempt, as written, left a rule unfinished that the split
    then used, and ``p`` was pruned from the grammar)."""
    schema = {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
              "properties": {"p": {"not": {"type": "object", "required": ["x"], "properties": {"y": {"type": "string"}}}}}}
    valid = [{"a": 1, "p": 3}, {"a": 1, "p": {"y": "s"}}, {"b": 1, "p": None}]
    assert all(schema_oracle(schema, v) for v in valid)
    refused_then_widened(schema, "/properties/p", "not", valid)
    agree_with_jsonschema({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                           "properties": {"p": {"not": {"required": ["x"]}}}},
                          [{"a": 1, "p": 3}, {"a": 1, "p": {"x": 1}}, {"a": 1, "b": 2}, {"b": 1, "p": {"y": 1}}])


def test_lenient_union_beside_a_refused_if_only_widens() -> None:
    """Two unions at one pointer (an ``if`` gad cannot rewrite beside an ``anyOf``), the ``if``
    dropped by ``lenient=True``: each ``anyOf`` branch keeps its own object rule (they were keyed by
    the pointer, and the second was taken for a copy of the first)."""
    schema = {"if": {"properties": {"b": {"required": ["a"]}}}, "then": {"minimum": 1},
              "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = SchemaChecker(schema, lenient=True)
    for v in [{"b": 1}, {"b": None}, {"a": 1, "b": 1}, {"a": 1}]:
        assert schema_oracle(schema, v) and c.accepts_value(v), v


def test_many_ifs_are_refused_at_once_not_multiplied_out() -> None:
    """Seven ``if`` / ``then`` / ``else`` in an ``allOf`` would spell out 128 alternatives: refused at
    the first ``if`` (``lenient=True`` drops each), not built for seconds; six are built."""
    def ifs(k: int) -> dict:
        return {"allOf": [{"if": {"properties": {f"p{i}": {"const": "x"}}}, "then": {"required": [f"a{i}"]},
                           "else": {"required": [f"b{i}"]}} for i in range(k)]}
    with pytest.raises(UnsupportedSchemaError) as e:
        convert(ifs(7))
    assert (e.value.pointer, e.value.keyword) == ("/allOf/0", "if")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert len(convert(ifs(7), lenient=True).dropped) == 7
    agree_with_jsonschema(ifs(6), [{}, {"p0": "x", "a0": 1}, {"p0": "x"}, {"p0": "y", "b0": 1, "b1": 1}])


_WORDS = [f"{a}{b}{c}" for a in "kmz" for b in "aeiou" for c in "lnrst"]  # 75 three-letter names


def test_not_of_many_strings_is_one_direct_automaton() -> None:
    """``not`` of 75 names (over interegular's budget when its regex was built as written: three tries
    in lockstep) compiles, its automaton built as the JSON strings minus the names' trie; the same
    names in a grammar read back in another process (its ``// gad:not-words`` line); a set whose
    regex is over gad's limit for one terminal is refused at the ``not``."""
    schema = {"type": "object", "properties": {"t": {"type": "string", "not": {"enum": _WORDS}}}}
    agree_with_jsonschema(schema, [{"t": w} for w in _WORDS[::5]] + [{"t": "ka"}, {"t": "kall"}, {"t": ""}, {"t": 1}])
    assert "// gad:not-words " in convert(schema).lark_text
    long = [f"{w}{x}{y}" for w in _WORDS for x in "abcdefgh" for y in "pqrs"]
    with pytest.raises(UnsupportedSchemaError) as e:
        convert({"type": "object", "properties": {"t": {"type": "string", "not": {"enum": long}}}})
    assert (e.value.pointer, e.value.keyword) == ("/properties/t", "not")


@pytest.mark.parametrize("quoted", [True, False])
def test_not_words_automaton_is_the_regexps(quoted: bool) -> None:
    """The automaton built directly for :func:`_not_keys_regex`'s regexp (JSON strings minus a trie)
    is the one interegular builds from the regexp's text, on random small key sets with quotes,
    backslashes, control and non-ASCII characters and the empty key."""
    import random

    from gad.grammar import automata
    from gad.grammar.json_schema import _not_keys_regex

    rng = random.Random(7)
    alpha = ["a", "b", "\\", '"', "\n", "é", "\x7f", "\x1f", "/"]
    for _ in range(60):
        keys = list({"".join(rng.choice(alpha) for _ in range(rng.randint(0, 3))) for _ in range(rng.randint(1, 4))})
        rx = _not_keys_regex(keys, quoted=quoted)
        direct = automata.regex_fsm(rx)
        with automata._crawl_lock:
            noted = automata._NOT_WORDS.pop(rx)
        try:
            written = automata._build_fsm(rx, automata.MAX_TERMINAL_STATES)
        finally:
            with automata._crawl_lock:
                automata._NOT_WORDS[rx] = noted
        assert direct.equivalent(written), keys


@pytest.mark.parametrize("schema,places", [
    # a then's key merged into the object's properties is named in the then
    ({"type": "object", "properties": {"k": {"type": "string"}},
      "allOf": [{"if": {"properties": {"k": {"const": "a"}}}, "then": {"properties": {"o": {"type": "array", "uniqueItems": True}}}}]},
     ["/allOf/0/then/properties/o"]),
    # two copies written alike, merged as one, are both named
    ({"allOf": [{"properties": {"o": {"type": "array", "uniqueItems": True}}},
                {"properties": {"o": {"type": "array", "uniqueItems": True}}}]},
     ["/allOf/0/properties/o", "/allOf/1/properties/o"]),
    # two different ones meeting: each side named
    ({"allOf": [{"properties": {"o": {"type": "array", "uniqueItems": True}}},
                {"properties": {"o": {"uniqueItems": True, "maxItems": 3}}}]},
     ["/allOf/0/properties/o", "/allOf/1/properties/o"]),
])
def test_lenient_drops_name_every_place_the_keyword_was_written(schema: dict, places: list) -> None:
    """Under ``lenient=True`` each dropped keyword is named where the user wrote it, once for each
    place merged into the schema that dropped it (a pointer gad made for a merged schema names
    nothing in the user's schema): removing the named keywords from the schema gives the grammar's
    language (MaskBench's JsonSchemaStore github-issue-forms: a then's ``uniqueItems``, named under
    the object's own pointer, was left in the reduced schema)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sg = convert(schema, lenient=True)
    assert sorted(d.pointer for d in sg.dropped if d.keyword == "uniqueItems") == places


def _reduced(schema: Any, dropped: tuple) -> Any:
    """``schema`` without each dropped (pointer, keyword), asserting that each names a keyword there."""
    s = copy.deepcopy(schema)
    for d in dropped:
        node = s
        for part in [p.replace("~1", "/").replace("~0", "~") for p in d.pointer.split("/")[1:]]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        assert isinstance(node, dict) and d.keyword in node, (schema, d)
    for d in dropped:
        node = s
        for part in [p.replace("~1", "/").replace("~0", "~") for p in d.pointer.split("/")[1:]]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node.pop(d.keyword, None)
    return s


@pytest.mark.parametrize("schema,values", [
    ({"$schema": D4, "not": {"const": "a"}}, ["a", "b", 1, None]),  # (draft-04: const is an annotation)
    ({"$schema": D4, "oneOf": [{"const": "a"}, {"type": "string"}]}, ["a", "b", 1]),
    ({"if": {"not": {"contains": {"const": 1}}}, "then": {"type": "string"}, "else": {"type": "null"}}, [None, [1], "a"]),
    ({"if": {"not": {"type": "string", "maxLength": 2}}, "then": {"not": {"enum": ["ab", "b"]}}}, ["ab", "b", "abc", 1]),
    ({"oneOf": [{"type": "object"}, {"properties": {"b": {"const": "y"}}, "required": ["c"]}]}, [{"c": "x"}, {}, 1]),
    ({"type": "string", "maxLength": 5000, "allOf": [{"not": {"const": "a"}}, {"not": {"const": "b"}}]}, ["a", "b", "c"]),
    ({"type": "object", "allOf": [{"properties": {"v": {"not": {"const": "a"}}}}, {"properties": {"v": {"not": {"const": "b"}}}}],
      "properties": {"v": {"type": "string", "maxLength": 5000}}}, [{"v": "a"}, {"v": "b"}, {"v": "c"}]),
    ({"type": "array", "allOf": [{"items": {"type": "string"}}, {"items": {"pattern": "(?=b)"}}]}, [["a"], ["b"], [1]]),
    ({"properties": {"b": {"type": "array", "uniqueItems": True}}, "patternProperties": {"^b": {"maxItems": 3}}},
     [{"b": [1, 1]}, {"b": [1, 2, 3, 4]}]),
    ({"type": "object", "patternProperties": {"^b": {"type": "integer"}}, "properties": {"a": False}}, [{"a": 1}, {"b": 1}, {"b": "x"}]),
    ({"not": {"const": "a" * 500}}, ["a", "a" * 500]),  # (a name too long to write: a typed refusal)
    ({"not": {"enum": ["\ud800"]}}, ["a"]),  # (a lone surrogate)
])
def test_lenient_drops_describe_the_grammar(schema: dict, values: list) -> None:
    """Shapes a second review found: each agrees with ``jsonschema`` or is refused with a typed error;
    with ``lenient=True`` every drop names a keyword where the user wrote it, every value the
    schema validates is accepted, and every value accepted is valid once the dropped keywords are
    removed (drops inside a rewritten ``if`` name the ``if``; a split ``oneOf``'s own union, the
    ``oneOf``; merged ``not``s, each of them; meets of array items and of a property with its
    patterns, their own places)."""
    try:
        agree_with_jsonschema(schema, values)
    except UnsupportedSchemaError:
        pass
    if not any(schema_oracle(schema, v) for v in values) and schema.get("$schema") == D4:
        return  # (empty: agree_with_jsonschema checked it; lenient has nothing to drop)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = SchemaChecker(schema, lenient=True)
    reduced = _reduced(schema, c.sg.dropped)
    for v in values:
        if schema_oracle(schema, v):
            assert c.accepts_value(v), v
        if c.accepts_value(v):
            assert schema_oracle(reduced, v), (v, c.sg.dropped)


@pytest.mark.parametrize("line", [
    '// gad:not-words {"keys": ["' + "a" * 2000 + '"], "quoted": true}',
    "// gad:not-words " + "[" * 100_000 + "]" * 100_000,
    '// gad:not-words {"keys": ["\\ud800"], "quoted": false}',
    '// gad:not-words {"keys": "ab", "quoted": true}',
])
def test_forged_not_words_lines_are_ignored(line: str) -> None:
    """A ``// gad:not-words`` line convert did not write (too long a name, deep JSON, a lone surrogate,
    a wrong shape) is skipped: the grammar loads, its terminals built from their own text."""
    text = convert({"type": "object", "properties": {"t": {"type": "string", "not": {"enum": ["x"]}}}}).lark_text
    g = Grammar.from_string(text + line + "\n")
    assert g.lark_text.endswith(line + "\n")


def test_lenient_warning_points_at_the_callers_line() -> None:
    """The warning listing lenient drops names the user's line, not a line inside gad (a newcomer
    saw ``gad/grammar/loader.py:211``)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        Grammar.from_json_schema({"not": {"minimum": 3}}, lenient=True)
    assert [w.filename for w in seen if issubclass(w.category, UserWarning)] == [__file__]


_PATTERN_STRINGS = ["", "a", "ab", "abc", "b", "ba", "...", "-", "x", "hello", "(){}", "ok.", "aaaaa", "aaaaaa",
                    "1234567890123plugin", "1234567890123plugi", "12345678901234plugin", "xplugin", "a@example.com",
                    "a@b.com", "a@example.comx", "é", "éa", "a\\", '"', "axxxb", "zaxxxb", "cd", "ce"]


@pytest.mark.parametrize("schema", [
    {"type": "string", "not": {"pattern": "^[\\.\\,\\*\\\\\\-\\s\\{\\}\\(\\)]+$"}},  # (MaskBench, a name)
    {"not": {"pattern": "^[\\.\\,\\*\\\\\\-\\s\\{\\}\\(\\)]+$"}},  # (every non-string matches: none passes)
    {"type": "string", "not": {"pattern": ".{14,}(?:ghlint|plugin)"}},  # (MaskBench: a lookahead difference)
    {"type": "string", "maxLength": 5, "not": {"pattern": "a"}},
    {"type": "string", "pattern": "^a", "not": {"pattern": "b"}},
    {"not": {"type": "string", "pattern": "x"}},
    {"type": "string", "format": "email", "not": {"pattern": "@example\\.com$"}},  # (a lookahead difference)
    {"type": "string", "not": {"enum": ["ab", "cd"]}, "allOf": [{"not": {"pattern": "^c"}}, {"not": {"pattern": "é"}}]},
    {"properties": {"n": {"not": {"pattern": "^a"}}}, "required": ["n"]},
    {"anyOf": [{"type": "string", "not": {"pattern": "^a"}}, {"type": "integer"}]},
])
def test_not_of_a_pattern_agrees_with_jsonschema(schema: dict) -> None:
    """``not`` of a ``pattern`` is the strings it finds no match in (the canonical strings' automaton
    less the pattern's, written back as a regex, or as the lookahead difference ``"(?!P")..."`` where
    that regex is too large), met with the string's other keywords; every other type matches a
    pattern, so fails its ``not``."""
    values = _VALUES + _PATTERN_STRINGS + [{"n": s} for s in _PATTERN_STRINGS]
    c = agree_with_jsonschema(schema, values)
    assert c is not None and not c.sg.dropped


def test_a_not_of_a_pattern_gad_cannot_write_is_refused_at_the_not() -> None:
    with pytest.raises(UnsupportedSchemaError) as ei:  # (a chain of length chunks: no lookahead over it)
        convert({"type": "string", "maxLength": 100, "not": {"pattern": "^a.{3}b"}})
    assert (ei.value.pointer, ei.value.keyword) == ("", "not")
    with pytest.raises(UnsupportedSchemaError) as ei:  # (a back-reference: no regular language)
        convert({"type": "string", "not": {"pattern": "(a)\\1"}})
    assert (ei.value.pointer, ei.value.keyword) == ("", "not")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(alphabet='ab"\\c', max_size=6), min_size=20, max_size=20))
def test_lookahead_difference_terminal_reads_as_pythons_re(texts: list[str]) -> None:
    """``"(?!N")(?=P")C"`` is read by gad's automata (:func:`gad.grammar.automata.meet_split`) as the
    JSON strings of C and P less those of N, as Python's ``re`` (Lark's scanner) reads it."""
    import re

    from gad.grammar.automata import meet_split, regex_fsm

    unit = '(?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\])'  # (a JSON string's content unit: the parts must spell JSON strings)
    terminal = f'"(?!{unit}*ab{unit}*")(?=a{unit}*"){unit}*"'
    assert meet_split(terminal) == ([f'"a{unit}*"', f'"{unit}*"'], [f'"{unit}*ab{unit}*"'])
    fsm = regex_fsm(terminal)
    for t in texts:
        s = '"' + t + '"'
        assert fsm.accepts(s) is bool(re.fullmatch(terminal, s)), s
