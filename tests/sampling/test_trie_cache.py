"""The trie's cache of model outputs, compute counting, and the invariants every Φ estimator keeps.

* next-token distributions read from the trie equal fresh model calls (toy: exactly; bundled model:
  within float tolerance, in tests/sampling/test_aligned_model.py);
* the sampled law is unchanged with the cache on or off: same seeds, same samples (toy models);
* the cache saves model rows (never more rows than without it) and counts extensions as positions;
* Φ̂ ∈ [0, 1]; Φ̂ = 0 where the mask forbids; Φ̂ = 1 at EOS of a complete text; Φ̂ never increases as
  the ASAp trie learns (GCD, ASAp, OneStep, exact).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gad.engine.vocab import Vocabulary
from gad.phi import make_estimator
from gad.phi.trie import PhiTrie
from gad.sampling.aligned import TrieProposer, asap_sample, mcmc_sample, rejection_sample
from gad.testing.regex_grammar import regex_grammar
from gad.testing.toys import gad_binary, hashed_lm, tiny_finite


def _ab():
    vocab = Vocabulary.from_strings(["a", "b", "ab", "ba", "c"], name="abc")
    return hashed_lm(vocab, seed=5, eos_boost=0.1, name="toy-abc"), regex_grammar("(a|b)(ab|ba|a|b)*c?", vocab)


TOYS = [tiny_finite, gad_binary, _ab]


@pytest.mark.parametrize("make", TOYS)
def test_cached_distributions_equal_fresh_model_calls(make) -> None:
    lm, cg = make()
    est = make_estimator("asap", lm, cg, [], trie=PhiTrie())
    prop = TrieProposer(lm, cg, [], est, max_new_tokens=8)
    for i in range(30):
        prop.observe(prop.propose(np.random.default_rng([1, i])))
    trie = prop.trie
    assert len(prop._dist) > 3
    for node, (ids, logp) in prop._dist.items():
        path = trie.prefix(node)
        assert trie.node_of(path) == node
        fresh = lm.logprobs([path])[0]
        m = cg.matcher()
        assert m.accept_tokens(path) == len(path)
        allowed = np.flatnonzero(m.mask() & np.isfinite(fresh))
        assert np.array_equal(ids, allowed)
        assert np.array_equal(logp, fresh[allowed])
        assert trie.mass[node] == pytest.approx(np.exp(fresh[allowed]).sum(), rel=1e-12)


@pytest.mark.parametrize("make", TOYS)
@pytest.mark.parametrize("sampler", ["rs", "asap", "mcmc"])
def test_same_samples_with_cache_on_and_off(make, sampler) -> None:
    lm, cg = make()
    runs = {}
    for cache in (True, False):
        if sampler == "rs":
            s = rejection_sample(lm, cg, [], n=40, seed=3, max_new_tokens=7, cache=cache)
        elif sampler == "asap":
            s = asap_sample(lm, cg, [], n=40, seed=3, max_new_tokens=7, cache=cache)
        else:
            s = mcmc_sample(lm, cg, [], n=10, steps=4, move="uniform", seed=3, max_new_tokens=7, cache=cache)
        runs[cache] = s
    on, off = runs[True], runs[False]
    assert [x.token_ids for x in on] == [x.token_ids for x in off]
    assert [x.finished for x in on] == [x.finished for x in off]
    if sampler == "asap":
        assert [x.log_weight for x in on] == pytest.approx([x.log_weight for x in off], abs=1e-12)
    rows_on = on[-1].stats["compute"]["model_rows"]
    rows_off = off[-1].stats["compute"]["model_rows"]
    assert rows_on < rows_off
    # without the cache every generated token after the root costs one row
    if sampler == "asap":
        assert rows_off == sum(len(x.token_ids) for x in off)


def test_cache_extends_over_skipped_tokens_in_one_pass() -> None:
    """A proposal that leaves cached territory at depth d > 1 advances the session over the skipped
    tokens in one call: positions > rows, and every row is one call."""
    lm, cg = gad_binary()
    s = asap_sample(lm, cg, [], n=200, seed=0, max_new_tokens=7)
    comp = s[-1].stats["compute"]
    assert comp["model_positions"] > comp["model_rows"] > 0
    assert sum(x.stats["model_rows"] for x in s) == comp["model_rows"]
    assert comp["prompt_passes"] == 1
    # once every reachable node is cached, sampling costs no model rows
    assert all(x.stats["model_rows"] == 0 for x in s[-20:])


def _check_phi(phi, mask, eos_ids, complete):
    assert phi.shape == mask.shape and phi.dtype == np.float64
    assert np.all((phi >= 0) & (phi <= 1))
    assert np.all(phi[~mask] == 0)
    if complete:
        assert np.all(phi[eos_ids] == 1)


@pytest.mark.parametrize("make", TOYS)
@pytest.mark.parametrize("method", ["gcd", "asap", "onestep", "exact"])
def test_estimator_invariants(make, method) -> None:
    lm, cg = make()
    eos_ids = np.asarray(sorted(cg.vocab.eos_ids))
    settings = {"exact_max_len": 6, "batch_size": 1}
    est = make_estimator(method, lm, cg, [], trie=PhiTrie() if method == "asap" else None,
                         settings=settings)
    rng = np.random.default_rng(0)
    seen: dict[tuple[int, ...], np.ndarray] = {}
    for _ in range(25):
        m = cg.matcher()
        prefix: list[int] = []
        for _step in range(6):
            logp = lm.logprobs([prefix])[0]
            mask = np.asarray(m.mask(), dtype=bool)
            phi = np.asarray(est.child_phi(prefix, logp, mask), dtype=np.float64)
            _check_phi(phi, mask, eos_ids, bool(mask[eos_ids].any()))
            key = tuple(prefix)
            if key in seen and method == "asap":  # never increases as the trie learns
                assert np.all(phi <= seen[key] + 1e-15)
            seen[key] = phi
            w = np.exp(logp) * phi
            if w.sum() <= 0:
                break
            t = int(rng.choice(len(w), p=w / w.sum()))
            if t in eos_ids:
                prefix.append(t)
                break
            assert m.accept_token(t)
            prefix.append(t)
        fin = bool(prefix) and prefix[-1] in eos_ids
        est.observe(prefix, fin)


def test_asap_trie_phi_never_increases_and_bounds_z() -> None:
    """Along learning, every node's Φ̂ only decreases, stays in [0, 1], and Φ̂(u) ≥ Z(u) (so a(w) ≤ 1)."""
    lm, cg = _ab()
    trie = PhiTrie()
    est = make_estimator("asap", lm, cg, [], trie=trie)
    prop = TrieProposer(lm, cg, [], est, max_new_tokens=7)
    prev = np.array(trie.phi)
    for i in range(60):
        p = prop.propose(np.random.default_rng([2, i]))
        prop.observe(p)
        cur = np.array(trie.phi)
        assert np.all(cur[: len(prev)] <= prev + 1e-15)
        assert np.all((cur >= 0) & (cur <= 1))
        prev = cur
        if p.finished:
            assert p.log_a <= 1e-12
    for node in list(prop._dist):
        law = prop.law(node, [])
        assert math.exp(law.log_z) <= trie.phi[node] * (1 + 1e-12) + 1e-15


