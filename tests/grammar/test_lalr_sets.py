"""gad's NULLABLE / FIRST / FOLLOW propagation equals Lark's own fixpoint on real and random grammars."""

from __future__ import annotations

import logging
import random

import lark
import pytest
from lark.common import ParserConf
from lark.exceptions import GrammarError as LarkGrammarError
from lark.grammar import NonTerminal, Rule, RuleOptions, Terminal
from lark.parsers import grammar_analysis
from lark.parsers.lalr_analysis import LALR_Analyzer

import gad
from gad.grammar.lalr_sets import calculate_sets, lark_uses_fast_sets
from gad.grammar.lalr_table import lalr_table
from gad.grammar.loader import builtin_names
from gad.testing import canonical_parse_table

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}},
                                           "c": {"anyOf": [{"type": "null"}, {"type": "boolean"}]}},
          "required": ["a"]}


def _rules(g: gad.Grammar) -> list:
    return list(g.lark.rules)


def _same(rules: list) -> None:
    f1, fo1, n1 = grammar_analysis.calculate_sets(rules)
    f2, fo2, n2 = calculate_sets(rules)
    assert n1 == n2
    assert f1 == f2
    assert fo1 == fo2


@pytest.mark.parametrize("name", builtin_names())
def test_shipped_grammars(name: str) -> None:
    _same(_rules(gad.Grammar.builtin(name)))


def test_schema_grammar() -> None:
    _same(_rules(gad.Grammar.from_json_schema(SCHEMA)))


def test_random_grammars() -> None:
    rng = random.Random(7)
    for _ in range(300):
        nts = [NonTerminal(f"n{i}") for i in range(rng.randint(1, 6))]
        ts = [Terminal(f"T{i}") for i in range(rng.randint(1, 4))]
        rules = []
        for nt in nts:
            for _ in range(rng.randint(1, 3)):
                body = [rng.choice(nts + ts) for _ in range(rng.randint(0, 4))]
                rules.append(Rule(nt, body))
        _same(rules)
        nullable = calculate_sets(rules)[2]
        # NULLABLE by brute force: a nonterminal is nullable iff some rule's body is all nullable
        brute: set = set()
        changed = True
        while changed:
            changed = False
            for r in rules:
                if r.origin not in brute and all(s in brute for s in r.expansion):
                    brute.add(r.origin)
                    changed = True
        assert nullable == brute


def test_swap_is_scoped() -> None:
    orig = grammar_analysis.calculate_sets
    with lark_uses_fast_sets():
        assert grammar_analysis.calculate_sets is calculate_sets
    assert grammar_analysis.calculate_sets is orig


@pytest.mark.parametrize("name", builtin_names())
def test_patched_build_gives_lark_own_table(name: str) -> None:
    """Lark's parser built under gad's patches (fast sets, remembered expand_rule) is Lark's own."""
    g = gad.Grammar.builtin(name)
    own = lark.Lark(g.lark_text, parser="lalr", lexer="contextual", start=g.start, maybe_placeholders=False,
                    source_path=g.path)
    assert canonical_parse_table(g.lark, g.start) == canonical_parse_table(own, g.start)


def _lark_table(rules: list, start: str = "s") -> object:
    a = LALR_Analyzer(ParserConf(rules, {}, [start]))
    a.compute_lalr()
    return a.parse_table


def test_random_grammars_tables_equal_lark(caplog: pytest.LogCaptureFixture) -> None:
    """gad's integer LALR(1) construction gives Lark's table (up to state numbers), Lark's
    shift/reduce log lines, and defers (None) exactly where Lark refuses the grammar."""
    rng = random.Random(11)
    seen = {"table": 0, "refused": 0, "shift/reduce": 0}
    for _ in range(400):
        nts = [NonTerminal("s")] + [NonTerminal(f"n{i}") for i in range(rng.randint(0, 5))]
        ts = [Terminal(f"T{i}") for i in range(rng.randint(1, 4))]
        rules = []
        for nt in nts:
            for order in range(rng.randint(1, 3)):
                body = [rng.choice(nts + ts) for _ in range(rng.randint(0, 4))]
                rules.append(Rule(nt, body, order, None, RuleOptions(priority=rng.choice([None, None, 1]))))
        rules = list(dict.fromkeys(rules))
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="lark"):
            try:
                want = _lark_table(rules)
            except LarkGrammarError:
                want = None
        lark_sr = sum("Shift/Reduce conflict" in r.getMessage() for r in caplog.records)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="lark"):
            got = lalr_table(rules, ["s"])
        gad_sr = sum("Shift/Reduce conflict" in r.getMessage() for r in caplog.records)
        if want is None:
            assert got is None
            seen["refused"] += 1
            continue
        assert got is not None
        assert canonical_parse_table(got, "s") == canonical_parse_table(want, "s")
        assert gad_sr == lark_sr
        seen["table"] += 1
        seen["shift/reduce"] += bool(lark_sr)
    assert min(seen.values()) >= 20, seen  # every case is exercised


def test_schema_grammar_tables_equal_lark() -> None:
    from_schema = gad.Grammar.from_json_schema(SCHEMA, whitespace="flexible")
    own = lark.Lark(from_schema.lark_text, parser="lalr", lexer="contextual", maybe_placeholders=False)
    assert canonical_parse_table(from_schema.lark) == canonical_parse_table(own)
