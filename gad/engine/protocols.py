"""The engine's typed seams: what samplers, estimators and verifiers need from a grammar constraint.

:class:`gad.engine.compiler.CompiledGrammar` and its :class:`gad.engine.matcher.Matcher` implement
them; so do the finite-language stand-ins of :mod:`gad.testing.finite` (exact masks by enumeration).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import numpy as np

from gad.engine.vocab import Vocabulary


@runtime_checkable
class TokenMatcher(Protocol):
    """Per-request state of a grammar constraint over token ids (cheap to fork and roll back)."""

    def mask(self) -> np.ndarray:
        """``(vocab,)`` bool: True where the token keeps the prefix viable; EOS True iff complete."""
        ...

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) when the mask forbids it."""
        ...

    def accept_tokens(self, token_ids: Iterable[int]) -> int:
        """Advance token by token; returns how many were accepted (stops at the first refusal)."""
        ...

    def is_accepting(self) -> bool:
        """The decoded prefix is a sentence of the grammar."""
        ...

    def is_finished(self) -> bool:
        """No non-EOS token can follow."""
        ...

    def rollback(self, k: int) -> None:
        """Forget the last ``k`` accepted tokens."""
        ...

    def fork(self) -> TokenMatcher:
        """An independent copy in the same state."""
        ...

    def reset(self) -> None:
        """Back to the empty prefix."""
        ...


@runtime_checkable
class ForcedTextMatcher(TokenMatcher, Protocol):
    """A :class:`TokenMatcher` that also reports the text the grammar forces next (jump-forward).

    :class:`gad.engine.matcher.Matcher` implements it; the finite-language stand-ins of
    :mod:`gad.testing.finite` do not (drafters then fall back to single forced tokens).
    """

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        """The longest byte string (at most ``max_bytes`` bytes) every grammatical continuation starts
        with; ``b""`` where the text is complete or EOS was accepted.  Raises InvalidArgumentError
        for a negative ``max_bytes``."""
        ...

    def forced_tokens(self, max_bytes: int = 64, tokenizer: object = None) -> list[int]:
        """Token ids, each allowed by the mask at its step, whose bytes concatenate to a prefix of
        :meth:`forced_bytes`: the tokenizer's own spelling when one is given, else greedy longest match."""
        ...


@runtime_checkable
class TokenConstraint(Protocol):
    """A grammar compiled against a vocabulary: hands out matchers.

    Attributes:
        vocab: the vocabulary (``vocab_size`` ids, ``eos_ids``).
        grammar_sha256: the constraint's identity (keys caches and Φ̂ tries).
    """

    vocab: Vocabulary
    vocab_size: int
    eos_ids: tuple[int, ...]
    grammar_sha256: str

    def matcher(self) -> TokenMatcher:
        """A fresh per-request matcher at the empty prefix."""
        ...
