"""Φ estimators: expected future grammaticality Φ̂(u·t) of each next token (BRIEF §3).

All estimators share :class:`gad.phi.base.PhiEstimator`; ``make_estimator`` builds one by name.
"""

from .base import IndicatorPhi, PhiEstimator

__all__ = ["IndicatorPhi", "PhiEstimator"]
