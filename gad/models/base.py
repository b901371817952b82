"""The language-model interface every sampler, Φ estimator and verifier in gad talks to.

Two implementations ship: :class:`ToyLM` (explicit next-token tables, for exact tests) and
``gad.hf.HFLanguageModel`` (any local Hugging Face causal LM, or the bundled SmolLM2 GGUF).

Conventions (BRIEF §1): ``logprobs`` are natural-log probabilities of the **whole** vocabulary at
temperature 1 — no top-k/top-p — as ``numpy.float64`` arrays of shape ``(batch, vocab)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from gad.engine.vocab import Vocabulary
from gad.errors import InvalidArgumentError


@runtime_checkable
class DecodeSession(Protocol):
    """Incremental decoding state (a KV cache for real models) over ``batch`` rows of one prompt.

    All rows start from the same prompt.  ``append`` feeds one token per row; ``extend`` and
    ``rollback`` exist for batch size 1 (speculative decoding); ``keep_rows`` drops finished rows (and
    may repeat a row: SMC resampling).  A session may also offer ``advance(tokens) -> (vocab,)`` (batch 1:
    feed several tokens in one pass computing only the last distribution), which the trie proposer of
    :mod:`gad.sampling.aligned` uses when present (else ``extend``).
    """

    batch: int

    def logprobs(self) -> np.ndarray:
        """Next-token log-probabilities at every row's current prefix: ``(batch, vocab)`` float64, nats."""
        ...

    def append(self, tokens: Sequence[int]) -> None:
        """Feed one token per row (``len(tokens) == batch``)."""
        ...

    def extend(self, tokens: Sequence[int]) -> np.ndarray:
        """Batch 1: feed ``k`` tokens in one forward pass.

        Returns ``(k, vocab)`` float64: row ``i`` is ``log p(· | prefix · tokens[:i+1])``.  Together with
        :meth:`logprobs` before the call this scores a whole draft with one target pass.
        """
        ...

    def rollback(self, n: int) -> None:
        """Batch 1: forget the last ``n`` fed tokens (KV cache cropped)."""
        ...

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (indices into the current batch, in that order; see :func:`check_keep_rows`)."""
        ...

    @property
    def generated(self) -> list[list[int]]:
        """Tokens fed after the prompt, per row."""
        ...


@runtime_checkable
class LanguageModel(Protocol):
    """What gad needs from a causal LM."""

    vocab: Vocabulary
    name: str

    @property
    def vocab_size(self) -> int:
        """Logits width (== ``vocab.size``)."""
        ...

    def encode_prompt(self, prompt: str, chat: bool = True, special_tokens: bool = False) -> list[int]:
        """Token ids of ``prompt``; with ``chat`` the model's chat template (user turn + generation prompt).

        Control tokens typed in ``prompt`` stay plain text unless ``special_tokens``; a prompt longer
        than the model's context raises :class:`gad.errors.InvalidArgumentError`."""
        ...

    def logprobs(self, contexts: Sequence[Sequence[int]]) -> np.ndarray:
        """``log p(· | context)`` for a batch of full contexts (prompt included): ``(batch, vocab)`` float64."""
        ...

    def session(self, prompt_ids: Sequence[int], batch: int = 1) -> DecodeSession:
        """Start incremental decoding of ``batch`` rows from ``prompt_ids``."""
        ...


def check_rollback(batch: int, n: int, have: int) -> None:
    """Validate ``rollback(n)`` on a session of ``batch`` rows holding ``have`` generated tokens.

    Raises:
        InvalidArgumentError: more than one row, or ``n`` outside ``[0, have]``.
    """
    if batch != 1:
        raise InvalidArgumentError("rollback needs a session of batch 1")
    if not 0 <= n <= have:
        raise InvalidArgumentError(f"cannot roll back {n} tokens (have {have})")


def check_keep_rows(batch: int, rows: Sequence[int]) -> list[int]:
    """Validate ``keep_rows(rows)`` on a session of ``batch`` rows; returns the indices as ints.

    Raises:
        InvalidArgumentError: ``rows`` is empty, or an index is outside ``[0, batch)``.
    """
    out = [int(r) for r in rows]
    if not out or any(not 0 <= r < batch for r in out):
        raise InvalidArgumentError(f"keep_rows needs row indices in [0, {batch}), got {out}")
    return out


