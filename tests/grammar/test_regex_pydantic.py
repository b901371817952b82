"""Grammar.from_regex agrees with re.fullmatch (hypothesis), Grammar.from_pydantic round-trips."""

from __future__ import annotations

import json
import re
from typing import Literal

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gad
from gad.engine.vocab import Vocabulary
from gad.errors import GrammarSyntaxError, InvalidArgumentError, UnsupportedGrammarError
from gad.grammar import Grammar

BYTES = Vocabulary(tokens=tuple(bytes([i]) for i in range(256)) + (None,), eos_ids=(256,), name="bytes")
_COMPILED: dict = {}


def accepts(pattern: str, text: str) -> bool:
    if pattern not in _COMPILED:
        _COMPILED[pattern] = gad.compile(Grammar.from_regex(pattern), BYTES, cache_dir=False)
    m = _COMPILED[pattern].matcher()
    return m.accept_bytes(text.encode()) and m.is_accepting()


_atom = st.sampled_from(["a", "b", "[ab]", "[^a]", ".", "\\d", "(a|bb)", "(ab)?", "x*", "[a-c]+", "\\.", "/"])
_regex = st.lists(st.tuples(_atom, st.sampled_from(["", "*", "+", "?", "{1,2}", "{0,3}"])), min_size=1, max_size=4).map(
    lambda xs: "".join(a + (q if not a.endswith(("*", "+", "?")) else "") for a, q in xs))


@settings(max_examples=40, deadline=None)
@given(_regex, st.lists(st.text(alphabet="ab1x./c\n", max_size=6), min_size=8, max_size=8))
def test_regex_agrees_with_fullmatch(pattern, texts):
    for t in texts + [""]:
        assert accepts(pattern, t) is (re.fullmatch(pattern, t) is not None), (pattern, t)


@pytest.mark.parametrize("pattern", [r'a\\"b', r'(\\")+', r'[\\"]\\"'])
def test_regex_with_a_backslash_before_a_quote_agrees_with_fullmatch(pattern):
    """A backslash right before a quote in the regex's text (``\\\\"``) reaches Lark as written
    (``gad.grammar.regex_ast.lark_regexp``): Lark's escaping dropped that backslash before."""
    for t in ['a\\"b', 'a"b', '\\"', '\\"\\"', '"\\"', '""', "\\\\"]:
        assert accepts(pattern, t) is (re.fullmatch(pattern, t) is not None), (pattern, t)


@pytest.mark.parametrize("pattern", [r"[\U00010000-\U0010ffff]", r"[\U00010000-\U0001ffff]+", r"[^\x00-\uffff]",
                                     r"[\ue000-\U0010ffff]", r"[^a-z\ue000-\U0010ffff]", r"[^\x00-\ud7ff]x?",
                                     r"a[\U0001F600-\U0001F64F]{1,2}b", r"[\u0800-\uffff]{2}", r"[\u4e00-\u9fa5]+é?"])
def test_classes_over_the_bmp_and_next_to_the_surrogates_agree_with_fullmatch(pattern):
    """A class past U+FFFF is written as the complement of a BMP range, whose alphabet names the
    surrogates: the lexer encoded them to UTF-8 (UnicodeEncodeError from the first mask); one ending
    at or starting after the surrogates was written with a raw surrogate (a GrammarError from Lark).
    Session 27's adversarial run."""
    for t in ["😀", "😀😀", "\U00020000", "\U0010ffff", "\ue000", "\ud7ff", "\ud7ffx", "\uffff", "é", "a", "A",
              "a😀b", "a😀😀b", "a😀😀😀b", "\U0001F64Fb", "", "中文", "中", "中é", "\u0800\uffff", "\u07ff\u0800"]:
        assert accepts(pattern, t) is (re.fullmatch(pattern, t) is not None), (pattern, t)
    m = _COMPILED[pattern].matcher()
    assert m.mask_view()[:256].any()


def test_regex_errors_are_typed():
    with pytest.raises(GrammarSyntaxError):
        Grammar.from_regex("a(")
    with pytest.raises(UnsupportedGrammarError):
        Grammar.from_regex("(?=a)a")
    with pytest.raises(UnsupportedGrammarError):
        Grammar.from_regex(r"(a)\1")
    with pytest.raises(InvalidArgumentError):
        Grammar.from_regex(12)  # type: ignore[arg-type]
    assert accepts("^ab$", "ab") and not accepts("^ab$", "ab\n")


@pytest.mark.parametrize("pattern", [r"\Bx*", r"\bx*", r"$x*", r"\Zx*", r"(?:)\bx*", r"x*\b", r"(\b)*x"])
def test_an_anchor_inside_a_pattern_that_matches_empty_is_refused(pattern):
    """A nullable pattern went through ``non_empty``, which read an inner anchor as the empty string:
    ``\\Bx*`` accepted "x" and "" (re.fullmatch: neither).  Now refused like the same anchor in a
    pattern that does not match "" (session 27's adversarial run)."""
    with pytest.raises(UnsupportedGrammarError, match="anchor"):
        Grammar.from_regex(pattern)


def test_python_re_failures_and_the_unicode_flag_are_typed():
    """Inputs on which Python's re raises something other than re.error, and (?u), which under
    gad's ASCII classes would have been accepted and ignored (``(?u)\\w`` matches "é" in re)."""
    with pytest.raises(GrammarSyntaxError, match="too large"):
        Grammar.from_regex("a{1,4294967295}")
    with pytest.raises(GrammarSyntaxError, match="nested too deeply"):
        Grammar.from_regex("(" * 2000 + "a" + ")" * 2000)
    with pytest.raises(UnsupportedGrammarError, match=r"\(\?u\)"):
        Grammar.from_regex(r"(?u)\w+")
    assert accepts(r"(?a)\w+", "ab_1") and not accepts(r"(?a)\w+", "é")  # (?a) says what gad does


class Address(pydantic.BaseModel):
    street: str
    zip: str = pydantic.Field(pattern=r"^[0-9]{5}$")


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(min_length=1, max_length=20)
    age: int = pydantic.Field(ge=0, le=130)
    kind: Literal["a", "b"] = "a"
    email: str | None = None
    tags: list[str] = pydantic.Field(default_factory=list, max_length=3)
    home: Address | None = None


def test_pydantic_round_trip():
    g = Grammar.from_pydantic(Person)
    cg = gad.compile(g, BYTES, cache_dir=False)
    sg = g.schema_grammar
    people = [Person(name="Ann", age=30), Person(name="Bo", age=0, kind="b", email="x", tags=["t"],
                                                 home=Address(street="Main", zip="12345"))]
    for p in people:
        text = sg.dumps(p.model_dump(mode="json"))
        m = cg.matcher()
        assert m.accept_bytes(text.encode()) and m.is_accepting(), text
        assert Person.model_validate_json(text) == p
    for bad in [{"name": "", "age": 3}, {"name": "A", "age": 131}, {"name": "A", "age": 1, "kind": "c"},
                {"name": "A", "age": 1, "home": {"street": "s", "zip": "1234"}}, {"age": 1}]:
        text = sg.dumps(bad)
        m = cg.matcher()
        assert not (m.accept_bytes(text.encode()) and m.is_accepting()), text
        with pytest.raises(pydantic.ValidationError):
            Person.model_validate_json(text)
    with pytest.raises(InvalidArgumentError):
        Grammar.from_pydantic(dict)
    assert json.loads(sg.dumps({"name": "A", "age": 1})) == {"name": "A", "age": 1}
