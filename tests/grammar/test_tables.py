"""The parser tables of plain-BNF grammars, built without Lark's parser, equal those Lark builds."""

from __future__ import annotations

import lark
import pytest

import gad
from gad.errors import GrammarConflictError, GrammarError, UnsupportedGrammarError
from gad.grammar import json_schema, regex
from gad.grammar.loader import builtin_names
from gad.grammar.tables import ParserTables
from gad.testing import canonical_contexts, canonical_parse_table
from tests.grammar.test_plain_bnf import SCHEMAS

HAND_WRITTEN = [
    # optionals, priorities, an unused rule, an unreachable cycle, %ignore
    "start: a? b? C a?\n    | _d\n    | \n_d: C C\na: A\nb: B\nunused: A\ncyc: cyc2 A\ncyc2: cyc\n"
    "A.2: /a+/i\nB: \"b\\\"q\"\nC: /\\//\nD.-1: \"d\"\nWS: /[ ]+/\n%ignore WS\n",
    # a keyword inside a NAME regex (Lark's "unless" rule), literals of equal width
    "start: stmt\n    | start SEMI stmt\nstmt: IF NAME\n    | NAME EQ NAME\nIF: \"if\"\nNAME: /[a-z]+/\n"
    "EQ: \"=\"\nSEMI: \";\"\nWS: /[ \\t]+/\n%ignore WS\n",
    # the same %ignore twice (Lark's contexts hold it once; a second copy changed the lexer's winners)
    "start: T1\nT0.-1: /[ab]*c/\nT1.-1: \"c\"\n%ignore T0\n%ignore T0\n",
]


def _texts() -> list[str]:
    out = [json_schema.convert(s, whitespace=ws).lark_text for s in SCHEMAS for ws in ("compact", "flexible", 2)]
    out += [regex.regex_lark(p) for p in (r"[a-c]+x\d{2}", r"(ab|c)*", r"\w+@\w+\.com", "é|ü")]
    return out + HAND_WRITTEN


@pytest.mark.parametrize("text", _texts())
def test_plain_grammar_tables_equal_larks(text: str) -> None:
    g = gad.Grammar.from_string(text)
    assert "lark" not in g.__dict__  # validated and tabled without building Lark's parser
    own = lark.Lark(text, parser="lalr", lexer="contextual", maybe_placeholders=False)
    ref = ParserTables.from_lark(own, "start")
    assert canonical_parse_table(g.tables.parse_table) == canonical_parse_table(own)
    assert canonical_contexts(g.tables) == canonical_contexts(ref)
    assert g.tables.ignore == list(own.ignore_tokens)
    assert [t.name for t in g.tables.terminals] == [t.name for t in own.terminals]
    # Lark's parser is built on first use, and parses as the one built from the text
    assert g.lark is not None and canonical_parse_table(g.lark) == canonical_parse_table(own)


@pytest.mark.parametrize("name", builtin_names())
def test_shipped_grammars_tables_from_lark(name: str) -> None:
    """Grammars outside plain BNF keep Lark's parser; their tables are read from it."""
    g = gad.Grammar.builtin(name)
    ref = ParserTables.from_lark(g.lark, g.start)
    assert canonical_contexts(g.tables) == canonical_contexts(ref)
    assert canonical_parse_table(g.tables.parse_table, g.start) == canonical_parse_table(g.lark, g.start)


def test_plain_grammar_with_a_conflict_is_reported_by_lark() -> None:
    """A shift/reduce conflict (Lark resolves it silently) declines the fast path: gad's loader names it."""
    with pytest.raises(GrammarConflictError):
        gad.Grammar.from_string("start: a\n    | a B\na: A\n    | A B\nA: \"a\"\nB: \"b\"\n")


def test_named_group_terminal_goes_through_lark() -> None:
    g = gad.Grammar.from_string("start: A\nA: /(?P<x>a)b/\n")
    assert "lark" in g.__dict__
    assert g.parses("ab") and not g.parses("a")


@pytest.mark.parametrize("sep", ["\x0c", "\xa0", "\r", "\u2028", "\x1f"])
def test_odd_white_space_between_symbols_is_lark_s_to_refuse(sep: str) -> None:
    """Plain BNF separates symbols by spaces and tabs; other white space goes to Lark, which refuses it
    (the plain reading split on any white space and took such a grammar)."""
    with pytest.raises(GrammarError):
        gad.Grammar.from_string(f'start: A{sep}B\nA: "a"\nB: "b"\n')


def test_a_global_flag_in_a_terminal_is_checked_by_lark_s_scanner() -> None:
    """``(?i)`` inside a terminal compiles alone but not in Lark's combined scanner: refused with a
    typed error at load (it was accepted, and ``parses`` raised re.error); a scoped flag is fine."""
    with pytest.raises(UnsupportedGrammarError):
        gad.Grammar.from_string('start: A B\nA: /(?i)a/\nB: "b"\n')
    g = gad.Grammar.from_string('start: A B\nA: /a/i\nB: "b"\n')
    assert "lark" not in g.__dict__ and g.parses("Ab") and not g.parses("ab ")
