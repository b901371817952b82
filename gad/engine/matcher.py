"""Per-request grammar state: the exact next-token mask, token acceptance, fork and rollback.

A :class:`Matcher` is a thin view over a :class:`gad.compiler.CompiledGrammar`: its state is the
LALR parser stack (a tuple of parser states) and the lexer automaton state of the current, still
open lexeme.  Every state ever visited is kept, so ``rollback(k)`` is O(k) and ``fork()`` copies a
list of references.

Definition of the mask (BRIEF §1): ``mask()[t]`` is True iff ``decode(prefix · t)`` is a prefix of
some sentence of the grammar (under the lexing semantics of :mod:`gad.lexer`), and for an EOS id iff
``decode(prefix)`` is itself a sentence.  Special tokens other than EOS are never allowed.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import SupportsIndex, cast

import numpy as np

from gad.errors import InvalidArgumentError


def _as_index(value: object, name: str) -> int:
    """``value`` as a Python int: ints and numpy integers only (a bool, float or string is refused,
    never silently turned into a token id)."""
    if isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError(f"{name} must be an integer, got a bool ({value!r})")
    try:
        return operator.index(cast(SupportsIndex, value))
    except TypeError:
        raise InvalidArgumentError(f"{name} must be an integer, got {type(value).__name__} ({value!r})") from None


def _born(compiled: object) -> None:
    born = getattr(compiled, "_matcher_born", None)
    if born is not None:
        born()


class Matcher:
    """Incremental grammar matcher over token ids.

    Attributes:
        compiled: the shared :class:`CompiledGrammar`.
        tokens: ids accepted so far (EOS included once accepted).
    """

    __slots__ = ("compiled", "_states", "tokens", "_finished")

    def __init__(self, compiled) -> None:
        self.compiled = compiled
        self._states = [compiled.initial_state]
        self.tokens: list[int] = []
        self._finished = False
        _born(compiled)

    def __del__(self) -> None:
        # the compiled grammar frees the interned stacks of finished requests once none is alive
        gone = getattr(getattr(self, "compiled", None), "_matcher_gone", None)
        if gone is not None:
            gone()

    # ------------------------------------------------------------------------------- queries
    def mask(self) -> np.ndarray:
        """Allowed next tokens: ``(vocab_size,)`` bool numpy array (a fresh, writable copy).

        All False once EOS has been accepted.
        """
        if self._finished:
            return np.zeros(self.compiled.vocab_size, dtype=bool)
        stack, d = self._states[-1]
        return self.compiled.mask_for(stack, d).copy()

    def mask_view(self) -> np.ndarray:
        """Like :meth:`mask` but returns the cached read-only array (no copy): do not modify."""
        if self._finished:
            return np.zeros(self.compiled.vocab_size, dtype=bool)
        stack, d = self._states[-1]
        return self.compiled.mask_for(stack, d)

    def is_accepting(self) -> bool:
        """True iff the text decoded so far is a sentence of the grammar (EOS would be allowed)."""
        if self._finished:
            return True
        stack, d = self._states[-1]
        return self.compiled.is_complete(stack, d)

    def is_finished(self) -> bool:
        """True iff EOS has been accepted."""
        return self._finished

    @property
    def num_tokens(self) -> int:
        """Number of accepted tokens (EOS included)."""
        return len(self.tokens)

    @property
    def state(self) -> tuple:
        """The current ``(parser stack id, lexer automaton state)`` of the compiled grammar; a negative
        stack id names a set of lexing hypotheses (:meth:`CompiledGrammar.hypotheses` lists them)."""
        return self._states[-1]

    def state_key(self) -> tuple:
        """A hashable key of the current state (equal keys ⇒ equal masks and futures)."""
        return (self._states[-1], self._finished)

    # ----------------------------------------------------------------------------- transitions
    def accept_token(self, token_id: int) -> bool:
        """Advance by one token.

        Returns:
            True if the token was allowed (state advanced), False otherwise (state unchanged).
        Raises:
            InvalidArgumentError: ``token_id`` not an integer, or outside ``[0, vocab_size)``.
        """
        cg = self.compiled
        t = _as_index(token_id, "token_id")
        if not 0 <= t < cg.vocab_size:
            raise InvalidArgumentError(f"token_id {token_id} is outside the vocabulary (size {cg.vocab_size})")
        if self._finished:
            return False
        stack, d = self._states[-1]
        if t in cg.eos_ids:
            if not cg.is_complete(stack, d):
                return False
            self._finished = True
            self._states.append((stack, d))
            self.tokens.append(t)
            return True
        data = cg.vocab.tokens[t]
        if not data:
            return False
        nxt = cg.step_bytes(stack, d, data)
        if nxt is None:
            return False
        self._states.append(nxt)
        self.tokens.append(t)
        return True

    def accept_tokens(self, token_ids: Iterable[int]) -> int:
        """Accept tokens in order, stopping at the first refused one; returns how many were accepted."""
        n = 0
        for t in token_ids:
            if not self.accept_token(t):
                break
            n += 1
        return n

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw text bytes (not a token); False (unchanged) if the prefix becomes non-viable.

        Rollback treats the bytes as one step.

        Raises:
            InvalidArgumentError: ``data`` is not bytes-like (e.g. a ``str``: encode it first).
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"accept_bytes needs bytes, got {type(data).__name__} ({data!r:.40})")
        data = bytes(data)
        if self._finished:
            return False
        stack, d = self._states[-1]
        nxt = self.compiled.step_bytes(stack, d, data)
        if nxt is None:
            return False
        self._states.append(nxt)
        self.tokens.append(-1)
        return True

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens.

        Raises:
            InvalidArgumentError: ``k`` not an integer, negative or larger than :attr:`num_tokens`.
        """
        k = _as_index(k, "k")
        if not 0 <= k <= len(self.tokens):
            raise InvalidArgumentError(f"cannot roll back {k} tokens: the matcher holds {len(self.tokens)}")
        if k == 0:
            return
        del self._states[-k:]
        del self.tokens[-k:]
        self._finished = False

    def fork(self) -> Matcher:
        """An independent copy sharing the compiled tables (O(number of tokens) references)."""
        m = Matcher.__new__(Matcher)
        m.compiled = self.compiled
        _born(self.compiled)
        m._states = list(self._states)
        m.tokens = list(self.tokens)
        m._finished = self._finished
        return m

    def reset(self) -> None:
        """Back to the empty prefix."""
        self._states = [self.compiled.initial_state]
        self.tokens = []
        self._finished = False
