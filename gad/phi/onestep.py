"""OneStep Φ estimator: the grammatical mass one token ahead (BRIEF §3.2).

``Φ̂(v) = Σ_t p(t | v) · mask(v)[t]`` for a candidate child ``v = u·t`` — an upper bound of ``Φ(v)``
(the grammatical mass of all continuations is at most the mass of the viable first steps).  The
``top`` allowed children with the largest ``p(t|u)`` get one extra forward pass each, batched into a
single ``lm.logprobs`` call; the other allowed children keep the trivial bound ``Φ̂ = 1``, an allowed
EOS gets 1, masked tokens 0.  (Estimator hierarchy of the Future-Validity paper, arXiv 2605.07698;
sampling law of Park et al., NeurIPS 2024, arXiv 2405.21047.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gad.engine.protocols import TokenConstraint
from gad.errors import InvalidArgumentError
from gad.models.base import LanguageModel
from gad.phi.base import PhiEstimator


class OneStepPhi(PhiEstimator):
    """One-step look-ahead Φ̂ (see module doc).

    Args:
        lm: the language model (``logprobs`` over full contexts, ``(batch, vocab)`` float64 nats).
        compiled: the compiled grammar (``matcher()``; its matchers support ``fork``/``accept_token``).
        prompt_ids: prepended to every context.
        top: how many allowed children (by ``p(t|u)``) get an extra forward pass; ≥ 1.
        eos_ids: EOS ids (default ``compiled.eos_ids``).
    Raises:
        InvalidArgumentError: ``top < 1``.
    """

    name = "onestep"

    def __init__(self, lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int] = (), *, top: int = 32,
                 eos_ids: Sequence[int] | None = None, cache: int = 1024) -> None:
        if top < 1:
            raise InvalidArgumentError(f"onestep_top must be >= 1, got {top}")
        self.lm = lm
        self.compiled = compiled
        self.prompt = [int(t) for t in prompt_ids]
        self.top = int(top)
        eos = eos_ids if eos_ids is not None else compiled.eos_ids
        self.eos = frozenset(int(e) for e in eos)
        self._cap = cache
        self._matchers: dict[tuple[int, ...], Any] = {}
        self.extra_passes = 0
        self.model_rows = 0  # look-ahead distributions computed (one per candidate child)
        self.model_positions = 0  # positions of those full-context passes (no KV cache)

    def _matcher(self, key: tuple[int, ...]) -> Any:
        m = self._matchers.get(key)
        if m is None:
            if key and key[:-1] in self._matchers:
                m = self._matchers[key[:-1]].fork()
                ok = m.accept_token(key[-1])
            else:
                m = self.compiled.matcher()
                ok = m.accept_tokens(list(key)) == len(key) if key else True
            if not ok:
                raise InvalidArgumentError(f"OneStep: prefix {list(key)} is not viable under the grammar")
            self._matchers[key] = m
            if len(self._matchers) > self._cap:
                del self._matchers[next(iter(self._matchers))]
        return m

    def child_phi(self, prefix: Sequence[int], logp: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``Φ̂(prefix·t)``: ``(vocab,)`` float64 in ``[0, 1]`` (see module doc).

        Raises:
            InvalidArgumentError: ``prefix`` is not viable.
        """
        mask = np.asarray(mask, dtype=bool)
        logp = np.asarray(logp, dtype=np.float64)
        out = mask.astype(np.float64)
        cand = np.flatnonzero(mask)
        cand = np.asarray([t for t in cand.tolist() if t not in self.eos], dtype=np.int64)
        if cand.size == 0:
            return out
        if cand.size > self.top:
            part = np.argpartition(-logp[cand], self.top - 1)[: self.top]
            cand = cand[part]
        key = tuple(int(t) for t in prefix)
        base = self._matcher(key)
        ctx = self.prompt + list(key)
        lp = np.asarray(self.lm.logprobs([ctx + [int(t)] for t in cand]), dtype=np.float64)
        self.extra_passes += 1
        self.model_rows += len(cand)
        self.model_positions += len(cand) * (len(ctx) + 1)
        for row, t in enumerate(cand.tolist()):
            child = base.fork()
            if not child.accept_token(t):
                raise InvalidArgumentError(f"matcher bug: mask allows {t} but accept_token refuses it")
            cm = np.asarray(child.mask(), dtype=bool)
            out[t] = float(min(1.0, np.exp(lp[row][cm]).sum()))
        return out

    def observe(self, tokens: Sequence[int], finished: bool) -> None:
        """Nothing to learn (drops cached matchers)."""
        self._matchers.clear()

    def flush(self) -> None:
        """Nothing to persist."""
        return None
