"""gad: grammar-aligned constrained decoding.

Data flow: grammar (``gad.grammar``) -> compiled token tables (``gad.compiler``) -> per-request
matcher and mask (``gad.matcher``) -> sampler with a Φ estimator (``gad.sampling``, ``gad.phi``) ->
speculative verifier (``gad.speculative``) -> results and evaluation (``gad.eval``).

Names are imported lazily so that ``import gad`` stays cheap (no torch until a model is loaded).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Grammar": "gad.grammar",
    "compile": "gad.compiler",
    "CompiledGrammar": "gad.compiler",
    "Matcher": "gad.matcher",
    "Vocabulary": "gad.vocab",
    "ToyLM": "gad.lm",
    "load_model": "gad.hf",
    "sample": "gad.sampling",
    "Sample": "gad.results",
    "GrammarLogitsProcessor": "gad.logits_processor",
    "errors": "gad.errors",
    "eval": "gad.eval",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'gad' has no attribute {name!r}")
    module = importlib.import_module(mod)
    value = module if mod == f"gad.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
