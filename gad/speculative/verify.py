"""Φ-reweighted verification of a draft (BRIEF §4).

The target law at a prefix ``v`` is the h-transformed next-token law

    p̃(t | v) ∝ p(t | v) · mask(v)[t] · Φ̂(v·t)

(Future Validity, arXiv 2605.07698: verifying against ``p·mask`` alone samples the locally projected
law μ_proj, not μ*).  A draft ``d_1 … d_k`` with draft distributions ``q_1 … q_k`` is checked with

* the **lossless** rule (Leviathan et al. 2022, arXiv 2211.17192; Chen et al. 2023, arXiv 2302.01318):
  accept ``d_i`` with probability ``min(1, p̃_i(d_i) / q_i(d_i))``; at the first rejection emit a token
  drawn from ``norm(max(0, p̃_i − q_i))``; when all ``k`` are accepted emit a bonus token from
  ``p̃_{k+1}``.  The output law equals sampling from ``p̃`` token by token, for any drafter;
* a **relaxed deterministic** rule from :mod:`gad.speculative.rules` (strict greedy, additive δ,
  multiplicative α, top-m, typical ε,δ; acceptance theory, arXiv 2606.30265): accept ``d_i`` iff the
  rule does not reject it; at the first rejection emit ``argmax p̃_i`` (the target's greedy token), and
  when all are accepted the bonus token is ``argmax p̃_{k+1}``.  These rules do **not** preserve the
  law; they trade fidelity for acceptance.

All randomness goes through an :class:`Rng` (``bernoulli`` / ``categorical``) so that the exact output
law can be enumerated in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gad.errors import InvalidArgumentError
from gad.sampling.dist import entropy, kl
from gad.sampling.rng import Rng
from gad.speculative.rules import LosslessRule, lossless_accept_prob, parse_rule, residual

# --- the target law ----------------------------------------------------------------------------------


def tilted(logp: np.ndarray, mask: np.ndarray, phi: np.ndarray) -> np.ndarray | None:
    """``p̃ ∝ exp(logp) · mask · Φ̂``, normalised.

    Args:
        logp: ``(vocab,)`` float64 log-probabilities (nats) of the unconstrained target.
        mask: ``(vocab,)`` bool grammar mask at the prefix.
        phi: ``(vocab,)`` float64 Φ̂ of every child (from ``PhiEstimator.child_phi``).
    Returns:
        ``(vocab,)`` float64 summing to 1, or None when no allowed token has positive weight.
    """
    logp = np.asarray(logp, dtype=np.float64)
    if logp.shape != np.shape(mask) or logp.shape != np.shape(phi):
        raise InvalidArgumentError(
            f"tilted: logp {logp.shape}, mask {np.shape(mask)} and phi {np.shape(phi)} must match")
    m = np.asarray(mask, dtype=bool)
    if not m.any():
        return None
    top = float(np.max(logp[m]))
    if not np.isfinite(top):
        return None
    w = np.where(m, np.exp(logp - top), 0.0) * np.asarray(phi, dtype=np.float64)
    s = float(w.sum())
    if not s > 0.0:
        return None
    return w / s


# --- rules -------------------------------------------------------------------------------------------


def parse_accept(accept: Any) -> Any | None:
    """None for the lossless rule, else a rule object with ``accepts(p, d) -> bool``.

    ``accept`` is ``None`` / ``"lossless"`` / ``"stochastic"``, a rule object, or a string that
    ``gad.speculative.rules.parse_rule`` understands (``greedy``, ``additive:0.1`` …).

    Raises:
        InvalidArgumentError: the text names no rule.
    """
    if accept is None or (isinstance(accept, str) and accept.strip().lower() in ("lossless", "stochastic")):
        return None
    if not isinstance(accept, str):
        if not hasattr(accept, "accepts"):
            raise InvalidArgumentError(f"accept must be a rule name or have .accepts(p, d); got {accept!r}")
        return accept
    rule = parse_rule(accept)
    if isinstance(rule, LosslessRule):
        return None
    return rule


# --- one verification step -----------------------------------------------------------------------------


@dataclass
class StepRecord:
    """What happened at one verified draft position (one row of the acceptance log).

    ``depth`` is 1-based; ``entropy`` in nats; ``margin = p̃_(1) − p̃_(2)``; ``kl = KL(p̃ ‖ q)`` in nats
    (inf when q misses target mass, e.g. one-hot drafts).
    """

    depth: int
    token: int
    accepted: bool
    entropy: float
    margin: float
    kl: float
    accept_prob: float | None = None


@dataclass
class VerifyOutcome:
    """Result of verifying one chain draft.

    Attributes:
        n_accepted: how many draft tokens were accepted (a prefix of the draft).
        next_token: the token emitted after them (residual / argmax correction, or bonus), or None
            when the accepted draft ended with EOS (nothing follows) or no target law exists there.
        bonus: True iff all draft tokens were accepted and ``next_token`` is the bonus token.
        targets: the p̃ rows that were computed, ``targets[i]`` at draft position ``i`` (0-based).
        records: one :class:`StepRecord` per verified draft position.
    """

    n_accepted: int
    next_token: int | None
    bonus: bool
    targets: list[np.ndarray] = field(default_factory=list)
    records: list[StepRecord] = field(default_factory=list)


def _margin(p: np.ndarray) -> float:
    if p.size < 2:
        return float(p[0]) if p.size else 0.0
    two = np.partition(p, -2)[-2:]
    return float(two[1] - two[0])


def verify_chain(target_at: Callable[[int], np.ndarray | None], draft: Sequence[int], q: np.ndarray,
                 rule: Any | None, rng: Rng, eos_ids: Sequence[int] = (), log: bool = False) -> VerifyOutcome:
    """Verify a chain draft against the target law (lossless or a relaxed rule; module docstring).

    Args:
        target_at: ``i -> p̃_i`` ``(vocab,)`` float64 for draft position ``i`` in ``0..k`` (``k`` = the
            bonus position); called lazily, only for positions actually reached; None = no target law.
        draft: ``k`` drafted token ids.
        q: ``(k, vocab)`` float64 draft distributions the tokens were drawn from (already masked).
        rule: None for the lossless rule, else an object with ``accepts(p, d) -> bool``.
        rng: source of randomness.
        eos_ids: after an accepted EOS nothing follows (no bonus).
        log: fill ``records`` (entropy, margin, KL per position).
    Returns:
        :class:`VerifyOutcome`.
    Raises:
        InvalidArgumentError: ``q`` does not have one row per draft token.
    """
    k = len(draft)
    q = np.asarray(q, dtype=np.float64)
    if k and (q.ndim != 2 or q.shape[0] != k):
        raise InvalidArgumentError(f"q must have shape (len(draft)={k}, vocab); got {q.shape}")
    out = VerifyOutcome(0, None, False)
    for i, d in enumerate(draft):
        p = target_at(i)
        if p is None:
            return out
        out.targets.append(p)
        if rule is None:
            acc = float(lossless_accept_prob(p, q[i], int(d)))
            a: float | None = acc
            ok = rng.bernoulli(acc)
        else:
            a = None
            ok = bool(rule.accepts(p, int(d)))
        if log:
            out.records.append(StepRecord(i + 1, int(d), ok, entropy(p), _margin(p), kl(p, q[i]), a))
        if not ok:
            out.next_token = int(np.argmax(p)) if rule is not None else rng.categorical(residual(p, q[i]))
            return out
        out.n_accepted += 1
        if int(d) in eos_ids:
            return out
    p = target_at(k)
    if p is None:
        return out
    out.targets.append(p)
    out.next_token = int(np.argmax(p)) if rule is not None else rng.categorical(p)
    out.bonus = True
    return out
