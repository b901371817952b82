"""gad: grammar-aligned constrained decoding.

The package is one stack, imports pointing down (checked by import-linter in CI)::

    errors, types, fileio  ->  grammar  ->  engine  ->  models  ->  phi  ->  sampling  ->  speculative
        ->  api  ->  testing  ->  eval | vllm  ->  cli

grammar (``gad.grammar``: Lark / GBNF loading, shipped grammars) -> compiled token tables and the
per-request matcher (``gad.engine``) -> language models (``gad.models``) -> Φ estimators (``gad.phi``)
-> the sampler and its method registry (``gad.sampling``) -> speculative verification
(``gad.speculative``) -> ``gad.sample`` (``gad.api``) -> evaluation (``gad.eval``) -> ``gad`` CLI.

Names are imported lazily so that ``import gad`` stays cheap (no torch until a model is loaded).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Grammar": "gad.grammar",
    "compile": "gad.engine.compiler",
    "CompiledGrammar": "gad.engine.compiler",
    "Matcher": "gad.engine.matcher",
    "Vocabulary": "gad.engine.vocab",
    "ToyLM": "gad.models.base",
    "LanguageModel": "gad.models.base",
    "load_model": "gad.models.hf",
    "GrammarLogitsProcessor": "gad.models.logits_processor",
    "PhiEstimator": "gad.phi.base",
    "AsapPhi": "gad.phi.asap",
    "Speculation": "gad.speculative.config",
    "sample": "gad.api",
    "Sample": "gad.types",
    "errors": "gad.errors",
    "eval": "gad.eval",
    "testing": "gad.testing",
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
