"""Certificates: closed forms against brute-force numerical minimisation (scipy SLSQP)."""

from __future__ import annotations

import itertools
import math
import zlib

import numpy as np
import pytest
from scipy.optimize import minimize

from gad.errors import InvalidArgumentError
from gad.speculative.certificates import (
    TreeCoverage,
    certificate,
    kl,
    margin_bounds,
    phi,
    rule_margin,
    tree_certificate,
    tree_margin_bounds,
)
from gad.speculative.rules import parse_rule

RULES = ["greedy", "additive:0.1", "additive:0.25", "multiplicative:0.5", "multiplicative:0.8",
         "topm:2", "topm:3", "typical:0.3,0.5", "typical:0.15,0.9", "typical:0.5,2.0"]


def _kl_np(p: np.ndarray, q: np.ndarray) -> float:
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] / q[nz])))


def _min_kl(p: np.ndarray, pairs: list[tuple[int, int]], rng: np.random.Generator, starts: int = 4) -> float:
    """Brute force: min KL(p‖q) over the simplex subject to q[hi] >= q[lo] for (hi, lo) in pairs.

    Parametrised by logits z (q = softmax z): the objective −Σ p z + logsumexp(z) (+ const) is convex
    and the constraints z[hi] ≥ z[lo] are linear, so SLSQP from several random starts finds the minimum.
    """
    n = p.shape[0]
    nz = p > 0
    const = float(np.sum(p[nz] * np.log(p[nz])))

    def f(z: np.ndarray) -> float:
        m = z.max()
        return const - float(p @ z) + m + math.log(float(np.exp(z - m).sum()))

    def grad(z: np.ndarray) -> np.ndarray:
        e = np.exp(z - z.max())
        return e / e.sum() - p

    cons = []
    for hi, lo in pairs:
        jac = np.zeros(n)
        jac[hi], jac[lo] = 1.0, -1.0
        cons.append({"type": "ineq", "fun": (lambda z, hi=hi, lo=lo: z[hi] - z[lo]),
                     "jac": (lambda z, jac=jac: jac)})
    best = math.inf
    inits = [np.zeros(n)] + [rng.normal(size=n) for _ in range(starts - 1)]
    for z0 in inits:
        res = minimize(f, z0, jac=grad, method="SLSQP", bounds=[(-60.0, 60.0)] * n, constraints=cons,
                       options={"ftol": 1e-15, "maxiter": 2000})
        z = res.x
        if all(z[hi] >= z[lo] - 1e-9 for hi, lo in pairs):
            best = min(best, f(z))
    return max(best, 0.0)


def _brute_certificate(p: np.ndarray, rule_spec: str, rng: np.random.Generator) -> float:
    rule = parse_rule(rule_spec)
    rejected = list(np.flatnonzero(rule.rejected(p)))
    if not rejected:
        return math.inf
    n = p.shape[0]
    return min(_min_kl(p, [(t, s) for s in range(n) if s != t], rng) for t in rejected)


def _brute_tree(p: np.ndarray, m: int, rng: np.random.Generator) -> float:
    n = p.shape[0]
    g = int(np.argmax(p))
    others = [s for s in range(n) if s != g]
    if len(others) < m:
        return math.inf
    return min(_min_kl(p, [(s, g) for s in M], rng, starts=3) for M in itertools.combinations(others, m))


def _random_ps(rng: np.random.Generator, count: int) -> list[np.ndarray]:
    out = []
    for i in range(count):
        n = int(rng.integers(3, 7))
        alpha = [0.3, 1.0, 3.0][i % 3]
        p = rng.dirichlet(np.full(n, alpha))
        out.append(p)
    return out


EDGE = [
    np.array([0.4, 0.4, 0.2]),               # tie at the top
    np.array([0.5, 0.2, 0.2, 0.1]),           # tie in the middle
    np.array([1.0, 0.0, 0.0]),               # one-hot
    np.array([0.25, 0.25, 0.25, 0.25]),       # uniform
    np.array([0.0, 0.7, 0.3, 0.0, 0.0]),       # zeros (grammar-masked tokens)
    np.array([0.3, 0.3, 0.3, 0.1]),            # three-way tie
    np.array([0.34, 0.33, 0.33]),              # tiny margin
]


