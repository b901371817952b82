"""Size limits of issue 9: grammars too large for Lark's LALR analysis or for gad's automata are
refused quickly, before the work, with a typed error that names the limit and never echoes a huge
pattern whole."""

from __future__ import annotations

import pytest

from gad import Grammar
from gad.errors import UnsupportedGrammarError
from gad.grammar import loader
from gad.grammar.automata import clip


def test_limits_are_documented_values() -> None:
    assert (loader.MAX_GRAMMAR_CHARS, loader.MAX_DEFINITIONS, loader.MAX_TERMINALS, loader.MAX_REGEX_CHARS) \
        == (1_000_000, 5_000, 1_000, 20_000)


def test_too_many_rules_refused_before_lark() -> None:
    # 56,790 rules made Lark's LALR analysis run for over 120 s
    text = "start: r0\n" + "".join(f"r{i}: A r{i + 1} | A\n" for i in range(6000)) + 'r6000: A\nA: "a"\n'
    with pytest.raises(UnsupportedGrammarError) as ei:
        Grammar.from_string(text, path="big.lark")
    assert ei.value.path == "big.lark"
    assert "6,003 rule and terminal definitions" in str(ei.value) and "5,000" in str(ei.value)


def test_grammar_text_over_the_size_limit_refused() -> None:
    text = 'start: "a"\n' + "// padding\n" * 100_000
    with pytest.raises(UnsupportedGrammarError, match=r"1,100,011 characters, more than gad's limit of 1,000,000"):
        Grammar.from_string(text)
    with pytest.raises(UnsupportedGrammarError, match="characters, more than"):
        Grammar.from_string('root ::= "a"\n' + "# padding\n" * 100_001, kind="ebnf")


def test_deep_rule_chain_builds_without_recursion() -> None:
    # Lark's own LALR analysis hit Python's recursion limit on this 3,000-deep chain; gad's table
    # construction (gad.grammar.lalr_table) has no recursion on rule depth
    text = "start: r0\n" + "".join(f"r{i}: A r{i + 1} | B\n" for i in range(3000)) + 'r3000: A\nA: "a"\nB: "b"\n'
    g = Grammar.from_string(text)
    assert g.parses("a" * 3001) and g.parses("aab") and not g.parses("a" * 3002) and not g.parses("")


def test_recursion_error_in_lark_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def deep(*args: object, **kwargs: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(loader.lark, "Lark", deep)
    with pytest.raises(UnsupportedGrammarError, match="nest too deeply"):
        Grammar.from_string('start: "x"\n')


def test_many_string_literals_refused() -> None:
    # 5,000 literals took 64-99 s and 924 MB to compile
    text = "start: " + " | ".join(f'"kw{i}"' for i in range(5000)) + "\n"
    with pytest.raises(UnsupportedGrammarError, match="5,000 distinct string literals, more than gad's limit of 1,000"):
        Grammar.from_string(text)
    ok = "start: " + " | ".join(f'"kw{i}"' for i in range(50)) + "\n"
    assert Grammar.from_string(ok).parses("kw49")


def test_huge_regex_refused_and_not_echoed() -> None:
    body = "|".join(f"w{i:06d}" for i in range(30_000))  # 239,999 characters
    with pytest.raises(UnsupportedGrammarError) as ei:
        Grammar.from_string(f"start: A\nA: /{body}/\n", path="g.lark")
    msg = str(ei.value)
    assert "longer than gad's limit of 20,000 characters" in msg and "terminal A" in msg
    assert len(msg) < 400 and "(239,999 characters)" in msg
    assert (ei.value.line, ei.value.column) == (2, 1)


def test_clip() -> None:
    assert clip("abc") == "abc"
    assert clip("x" * 100, 10) == "xxxxxxxxxx… (100 characters)"
