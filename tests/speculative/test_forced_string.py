"""The forced-string drafter: the grammar's forced text, spelled canonically, drafted for free."""

from __future__ import annotations

import lark
import numpy as np

from gad.engine.compiler import CompiledGrammar
from gad.engine.vocab import Vocabulary
from gad.models.base import ToyLM
from gad.speculative import ForcedStringDrafter, speculative_sample

GRAMMAR = r"""
start: "select" " " NAME ("," NAME)* ";"
NAME: /[ab]+/
"""
TOKENS = ["s", "se", "sel", "select", "elect", "ect", " ", "a", "b", "ab", ",", ";", " a", "t", "ect ", "l", "lect"]


def _setup():
    vocab = Vocabulary.from_strings(TOKENS)
    cg = CompiledGrammar(lark.Lark(GRAMMAR, parser="lalr", lexer="contextual"), vocab).warm()
    return vocab, cg


def test_forced_bytes_and_canonical_spelling() -> None:
    vocab, cg = _setup()
    m = cg.matcher()
    # every prefix spelling ("s", "se", "sel", "select") is allowed, so no single token is forced
    assert m.forced_bytes() == b"select "
    assert int(m.mask().sum()) == 4  # s, se, sel, select
    d = ForcedStringDrafter(None, vocab.eos_ids)
    toks, q = d.propose(m.fork(), [], 4)
    assert [vocab.tokens[t] for t in toks] == [b"select", b" "]  # greedy longest-match spelling
    assert q.shape == (2, vocab.size) and (q[np.arange(2), toks] == 1.0).all()
    # after a name, nothing is forced: "," or ";" or more name characters or a space
    assert m.accept_tokens([TOKENS.index("select"), TOKENS.index(" a")]) == 2
    assert m.forced_bytes() == b""
    # a partial keyword forces its rest
    m.reset()
    assert m.accept_token(TOKENS.index("se"))
    assert m.forced_bytes() == b"lect "
    toks, _ = d.propose(m.fork(), [], 4)
    assert b"".join(vocab.tokens[t] for t in toks) == b"lect "


def test_speculative_with_forced_strings_is_grammatical_and_saves_passes() -> None:
    vocab, cg = _setup()
    rng = np.random.default_rng(0)
    table = rng.random(vocab.size) + 0.05
    table[TOKENS.index(";")] = 3.0
    table[vocab.eos_ids[0]] = 3.0
    lm = ToyLM(vocab, lambda ctx: table, name="toy-forced")
    out = speculative_sample(lm, cg, [], n=20, seed=3, max_new_tokens=12, drafter="forced", draft_k=4)
    parser = lark.Lark(GRAMMAR, parser="lalr")
    finished = [s for s in out if s.finished]
    assert finished
    for s in finished:
        parser.parse(s.text)
        assert s.text.startswith("select")
    accepted = sum(s.stats["accepted"] for s in out)
    assert accepted >= len(out)  # the forced keyword is drafted (and accepted) in every sample
