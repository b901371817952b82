"""Acceptance rules for speculative verification (pure numpy, no model).

Every rule acts on ``p``, the target's next-token distribution *after* grammar reweighting
(``p̃ ∝ p · mask · Φ̂``, BRIEF §4): a float64 array of shape ``(vocab,)``, non-negative, summing to 1.

Deterministic ("relaxed") rules (acceptance theory, arXiv 2606.30265) reject a draft token ``d`` iff
``p[d] < τ(p)``; their rejection region is the lower level set ``{t : p_t < τ(p)}``:

==================  ==============================  =========================================
spec string          class                          threshold τ(p)
==================  ==============================  =========================================
``greedy``           :class:`StrictGreedy`          ``p_(1)``  (the largest probability)
``additive:δ``       :class:`Additive`              ``p_(1) − δ``
``multiplicative:α`` :class:`Multiplicative`        ``α · p_(1)``
``topm:m``           :class:`TopM`                  ``p_(m)``  (the m-th largest, with ties)
``typical:ε,δ``      :class:`Typical`               ``min(ε, δ · exp(−H(p)))``, H in nats (Medusa,
                                                    arXiv 2401.10774)
==================  ==============================  =========================================

Ties: a token whose probability equals τ is accepted.  In particular strict greedy accepts *every*
token tied with the maximum (not only the lowest-id argmax).  The comparison is ``p[d] < τ − TIE_TOL``
with ``TIE_TOL = 1e-12`` so that ties survive the rounding of τ (e.g. ``0.4 − 0.1`` is
``0.30000000000000004`` in float64; ``additive:0.1`` still accepts a token of probability 0.3 when
``p_(1) = 0.4``).

The stochastic lossless rule (Leviathan et al. 2022, arXiv 2211.17192; Chen et al. 2023,
arXiv 2302.01318) accepts ``d ~ q`` with probability ``min(1, p[d]/q[d])`` and, at the first rejection,
resamples from ``norm(max(0, p − q))``; see :func:`lossless_accept_prob` and :func:`residual`.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from gad.errors import InvalidArgumentError
from gad.sampling.dist import entropy

__all__ = [
    "TIE_TOL", "AcceptRule", "StrictGreedy", "Additive", "Multiplicative", "TopM", "Typical", "LosslessRule",
    "parse_rule", "check_distribution", "entropy", "lossless_accept_prob", "residual",
]

_SUM_TOL = 1e-6
TIE_TOL = 1e-12


def check_distribution(p: object, name: str = "p", ndim: int | tuple[int, ...] = 1) -> np.ndarray:
    """Validate and return a probability array as float64.

    Args:
        p: array-like of shape ``(vocab,)`` (``ndim=1``) or ``(k, vocab)`` (``ndim=2``); each row must be
            finite, non-negative and sum to 1 within 1e-6.
        name: argument name used in error messages.
        ndim: allowed number of dimensions (an int or a tuple of ints).
    Returns:
        ``np.ndarray`` float64 with the same shape.
    Raises:
        InvalidArgumentError: wrong shape, empty, non-finite, negative entries or rows not summing to 1.
    """
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    try:
        arr = np.asarray(p, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"{name}: not a numeric array ({exc})") from None
    if arr.ndim not in allowed:
        raise InvalidArgumentError(f"{name}: expected {' or '.join(f'{d}-D' for d in allowed)} array, "
                                   f"got shape {arr.shape}")
    if arr.size == 0 or arr.shape[-1] == 0:
        raise InvalidArgumentError(f"{name}: empty distribution")
    if not np.all(np.isfinite(arr)):
        raise InvalidArgumentError(f"{name}: contains NaN or inf")
    if np.any(arr < 0):
        raise InvalidArgumentError(f"{name}: contains negative probabilities")
    sums = arr.sum(axis=-1)
    if np.any(np.abs(sums - 1.0) > _SUM_TOL):
        raise InvalidArgumentError(f"{name}: does not sum to 1 (sum {np.ravel(sums)[0]!r})")
    return arr


def _check_token(d: object, vocab: int, name: str = "d") -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
        raise InvalidArgumentError(f"{name}: token id must be an int, got {type(d).__name__}")
    d = int(d)
    if not 0 <= d < vocab:
        raise InvalidArgumentError(f"{name}: token id {d} out of range [0, {vocab})")
    return d


class AcceptRule(ABC):
    """A deterministic acceptance rule: reject draft token ``d`` iff ``p[d] < τ(p)`` (arXiv 2606.30265).

    Subclasses implement :meth:`threshold`.  ``spec`` is the string :func:`parse_rule` reads back.
    """

    spec: str
    #: rule family (``greedy``, ``additive``, ``multiplicative``, ``topm``, ``typical``)
    name: ClassVar[str] = ""
    #: ``"deterministic"`` here, ``"lossless"`` for :class:`LosslessRule`
    kind: ClassVar[str] = "deterministic"

    @abstractmethod
    def _threshold(self, p: np.ndarray) -> float: ...

    def threshold(self, p: object) -> float:
        """τ(p) for a target distribution ``p`` of shape ``(vocab,)`` (float64, sums to 1).

        Raises:
            InvalidArgumentError: ``p`` is not a valid distribution.
        """
        return float(self._threshold(check_distribution(p)))

    def accepts(self, p: object, d: int) -> bool:
        """True iff the rule accepts draft token ``d`` under target ``p`` (``p[d] ≥ τ(p)``).

        Raises:
            InvalidArgumentError: bad ``p`` or ``d`` out of ``[0, vocab)``.
        """
        arr = check_distribution(p)
        d = _check_token(d, arr.shape[0])
        return not bool(self._rejected(arr)[d])

    def rejected(self, p: object) -> np.ndarray:
        """Boolean mask ``(vocab,)`` of the rejection region ``{t : p_t < τ(p) − TIE_TOL}`` (a lower level set).

        Raises:
            InvalidArgumentError: ``p`` is not a valid distribution.
        """
        return self._rejected(check_distribution(p))

    def _rejected(self, p: np.ndarray) -> np.ndarray:
        return p < self._threshold(p) - TIE_TOL

    def __repr__(self) -> str:
        return f"parse_rule({self.spec!r})"


@dataclass(frozen=True, repr=False)
class StrictGreedy(AcceptRule):
    """Strict greedy: ``τ = p_(1)``; accepts exactly the tokens tied with the maximum."""

    name: ClassVar[str] = "greedy"

    @property
    def spec(self) -> str:  # type: ignore[override]
        return "greedy"

    def _threshold(self, p: np.ndarray) -> float:
        return float(p.max())


@dataclass(frozen=True, repr=False)
class Additive(AcceptRule):
    """Additive relaxation: ``τ = p_(1) − δ`` with ``0 ≤ δ ≤ 1`` (δ = 0 is strict greedy)."""

    name: ClassVar[str] = "additive"

    delta: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.delta) and 0.0 <= self.delta <= 1.0):
            raise InvalidArgumentError(f"delta: additive slack must lie in [0, 1], got {self.delta!r}")

    @property
    def spec(self) -> str:  # type: ignore[override]
        return f"additive:{self.delta:g}"

    def _threshold(self, p: np.ndarray) -> float:
        return float(p.max()) - self.delta


@dataclass(frozen=True, repr=False)
class Multiplicative(AcceptRule):
    """Multiplicative relaxation: ``τ = α · p_(1)`` with ``0 ≤ α ≤ 1`` (α = 1 is strict greedy)."""

    name: ClassVar[str] = "multiplicative"

    alpha: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.alpha) and 0.0 <= self.alpha <= 1.0):
            raise InvalidArgumentError(f"alpha: multiplicative factor must lie in [0, 1], got {self.alpha!r}")

    @property
    def spec(self) -> str:  # type: ignore[override]
        return f"multiplicative:{self.alpha:g}"

    def _threshold(self, p: np.ndarray) -> float:
        return self.alpha * float(p.max())


@dataclass(frozen=True, repr=False)
class TopM(AcceptRule):
    """Top-m: ``τ = p_(m)``, the m-th largest probability (m ≥ 1; m = 1 is strict greedy).

    Tokens tied with ``p_(m)`` are accepted, so more than m tokens can be accepted.  If ``m ≥ vocab``
    then ``τ = min(p)`` and every token is accepted.
    """

    name: ClassVar[str] = "topm"

    m: int

    def __post_init__(self) -> None:
        if isinstance(self.m, bool) or not isinstance(self.m, (int, np.integer)) or self.m < 1:
            raise InvalidArgumentError(f"m: top-m needs an integer m ≥ 1, got {self.m!r}")

    @property
    def spec(self) -> str:  # type: ignore[override]
        return f"topm:{self.m}"

    def _threshold(self, p: np.ndarray) -> float:
        k = min(int(self.m), p.shape[0])
        return float(np.sort(p)[::-1][k - 1])


@dataclass(frozen=True, repr=False)
class Typical(AcceptRule):
    """Entropy-thresholded ("typical") acceptance of Medusa (arXiv 2401.10774).

    ``τ = min(ε, δ · exp(−H(p)))`` with ``H`` in nats, ``ε > 0`` a hard probability threshold and
    ``δ > 0`` the entropy-scaled one.  Since ``exp(−H(p)) ≤ p_(1)``, the top token is always accepted
    when ``δ ≤ 1``.
    """

    name: ClassVar[str] = "typical"

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and 0.0 < self.epsilon <= 1.0):
            raise InvalidArgumentError(f"epsilon: typical threshold must lie in (0, 1], got {self.epsilon!r}")
        if not (math.isfinite(self.delta) and self.delta > 0.0):
            raise InvalidArgumentError(f"delta: typical entropy factor must be > 0, got {self.delta!r}")

    @property
    def spec(self) -> str:  # type: ignore[override]
        return f"typical:{self.epsilon:g},{self.delta:g}"

    def _threshold(self, p: np.ndarray) -> float:
        return min(self.epsilon, self.delta * math.exp(-entropy(p)))


@dataclass(frozen=True)
class LosslessRule:
    """The stochastic, distribution-preserving rule (Leviathan et al. 2022; Chen et al. 2023).

    Not an :class:`AcceptRule`: acceptance is random and depends on the drafter's distribution ``q``.
    """

    spec: str = "lossless"
    name: ClassVar[str] = "lossless"
    kind: ClassVar[str] = "lossless"

    def accept_prob(self, p: object, q: object, d: object) -> float | np.ndarray:
        """Same as :func:`lossless_accept_prob`."""
        return lossless_accept_prob(p, q, d)

    def residual(self, p: object, q: object) -> np.ndarray:
        """Same as :func:`residual`."""
        return residual(p, q)


_NUM = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"


def parse_rule(text: str) -> AcceptRule | LosslessRule:
    """Parse an acceptance-rule spec (the CLI's ``--accept`` value).

    Accepted forms: ``lossless``, ``greedy``, ``additive:δ``, ``multiplicative:α``, ``topm:m``,
    ``typical:ε,δ`` (whitespace around the text is ignored; names are case-insensitive).

    Raises:
        InvalidArgumentError: unknown name, missing/extra/non-numeric parameters or out-of-range values;
            the message quotes ``text``.
    """
    if not isinstance(text, str):
        raise InvalidArgumentError(f"rule: expected a string, got {type(text).__name__}")
    s = text.strip().lower()
    try:
        if s == "lossless":
            return LosslessRule()
        if s == "greedy":
            return StrictGreedy()
        m = re.fullmatch(r"additive:" + _NUM, s)
        if m:
            return Additive(float(m.group(1)))
        m = re.fullmatch(r"multiplicative:" + _NUM, s)
        if m:
            return Multiplicative(float(m.group(1)))
        m = re.fullmatch(r"topm:(\d+)", s)
        if m:
            return TopM(int(m.group(1)))
        m = re.fullmatch(r"typical:" + _NUM + r"\s*,\s*" + _NUM, s)
        if m:
            return Typical(float(m.group(1)), float(m.group(2)))
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"rule {text!r}: {exc}") from None
    raise InvalidArgumentError(
        f"rule {text!r}: expected lossless | greedy | additive:δ | multiplicative:α | topm:m | typical:ε,δ")


# --- lossless rule ---------------------------------------------------------------------------------


def lossless_accept_prob(p: object, q: object, d: object) -> float | np.ndarray:
    """Acceptance probability ``min(1, p[d] / q[d])`` of the lossless rule.

    Leviathan et al. 2022 (arXiv 2211.17192), Chen et al. 2023 (arXiv 2302.01318).

    Args:
        p: target distribution(s), ``(vocab,)`` or, batched over k draft positions, ``(k, vocab)``.
        q: drafter distribution(s), same shape as ``p``.
        d: drafted token id (int) or ``(k,)`` int array, one per position.
    Returns:
        a float (unbatched) or a ``(k,)`` float64 array.
    Raises:
        InvalidArgumentError: shapes differ, bad distributions, token out of range, or ``q[d] == 0``
            (the drafter cannot have proposed ``d``).
    """
    pa = check_distribution(p, "p", (1, 2))
    qa = check_distribution(q, "q", (1, 2))
    if pa.shape != qa.shape:
        raise InvalidArgumentError(f"q: shape {qa.shape} differs from p's {pa.shape}")
    if pa.ndim == 1:
        di = _check_token(d, pa.shape[0])
        if qa[di] <= 0:
            raise InvalidArgumentError(f"d: drafter probability q[{di}] is 0, it cannot propose that token")
        return float(min(1.0, pa[di] / qa[di]))
    darr = np.asarray(d)
    if darr.shape != (pa.shape[0],) or not np.issubdtype(darr.dtype, np.integer):
        raise InvalidArgumentError(f"d: expected ({pa.shape[0]},) int array, got shape {darr.shape} "
                                   f"dtype {darr.dtype}")
    if np.any(darr < 0) or np.any(darr >= pa.shape[1]):
        raise InvalidArgumentError(f"d: token id out of range [0, {pa.shape[1]})")
    rows = np.arange(pa.shape[0])
    qd = qa[rows, darr]
    if np.any(qd <= 0):
        raise InvalidArgumentError("d: some drafter probability q[i, d_i] is 0, it cannot propose that token")
    return np.minimum(1.0, pa[rows, darr] / qd)


def residual(p: object, q: object) -> np.ndarray:
    """Residual distribution ``norm(max(0, p − q))`` sampled after a lossless-rule rejection.

    Leviathan et al. 2022 (arXiv 2211.17192), Chen et al. 2023 (arXiv 2302.01318).

    Args:
        p, q: ``(vocab,)`` or ``(k, vocab)`` float arrays (rows are distributions), same shape.
    Returns:
        float64 array of the same shape; each row sums to 1.  A row where ``p == q`` (residual mass 0,
        so a rejection has probability 0 there) is returned as ``p`` itself.
    Raises:
        InvalidArgumentError: bad distributions or mismatched shapes.
    """
    pa = check_distribution(p, "p", (1, 2))
    qa = check_distribution(q, "q", (1, 2))
    if pa.shape != qa.shape:
        raise InvalidArgumentError(f"q: shape {qa.shape} differs from p's {pa.shape}")
    r = np.maximum(0.0, pa - qa)
    z = r.sum(axis=-1, keepdims=True)
    zero = z <= 0
    out = np.where(zero, pa, r / np.where(zero, 1.0, z))
    return out
