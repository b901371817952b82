"""A minimal reference sampler: ancestral sampling from ``Q̂(t|u) ∝ p(t|u)·Φ̂(u·t)``, one row at a time.

It is the law of Park et al., "Grammar-Aligned Decoding" (NeurIPS 2024, arXiv 2405.21047) with batch
size 1 (the paper's sequential ASAp when ``estimator`` is ASAp; GCD with the indicator).  The
evaluation harness uses ``gad.sample`` when it is available and this loop otherwise; the Φ tests use it
to check estimators independently of the production sampler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gad.engine.protocols import TokenConstraint
from gad.errors import InvalidArgumentError
from gad.models.base import LanguageModel
from gad.types import Sample


def reference_sample(lm: LanguageModel, compiled: TokenConstraint, estimator: Any, prompt_ids: Sequence[int], n: int,
                     rng: np.random.Generator, max_new_tokens: int = 64) -> list[Sample]:
    """Draw ``n`` samples sequentially, calling ``estimator.observe`` after each.

    Args:
        lm: the model (``logprobs``, ``vocab``); compiled: the grammar (``matcher()``, ``eos_ids``).
        estimator: a Φ estimator (``child_phi``, ``observe``).
        prompt_ids: prompt ids; n: number of samples; rng: the random source.
        max_new_tokens: token budget per sample; a sample that hits it is ``finished=False``.
    Returns:
        ``n`` :class:`gad.results.Sample` (``logprob`` under the unconstrained model, nats).
    Raises:
        InvalidArgumentError: ``Q̂`` has no mass at some prefix (every allowed ``p·Φ̂`` is 0).
    """
    eos = set(int(e) for e in compiled.eos_ids)
    vocab = getattr(compiled, "vocab", None) or lm.vocab
    prompt = [int(t) for t in prompt_ids]
    out: list[Sample] = []
    for _ in range(n):
        m = compiled.matcher()
        prefix: list[int] = []
        lp_total = 0.0
        finished = False
        while len(prefix) < max_new_tokens:
            logp = np.asarray(lm.logprobs([prompt + prefix])[0], dtype=np.float64)
            mask = np.asarray(m.mask(), dtype=bool)
            phi = estimator.child_phi(prefix, logp, mask)
            w = np.where(mask, np.exp(logp) * phi, 0.0)
            total = w.sum()
            if not total > 0:
                raise InvalidArgumentError(f"Q̂ has no mass after {prefix} (every allowed p·Φ̂ is 0)")
            t = int(np.searchsorted(np.cumsum(w), rng.random() * total, side="right"))
            t = min(t, len(w) - 1)
            while w[t] <= 0:  # guard against landing on a zero-width bin through rounding
                t -= 1
            lp_total += float(logp[t])
            if t in eos:
                finished = True
                estimator.observe(prefix + [t], True)
                break
            if not m.accept_token(t):
                raise InvalidArgumentError(f"matcher refused token {t} that its mask allowed")
            prefix.append(t)
        if not finished:
            estimator.observe(prefix, False)
        text = vocab.decode(prefix).decode("utf-8", errors="replace")
        out.append(Sample(text=text, token_ids=list(prefix), logprob=lp_total, finished=finished,
                          method=str(getattr(estimator, "name", "?"))))
    return out
