"""Distributions over the vocabulary: constrained weights, the categorical draw (vectorised).

``constrained_weights`` gives the unnormalised sampling law ``p(t)^(1/T) · Φ̂(t)`` of every sampler
(BRIEF §2: GCD with Φ̂ = mask, GAD with a Φ estimator); ``draw`` is the one inverse-CDF categorical
draw all samplers use, so a sample depends only on its uniforms.
"""

from __future__ import annotations

import numpy as np


def constrained_weights(logp: np.ndarray, phi: np.ndarray, temperature: float = 1.0,
                        top_k: int | None = None, top_p: float | None = None) -> np.ndarray:
    """Unnormalised sampling weights ``p(t)^(1/T) · Φ̂(t)``, rescaled so each row's maximum is 1.

    Computed in log space (no underflow when every allowed token is improbable).  ``top_k`` / ``top_p``
    then keep the ``k`` largest weights / the smallest set holding ``top_p`` of the constrained mass, so
    they never remove every allowed token.
    Args:
        logp: ``(batch, vocab)`` float64 log-probabilities (nats).
        phi: ``(batch, vocab)`` float64 in ``[0, 1]``.
    Returns:
        ``(batch, vocab)`` float64 ≥ 0; a row with no allowed token is all zeros.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        logw = logp / temperature + np.log(phi)
    logw = np.where(np.isnan(logw), -np.inf, logw)
    top = logw.max(axis=1, keepdims=True)
    safe_top = np.where(np.isfinite(top), top, 0.0)
    w = np.exp(logw - safe_top)
    w[~np.isfinite(top[:, 0])] = 0.0
    if top_k is not None and top_k < w.shape[1]:
        kth = -np.partition(-w, top_k - 1, axis=1)[:, top_k - 1: top_k]
        w = np.where(w >= kth, w, 0.0)
    if top_p is not None and top_p < 1:
        order = np.argsort(-w, axis=1)
        sw = np.take_along_axis(w, order, axis=1)
        csum = np.cumsum(sw, axis=1)
        total = csum[:, -1:]
        keep_sorted = (csum - sw) < top_p * total  # keep until the mass before a token reaches top_p
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=1)
        w = np.where(keep, w, 0.0)
    return w


def draw(weights: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw of one index per row: ``(batch, vocab)`` weights, ``(batch,)`` uniforms in [0, 1).

    Returns ``(batch,)`` int64 indices; a zero-weight index is never returned for a row with mass.
    """
    cdf = np.cumsum(weights, axis=1)
    target = uniforms[:, None] * cdf[:, -1:]
    idx = (cdf <= target).sum(axis=1)
    return np.minimum(idx, weights.shape[1] - 1).astype(np.int64)


def entropy(p: np.ndarray) -> float:
    """Shannon entropy ``H(p) = −Σ p_t ln p_t`` in nats (``0 · ln 0 = 0``) of a ``(vocab,)`` float array."""
    p = np.asarray(p, dtype=np.float64)
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum())


def kl(p: np.ndarray, q: np.ndarray) -> float:
    """``KL(p ‖ q) = Σ p_t ln(p_t / q_t)`` in nats of two ``(vocab,)`` float distributions, with
    ``0 · ln(0/q) = 0`` and ``+inf`` where ``q_t = 0 < p_t``; clipped at 0 against rounding."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    nz = p > 0
    if np.any(q[nz] <= 0):
        return float("inf")
    return max(0.0, float(np.sum(p[nz] * (np.log(p[nz]) - np.log(q[nz])))))
