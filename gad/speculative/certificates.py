r"""Exact KL certificates of acceptance (acceptance theory, arXiv 2606.30265).

Convention.  A (greedy) drafter with next-token distribution ``q`` proposes its top token
``argmax q``, ties broken toward the lowest token id.  For a target ``p`` (``(vocab,)`` float64, summing
to 1, already Φ-reweighted) and a deterministic rule ``R`` rejecting the lower level set
``S = {t : p_t < τ(p)}`` (see :mod:`gad.speculative.rules`), the certificate is

    C_p = inf { KL(p ‖ q) : q a distribution whose proposal R rejects }          (nats).

If the drafter satisfies ``KL(p ‖ q) < C_p`` its draft is certainly accepted.  The tie-breaking
convention does not change the infimum (a tie can be broken either way by an arbitrarily small
perturbation of ``q``); it only decides whether the infimum is attained.

Derivation (single candidate, any lower-level-set rule)
-------------------------------------------------------
1. Split by the proposed token: ``C_p = min_{t ∈ S} D_t`` with
   ``D_t = min { KL(p‖q) : q_t ≥ q_s for all s }`` (closure of "t is q's argmax").
2. ``D_t`` is an information projection onto a convex polytope.  KKT (λ = 1 for Σq = 1, multipliers
   ``μ_s = p_s/c − 1 ≥ 0`` on the active constraints ``q_s ≤ q_t``) gives the *pooling / water-filling*
   solution: let ``A`` be the tokens ``s ≠ t`` with ``p_s > c`` where
   ``c = (p_t + Σ_{s∈A} p_s) / (|A| + 1)``; then ``q_s = c`` on ``P = A ∪ {t}``, ``q_s = p_s`` elsewhere, and

       D_t = Σ_{s ∈ P} p_s ln(p_s / c).

   ``A`` is found by sorting the other tokens in decreasing order and adding them while the next one
   exceeds the running pool average.
3. Monotonicity: if ``p_t ≤ p_{t'}`` then ``D_{t'} ≤ D_t`` (swap the coordinates t, t' of any
   q feasible for t: the KL changes by ``−(p_{t'} − p_t)(ln q_t − ln q_{t'}) ≤ 0``).  Hence the cheapest
   rejected proposal is the *largest rejected probability* ``v = max{p_t : p_t < τ}``, and

       C_p = Σ_{s ∈ P} p_s ln(p_s / c),   P = {v} ∪ {tokens with p_s above the pooled average c}.

   ``S = ∅`` (nothing is ever rejected) gives ``C_p = +∞``; ``τ > p_(1)`` (the top token is rejected)
   gives ``C_p = 0``.

Per rule this reads (``p_(1) ≥ p_(2) ≥ …`` sorted):

* strict greedy ``τ = p_(1)``: ``v`` = the largest probability strictly below ``p_(1)``.  With a unique
  maximum the pool is ``{p_(1), p_(2)}`` and ``C_p = p_(1) ln(2p_(1)/(p_(1)+p_(2))) + p_(2) ln(2p_(2)/(p_(1)+p_(2)))``
  (BRIEF §4).  Because tied maxima are all *accepted*, a tie at the top pools every tied maximum with
  the next lower value (``C_p > 0`` although ``p_(1) = p_(2)``).
* additive ``τ = p_(1) − δ``: ``v = max{p_t : p_t < p_(1) − δ}``; ``C_p = +∞`` if every
  ``p_t ≥ p_(1) − δ``.
* multiplicative ``τ = α p_(1)``: ``v = max{p_t : p_t < α p_(1)}``; ``+∞`` if none.
* top-m ``τ = p_(m)``: ``v`` = the largest probability strictly below ``p_(m)`` (normally ``p_(m+1)``).
  The pool may contain several of the top m tokens (all those above the pooled average).
* typical ``τ = min(ε, δ e^{−H(p)})``: ``v = max{p_t : p_t < τ}``.

Margin-only bounds.  With the rule margin ``γ = p_(1) − v`` (for strict greedy with a unique maximum
``γ = p_(1) − p_(2)``) and ``φ(γ) = ½[(1+γ)ln(1+γ) + (1−γ)ln(1−γ)]``:

* lower ``φ(γ) ≤ C_p``: the constraint set of ``v`` is contained in ``{q_v ≥ q_(1)}``, whose projection
  pools only the two tokens at cost ``s·φ(γ/s)`` with ``s = p_(1) + v ≤ 1``; the perspective
  ``s·φ(γ/s)`` is non-increasing in ``s`` (φ convex, φ(0) = 0), so it is ≥ φ(γ).
* upper ``C_p ≤ γ ln 2`` when the pool is the two tokens ``{p_(1), v}`` (i.e. the second-largest
  probability is ≤ (p_(1)+v)/2; always so for strict greedy with a unique maximum): ``ln 2 − H_b(x)`` is
  convex in ``x = p_(1)/s`` and below its chord, and ``s ≤ 1``.  In general ``C_p ≤ ln(1 + γ)``: the
  mixture ``q = (1−λ)p + λ e_v`` with ``λ = γ/(1+γ)`` makes ``v`` the argmax (ties allowed) at cost
  ``≤ −ln(1−λ)``.  Hence a single-candidate certificate never exceeds ``ln(1 + γ) ≤ ln 2``.

Greedy tree (top-m coverage)
----------------------------
The target's greedy token ``g`` (argmax p, lowest id on ties) must lie among the drafter's top-m
candidates.  It fails iff ``m`` other tokens all satisfy ``q_s ≥ q_g``.  The same swap argument shows the
cheapest set is the m largest other tokens ``M``; the projection onto ``{q_s ≥ q_g, s ∈ M}`` pools ``g``
with the *smallest* members of ``M``: sort ``M`` increasingly and add members while they are below the
running pool average ``c``; then ``C = Σ_{s ∈ P} p_s ln(p_s / c)`` with ``P = {g} ∪ B``.  For ``m = 1`` it
is the strict-greedy formula with a unique maximum; with a tie at the top (``p_(1) = p_(m+1)``) it is 0.
``C ≤ ln(m+1)`` (pool mass ``≤ 1`` times the KL of the normalised pool to the uniform law on ≤ m+1
tokens).  Margin-only bounds with ``γ_m = p_(1) − p_(m+1)``: ``φ(γ_m) ≤ C ≤ min(ln(1 + m γ_m), ln(m+1))``
(upper: mixture ``(1−λ)p + λ·uniform(M)``, ``λ = mγ_m/(1+mγ_m)``), and ``C ≤ γ_1 ln 2`` for ``m = 1``.
If the vocabulary has ``≤ m`` tokens, coverage can never fail and ``C = +∞``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gad.errors import InvalidArgumentError
from gad.sampling.dist import kl as dist_kl
from gad.speculative.rules import AcceptRule, LosslessRule, check_distribution

__all__ = ["kl", "certificate", "margin_bounds", "rule_margin", "TreeCoverage", "tree_certificate",
           "tree_margin_bounds", "phi"]

_LN2 = math.log(2.0)


def kl(p: object, q: object) -> float:
    """KL(p ‖ q) = Σ p_t ln(p_t / q_t) in nats, with ``0 · ln(0/q) = 0`` and ``+inf`` where ``q_t = 0 < p_t``.

    Args:
        p, q: ``(vocab,)`` float distributions (non-negative, summing to 1 within 1e-6).
    Raises:
        InvalidArgumentError: invalid distributions or different shapes.
    """
    pa = check_distribution(p, "p")
    qa = check_distribution(q, "q")
    if pa.shape != qa.shape:
        raise InvalidArgumentError(f"q: shape {qa.shape} differs from p's {pa.shape}")
    return dist_kl(pa, qa)


def phi(gamma: float) -> float:
    """``φ(γ) = ½[(1+γ)ln(1+γ) + (1−γ)ln(1−γ)]`` (nats), γ ∈ [0, 1]; φ(1) = ln 2 (arXiv 2606.30265)."""
    g = min(max(float(gamma), 0.0), 1.0)
    a = (1 + g) * math.log1p(g)
    b = (1 - g) * math.log1p(-g) if g < 1 else 0.0
    return max(0.0, 0.5 * (a + b))


def _pool_cost(values: np.ndarray) -> float:
    """Σ p ln(p / mean) over a pool of probabilities (0 ln 0 = 0)."""
    c = float(values.mean())
    if c <= 0:
        return 0.0
    nz = values[values > 0]
    return max(0.0, float(np.sum(nz * np.log(nz / c))))


def _pool_up(v: float, above: np.ndarray) -> np.ndarray:
    """Water-fill: pool ``v`` with the largest of ``above`` while they exceed the running average."""
    srt = np.sort(above)[::-1]
    pool = [v]
    total = v
    for x in srt:
        if x > total / len(pool):
            pool.append(float(x))
            total += float(x)
        else:
            break
    return np.asarray(pool)


def _pool_down(g: float, members: np.ndarray) -> np.ndarray:
    """Water-fill: pool ``g`` with the smallest of ``members`` while they are below the running average."""
    srt = np.sort(members)
    pool = [g]
    total = g
    for x in srt:
        if x < total / len(pool):
            pool.append(float(x))
            total += float(x)
        else:
            break
    return np.asarray(pool)


def _check_rule(rule: object) -> AcceptRule:
    if isinstance(rule, LosslessRule):
        raise InvalidArgumentError("rule: the lossless rule is stochastic and has no KL certificate")
    if not isinstance(rule, AcceptRule):
        raise InvalidArgumentError(f"rule: expected an AcceptRule (see parse_rule), got {type(rule).__name__}")
    return rule


def rule_margin(p: object, rule: AcceptRule) -> tuple[float, float]:
    """``(γ, v)``: the rule margin ``γ = p_(1) − v`` and ``v``, the largest rejected probability.

    Args:
        p: ``(vocab,)`` float64 target distribution.
        rule: a deterministic :class:`~gad.speculative.rules.AcceptRule`.
    Returns:
        ``(γ, v)``; ``(inf, nan)`` when the rule rejects no token.  ``γ ≤ 0`` iff the top token is rejected
        (then reported as 0).
    Raises:
        InvalidArgumentError: bad ``p`` or ``rule`` (the lossless rule has no certificate).
    """
    r = _check_rule(rule)
    pa = check_distribution(p)
    rej = r._rejected(pa)
    if not rej.any():
        return math.inf, math.nan
    v = float(pa[rej].max())
    return max(0.0, float(pa.max()) - v), v


def certificate(p: object, rule: AcceptRule) -> float:
    """Exact certificate ``C_p = inf{KL(p‖q) : R rejects argmax q}`` in nats (arXiv 2606.30265).

    The drafter proposes its top token (lowest id on ties).  ``C_p`` pools the largest rejected
    probability ``v`` with every token above the pooled average (module docstring, steps 1–3):
    ``C_p = Σ_{s∈P} p_s ln(p_s / mean(P))``.

    Args:
        p: ``(vocab,)`` float64 target distribution (sums to 1).
        rule: a deterministic rule (``greedy``, ``additive``, ``multiplicative``, ``topm``, ``typical``).
    Returns:
        ``C_p ∈ [0, ln 2]``, or ``+inf`` when the rule rejects no token.
    Raises:
        InvalidArgumentError: bad ``p`` or ``rule``.
    """
    r = _check_rule(rule)
    pa = check_distribution(p)
    rej = r._rejected(pa)
    if not rej.any():
        return math.inf
    v = float(pa[rej].max())
    return _pool_cost(_pool_up(v, pa[pa > v]))


def margin_bounds(p: object, rule: AcceptRule) -> tuple[float, float]:
    """Margin-only bounds ``(lo, hi)`` with ``lo ≤ certificate(p, rule) ≤ hi`` (nats; arXiv 2606.30265).

    With ``γ = p_(1) − v`` (:func:`rule_margin`): ``lo = φ(γ)``; ``hi = γ ln 2`` when the optimal pool is
    the two tokens ``{p_(1), v}`` (the second-largest probability is ≤ ``(p_(1)+v)/2``; always true for
    strict greedy with a unique maximum), else ``hi = ln(1 + γ)``.  Derivations in the module docstring.
    Returns ``(inf, inf)`` when nothing is rejected.

    Raises:
        InvalidArgumentError: bad ``p`` or ``rule``.
    """
    pa = check_distribution(p)
    gamma, v = rule_margin(pa, rule)
    if math.isinf(gamma):
        return math.inf, math.inf
    srt = np.sort(pa)[::-1]
    second = float(srt[1]) if srt.shape[0] > 1 else 0.0
    two_pool = second <= (float(srt[0]) + v) / 2 or second == v
    hi = gamma * _LN2 if two_pool else math.log1p(gamma)
    return phi(gamma), hi


# --- greedy tree ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeCoverage:
    """Greedy-tree acceptance event: the target's greedy token is among the drafter's top-``m`` tokens.

    ``m ≥ 1`` is the branching factor (m = 1 is strict greedy with lowest-id tie-breaking).
    """

    m: int

    def __post_init__(self) -> None:
        if isinstance(self.m, bool) or not isinstance(self.m, (int, np.integer)) or self.m < 1:
            raise InvalidArgumentError(f"m: tree branching needs an integer m ≥ 1, got {self.m!r}")

    def covers(self, p: object, q: object) -> bool:
        """True iff ``argmax p`` (lowest id) is among the ``m`` largest entries of ``q`` (lowest ids on ties)."""
        pa = check_distribution(p, "p")
        qa = check_distribution(q, "q")
        if pa.shape != qa.shape:
            raise InvalidArgumentError(f"q: shape {qa.shape} differs from p's {pa.shape}")
        g = int(np.argmax(pa))
        order = np.lexsort((np.arange(qa.shape[0]), -qa))  # by q descending, then id ascending
        return bool(g in order[: self.m])


def tree_certificate(p: object, m: int) -> float:
    """Exact greedy-tree certificate: ``inf{KL(p‖q) : argmax p ∉ top-m(q)}`` in nats (arXiv 2606.30265).

    ``g`` = argmax p is pooled with the smallest of the m next-largest target tokens while they lie below
    the running pool average (module docstring).  Result in ``[0, ln(m+1)]``; ``+inf`` if ``vocab ≤ m``.

    Args:
        p: ``(vocab,)`` float64 target distribution.
        m: branching factor (int ≥ 1).
    Raises:
        InvalidArgumentError: bad ``p`` or ``m``.
    """
    TreeCoverage(m)
    pa = check_distribution(p)
    if pa.shape[0] <= m:
        return math.inf
    srt = np.sort(pa)[::-1]
    return _pool_cost(_pool_down(float(srt[0]), srt[1 : m + 1]))


def tree_margin_bounds(p: object, m: int) -> tuple[float, float]:
    """Margin-only bounds on :func:`tree_certificate` from ``γ_m = p_(1) − p_(m+1)`` (nats).

    ``lo = φ(γ_m)``; ``hi = γ_1 ln 2`` for ``m = 1``, else ``min(ln(1 + m γ_m), ln(m+1))``.
    ``(inf, inf)`` if ``vocab ≤ m``.

    Raises:
        InvalidArgumentError: bad ``p`` or ``m``.
    """
    TreeCoverage(m)
    pa = check_distribution(p)
    if pa.shape[0] <= m:
        return math.inf, math.inf
    srt = np.sort(pa)[::-1]
    gamma = float(srt[0] - srt[m])
    hi = gamma * _LN2 if m == 1 else min(math.log1p(m * gamma), math.log(m + 1))
    return phi(gamma), hi
