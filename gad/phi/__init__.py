"""Φ estimators: expected future grammaticality Φ̂(u·t) of each next token (BRIEF §3).

All estimators implement :class:`gad.phi.base.PhiEstimator` (``child_phi``, ``observe``, ``flush``);
:mod:`gad.phi.registry` parses their names and builds them (:func:`make_estimator`).
"""

from __future__ import annotations

from gad.phi.asap import AsapPhi
from gad.phi.base import IndicatorPhi, PhiEstimator
from gad.phi.exact import Enumeration, ExactPhi, enumerate_language
from gad.phi.onestep import OneStepPhi
from gad.phi.registry import (
    ESTIMATORS,
    EstimatorName,
    GcdPhi,
    estimator_identity,
    make_estimator,
    parse_estimator,
)
from gad.phi.trie import PhiTrie
from gad.phi.trie_io import load_trie, save_trie

__all__ = ["IndicatorPhi", "PhiEstimator", "GcdPhi", "AsapPhi", "PhiTrie", "OneStepPhi", "ExactPhi",
           "Enumeration", "enumerate_language", "make_estimator", "parse_estimator", "estimator_identity",
           "load_trie", "save_trie", "ESTIMATORS", "EstimatorName"]
