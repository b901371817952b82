"""The Φ-estimator interface (BRIEF §3).

A Φ source answers, at a prefix ``u`` (token ids generated after the prompt), the vector
``Φ̂(u·t)`` over the whole vocabulary, and learns from finished samples.  Samplers then draw from
``Q̂(t | u) ∝ p(t | u) · Φ̂(u·t)`` (Park et al., "Grammar-Aligned Decoding", NeurIPS 2024,
arXiv 2405.21047); with the 0/1 indicator this is GCD.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np


class PhiEstimator(ABC):
    """Estimates of expected future grammaticality, one interface for every method.

    Subclasses implement :meth:`child_phi`; :meth:`observe` (learning) and :meth:`flush` (persisting)
    default to doing nothing.
    """

    name: str = "phi"

    @abstractmethod
    def child_phi(self, prefix: Sequence[int], logp: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``Φ̂(prefix·t)`` for every token ``t``.

        Args:
            prefix: generated token ids so far (prompt excluded).
            logp: ``log p(· | prefix)``, shape ``(vocab,)`` float64, nats.
            mask: the grammar mask at ``prefix``, shape ``(vocab,)`` bool (EOS True iff complete).
        Returns:
            ``(vocab,)`` float64 in ``[0, 1]``; 0 wherever ``mask`` is False; 1 for an allowed EOS.
        """

    def observe(self, tokens: Sequence[int], finished: bool) -> None:  # noqa: B027 - optional hook
        """Learn from one finished sample (its ids, EOS included when ``finished``); default: nothing."""
        return None

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Persist whatever must be persisted (an ASAp trie file); default: nothing."""
        return None


class IndicatorPhi(PhiEstimator):
    """Φ̂ = mask (the viability indicator): sampling with it is GCD (BRIEF §3, estimator 1)."""

    name = "gcd"

    def child_phi(self, prefix: Sequence[int], logp: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The mask as float64 ``(vocab,)``."""
        return mask.astype(np.float64)
