"""Per-request parser stacks (issue 9): deep nesting interns one stack per token (not one per probed
terminal), and the interned stacks of finished requests are freed when their last matcher goes,
without changing any mask."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from gad.engine.compiler import CompiledGrammar
from gad.engine.vocab import Vocabulary
from gad.grammar.loader import Grammar


@pytest.fixture()
def json_small():
    g = Grammar.builtin("json")
    return CompiledGrammar(g.lark, Vocabulary.from_strings(["[", "]", "1", ",", " ", "[1", "]]"]), g).warm()


def test_deep_nesting_interns_one_stack_per_token(json_small) -> None:
    cg = json_small
    m = cg.matcher()
    before = len(cg._stk_state)
    for _ in range(2000):
        assert m.accept_token(0)
        m.mask_view()
    # the "[" itself and the "1" the mask looks ahead through (token "[1"): probing which terminals
    # the parser allows interns nothing (it interned one stack per terminal of the context); the
    # suffix memo of fork walks adds a constant (its sentinel stack and the few suffixes it fills at)
    assert 2000 < len(cg._stk_state) - before <= 2 * 2000 + 1 + 32
    assert len(cg.stack_states(m.state[0])) >= 2000  # the nesting is on the stack


def test_stacks_freed_when_the_last_matcher_goes(json_small, monkeypatch) -> None:
    cg = json_small
    monkeypatch.setattr(CompiledGrammar, "STACK_RESET_MIN", 500)
    ref = CompiledGrammar(cg.grammar.lark, cg.vocab, cg.grammar).warm()  # never reset (threshold as shipped)
    m = cg.matcher()
    other = m.fork()
    for _ in range(1000):
        assert m.accept_token(0)
    grown = len(cg._stk_state)
    assert grown >= 1000
    del m
    gc.collect()
    assert len(cg._stk_state) == grown  # `other` is still alive: nothing freed
    assert other.accept_token(0) and other.accept_token(2)
    del other
    gc.collect()
    assert len(cg._stk_state) == 1 and not cg._masks and cg.stats["stack_resets"] == 1
    # masks after the reset equal those of a grammar that never reset
    a, b = cg.matcher(), ref.matcher()
    for t in [0, 0, 2, 3, 0, 2, 1, 1, 4, 1]:
        assert np.array_equal(a.mask(), b.mask())
        assert a.accept_token(t) == b.accept_token(t)
    assert a.is_accepting() == b.is_accepting()


def test_no_reset_below_the_threshold(json_small) -> None:
    cg = json_small
    m = cg.matcher()
    m.accept_token(0)
    n = len(cg._stk_state)
    del m
    gc.collect()
    assert len(cg._stk_state) == n and "stack_resets" not in cg.stats