@pytest.mark.parametrize("spec", RULES)
def test_certificate_matches_brute_force_random(spec: str) -> None:
    rng = np.random.default_rng(zlib.crc32(spec.encode()))
    rule = parse_rule(spec)
    for p in _random_ps(rng, 12):
        c = certificate(p, rule)
        b = _brute_certificate(p, spec, rng)
        if math.isinf(b):
            assert math.isinf(c)
        else:
            assert c == pytest.approx(b, abs=1e-6), (p, spec)


@pytest.mark.parametrize("spec", RULES)
@pytest.mark.parametrize("idx", range(len(EDGE)))
def test_certificate_matches_brute_force_edge(spec: str, idx: int) -> None:
    rng = np.random.default_rng(idx)
    p = EDGE[idx]
    c = certificate(p, parse_rule(spec))
    b = _brute_certificate(p, spec, rng)
    if math.isinf(b):
        assert math.isinf(c)
    else:
        assert c == pytest.approx(b, abs=1e-6)


def test_strict_greedy_brief_formula_and_known_values() -> None:
    rng = np.random.default_rng(0)
    g = parse_rule("greedy")
    for p in _random_ps(rng, 30):
        s = np.sort(p)[::-1]
        p1, p2 = s[0], s[1]
        if p1 - p2 < 1e-9:
            continue
        brief = p1 * math.log(2 * p1 / (p1 + p2)) + (p2 * math.log(2 * p2 / (p1 + p2)) if p2 > 0 else 0.0)
        assert certificate(p, g) == pytest.approx(brief, abs=1e-12)
        gamma = p1 - p2
        lo, hi = margin_bounds(p, g)
        assert lo == pytest.approx(0.5 * ((1 + gamma) * math.log(1 + gamma) + (1 - gamma) * math.log(1 - gamma)))
        assert hi == pytest.approx(gamma * math.log(2))
    # hand values
    assert certificate([1.0, 0.0, 0.0], g) == pytest.approx(math.log(2))
    assert math.isinf(certificate([0.25] * 4, g))  # nothing is ever rejected
    # tie at the top: both maxima are accepted, the 0.2 token must overtake both (pool of three)
    assert certificate([0.4, 0.4, 0.2], g) == pytest.approx(0.8 * math.log(1.2) + 0.2 * math.log(0.6))


def test_rule_specific_values() -> None:
    p = np.array([0.5, 0.3, 0.15, 0.05])
    two = 0.5 * math.log(2 * 0.5 / 0.8) + 0.3 * math.log(2 * 0.3 / 0.8)
    assert certificate(p, parse_rule("additive:0.1")) == pytest.approx(two)     # τ=0.4 rejects 0.3
    two_b = 0.5 * math.log(2 * 0.5 / 0.65) + 0.15 * math.log(2 * 0.15 / 0.65)
    assert certificate(p, parse_rule("additive:0.2")) == pytest.approx(two_b)   # τ=0.3 accepts 0.3
    assert certificate(p, parse_rule("topm:2")) == pytest.approx(two_b)         # 0.3 < pooled mean 0.325
    p3 = np.array([0.4, 0.35, 0.2, 0.05])
    c = (0.4 + 0.35 + 0.2) / 3                                                     # 0.35 > (0.4+0.2)/2
    three = sum(x * math.log(x / c) for x in (0.4, 0.35, 0.2))
    assert certificate(p3, parse_rule("topm:2")) == pytest.approx(three)
    assert certificate(p3, parse_rule("multiplicative:0.6")) == pytest.approx(three)  # τ=0.24
    assert math.isinf(certificate(p, parse_rule("additive:0.5")))
    assert math.isinf(certificate(p, parse_rule("topm:4")))
    # typical with δ > 1 can reject the top token itself: certificate 0
    assert certificate(np.array([0.5, 0.5]), parse_rule("typical:1.0,3.0")) == 0.0


@pytest.mark.parametrize("spec", RULES)
def test_bounds_hold_and_ln2(spec: str) -> None:
    rng = np.random.default_rng(7)
    rule = parse_rule(spec)
    for p in _random_ps(rng, 200) + EDGE:
        c = certificate(p, rule)
        lo, hi = margin_bounds(p, rule)
        if math.isinf(c):
            assert math.isinf(lo) and math.isinf(hi)
            continue
        assert lo - 1e-12 <= c <= hi + 1e-12, (p, spec, lo, c, hi)
        assert c <= math.log(2) + 1e-12


