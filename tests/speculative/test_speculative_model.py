"""Speculative decoding on the bundled SmolLM2: law unchanged (chi-square), KV rollback, tree attention."""

from __future__ import annotations

import numpy as np
import pytest

import gad
from gad.phi.base import IndicatorPhi
from gad.sampling.rng import NumpyRng
from gad.speculative import ChainDecoder, speculative_sample
from gad.speculative.drafters import make_drafter
from gad.speculative.tree import build_tree, tree_logprobs_check
from gad.speculative.verify import tilted

pytestmark = pytest.mark.model

BINARY = 'start: /[01]/ /[01]/? /[01]/?'


@pytest.fixture(scope="module")
def setup(smollm2):
    compiled = gad.compile(gad.Grammar.from_string(BINARY), smollm2.vocab, cache_dir=False)
    prompt = smollm2.encode_prompt("Write a random binary string of length 1 to 3.")
    return smollm2, compiled, prompt


def _gcd_law(lm, compiled, prompt) -> dict[tuple[int, ...], float]:
    law: dict[tuple[int, ...], float] = {}
    eos = set(compiled.eos_ids)

    def rec(u: tuple[int, ...], w: float) -> None:
        m = compiled.matcher()
        m.accept_tokens(u)
        mask = m.mask()
        lp = lm.logprobs([prompt + list(u)])[0]
        p = tilted(lp, mask, mask.astype(float))
        for t in np.flatnonzero(p > 1e-12):
            if int(t) in eos:
                law[u] = law.get(u, 0.0) + w * p[t]
            else:
                rec(u + (int(t),), w * p[t])

    rec((), 1.0)
    return law


def test_chi_square_lossless_self_drafter(setup) -> None:
    from scipy.stats import chisquare

    lm, compiled, prompt = setup
    law = _gcd_law(lm, compiled, prompt)
    assert abs(sum(law.values()) - 1.0) < 1e-6
    n = 60  # CPU budget: each sample starts two KV sessions (target + shallow drafter)
    out = speculative_sample(lm, compiled, prompt, n=n, seed=12345, drafter="self:10", draft_k=3,
                             max_new_tokens=6)
    assert all(s.finished for s in out)
    counts: dict[tuple[int, ...], int] = {}
    for s in out:
        counts[tuple(s.token_ids)] = counts.get(tuple(s.token_ids), 0) + 1
    assert set(counts) <= set(law)
    # pool outputs with small expected counts into one category
    keys = sorted(law, key=lambda k: -law[k])
    big = [k for k in keys if law[k] * n >= 5]
    obs = [counts.get(k, 0) for k in big] + [n - sum(counts.get(k, 0) for k in big)]
    exp = [law[k] * n for k in big] + [n * (1 - sum(law[k] for k in big))]
    if exp[-1] < 1e-9:
        obs, exp = obs[:-1], exp[:-1]
    assert len(obs) >= 2
    assert chisquare(obs, exp).pvalue > 0.001
    assert sum(s.stats["drafted"] for s in out) > 0


def test_kv_rollback_matches_fresh_session(setup) -> None:
    lm, _, prompt = setup
    json_c = gad.compile(gad.Grammar.builtin("json"), lm.vocab)
    dec = ChainDecoder(lm, json_c, prompt, make_drafter("self:6", lm), 4, None, IndicatorPhi(), NumpyRng(3),
                       12, tuple(lm.vocab.eos_ids))
    rejected = 0
    for _ in range(3):
        before = dec.accepted
        dec.step()
        rejected += dec.drafted - dec.accepted > before
        fed = dec.gen[: len(dec.gen) - len(dec.pending)]
        assert dec.sess.generated[0] == fed
        fresh = lm.session(prompt + fed)
        np.testing.assert_allclose(dec.sess.logprobs(), fresh.logprobs(), atol=2e-4)
        m = json_c.matcher()
        m.accept_tokens(dec.gen)
        assert m.state_key() == dec.m.state_key()
        if dec.done:
            break


def test_tree_attention_equals_per_path_scoring(setup) -> None:
    lm, compiled, prompt = setup
    tree = build_tree(make_drafter("self:6", lm), compiled.matcher(), prompt, 2, 2, lm.vocab.eos_ids)
    assert len(tree) >= 2
    assert tree_logprobs_check(lm, prompt, tree) < 2e-3
    (s,) = speculative_sample(lm, compiled, prompt, n=1, drafter="self:6", tree=(2, 2), max_new_tokens=6)
    assert s.stats["scorer"] == "tree-attention"
