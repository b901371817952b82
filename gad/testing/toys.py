"""Toy models and grammars with hand-checkable numbers (tests, examples, the harness's toy model).

* :func:`tiny_finite`: language ``{0, 00, 10, 11}`` over tokens ``0, 1, 00, EOS`` — the token ``00``
  gives ``00`` two tokenizations; ``Z = 0.2575`` by hand (see ``tests/test_exact.py``).
* :func:`gad_binary`: the GAD paper's ``string_start_w_1_all_0`` (``00000`` or ``1`` then bits) with a
  model that prefers ``0`` first and ``1`` afterwards, so GCD puts 90 % of its mass on ``00000`` while
  ``Q*("00000") ≈ 7·10^-5``; strings starting with ``1`` are forced to end by ``ones_len`` tokens.
* :func:`hashed_lm`: a deterministic pseudo-random next-token table keyed by a hash of the context.
"""

from __future__ import annotations

import hashlib

import numpy as np

from gad.engine.compiler import CompiledGrammar
from gad.engine.vocab import Vocabulary
from gad.models.base import ToyLM
from gad.testing.regex_grammar import regex_grammar


def tiny_finite() -> tuple[ToyLM, CompiledGrammar]:
    """Tokens ``["0", "1", "00", EOS]``, language ``0|00|1[01]`` (see module doc)."""
    vocab = Vocabulary.from_strings(["0", "1", "00"], name="tiny")
    table = {(): [0.4, 0.3, 0.2, 0.1], (0,): [0.5, 0.1, 0.1, 0.3]}
    lm = ToyLM.from_table(vocab, table, default=[0.25, 0.25, 0.25, 0.25], name="toy-tiny")
    return lm, regex_grammar("0|00|1[01]", vocab)


def gad_binary(ones_len: int = 4) -> tuple[ToyLM, CompiledGrammar]:
    """Tokens ``["0", "1", EOS]``, language ``00000|1[01]+`` (``string_start_w_1_all_0``)."""
    vocab = Vocabulary.from_strings(["0", "1"], name="bits")

    def f(ctx: tuple[int, ...]) -> np.ndarray:
        if not ctx:
            return np.array([0.9, 0.1, 0.0])
        if ctx[0] == 1:
            return np.array([0.0, 0.0, 1.0]) if len(ctx) >= ones_len else np.array([0.45, 0.45, 0.1])
        if len(ctx) >= 5:
            return np.array([0.0, 0.0, 1.0])
        return np.array([0.09, 0.9, 0.01])

    return ToyLM(vocab, f, name="toy-gad-binary"), regex_grammar("00000|1[01]+", vocab)


def hashed_lm(vocab: Vocabulary, seed: int = 0, eos_boost: float = 0.0, name: str | None = None) -> ToyLM:
    """Next-token probabilities drawn from a Dirichlet(0.5) keyed by SHA-256(seed, context).

    ``eos_boost`` adds that weight times the context length to every EOS id (shorter outputs).
    """
    v = vocab.size
    eos = list(vocab.eos_ids)

    def f(ctx: tuple[int, ...]) -> np.ndarray:
        h = hashlib.sha256(repr((seed, ctx)).encode()).digest()
        rng = np.random.default_rng(int.from_bytes(h[:8], "little"))
        p = rng.dirichlet(np.full(v, 0.5))
        p[eos] += eos_boost * len(ctx)
        return p + 1e-12

    return ToyLM(vocab, f, name=name or f"toy-hashed-{seed}")


def toy_model(seed: int = 0) -> ToyLM:
    """A character-level toy LM (printable ASCII + newline + EOS) with pseudo-random tables."""
    vocab = Vocabulary.from_strings([chr(i) for i in range(32, 127)] + ["\n"], name="ascii")
    return hashed_lm(vocab, seed=seed, eos_boost=0.05, name=f"toy-ascii-{seed}")
