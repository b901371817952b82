"""The one registry of Φ-estimator names (BRIEF §3): parsing, identity, construction.

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
from typing import Any, Literal, cast, get_args

import numpy as np

from gad.engine.protocols import TokenConstraint
from gad.errors import InvalidArgumentError
from gad.models.base import LanguageModel
from gad.phi.asap import AsapPhi
from gad.phi.base import IndicatorPhi, PhiEstimator
from gad.phi.exact import ExactPhi
from gad.phi.onestep import OneStepPhi

EstimatorName = Literal["gcd", "asap", "onestep", "exact"]
ESTIMATORS: tuple[EstimatorName, ...] = get_args(EstimatorName)
ALIASES: dict[str, EstimatorName] = {"indicator": "gcd", "mask": "gcd"}


def parse_estimator(name: str) -> EstimatorName:
    """The estimator ``name`` (an alias resolved) as a member of :data:`ESTIMATORS`.

    Raises:
        InvalidArgumentError: ``name`` is not an estimator name; the message lists the choices.
    """
    if isinstance(name, str):
        name = ALIASES.get(name, name)
        if name in ESTIMATORS:
            return cast(EstimatorName, name)
    raise InvalidArgumentError(f"unknown Φ estimator {name!r}; choose one of {', '.join(ESTIMATORS)} "
                               f"(aliases indicator, mask = gcd)")


GcdPhi = IndicatorPhi  # the estimator of method gcd (Φ̂ = mask)


def grammar_hash(compiled: TokenConstraint) -> str:
    """The grammar's identity: :attr:`gad.grammar.Grammar.sha256` of the compiled grammar's source
    (the same hash keys the compile cache)."""
    return compiled.grammar_sha256


def estimator_identity(lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int],
                       settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a saved Φ trie is conditioned on: model name and fingerprint, grammar hash, prompt hash, decoding
    settings, vocabulary size and fingerprint.

    The model is identified by ``lm.fingerprint`` (config + tokenizer + weights for
    :class:`gad.models.hf.HFLanguageModel`, see there), not by its name or folder: a trie is refused
    for another model whose folder has the same name.  A model object without ``fingerprint`` is
    identified by its name only.  ``settings`` keys ``temperature`` (default 1.0), ``top_k`` (None) and
    ``top_p`` (1.0) are recorded.
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
        "vocab_size": int(compiled.vocab_size),
        "model_fingerprint": str(getattr(lm, "fingerprint", None) or "unknown"),
        "vocab": compiled.vocab.fingerprint(),
    }


def make_estimator(method: str, lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int], *,
                   trie: Any = None, settings: dict[str, Any] | None = None) -> PhiEstimator:
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
    method = parse_estimator(method)
    s = dict(settings or {})
    eos = tuple(compiled.vocab.eos_ids)
    if method == "gcd":
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
    raise AssertionError(method)  # parse_estimator admits only the names above
