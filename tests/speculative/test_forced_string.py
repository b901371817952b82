"""The forced-string drafter: the grammar's forced text, spelled canonically, drafted for free."""

from __future__ import annotations

import lark
import numpy as np
from test_speculative_lossless import ScriptRng, enumerate_law

from gad.engine.compiler import CompiledGrammar
from gad.engine.vocab import Vocabulary
from gad.models.base import ToyLM
from gad.phi.base import IndicatorPhi
from gad.speculative import ForcedStringDrafter, NgramDrafter, speculative_sample, tilted
from gad.speculative.drafters import ChainedDrafter, ForcedDrafter
from gad.testing.finite import TextLanguage

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


def test_chained_drafter_drafts_the_forced_string_first() -> None:
    vocab, cg = _setup()
    chain = ChainedDrafter([ForcedStringDrafter(None, vocab.eos_ids), NgramDrafter(eos_ids=vocab.eos_ids)])
    toks, q = chain.propose(cg.matcher(), [], 4)
    assert [vocab.tokens[t] for t in toks] == [b"select", b" "]
    assert (q[np.arange(2), toks] == 1.0).all() and chain.last_masks is not None and chain.last_masks.shape == (2, vocab.size)
    # the single-token drafter alone sees nothing forced at the start (four spellings allowed)
    assert ForcedDrafter(vocab.eos_ids).propose(cg.matcher(), [], 4)[0] == []
    # a matcher without jump-forward (a finite-language stand-in): single forced tokens only
    lang = TextLanguage(vocab, {"select a;"})
    toks, _ = ForcedStringDrafter(None, vocab.eos_ids).propose(lang.matcher(), [], 4)
    assert toks == []  # "s", "se", "sel", "select" all allowed: nothing single-token forced


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


def test_lossless_law_with_forced_strings_equals_gcd_law() -> None:
    # a finite language with forced text at the start ("abc") and after the free letter ("ab");
    # the exact law of the real decoding code (every random choice enumerated) against token-by-token GCD
    parser = lark.Lark('start: "abc" X "ab"\nX: /[ab]|ca/\n', parser="lalr", lexer="contextual")
    vocab = Vocabulary.from_strings(["a", "b", "c", "ab", "bc", "abc", "ca", "cab"])
    cg = CompiledGrammar(parser, vocab).warm()
    eos = vocab.eos_ids[0]

    def f(ctx: tuple[int, ...]) -> np.ndarray:
        return np.random.default_rng([7, len(ctx), *ctx]).dirichlet(np.ones(vocab.size)) + 1e-3

    lm = ToyLM(vocab, f, name="toy-law")
    ref: dict[tuple[int, ...], float] = {}

    def rec(u: tuple[int, ...], w: float) -> None:
        m = cg.matcher()
        assert m.accept_tokens(u) == len(u)
        mask = m.mask()
        lp = lm.logprobs([u])[0]
        p = tilted(lp, mask, IndicatorPhi().child_phi(u, lp, mask))
        for t in np.flatnonzero(p > 0):
            if t == eos:
                ref[u] = ref.get(u, 0.0) + w * p[t]
            else:
                rec(u + (int(t),), w * p[t])

    rec((), 1.0)
    drafter = ForcedStringDrafter(None, vocab.eos_ids)
    assert drafter.plan(cg.matcher()) == [vocab.tokens.index(b"abc")]

    def run(rng: ScriptRng) -> tuple[int, ...]:
        (s,) = speculative_sample(lm, cg, [], n=1, seed=rng, drafter=drafter, draft_k=3, max_new_tokens=10)
        assert s.finished and s.stats["drafted"] > 0
        return tuple(s.token_ids)

    law = enumerate_law(run)
    assert abs(sum(law.values()) - 1.0) < 1e-9
    assert set(law) <= set(ref)
    assert max(abs(law.get(w, 0.0) - ref[w]) for w in ref) < 1e-12
