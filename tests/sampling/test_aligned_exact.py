"""Exact laws of the aligned samplers on toy models (BRIEF §6), by enumerating every proposal path.

* rejection on the ASAp trie: the law of accepted samples equals ``Q*`` (within the budget) to 1e-12 at
  random trie states, and ``E_q[Z(u_0)·a(w)] = Z_G``;
* the proposer's recorded ``log q`` and ``log a`` equal the enumerated ones;
* MCMC (restart / uniform / priority): the exact transition kernel leaves ``Q*`` invariant, ``πK = π``;
* SMC: ``E[Ẑ] = Z_G`` exactly, the expectation taken over every token draw and every resampling
  outcome of the library's own ``smc`` (its random choices replayed by an odometer).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from gad.engine.vocab import Vocabulary
from gad.errors import InvalidArgumentError
from gad.phi import make_estimator
from gad.phi.exact import enumerate_language
from gad.phi.trie import PhiTrie
from gad.sampling.aligned import (
    NodeLaw,
    TrieProposer,
    asap_sample,
    mh_log_ratio,
    rejection_sample,
    step_law,
    truncation_log_probs,
)
from gad.sampling.smc import Randomness, smc, systematic_resample
from gad.testing.regex_grammar import regex_grammar
from gad.testing.toys import gad_binary, hashed_lm, tiny_finite


def _hashed_finite():
    vocab = Vocabulary.from_strings(["a", "b", "ab", "ba"], name="ab")
    return hashed_lm(vocab, seed=3, name="toy-ab"), regex_grammar("(ab|a|b)(a|ba)?b?", vocab)


TOYS = {"tiny": (tiny_finite, 4), "binary": (gad_binary, 7), "hashed": (_hashed_finite, 5)}


def _eos(cg):
    return {int(e) for e in (getattr(cg, "eos_ids", None) or cg.vocab.eos_ids)}


def suffix_paths(lm, cg, trie, budget, prefix=()):
    """Every proposal path from ``prefix`` under the frozen trie: (tokens, finished, log_q, log_a_k, log_z0)."""
    eos = _eos(cg)
    out = []
    m0 = cg.matcher()
    assert m0.accept_tokens(list(prefix)) == len(prefix)
    node0 = 0
    for t in prefix:
        node0 = trie.child(node0, t) if node0 >= 0 else -1

    def rec(tokens, m, node, log_q, log_a, log_z0):
        lp = lm.logprobs([tokens])[0]
        ids = np.flatnonzero(m.mask() & np.isfinite(lp))
        law = step_law(ids, lp[ids], trie, node)
        if len(tokens) == len(prefix):
            log_z0 = law.log_z
        else:
            log_a += law.log_z
        if not math.isfinite(law.log_z):
            out.append((tuple(tokens), False, log_q, -math.inf, log_z0))
            return
        q = law.q()
        for j, t in enumerate(ids.tolist()):
            if q[j] <= 0:
                continue
            lq = log_q + math.log(q[j])
            if t in eos:
                out.append((tuple(tokens), True, lq, log_a, log_z0))
            elif len(tokens) + 1 >= budget:  # the budget (EOS included) is spent: cut
                out.append((tuple(tokens) + (t,), False, lq, -math.inf, log_z0))
            else:
                m2 = m.fork()
                assert m2.accept_token(t)
                c = trie.child(node, t) if node >= 0 else -1
                rec(tokens + [t], m2, c, lq, log_a - math.log(law.phi[j]), log_z0)

    rec(list(prefix), m0, node0, 0.0, 0.0, None)
    return out


def _trie_after(lm, cg, k, seed, budget):
    trie = PhiTrie()
    if k:
        asap_sample(lm, cg, [], n=k, seed=seed, max_new_tokens=budget, trie=trie)
    return trie


def _q_star(lm, cg, budget):
    e = enumerate_language(lm, cg, [], max_len=budget - 1)
    return e, {w: p / e.Z for w, p in e.sequences.items()}


@pytest.mark.parametrize("toy", sorted(TOYS))
@pytest.mark.parametrize("k", [0, 1, 3, 10, 40])
def test_rejection_law_is_q_star_at_every_trie_state(toy, k) -> None:
    make, budget = TOYS[toy]
    lm, cg = make()
    e, qstar = _q_star(lm, cg, budget)
    trie = _trie_after(lm, cg, k, seed=k, budget=budget)
    paths = suffix_paths(lm, cg, trie, budget)
    assert math.fsum(math.exp(p[2]) for p in paths) == pytest.approx(1.0, abs=1e-12)
    acc: Counter = Counter()
    mass = []
    for toks, fin, lq, la, lz0 in paths:
        if fin:
            assert la <= 1e-12  # a(w) <= 1 on the ASAp trie
            acc[toks] += math.exp(lq + min(0.0, la))
            mass.append(math.exp(lq + lz0 + la))
    total = math.fsum(acc.values())
    tv = 0.5 * math.fsum(abs(acc.get(w, 0.0) / total - qstar.get(w, 0.0)) for w in set(acc) | set(qstar))
    assert tv < 1e-12
    # E_q[Z(u_0) a(w)] = Z_G (within the budget) exactly
    assert math.fsum(mass) == pytest.approx(e.Z, rel=1e-12)


def test_proposer_records_the_enumerated_q_and_a() -> None:
    lm, cg = _hashed_finite()
    budget = 5
    trie = _trie_after(lm, cg, 6, seed=1, budget=budget)
    table = {(p[0], p[1]): p for p in suffix_paths(lm, cg, trie, budget)}
    est = make_estimator("asap", lm, cg, [], trie=trie)
    prop = TrieProposer(lm, cg, [], est, learn=False, max_new_tokens=budget)
    for i in range(40):
        p = prop.propose(np.random.default_rng([7, i]))
        toks, fin, lq, la, lz0 = table[(tuple(p.tokens), p.finished)]
        assert p.log_q == pytest.approx(lq, abs=1e-12)
        assert p.log_z0 == pytest.approx(lz0, abs=1e-12)
        if fin:
            assert p.log_a == pytest.approx(la, abs=1e-12)
            assert prop.log_a_from(p.tokens, 0) == pytest.approx(la, abs=1e-12)
        else:
            assert p.log_a == -math.inf


def test_rejection_sampler_matches_q_star_statistically() -> None:
    """Chi-square of 3000 rs samples on the GAD binary toy (Q* far from GCD's law): p-value above 1e-4."""
    from scipy.stats import chisquare

    lm, cg = gad_binary()
    e, qstar = _q_star(lm, cg, 7)
    s = rejection_sample(lm, cg, [], n=3000, seed=5, max_new_tokens=7)
    c = Counter(tuple(x.token_ids) for x in s)
    keys = sorted(qstar, key=lambda w: -qstar[w])
    big = [w for w in keys if qstar[w] * 3000 >= 5]
    obs = [c.get(w, 0) for w in big] + [3000 - sum(c.get(w, 0) for w in big)]
    exp = [qstar[w] * 3000 for w in big] + [3000 * (1 - sum(qstar[w] for w in big))]
    assert chisquare(obs, exp).pvalue > 1e-4
    assert all(x.finished and x.log_weight == 0.0 for x in s)
    st = s[-1].stats
    assert st["proposals_total"] >= 3000 and 0 < st["acceptance_rate"] <= 1
    assert st["log_z_hat"] == pytest.approx(math.log(e.Z), abs=0.05)


def _token_logps(lm, toks, eos_id):
    """``log p`` of each token of ``toks`` and then of ``eos_id`` (what a proposal records)."""
    out = []
    for j in range(len(toks) + 1):
        lp = lm.logprobs([list(toks[:j])])[0]
        out.append(float(lp[toks[j]] if j < len(toks) else lp[eos_id]))
    return out


@pytest.mark.parametrize("move", ["restart", "uniform", "priority"])
@pytest.mark.parametrize("toy,k", [("tiny", 0), ("tiny", 5), ("hashed", 0), ("hashed", 4), ("binary", 3)])
def test_mcmc_kernel_leaves_q_star_invariant(move, toy, k) -> None:
    """K(w → w') = Σ_k r_w(k) q(w'_{>k} | u_k) α, α from mh_log_ratio; rejections and cut proposals stay."""
    make, budget = TOYS[toy]
    lm, cg = make()
    (eos_id,) = sorted(_eos(cg))
    _, qstar = _q_star(lm, cg, budget)
    trie = _trie_after(lm, cg, k, seed=11 + k, budget=budget)
    states = sorted(qstar)
    index = {w: i for i, w in enumerate(states)}
    lps = {w: _token_logps(lm, w, eos_id) for w in states}
    K = np.zeros((len(states), len(states)))
    pi = np.array([qstar[w] for w in states])
    for i, w in enumerate(states):
        lr = truncation_log_probs(lps[w], move)
        assert math.fsum(math.exp(x) for x in lr) == pytest.approx(1.0, abs=1e-12)
        for kk in range(len(w) + 1):
            if lr[kk] == -math.inf:
                continue
            paths = suffix_paths(lm, cg, trie, budget, prefix=w[:kk])
            (la_old,) = [p[3] for p in paths if p[1] and p[0] == w]  # a_k(w) under the same estimates
            for toks, fin, lq, la, _ in paths:
                pr = math.exp(lr[kk] + lq)
                if not fin:
                    K[i, i] += pr
                    continue
                lr_new = truncation_log_probs(lps[toks], move)[kk]
                alpha = math.exp(min(0.0, mh_log_ratio(la, lr_new, la_old, lr[kk])))
                K[i, index[toks]] += pr * alpha
                K[i, i] += pr * (1 - alpha)
    assert np.allclose(K.sum(axis=1), 1.0, atol=1e-12)
    assert np.abs(pi @ K - pi).max() < 1e-12


def test_mcmc_sampler_runs_every_move_and_reports() -> None:
    from gad.sampling.aligned import mcmc_sample

    lm, cg = gad_binary()
    for move in ("restart", "uniform", "priority"):
        s = mcmc_sample(lm, cg, [], n=20, steps=3, move=move, max_new_tokens=7, seed=1)
        assert len(s) == 20 and all(x.finished for x in s)
        assert all(0 <= x.stats["accept_rate"] <= 1 for x in s)
        assert s[-1].stats["compute"]["model_rows"] > 0


class _Odometer(Randomness):
    """Replays a script of choices; new choice points take option 0 and record their branching."""

    def __init__(self, script):
        self.script = list(script)
        self.sizes: list[int] = []
        self.pos = 0
        self.prob = 1.0

    def _choose(self, probs):
        opts = [j for j, p in enumerate(probs) if p > 0]
        c = self.script[self.pos] if self.pos < len(self.script) else 0
        if self.pos >= len(self.sizes):
            self.sizes.append(len(opts))
        self.pos += 1
        self.prob *= probs[opts[c]]
        return opts[c]

    def next_script(self):
        """The script of the next run in odometer order (the last choice point with options left
        moves on, later ones restart at 0), or None when every run has been replayed."""
        choices = self.script + [0] * (len(self.sizes) - len(self.script))
        i = len(choices) - 1
        while i >= 0 and choices[i] == self.sizes[i] - 1:
            i -= 1
        return None if i < 0 else choices[:i] + [choices[i] + 1]

    def token(self, slot, cdf):
        w = np.diff(np.concatenate([[0.0], cdf])) / cdf[-1]
        return self._choose(w)

    def resample(self, weights):
        n = len(weights)
        cdf = np.cumsum(weights)
        cuts = {0.0, 1.0}
        for c in cdf[:-1]:
            for j in range(n):
                u = n * c - j
                if 0 < u < 1:
                    cuts.add(float(u))
        cuts = sorted(cuts)
        lengths = np.diff(cuts)
        k = self._choose(lengths)
        return systematic_resample(weights, 0.5 * (cuts[k] + cuts[k + 1]))


@pytest.mark.parametrize("threshold", [0.5, 1.0])
@pytest.mark.parametrize("toy,particles,est_name,k", [("tiny", 2, "gcd", 0), ("tiny", 3, "asap", 2),
                                                      ("hashed", 2, "asap", 3)])
def test_smc_z_hat_unbiased_exactly(toy, particles, est_name, k, threshold) -> None:
    make, budget = TOYS[toy]
    budget = min(budget, 4)
    lm, cg = make()
    e = enumerate_language(lm, cg, [], max_len=budget - 1)
    trie = _trie_after(lm, cg, k, seed=3, budget=budget) if est_name == "asap" else None
    est = make_estimator(est_name, lm, cg, [], trie=trie, settings={"batch_size": 8})
    script: list[int] = []
    total_p = expect = 0.0
    runs = 0
    while True:
        r = _Odometer(script)
        res = smc(lm, cg, [], est, particles=particles, max_new_tokens=budget, ess_threshold=threshold,
                  randomness=r)
        runs += 1
        total_p += r.prob
        expect += r.prob * (math.exp(res.log_z_hat) if res.log_z_hat > -math.inf else 0.0)
        script = r.next_script()
        if script is None:
            break
    assert total_p == pytest.approx(1.0, abs=1e-12)
    assert expect == pytest.approx(e.Z, rel=1e-12)
    assert runs > 1


def test_smc_with_exact_phi_has_unit_weights() -> None:
    lm, cg = tiny_finite()
    est = make_estimator("exact", lm, cg, [], settings={"exact_max_len": 3})
    e = enumerate_language(lm, cg, [], max_len=3)
    res = smc(lm, cg, [], est, particles=16, max_new_tokens=4, seed=2)
    lw = np.array([s.log_weight for s in res.particles])
    assert np.allclose(lw, 0.0, atol=1e-12)
    assert res.log_z_hat == pytest.approx(math.log(e.Z), abs=1e-12)
    assert res.resamples == 0


def test_node_law_q_sums_to_one() -> None:
    law = step_law(np.array([1, 4, 6]), np.log(np.array([0.2, 0.3, 0.1])), None, -1)
    assert law.q().sum() == pytest.approx(1.0)
    assert law.log_z == pytest.approx(math.log(0.6))
    assert isinstance(law, NodeLaw)


@pytest.mark.parametrize("method", ["gcd", "asap", "onestep"])
@pytest.mark.parametrize("batch", [1, 3])
def test_batch_sampler_weights_equal_enumerated_a(method, batch) -> None:
    """gad.sample's recorded log a(w) and log Z(u_0) equal the enumerated ones of the law it sampled
    (GCD: a(w) = Π_{i≥1} M(u_i)), and E_q[Z(u_0) a(w)] = Z_G holds for them."""
    import gad

    lm, cg = _hashed_finite()
    budget = 5
    s = gad.sample(lm, cg, [], n=12, method=method, seed=4, max_new_tokens=budget, batch_size=batch)
    if method == "gcd":
        table = {(p[0], p[1]): p for p in suffix_paths(lm, cg, PhiTrie(), budget)}
        for x in s:
            toks, fin, lq, la, lz0 = table[(tuple(x.token_ids), x.finished)]
            assert x.log_z0 == pytest.approx(lz0, abs=1e-12)
            assert x.log_weight == (pytest.approx(la, abs=1e-12) if fin else -math.inf)
    for x in s:
        assert x.log_weight is not None and x.log_z0 is not None
        assert x.log_weight <= 1e-12
        steps = len(x.token_ids) - (0 if x.finished else 1)  # a budget-cut sample's last token is not fed
        if method == "onestep":  # plus one look-ahead row per candidate child
            assert x.stats["model_rows"] > steps
        elif method == "asap" and batch == 1:  # the trie proposer: cached nodes cost no row
            assert x.stats["model_rows"] <= steps
        else:
            assert x.stats["model_rows"] == steps  # one distribution per step after the prompt pass
    t = gad.sample(lm, cg, [], n=4, method=method, seed=4, max_new_tokens=budget, batch_size=batch, top_k=2)
    assert all(x.log_weight is None and x.log_z0 is None for x in t)


@pytest.mark.parametrize("toy,threshold", [("tiny", 1.0), ("tiny", 0.5)])
def test_smc_proposal_draws_follow_the_proposal_law_exactly(toy, threshold) -> None:
    """``smc(…, proposal_draws=1)``: over every outcome of the run (token draws and resamplings, the
    particles' and the draw's), the draw's law is GCD's exact law (the proposal with the indicator Φ̂,
    enumerated by :func:`suffix_paths` on an empty trie), its recorded ``log_weight`` / ``log_z0`` are
    the enumerated ``log a(w)`` / ``log Z(u_0)``, and ``E[Ẑ]`` is still ``Z_G`` (the draw is not a
    particle)."""
    make, budget = TOYS[toy]
    budget = min(budget, 4)
    lm, cg = make()
    e = enumerate_language(lm, cg, [], max_len=budget - 1)
    paths = {(tok, fin): (lq, la, lz) for tok, fin, lq, la, lz in suffix_paths(lm, cg, PhiTrie(), budget)}
    est = make_estimator("gcd", lm, cg, [], settings={"batch_size": 8})
    script: list[int] = []
    law: Counter = Counter()
    total_p = expect = 0.0
    runs = 0
    while True:
        r = _Odometer(script)
        res = smc(lm, cg, [], est, particles=2, max_new_tokens=budget, ess_threshold=threshold,
                  randomness=r, proposal_draws=1)
        runs += 1
        total_p += r.prob
        expect += r.prob * (math.exp(res.log_z_hat) if res.log_z_hat > -math.inf else 0.0)
        (d,) = res.proposal_draws
        key = (tuple(d.token_ids), d.finished)
        law[key] += r.prob
        lq, la, lz = paths[key]
        assert d.log_z0 == pytest.approx(lz, abs=1e-12)
        assert d.log_weight == (pytest.approx(la, abs=1e-12) if d.finished else -math.inf)
        assert 0 <= res.proposal_rows <= res.compute.model_rows
        script = r.next_script()
        if script is None:
            break
    assert total_p == pytest.approx(1.0, abs=1e-12)
    assert set(law) == set(paths)
    for key, (lq, _, _) in paths.items():
        assert law[key] == pytest.approx(math.exp(lq), abs=1e-12)
    assert expect == pytest.approx(e.Z, rel=1e-12)
    assert runs > 1


def test_smc_particles_do_not_depend_on_proposal_draws() -> None:
    """The particles draw from their own slots: with or without proposal draws they are the same."""
    lm, cg = gad_binary()
    est = make_estimator("gcd", lm, cg, [], settings={"batch_size": 8})
    a = smc(lm, cg, [], est, particles=6, max_new_tokens=7, seed=4)
    b = smc(lm, cg, [], est, particles=6, max_new_tokens=7, seed=4, proposal_draws=3)
    assert [s.token_ids for s in a.particles] == [s.token_ids for s in b.particles]
    assert [s.log_weight for s in a.particles] == [s.log_weight for s in b.particles]
    assert a.log_z_hat == b.log_z_hat and a.resamples == b.resamples
    assert len(b.proposal_draws) == 3 and [s.index for s in b.proposal_draws] == [0, 1, 2]
    assert all(s.method == "gcd" for s in b.proposal_draws)
    assert b.compute.model_rows - b.proposal_rows <= a.compute.model_rows
    # draw j shares particle j's random source: they coincide up to the first resampling
    c = smc(lm, cg, [], est, particles=6, max_new_tokens=7, seed=4, ess_threshold=0.0, proposal_draws=3)
    assert [s.token_ids for s in c.proposal_draws] == [s.token_ids for s in c.particles[:3]]
    assert [s.log_weight for s in c.proposal_draws] == [s.log_weight for s in c.particles[:3]]
    assert c.proposal_rows == 0  # never resampled: every draw's row is a particle's
    with pytest.raises(InvalidArgumentError, match="proposal_draws"):
        smc(lm, cg, [], est, particles=2, max_new_tokens=7, proposal_draws=-1)
