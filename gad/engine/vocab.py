"""A tokenizer's vocabulary as byte strings: what the grammar mask is computed over.

Supports byte-level BPE (GPT-2 / Llama-3 / SmolLM2 style, where each byte is written as a printable
unicode character, e.g. ``Ġ`` for a space) and SentencePiece vocabularies with byte fallback
(``▁`` for a space, ``<0xAB>`` tokens for raw bytes).  Special tokens (``<|im_start|>``, ``<s>`` …)
map to ``None``: the mask never allows them inside content; the EOS ids are allowed exactly when the
prefix is a complete sentence of the grammar.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from gad.errors import InvalidArgumentError, TokenizerError


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's ``bytes_to_unicode`` table: printable char -> byte value."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@dataclass(frozen=True)
class Vocabulary:
    """The byte string of every token id.

    Attributes:
        tokens: ``tokens[i]`` is the bytes token ``i`` decodes to, or ``None`` for a special token
            that may never appear inside grammar content.  ``len(tokens)`` is the model's vocabulary
            size (the logits' last dimension), padded with ``None`` past the tokenizer's own size.
        eos_ids: the end-of-sequence ids (several are allowed); allowed iff the prefix is complete.
        name: a label for caches and messages.
    """

    tokens: tuple[bytes | None, ...]
    eos_ids: tuple[int, ...]
    name: str = "vocab"
    _fingerprint: list[str] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        for i, t in enumerate(self.tokens):
            if t is not None and not isinstance(t, bytes):
                raise InvalidArgumentError(
                    f"token {i} is {type(t).__name__} ({t!r:.40}); Vocabulary tokens must be bytes or None "
                    "(Vocabulary.from_strings encodes str)")
        if not self.eos_ids:
            raise InvalidArgumentError("Vocabulary needs at least one EOS id (argument eos_ids)")
        for e in self.eos_ids:
            if isinstance(e, bool) or not isinstance(e, int):
                raise InvalidArgumentError(f"eos id {e!r} is not an integer (argument eos_ids)")
            if not 0 <= e < len(self.tokens):
                raise InvalidArgumentError(f"eos id {e} is outside the vocabulary (size {len(self.tokens)})")

    @property
    def size(self) -> int:
        """Number of token ids (the mask's length)."""
        return len(self.tokens)

    def fingerprint(self) -> str:
        """A stable hash of the token bytes and EOS ids (keys the on-disk compile cache)."""
        if not self._fingerprint:
            h = hashlib.sha256()
            for t in self.tokens:
                h.update(b"\xff\xfe" if t is None else len(t).to_bytes(2, "little") + t)
            h.update(repr(tuple(self.eos_ids)).encode())
            self._fingerprint.append(h.hexdigest()[:24])
        return self._fingerprint[0]

    def decode(self, ids: Iterable[int]) -> bytes:
        """Concatenated bytes of ``ids``; EOS and special tokens contribute nothing."""
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t is not None and i not in self.eos_ids:
                out += t
        return bytes(out)

    @classmethod
    def from_strings(cls, tokens: Sequence[str | bytes | None], eos_ids: Sequence[int] | None = None,
                     name: str = "toy") -> Vocabulary:
        """A small hand-written vocabulary (tests, toys).  If ``eos_ids`` is None an EOS token is appended."""
        toks: list[bytes | None] = [t.encode() if isinstance(t, str) else bytes(t) if isinstance(t, bytearray)
                                    else t for t in tokens]
        if eos_ids is None:
            toks.append(None)
            eos_ids = [len(toks) - 1]
        if isinstance(eos_ids, (str, bytes)):
            raise InvalidArgumentError(f"eos_ids must be a sequence of integers, got {eos_ids!r}")
        ids = []
        for e in eos_ids:
            if isinstance(e, (bool, np.bool_)) or not isinstance(e, (int, np.integer)):
                raise InvalidArgumentError(f"eos id {e!r} is not an integer (argument eos_ids)")
            ids.append(int(e))
        return cls(tuple(toks), tuple(ids), name)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, vocab_size: int | None = None,
                       eos_ids: Sequence[int] | None = None) -> Vocabulary:
        """Map a Hugging Face tokenizer's ids to bytes.

        Args:
            tokenizer: a ``transformers`` tokenizer (fast or slow), or a :class:`Vocabulary` (returned).
            vocab_size: the model's logits width; ids past the tokenizer's size become ``None``.
            eos_ids: EOS ids; default the tokenizer's ``eos_token_id``.
        Raises:
            TokenizerError: the vocabulary is neither byte-level BPE nor SentencePiece-like.
        """
        if isinstance(tokenizer, Vocabulary):
            return tokenizer
        try:
            n_tok = len(tokenizer)
            pieces = tokenizer.convert_ids_to_tokens(list(range(n_tok)))
        except Exception as exc:  # noqa: BLE001 - any tokenizer failure becomes a typed error
            raise TokenizerError(f"cannot read the tokenizer's vocabulary: {exc}") from exc
        size = max(vocab_size or 0, n_tok)
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        for i, tok in added.items():
            if getattr(tok, "special", False):
                special.add(int(i))
        byte_level = _is_byte_level(tokenizer, pieces)
        bd = _byte_decoder()
        out: list[bytes | None] = []
        for i, piece in enumerate(pieces):
            if piece is None or i in special:
                out.append(None)
                continue
            if i in added and not getattr(added[i], "special", False):
                out.append(str(added[i].content).encode("utf-8"))
                continue
            if byte_level:
                try:
                    out.append(bytes(bd[c] for c in piece))
                except KeyError:
                    out.append(piece.encode("utf-8"))
            else:
                m = _BYTE_FALLBACK.match(piece)
                if m:
                    out.append(bytes([int(m.group(1), 16)]))
                else:
                    out.append(piece.replace("\u2581", " ").encode("utf-8"))
        out.extend([None] * (size - len(out)))
        if eos_ids is None:
            e = getattr(tokenizer, "eos_token_id", None)
            if e is None:
                raise TokenizerError("the tokenizer has no eos_token_id; pass eos_ids explicitly")
            eos_ids = [e]
        name = str(getattr(tokenizer, "name_or_path", "") or "tokenizer")
        return cls(tuple(out), tuple(sorted(set(int(e) for e in eos_ids))), name)


def _is_byte_level(tokenizer: Any, pieces: Sequence[str | None]) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        dec = repr(getattr(backend, "decoder", ""))
        if "ByteLevel" in dec:
            return True
        if "ByteFallback" in dec or "Metaspace" in dec or "Replace" in dec:
            return False
    sample = [p for p in pieces[:5000] if p]
    spaces_g = sum("Ġ" in p for p in sample)
    spaces_sp = sum("\u2581" in p for p in sample)
    return spaces_g > spaces_sp
