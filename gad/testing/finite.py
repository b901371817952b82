"""Finite languages as grammar constraints, with exact masks by enumeration (tests and toy examples).

:class:`TokenLanguage` takes token sequences (token ``t`` allowed after ``u`` iff ``u·t`` prefixes a
sentence); :class:`TextLanguage` takes strings (``t`` allowed iff ``decode(u·t)`` prefixes a sentence).
Both implement :class:`gad.engine.protocols.TokenConstraint` and loop over the vocabulary per mask:
they are reference implementations for small vocabularies, never for real models.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from gad.engine.vocab import Vocabulary


def _digest(items: Sequence[object]) -> str:
    return hashlib.sha256(repr(list(items)).encode("utf-8")).hexdigest()


class _AcceptTokens:
    """``accept_tokens`` on top of a matcher's ``accept_token`` (shared by both stand-ins)."""

    def accept_token(self, t: int) -> bool:
        raise NotImplementedError

    def accept_tokens(self, ids: Sequence[int]) -> int:
        """Accept ids one by one; the number accepted before the first refusal."""
        n = 0
        for t in ids:
            if not self.accept_token(t):
                break
            n += 1
        return n


class TokenLanguageMatcher(_AcceptTokens):
    """Matcher over an explicit finite set of token sequences (EOS allowed iff the prefix is in L)."""

    def __init__(self, lang: frozenset[tuple[int, ...]], vocab_size: int, eos: int,
                 tokens: Sequence[int] = ()) -> None:
        self.lang, self.V, self.eos = lang, vocab_size, eos
        self.tokens: list[int] = list(tokens)
        self.prefixes = {w[:i] for w in lang for i in range(len(w) + 1)}

    def mask(self) -> np.ndarray:
        u = tuple(self.tokens)
        m = np.zeros(self.V, dtype=bool)
        for t in range(self.V):
            if t != self.eos and u + (t,) in self.prefixes:
                m[t] = True
        m[self.eos] = u in self.lang
        return m

    def accept_token(self, t: int) -> bool:
        if t == self.eos:
            return tuple(self.tokens) in self.lang
        if tuple(self.tokens) + (int(t),) not in self.prefixes:
            return False
        self.tokens.append(int(t))
        return True

    def rollback(self, k: int) -> None:
        if k:
            del self.tokens[-k:]

    def fork(self) -> TokenLanguageMatcher:
        return TokenLanguageMatcher(self.lang, self.V, self.eos, self.tokens)

    def is_accepting(self) -> bool:
        return tuple(self.tokens) in self.lang

    def is_finished(self) -> bool:
        return not any(tuple(self.tokens) + (t,) in self.prefixes for t in range(self.V) if t != self.eos)

    def reset(self) -> None:
        self.tokens = []


class TokenLanguage:
    """A finite language given as token sequences, as a :class:`gad.engine.protocols.TokenConstraint`."""

    def __init__(self, vocab: Vocabulary, lang: set[tuple[int, ...]]) -> None:
        self.vocab = vocab
        self.vocab_size = vocab.size
        self.eos_ids = tuple(vocab.eos_ids)
        self.lang = frozenset(lang)
        self.grammar_sha256 = _digest(sorted(self.lang))

    def matcher(self) -> TokenLanguageMatcher:
        return TokenLanguageMatcher(self.lang, self.vocab.size, self.eos_ids[0])


class TextLanguageMatcher(_AcceptTokens):
    """Exact matcher for a finite language: t is allowed iff decode(prefix·t) prefixes a sentence."""

    def __init__(self, vocab: Vocabulary, language: set[bytes]) -> None:
        self.vocab = vocab
        self.language = language
        self.tokens: list[int] = []

    def _text(self, ids: list[int]) -> bytes:
        return self.vocab.decode(ids)

    def mask(self) -> np.ndarray:
        cur = self._text(self.tokens)
        out = np.zeros(self.vocab.size, dtype=bool)
        for i, t in enumerate(self.vocab.tokens):
            if i in self.vocab.eos_ids:
                out[i] = cur in self.language
            elif t:
                out[i] = any(s.startswith(cur + t) for s in self.language)
        return out

    def accept_token(self, i: int) -> bool:
        if i in self.vocab.eos_ids or not self.mask()[i]:
            return False
        self.tokens.append(i)
        return True

    def is_accepting(self) -> bool:
        return self._text(self.tokens) in self.language

    def is_finished(self) -> bool:
        cur = self._text(self.tokens)
        return not any(s.startswith(cur) and len(s) > len(cur) for s in self.language)

    def rollback(self, k: int) -> None:
        if k:
            del self.tokens[-k:]

    def fork(self) -> TextLanguageMatcher:
        m = TextLanguageMatcher(self.vocab, self.language)
        m.tokens = list(self.tokens)
        return m

    def reset(self) -> None:
        self.tokens = []


class TextLanguage:
    """A finite language given as strings (byte-level masks), as a :class:`gad.engine.protocols.TokenConstraint`."""

    def __init__(self, vocab: Vocabulary, language: set[str]) -> None:
        self.vocab = vocab
        self.vocab_size = vocab.size
        self.eos_ids = tuple(vocab.eos_ids)
        self.language = {s.encode() for s in language}
        self.grammar_sha256 = _digest(sorted(self.language))

    def matcher(self) -> TextLanguageMatcher:
        return TextLanguageMatcher(self.vocab, self.language)
