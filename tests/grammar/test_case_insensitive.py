"""Case-insensitive terminals (``"select"i``, ``/.../i``) match what Python's ``re`` matches, as Lark
does: ``ß`` and ``ẞ`` (not ``SS``), ``k`` and the Kelvin sign, ``s`` and the long s, the dotted and
dotless ``i``.  interegular, which builds gad's automata, widens a character to ``str.lower()`` and
``str.upper()`` instead (``"ß".upper() == "SS"`` crashed the lexer build with ``TypeError: ord()``).
The oracle is ``re`` itself, run over every Unicode code point."""

from __future__ import annotations

import re

import pytest

import gad
from gad import Grammar
from gad.grammar.automata import ASCII_CASE_EXTRA, case_class, regex_fsm
from gad.testing.schemas import BYTES

ALL = "".join(map(chr, range(0x110000)))


def brute_class(x: str) -> frozenset[str]:
    """Every code point ``re.fullmatch("(?i)" + re.escape(x), c)`` accepts."""
    return frozenset(re.findall("(?i)" + re.escape(x), ALL))


def test_ascii_table_is_what_re_matches() -> None:
    for x in map(chr, range(128)):
        assert case_class(x) == brute_class(x), repr(x)
    extra = {x: "".join(sorted(brute_class(x) - {x, x.upper()})) for x in "abcdefghijklmnopqrstuvwxyz"}
    assert {x: e for x, e in extra.items() if e} == {x: "".join(sorted(e)) for x, e in ASCII_CASE_EXTRA.items()}


@pytest.mark.parametrize("x", ["ß", "ẞ", "µ", "Μ", "Σ", "ς", "ǅ", "İ", "ı", "ﬀ", "Ω", "Å", "é", "ſ", "\u212a", "я", "ǰ"])
def test_non_ascii_class_is_what_re_matches(x: str) -> None:
    assert case_class(x) == brute_class(x)


@pytest.mark.parametrize("pattern", ["(?i:ß)", "(?i:[^a-z])", "(?i:stra[ßs]e)", "(?i:[α-ω]+)", "(?i:[^ß])"])
def test_automaton_agrees_with_re_on_every_code_point(pattern: str) -> None:
    fsm = regex_fsm(pattern)
    want = set(re.findall(f"^(?:{pattern})$", "\n".join(ALL), flags=re.M))
    got = {c for c in ALL if c != "\n" and fsm.accepts(c)}
    assert got == want - {"\n"}
    assert all(len(s) == 1 for s in fsm.alphabet._symbol_mapping if isinstance(s, str))  # no "SS" symbol


@pytest.mark.parametrize("text, words", [
    ('start: "ß"i\n', ["ß", "ẞ", "SS", "ss", "s"]),
    ('start: "straße"i\n', ["straße", "STRAẞE", "STRASSE", "ſtraße", "strasse"]),
    ('start: "kiss"i\n', ["KISS", "\u212aiſſ", "kİss", "kıss", "kis"]),
    ('start: A\nA: /[a-z]+/i\n', ["ẞ", "\u212a", "ı", "abcZ", "ß", "é"]),
])
def test_masks_accept_what_lark_parses(text: str, words: list[str]) -> None:
    g = Grammar.from_string(text)
    cg = gad.compile(g, BYTES, cache_dir=False)
    for w in words:
        m = cg.matcher()
        ours = m.accept_bytes(w.encode("utf-8")) and m.is_accepting()
        assert ours == g.parses(w), (text, w)


def test_sql_keyword_spelled_with_a_long_s_is_a_keyword_as_in_lark() -> None:
    g = Grammar.builtin("sql")
    cg = gad.compile(g, BYTES, cache_dir=False)
    for q in ["SELECT a FROM t", "ſelect a from t", "select a from t where a li\u212ae 'x'"]:
        m = cg.matcher()
        assert (m.accept_bytes(q.encode("utf-8")) and m.is_accepting()) == g.parses(q), q
