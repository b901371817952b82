"""Exact Φ, Z and Q* by enumerating the token trie of a grammar (BRIEF §3.4).

Every grammatical token sequence — all tokenizations, not only the canonical one — with at most
``max_len`` tokens before EOS is enumerated breadth-first.  Dead branches are pruned with the grammar
mask (one matcher fork per node) and the model is called once per batch of frontier prefixes.

**Truncation.**  Sequences with more than ``max_len`` tokens before EOS are dropped, so the ``Z`` and
``Φ`` reported are those of the language truncated at ``max_len`` tokens: lower bounds of the untruncated
values, equal to them when the model puts no mass on longer grammatical sequences (finite languages,
or toy models that force EOS).  Children with ``p(t|u) = 0`` are pruned as well (they carry no mass).

Definitions (Park et al., "Grammar-Aligned Decoding", NeurIPS 2024, arXiv 2405.21047):
``Z = Σ_w P(w) 1[decode(w) ∈ L(G)]``, ``Q*(w) = P(w) 1[…] / Z``, ``Φ(u) = Σ_{w ⊒ u} P(w | u) 1[…]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gad.engine.protocols import TokenConstraint
from gad.errors import EnumerationBudgetError, InvalidArgumentError
from gad.models.base import LanguageModel
from gad.phi.base import PhiEstimator


@dataclass
class Enumeration:
    """The result of :func:`enumerate_language`.

    Attributes:
        Z: total probability (after the prompt) of grammatical sequences with ≤ ``max_len`` tokens.
        max_len: the token-length bound (EOS excluded).
        sequences: complete sequence (ids, EOS excluded) → ``P(w)`` with ``P(EOS|w)`` summed over every
            allowed EOS id (unnormalised; divide by ``Z`` for ``Q*``).
        phi: every visited prefix → its exact (truncated) ``Φ``.
        n_nodes: number of prefixes visited.
        decode: token ids → bytes (the vocabulary's decoder).
    """

    Z: float
    max_len: int
    sequences: dict[tuple[int, ...], float]
    phi: dict[tuple[int, ...], float]
    n_nodes: int
    decode: Any = field(repr=False, default=None)

    def q_tokens(self) -> dict[tuple[int, ...], float]:
        """``Q*`` over token sequences (EOS excluded); sums to 1.

        Raises:
            InvalidArgumentError: ``Z == 0`` (no grammatical sequence within the bound).
        """
        if self.Z <= 0:
            raise InvalidArgumentError("Z = 0: no grammatical sequence has positive probability within max_len")
        return {w: pw / self.Z for w, pw in self.sequences.items()}

    def q_strings(self) -> dict[bytes, float]:
        """``Q*`` over decoded byte strings (tokenizations of one string merged); sums to 1."""
        out: dict[bytes, float] = {}
        for w, q in self.q_tokens().items():
            s = self.decode(w)
            out[s] = out.get(s, 0.0) + q
        return out

    def phi_at(self, prefix: Sequence[int]) -> float:
        """Exact ``Φ(prefix)``.

        Raises:
            InvalidArgumentError: ``prefix`` was not visited (not viable, zero probability or too long).
        """
        key = tuple(int(t) for t in prefix)
        if key not in self.phi:
            raise InvalidArgumentError(f"prefix {list(key)} was not visited by the enumeration")
        return self.phi[key]


def enumerate_language(lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int] = (), *, max_len: int,
                       node_budget: int = 200_000, batch_size: int = 256) -> Enumeration:
    """Enumerate every grammatical token sequence of at most ``max_len`` tokens (see module doc).

    Args:
        lm: a :class:`gad.lm.LanguageModel` (``logprobs`` over full contexts, nats).
        compiled: a compiled grammar (``.matcher()``, ``.eos_ids`` or ``.vocab.eos_ids``).
        prompt_ids: prepended to every context.
        max_len: token-length bound (EOS excluded), ≥ 0.
        node_budget: the most prefixes to visit.
        batch_size: frontier prefixes per ``lm.logprobs`` call.
    Returns:
        an :class:`Enumeration`.
    Raises:
        InvalidArgumentError: ``max_len < 0`` or ``node_budget < 1``.
        EnumerationBudgetError: the next level would exceed ``node_budget``; ``estimate`` extrapolates
            the total number of prefixes with the last level's branching factor.
    """
    if max_len < 0 or node_budget < 1 or batch_size < 1:
        raise InvalidArgumentError("max_len must be >= 0, node_budget and batch_size >= 1")
    eos_ids = tuple(compiled.eos_ids)
    eos_arr = np.asarray(eos_ids, dtype=np.int64)
    prompt = [int(t) for t in prompt_ids]
    # node arrays (creation order): parent, log-prob of the edge, eos mass
    parents: list[int] = [-1]
    edge_p: list[float] = [1.0]
    eos_mass: list[float] = [0.0]
    keys: list[tuple[int, ...]] = [()]
    frontier: list[tuple[int, Any]] = [(0, compiled.matcher())]
    depth = 0
    while frontier:
        children: list[tuple[int, int, float, Any]] = []  # (parent node, token, p, matcher)
        for start in range(0, len(frontier), batch_size):
            chunk = frontier[start:start + batch_size]
            lp = np.asarray(lm.logprobs([prompt + list(keys[n]) for n, _ in chunk]), dtype=np.float64)
            for row, (n, m) in enumerate(chunk):
                mask = np.asarray(m.mask(), dtype=bool)
                p = np.exp(lp[row])
                eos_mass[n] = float(p[eos_arr[mask[eos_arr]]].sum())
                if depth == max_len:
                    continue
                allowed = np.flatnonzero(mask & (p > 0))
                for t in allowed.tolist():
                    if t in eos_ids:
                        continue
                    c = m.fork()
                    if not c.accept_token(t):
                        raise InvalidArgumentError(
                            f"matcher bug: mask allows token {t} after {list(keys[n])} but accept_token refuses it")
                    children.append((n, t, float(p[t]), c))
        if len(parents) + len(children) > node_budget:
            b = len(children) / max(1, len(frontier))
            rest = max_len - depth - 1
            more = len(children) * (rest + 1 if b <= 1 else (b ** (rest + 1) - 1) / (b - 1))
            est = int(min(len(parents) + more, 1e18))
            raise EnumerationBudgetError(
                f"exact enumeration would visit more than node_budget={node_budget} prefixes "
                f"(at least {len(parents) + len(children)}, about {est} up to max_len={max_len}); "
                "raise node_budget or lower max_len", estimate=est)
        frontier = []
        for n, t, pt, c in children:
            parents.append(n)
            edge_p.append(pt)
            eos_mass.append(0.0)
            keys.append(keys[n] + (t,))
            frontier.append((len(parents) - 1, c))
        depth += 1
    phi = list(eos_mass)
    for i in range(len(parents) - 1, 0, -1):
        phi[parents[i]] += edge_p[i] * phi[i]
    # P(prefix) top-down
    prob = [1.0] * len(parents)
    for i in range(1, len(parents)):
        prob[i] = prob[parents[i]] * edge_p[i]
    sequences = {keys[i]: prob[i] * eos_mass[i] for i in range(len(parents)) if eos_mass[i] > 0}
    vocab = getattr(compiled, "vocab", None) or getattr(lm, "vocab", None)
    Z = math.fsum(sequences.values())
    return Enumeration(Z=Z, max_len=max_len, sequences=sequences,
                       phi={keys[i]: min(1.0, phi[i]) for i in range(len(parents))},
                       n_nodes=len(parents), decode=vocab.decode if vocab is not None else None)


class ExactPhi(PhiEstimator):
    """Φ estimator that answers the exact (truncated) ``Φ`` from an :class:`Enumeration`.

    Sampling with it draws from ``Q*`` exactly (BRIEF §2).  At a prefix the enumeration did not visit,
    or where every allowed child has ``Φ = 0`` (the length bound), it falls back to the mask (GCD).
    """

    name = "exact"

    def __init__(self, enumeration: Enumeration, eos_ids: Sequence[int]) -> None:
        self.enum = enumeration
        self.eos = tuple(int(e) for e in eos_ids)

    @classmethod
    def from_model(cls, lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int] = (), *, max_len: int = 24,
                   node_budget: int = 200_000, batch_size: int = 256) -> ExactPhi:
        """Enumerate (see :func:`enumerate_language`, which documents the errors) and wrap."""
        e = enumerate_language(lm, compiled, prompt_ids, max_len=max_len, node_budget=node_budget,
                               batch_size=batch_size)
        eos = tuple(compiled.eos_ids)
        return cls(e, eos)

    def child_phi(self, prefix: Sequence[int], logp: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Exact ``Φ(prefix·t)``: ``(vocab,)`` float64; 0 where masked, 1 for an allowed EOS."""
        mask = np.asarray(mask, dtype=bool)
        base = tuple(int(t) for t in prefix)
        if base not in self.enum.phi:
            return mask.astype(np.float64)
        out = np.zeros(mask.shape, dtype=np.float64)
        phi = self.enum.phi
        for t in np.flatnonzero(mask).tolist():
            out[t] = 1.0 if t in self.eos else phi.get(base + (t,), 0.0)
        if not (out > 0).any():
            return mask.astype(np.float64)
        return out

    def observe(self, tokens: Sequence[int], finished: bool) -> None:
        """Nothing to learn: the estimates are exact."""
        return None

    def flush(self) -> None:
        """Nothing to persist."""
        return None
