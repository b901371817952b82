"""Distances between sample sets and target laws (BRIEF §5).

* Exact tasks: ``KL(Q̂_emp ‖ Q*)`` and total variation ``TV = ½ Σ |Q̂_emp − Q*|`` after ``k`` samples
  (outputs keyed by text).
* Open tasks — the estimator of Park et al., "Grammar-Aligned Decoding" (NeurIPS 2024,
  arXiv 2405.21047): the "ideal" law renormalises ``P`` over the union of distinct outputs sampled by
  all methods; each method's empirical law over a sliding window of its last ``window`` samples is
  compared to it by KL, and the running mean of ``ideal(output)`` is the "expectation" curve.

All KL values are in nats.  Unfinished samples (token budget exhausted) are excluded from the laws and
counted in ``share_finished``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np


def kl_divergence(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """``KL(p ‖ q) = Σ_s p(s) ln(p(s)/q(s))`` in nats; ``inf`` if ``p`` has mass where ``q`` has none."""
    total = 0.0
    for s, ps in p.items():
        if ps <= 0:
            continue
        qs = q.get(s, 0.0)
        if qs <= 0:
            return math.inf
        total += ps * math.log(ps / qs)
    return max(total, 0.0)


def total_variation(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """``½ Σ_s |p(s) − q(s)|`` over the union of supports."""
    keys = set(p) | set(q)
    return 0.5 * math.fsum(abs(p.get(s, 0.0) - q.get(s, 0.0)) for s in keys)


def empirical(outputs: Iterable[str]) -> dict[str, float]:
    """Relative frequencies of ``outputs``."""
    c = Counter(outputs)
    n = sum(c.values())
    return {k: v / n for k, v in c.items()} if n else {}


def checkpoints(n: int, marks: Sequence[int] = (100, 500, 1000), points: int = 40) -> list[int]:
    """Sample counts at which curves are evaluated: ~``points`` log-spaced values, ``marks`` and ``n``."""
    if n < 1:
        return []
    grid = np.unique(np.round(np.logspace(0, math.log10(n), num=points)).astype(int))
    return sorted({int(g) for g in grid if 1 <= g <= n} | {m for m in marks if m <= n} | {n})


def exact_curves(outputs: Sequence[str | None], q_star: Mapping[str, float],
                 ks: Sequence[int]) -> dict[str, list[float]]:
    """KL and TV of the first ``k`` finished outputs against ``Q*``, and the running mean of ``Q*``.

    Args:
        outputs: per sample, its text (None when unfinished), in sampling order.
        q_star: ``Q*`` over texts (sums to 1).
        ks: sample counts (over all samples, finished or not).
    Returns:
        ``{"n": ks, "kl": …, "tv": …, "expectation": …}`` (NaN where no sample finished yet).
    """
    kl, tv, ex = [], [], []
    for k in ks:
        fin = [o for o in outputs[:k] if o is not None]
        emp = empirical(fin)
        kl.append(kl_divergence(emp, q_star) if emp else math.nan)
        tv.append(total_variation(emp, q_star) if emp else math.nan)
        ex.append(float(np.mean([q_star.get(o, 0.0) for o in fin])) if fin else math.nan)
    return {"n": list(ks), "kl": kl, "tv": tv, "expectation": ex}


def ideal_law(outputs: Iterable[tuple[str, tuple[int, ...], float]]) -> dict[str, float]:
    """The GAD paper's "ideal" law: ``P`` renormalised over the distinct outputs seen by all methods.

    Args:
        outputs: ``(text, token_ids, logprob)`` of finished samples; distinct tokenizations of one text
            add their probabilities, repeats of one token sequence count once.
    """
    seen: dict[tuple[str, tuple[int, ...]], float] = {}
    for text, ids, lp in outputs:
        seen[(text, tuple(ids))] = lp
    by_text: dict[str, list[float]] = {}
    for (text, _), lp in seen.items():
        by_text.setdefault(text, []).append(lp)
    if not by_text:
        return {}
    logs = {t: float(np.logaddexp.reduce(v)) for t, v in by_text.items()}
    m = max(logs.values())
    w = {t: math.exp(v - m) for t, v in logs.items()}
    z = math.fsum(w.values())
    return {t: v / z for t, v in w.items()}


def open_curves(outputs: Sequence[str | None], ideal: Mapping[str, float], ks: Sequence[int],
                window: int = 500) -> dict[str, list[float]]:
    """Sliding-window KL to the ideal law and the running mean of ``ideal(output)``.

    At ``k`` samples the window is samples ``max(0, k − window) … k`` (finished ones only).
    """
    kl, ex = [], []
    for k in ks:
        win = [o for o in outputs[max(0, k - window):k] if o is not None]
        emp = empirical(win)
        kl.append(kl_divergence(emp, ideal) if emp else math.nan)
        fin = [o for o in outputs[:k] if o is not None]
        ex.append(float(np.mean([ideal.get(o, 0.0) for o in fin])) if fin else math.nan)
    return {"n": list(ks), "kl": kl, "expectation": ex}


def value_at(curve: Mapping[str, list[float]], k: int, key: str = "kl") -> float | None:
    """The curve's ``key`` value at exactly ``k`` samples, or None when ``k`` is not a checkpoint."""
    try:
        return curve[key][curve["n"].index(k)]
    except ValueError:
        return None
