"""A Hugging Face ``LogitsProcessor`` that constrains ``model.generate`` to a grammar (GCD).

    from gad import GrammarLogitsProcessor
    proc = GrammarLogitsProcessor(compiled)            # compiled = gad.compile(grammar, lm.vocab)
    model.generate(ids, logits_processor=[proc], ...)

At each call every row's generated prefix (the ids after the prompt) is looked up in a cache of
matchers keyed by that prefix; an unseen prefix forks the matcher of its longest cached prefix and
advances it.  Repeated prefixes (several rows, beam search reordering rows, a rolled-back prefix in
assisted generation) therefore all work without the processor tracking row identities.

A row that has already emitted EOS (``num_return_sequences > 1``, batches: Hugging Face keeps
sampling every row and pads the finished ones) may only produce EOS or the pad id — never an
all-``-inf`` row, which made ``do_sample=True`` fail with ``probability tensor contains inf/nan``.

One processor may serve several ``generate`` calls: when the prompt length was inferred, a call whose
first ``prompt_length`` columns are not one of the remembered prompt rows (or that is narrower
than them) starts afresh.  A new prompt that *extends* the previous one with exactly the
tokens generated last time is indistinguishable from a continuation: call :meth:`reset` between
such calls.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from gad.engine.protocols import TokenConstraint
from gad.errors import InvalidArgumentError


class GrammarLogitsProcessor:
    """Sets the logits of grammar-disallowed tokens to ``-inf``.

    Args:
        compiled: a compiled grammar (``gad.compile(...)``) over the model's vocabulary.
        prompt_length: number of prompt columns in ``input_ids`` (left padding included); default: the
            width of ``input_ids`` at the first call (i.e. the processor is fresh for each ``generate``).
        max_cached: matchers kept (least recently used ones are dropped).
        pad_token_id: also allowed in finished rows (default: EOS ids only, which is enough for
            Hugging Face, which writes the pad id into finished rows itself).

    A row that has emitted EOS, or whose prefix the grammar refuses (e.g. it ended with EOS and is now
    padded), may only produce EOS ids (and ``pad_token_id``).
    """

    def __init__(self, compiled: TokenConstraint, prompt_length: int | None = None, max_cached: int = 4096,
                 pad_token_id: int | None = None) -> None:
        if not hasattr(compiled, "matcher"):
            raise InvalidArgumentError("compiled must be a compiled grammar (gad.compile(...)), "
                                       f"got {type(compiled).__name__}")
        if prompt_length is not None and prompt_length < 0:
            raise InvalidArgumentError(f"prompt_length must be >= 0, got {prompt_length}")
        self.compiled = compiled
        self.prompt_length = prompt_length
        self.max_cached = max_cached
        self._root = compiled.matcher()
        self._cache: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._dead: set[tuple[int, ...]] = set()
        self._inferred = False
        vs = int(getattr(compiled, "vocab_size", len(self._root.mask())))
        self._eos_only = np.zeros(vs, dtype=bool)
        self._eos_only[list(compiled.eos_ids)] = True
        if pad_token_id is not None:
            if not 0 <= int(pad_token_id) < vs:
                raise InvalidArgumentError(f"pad_token_id {pad_token_id} is outside the vocabulary (size {vs})")
            self._eos_only[int(pad_token_id)] = True
        # the prompt rows of the current generate (when the prompt length is inferred)
        self._prompt: set[tuple[int, ...]] | None = None

    def reset(self) -> None:
        """Forget cached prefixes and the inferred prompt length (reuse for another ``generate``)."""
        self._cache.clear()
        self._dead.clear()
        self._prompt = None
        if self._inferred:
            self.prompt_length = None
            self._inferred = False

    def matcher_for(self, prefix: tuple[int, ...]) -> Any | None:
        """The matcher after ``prefix`` (generated ids), or None when the grammar refuses the prefix."""
        if not prefix:
            return self._root
        hit = self._cache.get(prefix)
        if hit is not None:
            self._cache.move_to_end(prefix)
            return hit
        if prefix in self._dead:
            return None
        k = len(prefix) - 1
        base = self._root
        while k > 0:
            m = self._cache.get(prefix[:k])
            if m is not None:
                base = m
                break
            if prefix[:k] in self._dead:
                self._dead.add(prefix)
                return None
            k -= 1
        m = base.fork()
        for t in prefix[k:]:
            if not m.accept_token(int(t)):
                self._dead.add(prefix)
                return None
        self._cache[prefix] = m
        if len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)
        return m

    def masks(self, prefixes: list[tuple[int, ...]]) -> np.ndarray:
        """Stacked masks ``(len(prefixes), vocab_size)`` bool for the given generated prefixes."""
        out = np.empty((len(prefixes), self._eos_only.shape[0]), dtype=bool)
        for i, p in enumerate(prefixes):
            m = self.matcher_for(p)
            # a finished row (EOS accepted) keeps EOS / pad allowed: never an all-False row
            finished = m is not None and getattr(m, "is_finished", bool)()
            out[i] = self._eos_only if m is None or finished else m.mask()
        return out

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """HF hook: ``input_ids`` ``(batch, seq)`` long, ``scores`` ``(batch, vocab)`` float -> masked scores.

        Raises:
            InvalidArgumentError: ``scores`` is narrower than the grammar's vocabulary, or the input is
                shorter than ``prompt_length``.
        """
        import torch

        if self._inferred and self._prompt is not None and not self._same_prompt(input_ids):
            self.reset()  # a new generate call reusing this processor
        if self.prompt_length is None:
            self.prompt_length = int(input_ids.shape[1])
            self._inferred = True
            self._prompt = {tuple(r) for r in input_ids[:, : self.prompt_length].tolist()}
        if input_ids.shape[1] < self.prompt_length:
            raise InvalidArgumentError(
                f"input_ids has {input_ids.shape[1]} columns, fewer than prompt_length={self.prompt_length}")
        width = scores.shape[-1]
        vs = self._eos_only.shape[0]
        if width < vs:
            raise InvalidArgumentError(f"scores have {width} columns, the grammar's vocabulary {vs}")
        gen = input_ids[:, self.prompt_length:].tolist()
        masks = self.masks([tuple(r) for r in gen])
        if width > vs:
            masks = np.concatenate([masks, np.zeros((masks.shape[0], width - vs), dtype=bool)], axis=1)
        allowed = torch.from_numpy(masks).to(scores.device)
        return scores.masked_fill(~allowed, float("-inf"))

    def _same_prompt(self, input_ids: Any) -> bool:
        """Does every row of ``input_ids`` ``(batch, seq)`` start with one of the remembered prompts?"""
        k = self.prompt_length or 0
        if self._prompt is None or input_ids.shape[1] < k:
            return False
        return all(tuple(r) in self._prompt for r in input_ids[:, :k].tolist())
