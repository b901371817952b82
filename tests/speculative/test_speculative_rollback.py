"""After any rejection the matcher and the target session equal a fresh run on the accepted prefix."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_speculative_lossless import EOS, TARGET, VOCAB, random_lm

import gad
from gad.errors import TokenRejectedError
from gad.phi.base import IndicatorPhi
from gad.sampling.rng import NumpyRng
from gad.speculative import ChainDecoder, LMDrafter

GRAMMAR = 'start: ("a" | "b" "c" | "d" "a")+ ("b" | "c")?'


@pytest.fixture(scope="module")
def compiled():
    return gad.compile(gad.Grammar.from_string(GRAMMAR), VOCAB, cache_dir=False)


def _decoder(compiled, seed: int, k: int = 4, lm=TARGET) -> ChainDecoder:
    return ChainDecoder(lm, compiled, [], LMDrafter(random_lm(7, "d"), 5), k, None, IndicatorPhi(),
                        NumpyRng(seed), 12, (EOS,))


def _check_state(dec: ChainDecoder, compiled) -> None:
    fresh = compiled.matcher()
    assert fresh.accept_tokens(dec.gen) == len(dec.gen)
    assert dec.m.tokens == dec.gen
    assert dec.m.state_key() == fresh.state_key()
    assert np.array_equal(dec.m.mask(), fresh.mask())
    fed = dec.gen[: len(dec.gen) - len(dec.pending)]
    assert dec.sess.generated[0] == fed
    fresh_sess = dec.lm.session([])
    fresh_sess.extend(fed) if fed else None
    np.testing.assert_allclose(dec.sess.logprobs(), fresh_sess.logprobs(), atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_rollback_random_drafts(compiled, data: st.DataObject, seed: int) -> None:
    dec = _decoder(compiled, seed)
    for _ in range(data.draw(st.integers(1, 4), label="steps")):
        if dec.done:
            break
        fork = dec.m.fork()
        draft, rows = [], []
        for _ in range(data.draw(st.integers(0, 4), label="k")):
            mask = fork.mask()
            allowed = [int(t) for t in np.flatnonzero(mask)]
            t = data.draw(st.sampled_from(allowed), label="token")
            q = np.random.default_rng(seed + len(draft)).dirichlet(np.ones(VOCAB.size)) * mask
            q[t] += 0.05
            rows.append(q / q.sum())
            draft.append(t)
            if t == EOS:
                break
            assert fork.accept_token(t)
        q = np.array(rows).reshape(len(rows), VOCAB.size)
        dec.step((draft, q))
        if not dec.done:
            _check_state(dec, compiled)


def test_rejection_happens_and_is_rolled_back(compiled) -> None:
    """A draft the target cannot accept (target puts no mass on it) is rejected at position 1."""
    lm = gad.ToyLM.from_table(VOCAB, {(): [0, 1, 0, 0, 0]}, default=[1, 1, 1, 1, 1])
    dec = _decoder(compiled, 0, lm=lm)
    q = np.zeros((3, 5))
    q[:, 0] = 1.0
    dec.step(([0, 0, 0], q))
    assert dec.accepted == 0 and dec.gen == [1]  # 'b' is the only token the target allows
    _check_state(dec, compiled)


def test_masked_draft_token_raises_and_restores(compiled) -> None:
    dec = _decoder(compiled, 0)
    q = np.zeros((2, 5))
    q[:, 2] = 1.0
    with pytest.raises(TokenRejectedError):
        dec.step(([2, 2], q))  # 'c' cannot start a sentence
    assert dec.m.tokens == [] and dec.sess.generated[0] == []


def test_full_runs_end_in_the_language(compiled) -> None:
    from gad.speculative import speculative_sample

    out = speculative_sample(TARGET, compiled, [], n=20, seed=1, drafter=LMDrafter(random_lm(7, "d"), 5),
                             draft_k=3, max_new_tokens=12)
    for s in out:
        m = compiled.matcher()
        assert m.accept_tokens(s.token_ids) == len(s.token_ids)
        if s.finished:
            assert m.is_accepting()
