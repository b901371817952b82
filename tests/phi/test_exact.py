"""Exact enumeration (gad.phi.exact) against hand-computed values on a toy model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gad.engine.vocab import Vocabulary
from gad.errors import EnumerationBudgetError, InvalidArgumentError
from gad.phi import ExactPhi, enumerate_language
from gad.testing.regex_grammar import regex_grammar
from gad.testing.toys import gad_binary, hashed_lm, tiny_finite

# tiny_finite: tokens 0:"0" 1:"1" 2:"00" 3:EOS, language {0, 00, 10, 11}
# p(.|())   = [.4 .3 .2 .1]; p(.|(0,)) = [.5 .1 .1 .3]; every other context uniform (.25 each)
P_0 = 0.4 * 0.3                 # "0"  as (0,EOS)
P_00a = 0.4 * 0.5 * 0.25        # "00" as (0,0,EOS)
P_00b = 0.2 * 0.25              # "00" as (2,EOS)   <- the non-canonical tokenization counts too
P_10 = 0.3 * 0.25 * 0.25
P_11 = 0.3 * 0.25 * 0.25
Z_HAND = P_0 + P_00a + P_00b + P_10 + P_11   # 0.2575


def test_z_and_q_star_match_hand_computation() -> None:
    lm, g = tiny_finite()
    e = enumerate_language(lm, g, max_len=6)
    assert e.Z == pytest.approx(Z_HAND, abs=1e-15)
    assert e.Z == pytest.approx(0.2575, abs=1e-15)
    q = e.q_tokens()
    assert set(q) == {(0,), (0, 0), (2,), (1, 0), (1, 1)}
    assert q[(0, 0)] == pytest.approx(P_00a / Z_HAND)
    assert q[(2,)] == pytest.approx(P_00b / Z_HAND)
    qs = e.q_strings()
    assert qs == pytest.approx({b"0": P_0 / Z_HAND, b"00": (P_00a + P_00b) / Z_HAND,
                                b"10": P_10 / Z_HAND, b"11": P_11 / Z_HAND})
    assert math.fsum(qs.values()) == pytest.approx(1.0)


def test_phi_at_prefixes() -> None:
    lm, g = tiny_finite()
    e = enumerate_language(lm, g, max_len=6)
    assert e.phi_at([]) == pytest.approx(Z_HAND)
    assert e.phi_at([0]) == pytest.approx(0.3 + 0.5 * 0.25)      # EOS now, or "0" then EOS
    assert e.phi_at([1]) == pytest.approx(2 * 0.25 * 0.25)
    assert e.phi_at([2]) == pytest.approx(0.25)
    with pytest.raises(InvalidArgumentError):
        e.phi_at([1, 1, 1])      # not viable: never visited


def test_length_bound_truncates_z() -> None:
    lm, g = tiny_finite()
    e1 = enumerate_language(lm, g, max_len=1)   # drops (0,0) and (1,b): only "0" and (2,)
    assert e1.Z == pytest.approx(P_0 + P_00b)
    lm2, g2 = gad_binary(ones_len=4)
    # "1" + 1..3 bits (EOS forced at length 4); "00000" = 0.9 * 0.09**4 * 1
    z = 0.1 * 0.9 + 0.9 * 0.09 ** 4
    assert enumerate_language(lm2, g2, max_len=8).Z == pytest.approx(z)
    assert enumerate_language(lm2, g2, max_len=4).Z == pytest.approx(0.1 * 0.9)   # "00000" dropped


def test_q_star_matches_brute_force_on_random_model() -> None:
    vocab = Vocabulary.from_strings(["a", "b", "ab", "ba"], name="ab")
    lm = hashed_lm(vocab, seed=3, eos_boost=0.3)
    g = regex_grammar("(ab|ba)(ab)?b?", vocab)
    e = enumerate_language(lm, g, max_len=5)
    # brute force over all token sequences of length <= 5 (EOS appended), checking the language
    import itertools
    import re
    z = 0.0
    for n in range(0, 6):
        for w in itertools.product(range(4), repeat=n):
            text = vocab.decode(w).decode()
            if not re.fullmatch("(ab|ba)(ab)?b?", text):
                continue
            lp = sum(lm.logprobs([list(w[:i])])[0][w[i]] for i in range(n))
            lp += lm.logprobs([list(w)])[0][4]
            z += math.exp(lp)
    assert e.Z == pytest.approx(z, rel=1e-12)


def test_budget_error_carries_estimate() -> None:
    vocab = Vocabulary.from_strings(["0", "1"], name="bits")
    lm = hashed_lm(vocab, seed=1)
    g = regex_grammar("[01]+", vocab)
    with pytest.raises(EnumerationBudgetError) as ei:
        enumerate_language(lm, g, max_len=20, node_budget=100)
    assert ei.value.estimate is not None and ei.value.estimate > 100
    # 2^21 - 1 prefixes in total: the extrapolation is exact for a constant branching factor
    assert ei.value.estimate == 2 ** 21 - 1


def test_regex_grammar_refuses_bad_and_empty_matching_patterns() -> None:
    vocab = Vocabulary.from_strings(["0", "1"], name="bits")
    with pytest.raises(InvalidArgumentError, match=r"'\[01\]\*'.*empty string"):
        regex_grammar("[01]*", vocab)
    with pytest.raises(InvalidArgumentError, match="argument pattern"):
        regex_grammar("(01", vocab)
    g = regex_grammar("a/b|0", Vocabulary.from_strings(["a", "/", "b", "0"], name="slash"))
    m = g.matcher()
    assert m.accept_tokens([0, 1, 2]) == 3 and m.is_accepting()


def test_exact_phi_estimator() -> None:
    lm, g = tiny_finite()
    est = ExactPhi.from_model(lm, g, max_len=6)
    m = g.matcher()
    logp = lm.logprobs([[]])[0]
    phi = est.child_phi([], logp, m.mask())
    np.testing.assert_allclose(phi, [0.425, 0.125, 0.25, 0.0])
    # Q*(t | ε) = p(t) Φ(t) / Φ(ε)
    q = np.exp(logp) * phi / Z_HAND
    assert q.sum() == pytest.approx(1.0)
    m.accept_token(0)
    phi0 = est.child_phi([0], lm.logprobs([[0]])[0], m.mask())
    np.testing.assert_allclose(phi0, [0.25, 0.0, 0.0, 1.0])
