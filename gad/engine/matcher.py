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


_INDEX: dict[int, tuple[object, dict[bytes, int], int]] = {}


def _token_index(vocab) -> tuple[dict[bytes, int], int]:
    """``(bytes -> token id, longest token in bytes)`` over the content tokens of ``vocab`` (EOS and
    special tokens left out; the lowest id wins among equal spellings), built once per vocabulary."""
    hit = _INDEX.get(id(vocab))
    if hit is not None and hit[0] is vocab:
        return hit[1], hit[2]
    eos = set(vocab.eos_ids)
    index: dict[bytes, int] = {}
    for i, t in enumerate(vocab.tokens):
        if t and i not in eos:
            index.setdefault(t, i)
    longest = max((len(t) for t in index), default=0)
    while len(_INDEX) >= 4:
        _INDEX.pop(next(iter(_INDEX)))
    _INDEX[id(vocab)] = (vocab, index, longest)
    return index, longest


def _encode_within(tokenizer: object, data: bytes, vocab) -> list[int]:
    """The tokenizer's encoding of the complete UTF-8 characters of ``data``, cut at the first token
    whose bytes do not continue ``data`` exactly (or that is EOS, special or outside the vocabulary)."""
    if data[:1] and 0x80 <= data[0] <= 0xBF:
        return []  # starts inside a character: the tokenizer cannot spell it
    text = None
    for cut in range(4):
        try:
            text = data[: len(data) - cut].decode("utf-8")
            break
        except UnicodeDecodeError:
            continue
    encode = getattr(tokenizer, "encode", None)
    if not text or encode is None:
        return []
    try:
        ids = encode(text, add_special_tokens=False)
    except TypeError:
        ids = encode(text)
    eos = set(vocab.eos_ids)
    out: list[int] = []
    pos = 0
    for t in ids:
        t = int(t)
        tb = vocab.tokens[t] if 0 <= t < vocab.size and t not in eos else None
        if not tb or data[pos: pos + len(tb)] != tb:
            break
        out.append(t)
        pos += len(tb)
    return out


