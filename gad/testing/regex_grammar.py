"""Regular languages as compiled grammars (toy tasks and tests).

A regular expression ``R`` (Python ``re`` syntax, as in Lark) becomes the one-terminal Lark grammar
``start: WORD`` / ``WORD: /R/`` compiled by :func:`gad.compile` against the vocabulary, so a regular
task gets the same exact masks, matcher (fork, rollback, …) and compile cache as every other grammar:
token ``t`` is allowed after ``u`` iff ``decode(u·t)`` is a prefix of a word of ``R``; EOS iff
``decode(u)`` matches ``R`` in full.
"""

from __future__ import annotations

import os
from typing import Any

from gad.engine.compiler import CompiledGrammar
from gad.engine.compiler import compile as compile_grammar
from gad.errors import GrammarError, InvalidArgumentError
from gad.grammar import Grammar


def regex_lark(pattern: str) -> str:
    """The Lark text of the one-terminal grammar whose language is ``pattern`` (matched in full)."""
    return "start: WORD\nWORD: /" + pattern.replace("/", "\\/") + "/\n"


def regex_grammar(pattern: str, vocab: Any, cache_dir: str | os.PathLike[str] | bool | None = None) -> CompiledGrammar:
    """Compile the regular language ``pattern`` over ``vocab`` (a :class:`gad.vocab.Vocabulary` or a
    tokenizer): a :class:`gad.compiler.CompiledGrammar`.

    Raises:
        InvalidArgumentError: ``pattern`` is not a string, is not a valid regular expression, or
            matches the empty string (Lark terminals cannot); the message names the pattern.
    """
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgumentError(f"pattern must be a non-empty regular expression, got {pattern!r}")
    try:
        return compile_grammar(Grammar.from_string(regex_lark(pattern), kind="lark"), vocab, cache_dir=cache_dir)
    except GrammarError as exc:
        raise InvalidArgumentError(f"bad regular expression {pattern!r} (argument pattern): {exc}") from exc
