"""Φ estimators: expected future grammaticality Φ̂(u·t) of each next token (BRIEF §3).

All estimators share :class:`gad.phi.base.PhiEstimator` (``child_phi``, ``observe``) and add
``flush()`` (persist whatever must be persisted).  :func:`make_estimator` builds one by name:

========== ============================================================================
``gcd``    the 0/1 viability indicator (alias ``indicator``): sampling is GCD
``asap``   ASAp trie (:mod:`gad.phi.asap`), persisted with :mod:`gad.phi.trie_io`
``onestep`` one-token look-ahead mass (:mod:`gad.phi.onestep`)
``exact``  exact Φ by enumeration (:mod:`gad.phi.exact`)
========== ============================================================================
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from .asap import AsapPhi, PhiTrie
from .base import IndicatorPhi, PhiEstimator
from .exact import Enumeration, ExactPhi, enumerate_language
from .onestep import OneStepPhi
from .trie_io import load_trie, save_trie

__all__ = ["IndicatorPhi", "PhiEstimator", "GcdPhi", "AsapPhi", "PhiTrie", "OneStepPhi", "ExactPhi",
           "Enumeration", "enumerate_language", "make_estimator", "estimator_identity", "load_trie",
           "save_trie", "METHODS"]

METHODS = ("gcd", "indicator", "asap", "onestep", "exact")


class GcdPhi(IndicatorPhi):
    """:class:`IndicatorPhi` with a no-op ``flush`` (GCD: ``Φ̂ = mask``)."""

    def flush(self) -> None:
        """Nothing to persist."""
        return None


def grammar_hash(compiled: Any) -> str:
    """SHA-256 of the grammar: ``compiled.grammar.sha256`` when present, else a hash of its text."""
    g = getattr(compiled, "grammar", None)
    h = getattr(g, "sha256", None)
    if callable(h):
        h = h()
    if isinstance(h, str) and h:
        return h
    text = None
    for attr in ("text", "source", "lark_text"):
        v = getattr(g, attr, None)
        if isinstance(v, str):
            text = v
            break
    if text is None:
        text = repr(g)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def estimator_identity(lm: Any, compiled: Any, prompt_ids: Sequence[int],
                       settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a saved Φ trie is conditioned on: model id, grammar hash, prompt hash, decoding settings.

    ``settings`` keys ``temperature`` (default 1.0), ``top_k`` (None) and ``top_p`` (1.0) are recorded.
    """
    s = settings or {}
    prompt = np.asarray([int(t) for t in prompt_ids], dtype="<i8").tobytes()
    return {
        "model": str(getattr(lm, "name", type(lm).__name__)),
        "grammar": grammar_hash(compiled),
        "prompt": hashlib.sha256(prompt).hexdigest(),
        "settings": {"temperature": float(s.get("temperature", 1.0) or 1.0),
                     "top_k": None if not s.get("top_k") else int(s["top_k"]),
                     "top_p": float(s.get("top_p", 1.0) or 1.0)},
        "vocab_size": int(getattr(compiled, "vocab_size", None) or lm.vocab_size),
    }


def make_estimator(method: str, *, lm: Any, compiled: Any, prompt_ids: Sequence[int],
                   trie: Any = None, settings: dict[str, Any] | None = None) -> Any:
    """Build the Φ estimator ``method`` for one (model, grammar, prompt).

    Args:
        method: ``gcd`` / ``indicator``, ``asap``, ``onestep`` or ``exact``.
        lm: the language model; compiled: the compiled grammar; prompt_ids: the prompt's ids.
        trie: ASAp only — a :class:`PhiTrie`, a path (loaded if present, saved by ``flush``), or None.
        settings: decoding settings (``temperature``, ``top_k``, ``top_p``, recorded in saved tries;
            ``batch_size``) and estimator options: ``onestep_top`` (32), ``exact_max_len`` (24),
            ``exact_node_budget`` (200000).
    Returns:
        an object with ``name``, ``child_phi``, ``observe`` and ``flush``.
    Raises:
        InvalidArgumentError: unknown method.
        TrieMismatchError / TrieFormatError: ``trie`` cannot be used (ASAp).
        EnumerationBudgetError: the exact enumeration is too large.
    """
    s = dict(settings or {})
    eos = tuple(getattr(compiled, "eos_ids", None) or compiled.vocab.eos_ids)
    if method in ("gcd", "indicator"):
        return GcdPhi()
    if method == "asap":
        bs = int(s.get("batch_size", 1) or 1)
        return AsapPhi(trie, identity=estimator_identity(lm, compiled, prompt_ids, s), eos_ids=eos,
                       cache=max(4096, 8 * bs), pending=max(128, 2 * bs + 2))
    if method == "onestep":
        return OneStepPhi(lm, compiled, prompt_ids, top=int(s.get("onestep_top", 32)), eos_ids=eos)
    if method == "exact":
        return ExactPhi.from_model(lm, compiled, prompt_ids, max_len=int(s.get("exact_max_len", 24)),
                                   node_budget=int(s.get("exact_node_budget", 200_000)))
    raise InvalidArgumentError(f"unknown Φ method {method!r}; choose one of {', '.join(METHODS)}")
