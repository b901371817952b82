"""The one randomness convention of gad's samplers.

* Token-level samplers give sample ``i`` of a run with seed ``s`` its own generator
  :func:`sample_rng` ``= numpy.random.default_rng([s, i])``, so a sample does not depend on batching.
* Speculative decoding draws through the :class:`Rng` protocol (a Bernoulli and a categorical choice);
  :class:`NumpyRng` backs it with a ``numpy.random.Generator``; :func:`as_rng` accepts a seed or an Rng.
* Seeds are non-negative integers (:func:`check_seed`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from gad.errors import InvalidArgumentError


def check_seed(seed: object, name: str = "seed") -> int:
    """``seed`` as an int if it is a non-negative integer (bools and floats refused).

    Raises:
        InvalidArgumentError: naming ``name``, when ``seed`` is not a non-negative integer.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise InvalidArgumentError(f"{name} must be a non-negative integer, got {seed!r}")
    return int(seed)


def sample_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of sample ``index`` of a run seeded ``seed``: ``default_rng([seed, index])``."""
    return np.random.default_rng([int(seed), int(index)])


@runtime_checkable
class Rng(Protocol):
    """The two random choices speculative decoding makes."""

    def bernoulli(self, prob: float) -> bool:
        """True with probability ``prob`` (clipped to [0, 1])."""
        ...

    def categorical(self, probs: np.ndarray) -> int:
        """An index drawn from ``probs`` ``(n,)`` float64 (non-negative, need not be normalised)."""
        ...


class NumpyRng:
    """:class:`Rng` backed by ``numpy.random.Generator`` (``seed`` int or None)."""

    def __init__(self, seed: int | None = None) -> None:
        self.gen = np.random.default_rng(seed)

    def bernoulli(self, prob: float) -> bool:
        if prob >= 1.0:
            return True
        if prob <= 0.0:
            return False
        return bool(self.gen.random() < prob)

    def categorical(self, probs: np.ndarray) -> int:
        p = np.asarray(probs, dtype=np.float64)
        c = np.cumsum(p)
        total = float(c[-1]) if c.size else 0.0
        if not total > 0.0:
            raise InvalidArgumentError("categorical: probs has no positive mass (argument probs)")
        i = int(np.searchsorted(c, self.gen.random() * total, side="right"))
        if i >= p.size or p[i] <= 0.0:  # float round-off at the top end
            i = int(np.flatnonzero(p > 0.0)[-1])
        return i


def as_rng(seed: int | None | Rng) -> Rng:
    """An :class:`Rng` from a seed (int / None) or an existing Rng."""
    if isinstance(seed, Rng) and not isinstance(seed, (int, np.integer)):
        return seed
    return NumpyRng(None if seed is None else int(seed))
