"""Φ estimators through gad.phi.make_estimator and the sampler: OneStep values, the KL test of ASAp vs GCD."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

import gad
from gad.errors import InvalidArgumentError
from gad.phi import ESTIMATORS, AsapPhi, ExactPhi, GcdPhi, OneStepPhi, enumerate_language, make_estimator
from gad.phi.base import PhiEstimator
from gad.testing.toys import gad_binary, tiny_finite


def kl(emp: dict, q: dict) -> float:
    return sum(p * math.log(p / q[s]) if q.get(s, 0) > 0 else math.inf for s, p in emp.items() if p > 0)


def empirical(samples) -> dict[bytes, float]:
    c = Counter(s.text.encode() for s in samples if s.finished)
    n = sum(c.values())
    return {k: v / n for k, v in c.items()}


def gcd_law(lm, g, max_len: int) -> dict[bytes, float]:
    """The exact GCD output law: Π_i p(w_i|u)·mask / M(u), by recursion over viable prefixes."""
    out: dict[bytes, float] = {}
    eos = set(g.eos_ids)

    def rec(prefix: list[int], m, q: float) -> None:
        p = np.exp(lm.logprobs([prefix])[0])
        mask = m.mask()
        z = p[mask].sum()
        for t in np.flatnonzero(mask & (p > 0)).tolist():
            qt = q * p[t] / z
            if t in eos:
                s = g.vocab.decode(prefix)
                out[s] = out.get(s, 0.0) + qt
            elif len(prefix) < max_len:
                c = m.fork()
                c.accept_token(t)
                rec(prefix + [t], c, qt)

    rec([], g.matcher(), 1.0)
    return out


def test_make_estimator_names() -> None:
    lm, g = tiny_finite()
    kinds = {"gcd": GcdPhi, "indicator": GcdPhi, "asap": AsapPhi, "onestep": OneStepPhi, "exact": ExactPhi}
    assert set(kinds) - {"indicator"} == set(ESTIMATORS)
    for name, cls in kinds.items():
        est = make_estimator(name, lm=lm, compiled=g, prompt_ids=[])
        assert isinstance(est, cls) and isinstance(est, PhiEstimator)
        assert callable(est.flush)
    with pytest.raises(InvalidArgumentError, match="unknown"):
        make_estimator("nope", lm=lm, compiled=g, prompt_ids=[])


def test_onestep_values_by_hand() -> None:
    lm, g = tiny_finite()
    est = make_estimator("onestep", lm=lm, compiled=g, prompt_ids=[], settings={"onestep_top": 32})
    phi = est.child_phi([], lm.logprobs([[]])[0], g.matcher().mask())
    # child "0": mask allows 0 and EOS -> .5 + .3 ; child "1": allows 0,1 -> .5 ; child "00": EOS -> .25
    np.testing.assert_allclose(phi, [0.8, 0.5, 0.25, 0.0])
    e = enumerate_language(lm, g, max_len=6)
    for t in range(3):
        assert phi[t] >= e.phi[(t,)] - 1e-12          # an upper bound of the exact Φ
    top1 = make_estimator("onestep", lm=lm, compiled=g, prompt_ids=[], settings={"onestep_top": 1})
    # only the most likely child ("0", p=.4) gets a look-ahead; the others keep 1
    np.testing.assert_allclose(top1.child_phi([], lm.logprobs([[]])[0], g.matcher().mask()), [0.8, 1, 1, 0])
    with pytest.raises(InvalidArgumentError):
        make_estimator("onestep", lm=lm, compiled=g, prompt_ids=[], settings={"onestep_top": 0})


def test_asap_kl_beats_gcd_on_binary_grammar() -> None:
    """string_start_w_1_all_0 (00000 | 1[01]+) with a toy model that prefers 0 first, 1 afterwards.

    GCD's law puts 0.9 on "00000" although Q*("00000") = 6.6e-4: KL(Q_gcd || Q*) = 6.27 nats, and the
    empirical KL of GCD samples stays near it.  ASAp (B = 1, the paper's sequential algorithm) learns
    Φ("0") from its first "00000" sample; after 1,000 samples its empirical KL is < 0.05 nats.
    """
    lm, g = gad_binary(ones_len=4)
    q_star = enumerate_language(lm, g, max_len=8).q_strings()
    q_gcd = gcd_law(lm, g, max_len=8)
    assert sum(q_gcd.values()) == pytest.approx(1.0)
    limit = kl(q_gcd, q_star)
    assert limit == pytest.approx(6.27, abs=0.01)
    n = 1000
    gcd_samples = gad.sample(lm, g, [], n=n, method="gcd", seed=0, max_new_tokens=10, batch_size=50)
    asap_samples = gad.sample(lm, g, [], n=n, method="asap", seed=0, max_new_tokens=10, batch_size=1)
    assert all(s.finished for s in gcd_samples + asap_samples)
    kl_gcd = kl(empirical(gcd_samples), q_star)
    kl_asap = kl(empirical(asap_samples), q_star)
    assert abs(kl_gcd - limit) < 0.2
    assert kl_asap < 0.05
    assert kl_asap < kl_gcd


def test_exact_method_samples_q_star() -> None:
    lm, g = gad_binary(ones_len=4)
    q_star = enumerate_language(lm, g, max_len=8).q_strings()
    samples = gad.sample(lm, g, [], n=600, method="exact", seed=1, max_new_tokens=10, batch_size=50)
    emp = empirical(samples)
    tv = 0.5 * sum(abs(emp.get(s, 0) - q_star.get(s, 0)) for s in set(emp) | set(q_star))
    assert tv < 0.1
    assert kl(emp, q_star) < 0.05
