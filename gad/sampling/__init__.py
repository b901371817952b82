"""Sampling: distributions over the vocabulary, the randomness convention, the batched sampler and the
registry of method names."""

from __future__ import annotations

from gad.sampling.dist import constrained_weights, draw, entropy
from gad.sampling.methods import Method, get_method, method_names, register_method
from gad.sampling.rng import NumpyRng, Rng, as_rng, check_seed, sample_rng
from gad.sampling.sampler import sample_rows

__all__ = ["constrained_weights", "draw", "entropy", "Method", "get_method", "method_names",
           "register_method", "NumpyRng", "Rng", "as_rng", "check_seed", "sample_rng", "sample_rows"]
