"""Grammars: Lark and GBNF/EBNF loading and validation, regex automata, shipped grammars.

``Grammar.from_file`` / ``from_string`` / ``builtin`` build a validated :class:`Grammar`; the engine
(:mod:`gad.engine`) compiles it against a vocabulary.
"""

from __future__ import annotations

from gad.grammar.loader import BUILTIN_DIR, Grammar, builtin_names

__all__ = ["BUILTIN_DIR", "Grammar", "builtin_names"]
