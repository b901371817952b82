"""A regular-language grammar with the matcher interface of ``gad.compile`` (toys and tests).

For regular languages (binary strings, bounded Dyck words, finite JSON languages) the exact mask is a
DFA walk: token ``t`` is allowed after prefix ``u`` iff running the DFA over ``decode(u·t)`` ends in a
state from which an accepting state is reachable; EOS is allowed iff the current state accepts.  Bytes
are mapped to characters one-to-one (Latin-1), so the pattern should be ASCII.

This is the stand-in used by the evaluation harness's toy tasks and by the Φ tests; real grammars go
through ``gad.compile``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import interegular
import numpy as np

from ..errors import InvalidArgumentError, TokenRejectedError
from ..vocab import Vocabulary


@dataclass(frozen=True)
class RegexSource:
    """The grammar record of a :class:`RegexGrammar` (``text`` and ``sha256`` as ``gad.Grammar``)."""

    text: str

    @property
    def sha256(self) -> str:
        """SHA-256 of the pattern text."""
        return hashlib.sha256(("regex:" + self.text).encode()).hexdigest()


class RegexGrammar:
    """A compiled regular grammar over a :class:`Vocabulary` (same surface as ``CompiledGrammar``).

    Args:
        pattern: a regular expression (interegular syntax) matched against the whole output.
        vocab: the token byte strings and EOS ids.
    Raises:
        InvalidArgumentError: the pattern cannot be parsed.
    """

    def __init__(self, pattern: str, vocab: Vocabulary) -> None:
        try:
            self.fsm = interegular.parse_pattern(pattern).to_fsm()
        except Exception as exc:  # noqa: BLE001 - interegular raises several types
            raise InvalidArgumentError(f"bad regular expression {pattern!r}: {exc}") from exc
        self.grammar = RegexSource(pattern)
        self.vocab = vocab
        self.vocab_size = vocab.size
        self.eos_ids = tuple(vocab.eos_ids)
        self._live = self._live_states()
        self._masks: dict[int, np.ndarray] = {}
        self._steps: dict[tuple[int, int], int | None] = {}

    def _live_states(self) -> set[int]:
        rev: dict[int, set[int]] = {}
        for s, tr in self.fsm.map.items():
            for d in tr.values():
                rev.setdefault(d, set()).add(s)
        live = set(self.fsm.finals)
        stack = list(live)
        while stack:
            d = stack.pop()
            for s in rev.get(d, ()):
                if s not in live:
                    live.add(s)
                    stack.append(s)
        return live

    def step(self, state: int, token: int) -> int | None:
        """DFA state after ``token`` from ``state`` (None: dead or a special token)."""
        key = (state, token)
        if key in self._steps:
            return self._steps[key]
        b = self.vocab.tokens[token]
        s: int | None = state
        if b is None or token in self.eos_ids:
            s = None
        else:
            for ch in b.decode("latin-1"):
                k = self.fsm.alphabet[ch]
                s = self.fsm.map.get(s, {}).get(k)
                if s is None or s not in self._live:
                    s = None
                    break
        self._steps[key] = s
        return s

    def mask_at(self, state: int) -> np.ndarray:
        """``(vocab,)`` bool mask at a DFA state (cached)."""
        m = self._masks.get(state)
        if m is None:
            m = np.zeros(self.vocab_size, dtype=bool)
            for t in range(self.vocab_size):
                m[t] = self.step(state, t) is not None
            if state in self.fsm.finals:
                m[list(self.eos_ids)] = True
            self._masks[state] = m
        return m

    def matcher(self) -> RegexMatcher:
        """A fresh matcher at the empty prefix."""
        return RegexMatcher(self)


class RegexMatcher:
    """Matcher of a :class:`RegexGrammar`: ``mask``, ``accept_token(s)``, ``rollback``, ``fork`` …"""

    def __init__(self, g: RegexGrammar) -> None:
        self.g = g
        self._states: list[int] = [g.fsm.initial]
        self.tokens: list[int] = []
        self._finished = False

    def mask(self) -> np.ndarray:
        """``(vocab,)`` bool: allowed next tokens (all False once finished)."""
        if self._finished:
            return np.zeros(self.g.vocab_size, dtype=bool)
        return self.g.mask_at(self._states[-1]).copy()

    def accept_token(self, token: int) -> bool:
        """Advance by one token; False (state unchanged) when the token is not allowed."""
        if self._finished:
            return False
        token = int(token)
        if token in self.g.eos_ids:
            if self._states[-1] not in self.g.fsm.finals:
                return False
            self._finished = True
            self._states.append(self._states[-1])
            self.tokens.append(token)
            return True
        s = self.g.step(self._states[-1], token)
        if s is None:
            return False
        self._states.append(s)
        self.tokens.append(token)
        return True

    def accept_tokens(self, ids: Sequence[int]) -> int:
        """Accept ids in order; returns how many were accepted before the first refusal."""
        n = 0
        for t in ids:
            if not self.accept_token(t):
                break
            n += 1
        return n

    def force(self, token: int) -> None:
        """Accept or raise ``TokenRejectedError``."""
        if not self.accept_token(token):
            raise TokenRejectedError(f"token {token} is not allowed here")

    def is_accepting(self) -> bool:
        """True iff the text so far is in the language."""
        return self._states[-1] in self.g.fsm.finals

    def is_finished(self) -> bool:
        """True after EOS was accepted."""
        return self._finished

    def rollback(self, k: int) -> None:
        """Forget the last ``k`` tokens.

        Raises:
            InvalidArgumentError: ``k`` is negative or larger than the number of tokens.
        """
        if not 0 <= k <= len(self.tokens):
            raise InvalidArgumentError(f"cannot roll back {k} tokens (have {len(self.tokens)})")
        for _ in range(k):
            t = self.tokens.pop()
            self._states.pop()
            if t in self.g.eos_ids:
                self._finished = False

    def fork(self) -> RegexMatcher:
        """An independent copy."""
        m = RegexMatcher.__new__(RegexMatcher)
        m.g = self.g
        m._states = list(self._states)
        m.tokens = list(self.tokens)
        m._finished = self._finished
        return m

    def reset(self) -> None:
        """Back to the empty prefix."""
        self.rollback(len(self.tokens))

