"""Test and example helpers that ship with gad: toy language models with hand-checkable numbers, regular
toy grammars, and a one-row reference sampler (tests import from here, never from private names)."""

from __future__ import annotations

from gad.testing.refsample import reference_sample
from gad.testing.regex_grammar import regex_grammar, regex_lark
from gad.testing.tables import canonical_contexts, canonical_parse_table
from gad.testing.toys import gad_binary, hashed_lm, tiny_finite, toy_model

__all__ = ["canonical_contexts", "canonical_parse_table", "reference_sample", "regex_grammar", "regex_lark", "gad_binary", "hashed_lm", "tiny_finite",
           "toy_model"]
