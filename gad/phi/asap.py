"""ASAp: adaptive sampling with approximate expected futures (BRIEF §3.3).

Park et al., "Grammar-Aligned Decoding", NeurIPS 2024, arXiv 2405.21047.

The estimator keeps a trie over the token prefixes sampled so far.  A node ``u`` stores only what
sampling needs:

* ``M(u) = Σ_t p(t|u) · mask(u)[t]`` — the allowed next-token mass (EOS included when allowed),
  its EOS part ``E(u)`` and the number of allowed non-EOS tokens with ``p > 0``, recorded the first
  time the sampler asks for ``Φ̂`` at ``u``;
* for every *visited* child ``c = u·t``: ``p(t|u)`` and ``Φ̂(u·t)`` (the child's own node);
* running sums over visited children: ``V(u) = Σ p(c|u)`` and ``S(u) = Σ p(c|u) Φ̂(u·c)``.

Unexplored allowed children count ``Φ̂ = 1``, masked children ``0``, an allowed EOS ``1``.  After each
sample the path is walked leaf → root and ``Φ̂(u) = (M(u) − V(u)) + S(u)``, which equals
``Σ_t p(t|u) Φ̂(u·t) = M(u) − Σ_{visited c} p(c|u)(1 − Φ̂(u·c))`` (BRIEF §3.3) and costs O(1) per
node, so one update costs O(sample length).

Numerics: the brief's form ``M − Σ p(1 − Φ̂)`` cancels catastrophically when a child's ``Φ̂`` is tiny
(a forced chain of unlikely tokens gives ``M − p + pΦ̂`` = 0 in float64), so the unexplored mass
``M − V`` and the explored mass ``S`` are kept apart: once every allowed child is visited the unexplored
mass is exactly ``E(u)``, and ``S`` is re-summed over the children (O(children), amortised O(1): it only
happens when ``S`` drops by a factor 10^8) whenever its running update would cancel.  Values below
float64's range (≈ 10^-308, i.e. a grammatical mass under e^-709) underflow to 0.  ``Φ̂`` never
increases (each update only lowers children) and converges to the exact ``Φ`` once every node reachable
with positive probability has been visited.

No vocabulary-sized array is stored per node: the trie is a struct of flat ``array`` columns
(``parent``, ``token``, ``p``, ``phi``, ``mass``, ``eos``, ``nallow``, ``vsum``, ``ssum``, a visited-child
count and a first-child / next-sibling list) plus one ``dict`` from ``(node, token)`` to the child
index — about 200 bytes per node (see ``benchmarks/bench_asap.py``).

**Batching.**  ``Φ̂`` only changes in :meth:`AsapPhi.observe`, which the sampler calls after each batch,
so every sample of a batch of ``B`` is drawn with the estimates as they stood when the batch started.
``B = 1`` is exactly the paper's sequential algorithm.
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError

_STRIDE = 1 << 32  # child key = node * _STRIDE + token (token ids < 2**32)


class PhiTrie:
    """The ASAp trie: Φ̂ upper bounds over sampled token prefixes.

    Node 0 is the root (the empty prefix, right after the prompt).  Nodes are numbered in creation
    order, so a parent's index is always smaller than its children's.

    Attributes:
        identity: what the trie was built for — ``{"model", "grammar", "prompt", "settings",
            "vocab_size"}`` — or an empty dict while unbound.  :class:`AsapPhi` binds an unbound trie
            and refuses (``TrieMismatchError``) one bound to something else.
        samples: number of samples observed so far.
    """

    def __init__(self, identity: dict[str, Any] | None = None) -> None:
        self.identity: dict[str, Any] = dict(identity or {})
        self.samples = 0
        self.parent = array("q")
        self.token = array("q")
        self.p = array("d")
        self.phi = array("d")
        self.mass = array("d")
        self.eos = array("d")
        self.nallow = array("q")
        self.vsum = array("d")
        self.ssum = array("d")
        self.nvis = array("q")
        self.first = array("q")
        self.next = array("q")
        self._child: dict[int, int] = {}
        self._append(-1, -1, 1.0)

    # --- structure ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.parent)

    def _append(self, parent: int, token: int, p: float) -> int:
        i = len(self.parent)
        self.parent.append(parent)
        self.token.append(token)
        self.p.append(p)
        self.phi.append(1.0)
        self.mass.append(math.nan)
        self.eos.append(0.0)
        self.nallow.append(0)
        self.vsum.append(0.0)
        self.ssum.append(0.0)
        self.nvis.append(0)
        self.first.append(-1)
        self.next.append(-1)
        return i

    def child(self, node: int, token: int) -> int:
        """Index of the visited child ``node·token``, or -1."""
        return self._child.get(node * _STRIDE + token, -1)

    def add_child(self, node: int, token: int, p: float) -> int:
        """Create (or return) the child ``node·token`` with ``p = p(token | node)``.

        Raises:
            InvalidArgumentError: ``p`` is not in ``[0, 1]``.
        """
        key = node * _STRIDE + token
        c = self._child.get(key)
        if c is not None:
            return c
        if not 0.0 <= p <= 1.0 + 1e-9:
            raise InvalidArgumentError(f"child probability must be in [0, 1], got {p}")
        p = min(p, 1.0)
        c = self._append(node, token, p)
        self._child[key] = c
        self.vsum[node] += p
        self.ssum[node] += p  # an unexplored child counts Φ̂ = 1
        self.nvis[node] += 1
        self.next[c] = self.first[node]
        self.first[node] = c
        return c

    def children(self, node: int) -> Iterator[int]:
        """Visited children of ``node`` (any order)."""
        c = self.first[node]
        while c >= 0:
            yield c
            c = self.next[c]

    def node_of(self, prefix: Sequence[int]) -> int:
        """The node of ``prefix`` (ids after the prompt), or -1 when it was never visited."""
        u = 0
        for t in prefix:
            u = self._child.get(u * _STRIDE + int(t), -1)
            if u < 0:
                return -1
        return u

    def phi_of(self, prefix: Sequence[int]) -> float:
        """``Φ̂(prefix)``; 1.0 for a prefix never visited (the unexplored upper bound)."""
        u = self.node_of(prefix)
        return 1.0 if u < 0 else self.phi[u]

    @property
    def root_phi(self) -> float:
        """``Φ̂(ε)``: the current upper bound of the grammatical mass ``Z`` (after the prompt)."""
        return self.phi[0]

    def expand(self, node: int, mass: float, eos_mass: float = 0.0, n_allowed: int = 0) -> None:
        """Record ``M(node)`` (allowed next-token mass), its EOS part and the number of allowed
        non-EOS tokens with ``p > 0``, the first time the node is expanded."""
        if math.isnan(self.mass[node]):
            self.mass[node] = float(min(max(mass, 0.0), 1.0))
            self.eos[node] = float(min(max(eos_mass, 0.0), 1.0))
            self.nallow[node] = int(n_allowed)

    # --- learning -----------------------------------------------------------------------------

    def update_path(self, nodes: Sequence[int]) -> None:
        """Leaf → root update along ``nodes`` (root first, each the parent of the next).

        ``Φ̂(u) ← min(Φ̂(u), unexplored(u) + S(u))`` with ``S(u)`` adjusted by the child's change, O(1)
        per node (amortised).  Nodes never expanded (``M`` unknown) keep ``Φ̂ = 1``.
        """
        phi, ssum, mass, p = self.phi, self.ssum, self.mass, self.p
        old_c = new_c = 0.0
        child = -1
        for u in reversed(nodes):
            if child >= 0 and new_c != old_c:
                s_old = ssum[u]
                s = s_old + p[child] * (new_c - old_c)
                if s < 1e-8 * s_old:  # the running update would cancel: re-sum exactly
                    s = math.fsum(p[c] * phi[c] for c in self.children(u))
                ssum[u] = max(s, 0.0)
            m = mass[u]
            old = phi[u]
            if math.isnan(m):
                new = old
            else:
                e = self.eos[u]
                unexplored = e if self.nvis[u] >= self.nallow[u] else max(e, m - self.vsum[u])
                new = min(old, unexplored + ssum[u])
            phi[u] = new
            old_c, new_c, child = old, new, u

    # --- (de)serialisation helpers ------------------------------------------------------------

    COLUMN_NAMES = ("parent", "token", "p", "phi", "mass", "eos", "nallow", "vsum", "ssum")

    def columns(self) -> dict[str, np.ndarray]:
        """Copies of the node columns as numpy arrays, ``(n_nodes,)`` each, creation order (parents
        first): ``parent``/``token``/``nallow`` int64 (-1 at the root), ``p``/``phi``/``mass``/``eos``/
        ``vsum``/``ssum`` float64 (``mass`` is NaN for nodes never expanded)."""
        return {k: np.array(getattr(self, k)) for k in self.COLUMN_NAMES}

    @classmethod
    def from_columns(cls, cols: dict[str, np.ndarray], identity: dict[str, Any] | None = None,
                     samples: int = 0) -> PhiTrie:
        """Rebuild a trie from :meth:`columns` (vectorised; the child dict is built in one pass).

        Raises:
            InvalidArgumentError: the columns are inconsistent (a parent index not before its child).
        """
        parent = np.ascontiguousarray(cols["parent"], dtype=np.int64)
        n = len(parent)
        if n == 0 or parent[0] != -1 or (n > 1 and (np.any(parent[1:] < 0) or
                                                  np.any(parent[1:] >= np.arange(1, n)))):
            raise InvalidArgumentError("trie columns are inconsistent: every parent must precede its child")
        t = cls(identity)
        t.samples = samples
        for name in ("parent", "token", "nallow"):
            a = array("q")
            a.frombytes(np.ascontiguousarray(cols[name], dtype=np.int64).tobytes())
            setattr(t, name, a)
        for name in ("p", "phi", "mass", "eos", "vsum", "ssum"):
            a = array("d")
            a.frombytes(np.ascontiguousarray(cols[name], dtype=np.float64).tobytes())
            setattr(t, name, a)
        token = np.asarray(cols["token"], dtype=np.int64)
        first = np.full(n, -1, dtype=np.int64)
        nxt = np.full(n, -1, dtype=np.int64)
        if n > 1:
            order = np.argsort(parent[1:], kind="stable") + 1
            ps = parent[order]
            same_next = np.empty(len(order), dtype=bool)
            same_next[:-1] = ps[1:] == ps[:-1]
            same_next[-1] = False
            nxt[order[:-1]] = np.where(same_next[:-1], order[1:], -1)
            is_first = np.empty(len(order), dtype=bool)
            is_first[0] = True
            is_first[1:] = ps[1:] != ps[:-1]
            first[ps[is_first]] = order[is_first]
            keys = parent[1:] * _STRIDE + token[1:]
            t._child = dict(zip(keys.tolist(), range(1, n), strict=True))
        fa, na, va = array("q"), array("q"), array("q")
        fa.frombytes(first.tobytes())
        na.frombytes(nxt.tobytes())
        va.frombytes(np.bincount(parent[1:], minlength=n).astype(np.int64).tobytes())
        t.first, t.next, t.nvis = fa, na, va
        return t


class AsapPhi:
    """The ASAp Φ estimator (Park et al., NeurIPS 2024, arXiv 2405.21047; BRIEF §3.3).

    Args:
        trie: an in-memory :class:`PhiTrie`, a path (loaded if the file exists, written by
            :meth:`flush`), or None for a fresh in-memory trie.
        identity: what the estimates are conditioned on (model id, grammar hash, prompt hash,
            decoding settings, vocabulary size); a trie bound to a different identity is refused.
        eos_ids: EOS token ids (never stored as trie nodes: ``Φ̂(u·EOS) = 1``).
        cache: how many recent prefix → node lookups to keep.
        pending: how many parents' next-token distributions (one ``(vocab,)`` copy each) to keep until
            their sampled child is created; must exceed the batch size (memory: at most
            ``pending × vocab × 8`` bytes).

    Raises:
        TrieMismatchError: ``trie`` was built for another model, grammar, prompt or setting.
        TrieFormatError: ``trie`` is a path to a truncated / corrupted / unknown-version file.
    """

    name = "asap"

    def __init__(self, trie: PhiTrie | str | os.PathLike[str] | None = None, *,
                 identity: dict[str, Any] | None = None, eos_ids: Sequence[int] = (),
                 cache: int = 4096, pending: int = 128) -> None:
        from .trie_io import check_identity, load_trie

        self.path: str | None = None
        self.identity = dict(identity or {})
        if trie is None:
            self.trie = PhiTrie(self.identity)
        elif isinstance(trie, PhiTrie):
            if trie.identity:
                check_identity(trie.identity, self.identity, where="in-memory trie")
            else:
                trie.identity = dict(self.identity)
            self.trie = trie
        elif isinstance(trie, (str, os.PathLike)):
            self.path = os.fspath(trie)
            if os.path.exists(self.path):
                self.trie = load_trie(self.path, expected=self.identity)
            else:
                self.trie = PhiTrie(self.identity)
        else:
            raise InvalidArgumentError(f"trie must be a PhiTrie, a path or None, got {type(trie).__name__}")
        self.eos = frozenset(int(e) for e in eos_ids)
        self._eos_arr = np.asarray(sorted(self.eos), dtype=np.int64)
        self._cap = max(64, int(cache))
        self._pending_cap = max(8, int(pending))
        self._recent: dict[tuple[int, ...], int] = {}
        self._pending: dict[int, np.ndarray] = {}

    # --- PhiEstimator ---------------------------------------------------------------------------

    def child_phi(self, prefix: Sequence[int], logp: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``Φ̂(prefix·t)`` for every token: ``(vocab,)`` float64 in ``[0, 1]``.

        ``mask`` as float, with every visited child overwritten by its current ``Φ̂``.  Also expands the
        node of ``prefix`` (records ``M``) and keeps a copy of ``log p(·|prefix)`` until
        the chosen child is created (a bounded LRU of ``pending`` entries).

        Args:
            prefix: ids generated after the prompt.
            logp: ``log p(·|prefix)``, ``(vocab,)`` float64, nats, whole vocabulary, temperature 1.
            mask: ``(vocab,)`` bool grammar mask at ``prefix``.
        Raises:
            InvalidArgumentError: shapes disagree, or ``prefix``'s parent was never expanded by
                ``child_phi`` (its ``p(t|u)`` is unknown).
        """
        logp = np.asarray(logp)
        mask = np.asarray(mask, dtype=bool)
        if logp.shape != mask.shape or logp.ndim != 1:
            raise InvalidArgumentError(f"logp {logp.shape} and mask {mask.shape} must both be (vocab,)")
        key = tuple(map(int, prefix))
        node = self._node_for(key)
        trie = self.trie
        if math.isnan(trie.mass[node]):
            pv = np.exp(logp[mask])
            pe = np.exp(logp[self._eos_arr[mask[self._eos_arr]]])
            trie.expand(node, float(pv.sum()), float(pe.sum()),
                        int(np.count_nonzero(pv > 0)) - int(np.count_nonzero(pe > 0)))
        self._remember(self._pending, node, logp.copy(), self._pending_cap)
        out = mask.astype(np.float64)
        phi, tok = trie.phi, trie.token
        for c in trie.children(node):
            t = tok[c]
            if mask[t]:
                out[t] = phi[c]
        return out

    def observe(self, tokens: Sequence[int], finished: bool) -> None:
        """Learn from one sample: walk its path leaf → root, O(1) per node (EOS is not a node)."""
        trie = self.trie
        nodes = [0]
        u = 0
        for t in tokens:
            t = int(t)
            if t in self.eos:
                break
            u = trie.child(u, t)
            if u < 0:
                break
            nodes.append(u)
        trie.update_path(nodes)
        trie.samples += 1

    def flush(self) -> None:
        """Persist the trie when it was given as a path (atomic: temp file + fsync + rename)."""
        if self.path is not None:
            from .trie_io import save_trie

            save_trie(self.trie, self.path)

    # --- internals -----------------------------------------------------------------------------

    def _remember(self, d: dict, key: Any, value: Any, cap: int | None = None) -> None:
        d.pop(key, None)
        d[key] = value
        if len(d) > (cap or self._cap):
            del d[next(iter(d))]

    def _node_for(self, key: tuple[int, ...]) -> int:
        node = self._recent.get(key)
        if node is not None:
            return node
        if not key:
            node = 0
        else:
            parent = self._recent.get(key[:-1])
            if parent is None:
                parent = self.trie.node_of(key[:-1])
            if parent < 0:
                raise InvalidArgumentError(
                    f"ASAp: child_phi was never called at the parent of a prefix of length {len(key)}")
            t = key[-1]
            node = self.trie.child(parent, t)
            if node < 0:
                pend = self._pending.get(parent)
                if pend is None:
                    raise InvalidArgumentError(
                        "ASAp: p(t|u) of a new child is unknown; call child_phi at the parent first "
                        "(or raise the estimator's cache above 4 x batch size)")
                node = self.trie.add_child(parent, t, math.exp(float(pend[t])))
        self._remember(self._recent, key, node)
        return node