def test_trie_sums_stay_exact_on_forced_chains_of_improbable_tokens() -> None:
    """json-finite under the char-level toy: long forced chains with p ~ 1e-2 per token, Φ̂ down to
    1e-118.  Every node's running sum S(u) equals the exact Σ p·Φ̂ over its children (a fixed 1e-8
    cancellation threshold let it drift far above it, so a(w) never reached 1 and rs never accepted)."""
    from gad.eval.harness import toy_model
    from gad.eval.tasks import get_task

    lm = toy_model()
    cg = get_task("json-finite").compile(lm.vocab)
    est = make_estimator("asap", lm, cg, [], trie=PhiTrie())
    prop = TrieProposer(lm, cg, [], est, max_new_tokens=48)
    for i in range(40):
        prop.observe(prop.propose(np.random.default_rng([0, i])))
    trie = prop.trie
    assert trie.root_phi < 1e-100
    for u in range(len(trie)):
        kids = list(trie.children(u))
        if kids:
            exact = math.fsum(trie.p[c] * trie.phi[c] for c in kids)
            assert trie.ssum[u] == pytest.approx(exact, rel=1e-9, abs=0)
    s = rejection_sample(lm, cg, [], n=5, seed=1, max_new_tokens=48)
    assert s[-1].stats["proposals_total"] < 200