class RecomputeSession:
    """A :class:`DecodeSession` that recomputes every step from full contexts (toy models)."""

    def __init__(self, lm: LanguageModel, prompt_ids: Sequence[int], batch: int = 1) -> None:
        if batch < 1:
            raise InvalidArgumentError(f"batch must be >= 1, got {batch}")
        self.lm = lm
        self.prompt = list(prompt_ids)
        self.batch = batch
        self._gen: list[list[int]] = [[] for _ in range(batch)]
        self.forward_passes = 0

    @property
    def generated(self) -> list[list[int]]:
        return self._gen

    def logprobs(self) -> np.ndarray:
        self.forward_passes += 1
        return self.lm.logprobs([self.prompt + g for g in self._gen])

    def append(self, tokens: Sequence[int]) -> None:
        if len(tokens) != self.batch:
            raise InvalidArgumentError(f"append needs {self.batch} tokens, got {len(tokens)}")
        for g, t in zip(self._gen, tokens):
            g.append(int(t))

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (indices into the current batch, in that order)."""
        rows = check_keep_rows(self.batch, rows)
        self._gen = [list(self._gen[r]) for r in rows]  # copies: a row may be duplicated
        self.batch = len(rows)

    def extend(self, tokens: Sequence[int]) -> np.ndarray:
        if self.batch != 1:
            raise InvalidArgumentError("extend needs a session of batch 1")
        base = self.prompt + self._gen[0]
        ctxs = [base + list(tokens[: i + 1]) for i in range(len(tokens))]
        self._gen[0].extend(int(t) for t in tokens)
        self.forward_passes += 1
        return self.lm.logprobs(ctxs) if ctxs else np.zeros((0, self.lm.vocab_size))

    def advance(self, tokens: Sequence[int]) -> np.ndarray:
        """Batch 1: feed ``k ≥ 1`` tokens; returns ``(vocab,)`` ``log p(· | prefix · tokens)`` (one call)."""
        if self.batch != 1 or not tokens:
            raise InvalidArgumentError("advance needs a session of batch 1 and at least one token")
        self._gen[0].extend(int(t) for t in tokens)
        self.forward_passes += 1
        return self.lm.logprobs([self.prompt + self._gen[0]])[0]

    def rollback(self, n: int) -> None:
        check_rollback(self.batch, n, len(self._gen[0]))
        if n:
            del self._gen[0][-n:]


class ToyLM:
    """A language model given by an explicit next-token function (for exact tests and examples).

    Args:
        vocab: the token byte strings and EOS ids.
        next_probs: ``f(context: tuple[int, ...]) -> probabilities (vocab,)``; rows are renormalised.
            ``context`` excludes the prompt (toy prompts are ignored).
        name: model id recorded in saved tries.
    """

    def __init__(self, vocab: Vocabulary, next_probs: Callable[[tuple[int, ...]], Any], name: str = "toy") -> None:
        self.vocab = vocab
        self.tokenizer = vocab
        self.name = name
        self._f = next_probs
        self.calls = 0

    @property
    def vocab_size(self) -> int:
        return self.vocab.size

    @property
    def fingerprint(self) -> str:
        """Identity for saved tries: SHA-256 (24 hex) of the name, the vocabulary's fingerprint and the
        next-token probabilities at the empty context and at each one-token context (a toy model's
        "weights"; computed once, without counting in :attr:`calls`)."""
        fp = getattr(self, "_fp", None)
        if fp is None:
            h = hashlib.sha256(f"{self.name}|{self.vocab.fingerprint()}".encode())
            for ctx in [()] + [(t,) for t in range(min(self.vocab_size, 64))]:
                h.update(np.asarray(self._f(ctx), dtype=np.float64).tobytes())
            fp = self._fp = h.hexdigest()[:24]
        return fp

    def encode_prompt(self, prompt: str, chat: bool = True, special_tokens: bool = False) -> list[int]:
        return []

    def logprobs(self, contexts: Sequence[Sequence[int]]) -> np.ndarray:
        self.calls += 1
        out = np.empty((len(contexts), self.vocab_size))
        for i, c in enumerate(contexts):
            p = np.asarray(self._f(tuple(int(x) for x in c)), dtype=np.float64)
            if p.shape != (self.vocab_size,) or (p < 0).any() or p.sum() <= 0:
                raise InvalidArgumentError(f"toy next_probs returned a bad distribution for context {c}")
            with np.errstate(divide="ignore"):
                out[i] = np.log(p / p.sum())
        return out

    def session(self, prompt_ids: Sequence[int], batch: int = 1) -> RecomputeSession:
        return RecomputeSession(self, prompt_ids, batch)

    @classmethod
    def uniform(cls, vocab: Vocabulary) -> ToyLM:
        """Every token equally likely at every step."""
        return cls(vocab, lambda ctx: np.ones(vocab.size), name="toy-uniform")

    @classmethod
    def from_table(cls, vocab: Vocabulary, table: Mapping[tuple[int, ...], Sequence[float]],
                   default: Sequence[float] | None = None, name: str = "toy-table") -> ToyLM:
        """Next-token probabilities looked up by context; contexts missing from ``table`` use ``default``."""
        dflt = np.ones(vocab.size) if default is None else np.asarray(default, dtype=float)

        def f(ctx: tuple[int, ...]) -> np.ndarray:
            return np.asarray(table.get(ctx, dflt), dtype=float)

        return cls(vocab, f, name=name)
