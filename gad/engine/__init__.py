"""The mask engine: vocabularies, byte-level lexer automata, parse tables and token walks compiled once
per (grammar, vocabulary), and the cheap per-request matcher."""

from __future__ import annotations

from gad.engine.compiler import CompiledGrammar, compile
from gad.engine.matcher import Matcher
from gad.engine.vocab import Vocabulary

__all__ = ["CompiledGrammar", "compile", "Matcher", "Vocabulary"]
