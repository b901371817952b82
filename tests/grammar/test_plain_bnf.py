"""gad's direct reading of plain BNF equals Lark's grammar compiler; literal automata equal interegular's."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import interegular
import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gad
from gad.errors import GadError
from gad.grammar import json_schema, loader, regex
from gad.grammar.automata import literal_text, literal_words, regex_fsm, repeat_fsm, repeat_parts, words_fsm
from gad.grammar.loader import _build_lark
from gad.grammar.plain_bnf import compile_plain
from gad.testing import canonical_parse_table

SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 3}, "b": {"type": "string"}},
     "required": ["a"]},
    {"type": "object", "properties": {"x": {"enum": ["red", "green", 3, None]}}, "additionalProperties": False},
    {"type": "array", "items": {"type": "number", "maximum": 10}, "minItems": 1, "maxItems": 3},
    {"anyOf": [{"type": "null"}, {"type": "string", "format": "date"}, {"type": "string", "pattern": "^a+b$"}]},
    {"$defs": {"t": {"type": "object", "properties": {"k": {"$ref": "#/$defs/t"}}}}, "$ref": "#/$defs/t"},
    {"type": "string", "minLength": 2, "maxLength": 40},
    {"oneOf": [{"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"], "additionalProperties": False},
               {"type": "object", "properties": {"b": {"const": 2}}, "required": ["b"], "additionalProperties": False}]},
    {"type": "object", "properties": {"k-1": {"type": "boolean"}, "é\"": {"type": "integer"}}},
]


def _lark_compile(text: str) -> tuple:
    g, _ = lark.load_grammar.load_grammar(text, "<s>", None, False)
    return g.compile(["start"], set())


def _same(fast: tuple, slow: tuple) -> None:
    (ft, fr, fi), (st_, sr, si) = fast, slow

    def terms(ts: list) -> list:
        return [(t.name, t.pattern, t.pattern.raw, t.priority) for t in ts]

    def rules(rs: list) -> list:
        return [(r.origin, r.expansion, [s.filter_out for s in r.expansion if s.is_term], r.order, r.alias,
                 repr(r.options), r.options.empty_indices) for r in rs]

    assert terms(ft) == terms(st_)
    assert rules(fr) == rules(sr)
    assert fi == si


@pytest.mark.parametrize("whitespace", ["compact", "flexible", 2])
@pytest.mark.parametrize("schema", SCHEMAS)
def test_schema_grammars_equal_lark(schema: dict, whitespace: str | int) -> None:
    text = json_schema.convert(schema, whitespace=whitespace).lark_text
    fast = compile_plain(text, ["start"])
    assert fast is not None  # the converter writes plain BNF only
    _same(fast, _lark_compile(text))


@pytest.mark.parametrize("pattern", [r"[a-c]+x\d{2}", r"(ab|c)*", r"\w+@\w+\.com", "é|ü"])
def test_regex_grammars_equal_lark(pattern: str) -> None:
    text = regex.regex_lark(pattern)
    fast = compile_plain(text, ["start"])
    assert fast is not None
    _same(fast, _lark_compile(text))


def test_hand_written_plain_bnf_with_optionals_priorities_and_ignore() -> None:
    text = ("start: a? b? C a?\n    | _d\n    | \n_d: C\na: A\nb: B\nunused: A\ncyc: cyc2 A\ncyc2: cyc\n"
            "A.2: /a+/i\nB: \"b\\\"q\"\nC: /\\//\nD.-1: \"d\"\nWS: /[ ]+/\n%ignore WS\n")
    fast = compile_plain(text, ["start"])
    assert fast is not None
    _same(fast, _lark_compile(text))
    names = [t.name for t in fast[0]]
    assert "D" not in names and "WS" in names  # unused terminals go, %ignore-d ones stay
    origins = {r.origin.name for r in fast[1]}
    assert "unused" not in origins and {"cyc", "cyc2"} <= origins  # an unused cycle stays, as in Lark


@pytest.mark.parametrize("text", [
    'start: "x"\n',                      # inline literal
    "start: a+\na: A\nA: /a/\n",         # EBNF operator
    "start: (a | b)\na: A\nb: A\nA: /a/\n",
    "?start: A\nA: /a/\n",               # rule modifier
    "start: A\nA: /a/ | /b/\n",          # terminal expression, not one literal
    "start: A B\nA: /a/\n",              # undefined terminal: Lark's message
    "start: a\nA: /a/\n",                # undefined rule
    "start: A\nstart: A\nA: /a/\n",      # defined twice
    "start: A | A\nA: /a/\n",            # duplicate alternative
    "start: A // comment\nA: /a/\n",     # trailing comment
    "%import common.WS\nstart: A\nA: /a/\n",
    "start: A\nA: \"\"\n",               # empty literal: Lark's message
    "other: A\nA: /a/\n",                # no start rule
])
def test_everything_else_is_left_to_lark(text: str) -> None:
    assert compile_plain(text, ["start"]) is None


def test_grammar_built_either_way_is_the_same_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    text = json_schema.convert(SCHEMAS[0]).lark_text
    fast = _build_lark(text, "start")
    monkeypatch.setattr(loader, "compile_plain", lambda text, start: None)
    slow = _build_lark(text, "start")
    # Lark numbers LALR states in set order (object ids): equal up to renaming from the start state
    assert canonical_parse_table(fast) == canonical_parse_table(slow)
    assert [t.name for t in fast.terminals] == [t.name for t in slow.terminals]
    g = gad.Grammar.from_string(text)
    assert g.parses('{"a":3,"b":"x"}') and not g.parses('{"a":2}')


def _maskbench() -> Path:
    return Path(os.environ.get("GAD_MASKBENCH_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data" / "maskbench")


@pytest.mark.skipif(not _maskbench().is_dir(), reason="MaskBench not found (read in place, never copied)")
def test_maskbench_grammars_equal_lark() -> None:
    checked = 0
    for f in sorted(_maskbench().glob("*.json"))[::40]:
        try:
            text = json_schema.convert(json.loads(f.read_text())["schema"]).lark_text
        except GadError:
            continue
        fast = compile_plain(text, ["start"])
        assert fast is not None, f.name
        _same(fast, _lark_compile(text))
        # and the parser gad builds from it (gad.grammar.lalr_table) is Lark's own
        own = lark.Lark(text, parser="lalr", lexer="contextual", maybe_placeholders=False)
        assert canonical_parse_table(_build_lark(text, "start")) == canonical_parse_table(own), f.name
        checked += 1
    assert checked >= 20


# ------------------------------------------------------------------------------ literal automata
_chars = st.sampled_from(list('ab"|(.\\é {}*') + ["\n", "😀"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(_chars, max_size=4), min_size=1, max_size=5), st.sampled_from(["", '"', "k:"]),
       st.sampled_from(["", '"']))
def test_word_sets_equal_interegular(words: list[str], pre: str, post: str) -> None:
    rx = re.escape(pre) + "(?:" + "|".join(map(re.escape, words)) + ")" + re.escape(post)
    full = [pre + w + post for w in words]
    got = literal_words(rx)
    if not all(full):
        assert got is None  # the empty string is not a terminal's language
        return
    assert got == full
    assert words_fsm(got).equivalent(interegular.parse_pattern(rx).to_fsm())
    assert regex_fsm(rx).equivalent(interegular.parse_pattern(rx).to_fsm())


@pytest.mark.parametrize("rx", [r"\d", "a|b", "a*", "[ab]", "(?:a|b)*", "(?:a)(?:b)", r"\x41", "a{2}", "(a|b)", ""])
def test_operators_are_not_literals(rx: str) -> None:
    assert literal_words(rx) is None


def test_literal_text_unescapes() -> None:
    assert literal_text(re.escape('"k-1 é"')) == '"k-1 é"'
    assert literal_text(r"\,") == ","
    assert literal_text("false") == "false"


@pytest.mark.parametrize("text", [
    "start: A\nA: /a*/\n",                    # zero-width terminal
    "start: A\nA: /a(/\n",                    # Python's re refuses it
    "start: A B\nA: /a/\nB: /(?P<A>b)/\n",    # a group name clashing in Lark's combined pattern
    "start: A\nA: /(?P<x>a)(?P<x>b)/\n",      # refused alone
])
def test_bad_terminals_give_the_same_typed_error_either_way(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert compile_plain(text, ["start"]) is not None
    with pytest.raises(GadError) as fast:
        gad.Grammar.from_string(text)
    monkeypatch.setattr(loader, "compile_plain", lambda text, start: None)
    with pytest.raises(GadError) as slow:
        gad.Grammar.from_string(text)
    assert type(fast.value) is type(slow.value) and str(fast.value) == str(slow.value)


def test_prebuilt_grammar_parses_with_lark_scanner_built_lazily() -> None:
    g = gad.Grammar.from_json_schema({"type": "object", "properties": {"a": {"enum": ["x", "y"]}}})
    assert g.lark._gad_prebuilt
    assert g.parses('{"a":"y"}') and not g.parses('{"a":"z"}')


_BODIES = ["a", "ab", "[ab]c", "a|bc", "[^a]", "x|y|zz", "\\\\x", "a?b", "ab*c", "[a-c]",
           r'[^\x00-\x1f"\\]|\\(?:[btnfr"\\]|u00[01][0-9a-f])']


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(_BODIES), st.integers(0, 3), st.sampled_from([None, 0, 1, 3]),
       st.sampled_from(["", '"', "a", "xq"]), st.sampled_from(["", '"', "a", "b", "qz"]), st.booleans())
def test_bounded_repeats_equal_interegular(body: str, lo: int, extra: int | None, pre: str, post: str,
                                           exact_form: bool) -> None:
    hi = None if extra is None else lo + extra
    count = f"{{{lo}}}" if hi == lo and exact_form else (f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}")
    rx = re.escape(pre) + "(?:" + body + ")" + count + re.escape(post)
    parts = repeat_parts(rx)
    assert parts == (pre, body, lo, hi, post)
    ref = interegular.parse_pattern(rx).to_fsm()
    built = repeat_fsm(*parts)
    if built is not None:  # None: a body that can go on after a match, or post clashing with it
        assert built.equivalent(ref)
    assert regex_fsm(rx).equivalent(ref)


def test_json_string_length_bound_is_built_directly() -> None:
    unit = r'(?:[^\x00-\x1f"\\]|\\(?:[btnfr"\\]|u00[01][0-9a-f]))'
    built = repeat_fsm(*repeat_parts(f'"(?:{unit}){{0,40}}"'))  # type: ignore[misc]
    assert built is not None and built.accepts('"' + "é" * 40 + '"') and not built.accepts('"' + "a" * 41 + '"')
    assert built.accepts('"\\u001f\\n"') and not built.accepts('"\\x"')


@pytest.mark.parametrize("rx", ["(?:a)*", "(?:a){2}(?:b){2}", "a(?:b|c)", "(?:a){3,1}", "(?:a{2}"])
def test_other_shapes_are_not_repeats(rx: str) -> None:
    assert repeat_parts(rx) is None