def _as_array(bitmask: object) -> np.ndarray:
    """``bitmask`` as a numpy array sharing its memory (a CPU torch tensor through ``.numpy()``)."""
    if isinstance(bitmask, np.ndarray):
        return bitmask
    to_numpy = getattr(bitmask, "numpy", None)
    try:
        arr = to_numpy() if to_numpy is not None else None
    except (RuntimeError, TypeError) as e:  # a tensor on an accelerator, or one that needs grad
        raise InvalidArgumentError(f"bitmask must be on the CPU: {e}") from None
    if not isinstance(arr, np.ndarray):
        raise InvalidArgumentError(f"bitmask must be a numpy array or a CPU torch tensor, got {type(bitmask).__name__}")
    return arr


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
        bits = self.compiled.mask_bits(stack, d)
        return np.unpackbits(bits, count=self.compiled.vocab_size, bitorder="little").view(bool)

    def mask_view(self) -> np.ndarray:
        """Like :meth:`mask` but returns the cached read-only array (no copy): do not modify."""
        if self._finished:
            none = np.zeros(self.compiled.vocab_size, dtype=bool)
            none.setflags(write=False)
            return none
        stack, d = self._states[-1]
        return self.compiled.mask_for(stack, d)

    def mask_bits(self) -> np.ndarray:
        """The mask packed: ``(4 * ceil(vocab / 32),)`` uint8, read-only (the cached array: do not
        modify); token ``i`` allowed iff bit ``i % 8`` of byte ``i // 8`` is set.  Read as little-endian
        int32 it is the bitmask layout of xgrammar, llguidance and vLLM (:meth:`fill_next_token_bitmask`).
        All zero once EOS has been accepted."""
        if self._finished:
            none = np.zeros(self.compiled._mask_nbytes, dtype=np.uint8)
            none.setflags(write=False)
            return none
        stack, d = self._states[-1]
        return self.compiled.mask_bits(stack, d)

    def fill_next_token_bitmask(self, bitmask: object, index: int = 0) -> None:
        """Write the mask into row ``index`` of ``bitmask``, a ``(batch, ceil(vocab / 32))`` int32 array
        (numpy, or a CPU torch tensor: xgrammar's ``allocate_token_bitmask`` layout, which vLLM's
        ``apply_grammar_bitmask`` reads): bit ``i % 32`` of word ``i // 32`` set iff token ``i`` is
        allowed.  Words past the vocabulary's are set to 0.

        Raises:
            InvalidArgumentError: ``bitmask`` is not a 2-D int32 array on the CPU, has fewer than
                ``ceil(vocab / 32)`` columns, or ``index`` is not one of its rows.
        """
        arr = _as_array(bitmask)
        if arr.ndim != 2 or arr.dtype != np.int32:
            raise InvalidArgumentError("bitmask must be a (batch, words) int32 array or CPU tensor, got "
                                       f"{getattr(bitmask, 'dtype', type(bitmask).__name__)} "
                                       f"{tuple(getattr(bitmask, 'shape', ()))}")
        row = index if type(index) is int else _as_index(index, "index")
        words = self.compiled._mask_nbytes // 4
        if arr.shape[1] < words:
            raise InvalidArgumentError(f"bitmask has {arr.shape[1]} words per row; the vocabulary "
                                       f"({self.compiled.vocab_size} tokens) needs {words}")
        if not -arr.shape[0] <= row < arr.shape[0]:
            raise InvalidArgumentError(f"index {row} is outside the bitmask's {arr.shape[0]} rows")
        out = arr[row]
        out[:words] = self.mask_bits().view("<i4")
        out[words:] = 0

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

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        """Jump-forward: the longest byte string every grammatical continuation of the prefix starts with.

        Byte by byte, while the text is not complete (EOS not allowed: a complete text may stop here)
        and exactly one of the 256 byte values keeps the prefix viable, that byte is forced.  Exact
        under the same semantics as :meth:`mask` and :meth:`accept_bytes`: every lexing hypothesis
        is followed, the parser's viability is checked, and a multi-byte UTF-8 character comes out
        byte by byte (forced only where the automaton leaves a single continuation byte).  Keys,
        ``":`` and ``,"`` in schema JSON and a case-sensitive keyword after its first letters come
        out forced (sql.lark's keywords are case-insensitive: each letter has two spellings, nothing
        is forced there).  The matcher's state is unchanged.

        Cost: per forced byte one vectorised look-up of the lexer automaton's transition-table rows
        (:meth:`gad.engine.compiler.CompiledGrammar.next_bytes`) and one one-byte automaton step
        (instead of 256 one-byte steps); no mask is computed.

        Args:
            max_bytes: longest string returned (bytes, >= 0).
        Returns:
            the forced bytes (``b""`` when nothing is forced, the text is complete, or EOS was accepted).
        Raises:
            InvalidArgumentError: ``max_bytes`` not an integer or negative.
        """
        limit = _as_index(max_bytes, "max_bytes")
        if limit < 0:
            raise InvalidArgumentError(f"max_bytes must be >= 0, got {limit}")
        if self._finished:
            return b""
        cg = self.compiled
        stack, d = self._states[-1]
        out = bytearray()
        while len(out) < limit and not cg.is_complete(stack, d):
            idx = np.flatnonzero(cg.next_bytes(stack, d))
            if idx.size != 1:
                break
            b = int(idx[0])
            nxt = cg.step_bytes(stack, d, bytes((b,)))
            if nxt is None:  # pragma: no cover - next_bytes and step_bytes share one semantics
                break
            out.append(b)
            stack, d = nxt
        return bytes(out)

    def forced_tokens(self, max_bytes: int = 64, tokenizer: object = None) -> list[int]:
        """Jump-forward in tokens: canonical token ids spelling (a prefix of) :meth:`forced_bytes`.

        With ``tokenizer`` (a Hugging Face tokenizer: ``encode(text, add_special_tokens=False)``), its
        own encoding of the forced text, kept token by token while each token's bytes continue the
        forced bytes exactly (no token crosses past them: what follows is the model's free choice, so
        a token spanning that boundary is not certain) and the mask allows it at its step.  What it
        leaves (an incomplete UTF-8 character at either end; everything from its first token that
        disagrees with the bytes, e.g. a SentencePiece ``▁`` prefix), and everything when no
        tokenizer is given, is spelled by greedy longest match over the vocabulary: at each position
        the longest token that is a prefix of the remaining forced bytes and that the mask allows.
        Special tokens and EOS are never used.  The last token
        is the one a model may still merge with the free text after it (``":`` + ``"`` as ``":"``):
        a drafter's guess that the target verifies.  The matcher's state is unchanged.

        Args:
            max_bytes: longest forced string considered (bytes, >= 0).
            tokenizer: None, or an object with ``encode``.
        Returns:
            token ids (possibly empty); their bytes concatenate to a prefix of ``forced_bytes(max_bytes)``.
        Raises:
            InvalidArgumentError: ``max_bytes`` not an integer or negative.
        """
        data = self.forced_bytes(max_bytes)
        if not data:
            return []
        vocab = self.compiled.vocab
        probe = self.fork()
        out: list[int] = []
        pos = 0
        if tokenizer is not None:
            for t in _encode_within(tokenizer, data, vocab):
                if not probe.accept_token(t):
                    break
                out.append(t)
                pos += len(cast(bytes, vocab.tokens[t]))
        index, longest = _token_index(vocab)
        while pos < len(data):
            for j in range(min(len(data), pos + longest), pos, -1):
                g = index.get(data[pos:j])
                if g is not None and probe.accept_token(g):
                    out.append(g)
                    pos = j
                    break
            else:
                break
        return out

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