def test_certificate_is_sharp_and_sound() -> None:
    """Soundness: KL(p‖q) < C ⇒ accepted.  Sharpness: a rejecting q with KL ≤ C + 1e-6 exists."""
    rng = np.random.default_rng(11)
    for spec in RULES:
        rule = parse_rule(spec)
        for p in _random_ps(rng, 15):
            c = certificate(p, rule)
            for _ in range(200):  # soundness on random drafters near p
                q = rng.dirichlet(p * rng.uniform(5, 200) + 1e-3)
                if kl(p, q) < c:
                    assert rule.accepts(p, int(np.argmax(q)))
            if math.isinf(c) or c == 0:
                continue
            # build the pooled optimum and nudge the rejected token up: it becomes q's argmax
            v_idx = int(np.argmax(np.where(rule.rejected(p), p, -1)))
            q = p.copy()
            pool = [v_idx]
            for s in np.argsort(-p):
                if s != v_idx and p[s] > p[pool].mean():
                    pool.append(int(s))
            q[pool] = p[pool].mean()
            q[v_idx] += 1e-9
            q /= q.sum()
            assert int(np.argmax(q)) == v_idx and not rule.accepts(p, v_idx)
            assert kl(p, q) == pytest.approx(c, abs=1e-6)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_tree_certificate_matches_brute_force(m: int) -> None:
    rng = np.random.default_rng(100 + m)
    for p in _random_ps(rng, 8) + EDGE:
        c = tree_certificate(p, m)
        b = _brute_tree(p, m, rng)
        if math.isinf(b):
            assert math.isinf(c)
        else:
            assert c == pytest.approx(b, abs=1e-6), (p, m)


@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_tree_bounds(m: int) -> None:
    rng = np.random.default_rng(m)
    for p in _random_ps(rng, 200) + EDGE:
        c = tree_certificate(p, m)
        lo, hi = tree_margin_bounds(p, m)
        if math.isinf(c):
            assert p.shape[0] <= m and math.isinf(lo)
            continue
        assert lo - 1e-12 <= c <= hi + 1e-12
        assert c <= math.log(m + 1) + 1e-12
    # ln(m+1) is attained by a one-hot target
    assert tree_certificate(np.eye(m + 2)[0], m) == pytest.approx(math.log(m + 1))
    # m = 1 with a unique maximum equals strict greedy
    p = np.array([0.5, 0.3, 0.2])
    assert tree_certificate(p, 1) == pytest.approx(certificate(p, parse_rule("greedy")))
    assert tree_certificate(np.array([0.4, 0.4, 0.2]), 1) == 0.0


def test_tree_soundness() -> None:
    rng = np.random.default_rng(5)
    for m in (1, 2, 3):
        cov = TreeCoverage(m)
        for p in _random_ps(rng, 20):
            c = tree_certificate(p, m)
            for _ in range(100):
                q = rng.dirichlet(p * rng.uniform(2, 100) + 1e-3)
                if kl(p, q) < c:
                    assert cov.covers(p, q)


def test_kl_conventions_and_errors() -> None:
    assert kl([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]) == pytest.approx(math.log(2))
    assert kl([0.5, 0.5], [1.0, 0.0]) == math.inf
    assert kl([1.0, 0.0], [1.0, 0.0]) == 0.0
    assert phi(0.0) == 0.0 and phi(1.0) == pytest.approx(math.log(2))
    assert rule_margin([0.6, 0.3, 0.1], parse_rule("greedy")) == (pytest.approx(0.3), 0.3)
    with pytest.raises(InvalidArgumentError, match="q"):
        kl([0.5, 0.5], [1.0, 0.0, 0.0])
    with pytest.raises(InvalidArgumentError, match="p"):
        kl([0.5, 0.6], [0.5, 0.5])
    with pytest.raises(InvalidArgumentError, match="rule"):
        certificate([0.5, 0.5], parse_rule("lossless"))
    with pytest.raises(InvalidArgumentError, match="m"):
        tree_certificate([0.5, 0.5], 0)
