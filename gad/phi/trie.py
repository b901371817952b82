"""The ASAp Φ̂ trie as flat columns (see :mod:`gad.phi.asap` for the estimator and its numerics).

Persisted by :mod:`gad.phi.trie_io`.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from gad.errors import InvalidArgumentError

_STRIDE = 1 << 32  # child key = node * _STRIDE + token (token ids < 2**32)


def _darr(a: np.ndarray) -> array:
    out = array("d")
    out.frombytes(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return out


def _qarr(a: np.ndarray) -> array:
    out = array("q")
    out.frombytes(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    return out


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
        self.sref = array("d")  # S(u) at its last exact re-sum (in memory only; see update_path)
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
        self.sref.append(0.0)
        self.nvis.append(0)
        self.first.append(-1)
        self.next.append(-1)
        return i

    _NODE_ARRAYS = ("parent", "token", "p", "phi", "mass", "eos", "nallow", "vsum", "ssum", "sref", "nvis",
                    "first", "next")

    def _complete(self) -> bool:
        """Whether the last node creation ran to its end: every node array of one length and every
        node but the root in the child dict (:meth:`add_child` puts it there last)."""
        n = len(self.parent)
        return len(self._child) == n - 1 and all(len(getattr(self, k)) == n for k in self._NODE_ARRAYS)

    def repair(self) -> bool:
        """Undo a node creation cut short (a ``KeyboardInterrupt`` inside :meth:`add_child`, e.g. a
        signal while sampling): the newest node goes unless it was completely made, the child lists,
        visit counts and sums are rebuilt from the parent column and Φ̂ recomputed (:meth:`recompute`).
        Nothing else can be cut short in a way that matters: :meth:`expand` sets ``M`` last (a node
        is expanded once it is set), and :meth:`update_path` only lowers Φ̂ values that
        :meth:`recompute` makes again.  :meth:`add_child` repairs first when it finds such a node (a
        caller that goes on after the interrupt), so there is never more than one.  Returns whether
        there was anything to repair."""
        if self._complete():
            return False
        n = len(self._child) + 1  # the nodes made to the end (a cut-short one is the newest)
        fresh = PhiTrie.from_columns({k: np.array(getattr(self, k)[:n]) for k in self.COLUMN_NAMES},
                                     self.identity, self.samples)
        self.__dict__.update(fresh.__dict__)
        self.recompute()
        return True

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
        n = len(self.parent)
        if len(self.next) != n or len(self._child) != n - 1:  # an earlier creation was cut short
            self.repair()  # (parent first and next last in _append; the child dict last in here)
        if not 0.0 <= p <= 1.0 + 1e-9:
            raise InvalidArgumentError(f"child probability must be in [0, 1], got {p}")
        p = min(p, 1.0)
        c = self._append(node, token, p)
        self.vsum[node] += p
        self.ssum[node] += p  # an unexplored child counts Φ̂ = 1
        self.sref[node] = max(self.sref[node], self.ssum[node])
        self.nvis[node] += 1
        self.next[c] = self.first[node]
        self.first[node] = c
        self._child[key] = c  # last: the node is made once it is here (_complete)
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

    def prefix(self, node: int) -> list[int]:
        """The token ids from the root to ``node`` (the inverse of :meth:`node_of`)."""
        path: list[int] = []
        while node > 0:
            path.append(int(self.token[node]))
            node = int(self.parent[node])
        return path[::-1]

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
        if math.isnan(self.mass[node]):  # (mass last: a node is expanded once it is set)
            self.eos[node] = float(min(max(eos_mass, 0.0), 1.0))
            self.nallow[node] = int(n_allowed)
            self.mass[node] = float(min(max(mass, 0.0), 1.0))

    # --- learning -----------------------------------------------------------------------------

    def update_path(self, nodes: Sequence[int]) -> None:
        """Leaf → root update along ``nodes`` (root first, each the parent of the next).

        ``Φ̂(u) ← min(Φ̂(u), unexplored(u) + S(u))`` with ``S(u)`` adjusted by the child's change, O(1)
        per node (amortised).  Nodes never expanded (``M`` unknown) keep ``Φ̂ = 1``.
        """
        phi, ssum, mass, p, sref = self.phi, self.ssum, self.mass, self.p, self.sref
        old_c = new_c = 0.0
        child = -1
        for u in reversed(nodes):
            if child >= 0 and new_c != old_c:
                s_old = ssum[u]
                s = s_old + p[child] * (new_c - old_c)
                # The running update's rounding error is relative to the S it started from; once S has
                # fallen below half of its value at the last exact re-sum that error would be amplified
                # (a forced chain of improbable tokens loses every digit in a few updates), so re-sum.
                # S only decreases, so a node re-sums at most ~log2(S_max/S_min) ≤ 1100 times.
                if s < 0.5 * sref[u]:
                    s = math.fsum(p[c] * phi[c] for c in self.children(u))
                    sref[u] = s
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

    # --- canonical values and merging ----------------------------------------------------------

    def recompute(self) -> None:
        """Recompute every ``Φ̂``, ``V`` and ``S`` from the trie's structure alone (vectorised, O(n log n)).

        ASAp's ``Φ̂`` after a set of samples is a function of the *set* of visited prefixes with their
        stored ``p(t|u)``, ``M(u)``, ``E(u)`` and allowed counts (BRIEF §3.3: ``Φ̂(u) = Σ_t p(t|u) Φ̂(u·t)``
        with unexplored allowed children at 1, bottom-up), not of the order the samples came in: every
        update along a sample's path recomputes each node on it from its children, and a node's children
        change only when it is on the path.  The incremental updates of :meth:`update_path` equal this up
        to float rounding; here children are summed in token order per parent, so two tries holding the
        same prefixes get bit-identical values however they were built or merged.  Never-expanded nodes
        keep ``Φ̂ = 1``.
        """
        n = len(self)
        parent = np.frombuffer(self.parent, dtype=np.int64)
        token = np.frombuffer(self.token, dtype=np.int64)
        p = np.frombuffer(self.p, dtype=np.float64)
        mass = np.frombuffer(self.mass, dtype=np.float64)
        eos = np.frombuffer(self.eos, dtype=np.float64)
        nallow = np.frombuffer(self.nallow, dtype=np.int64)
        depth = (parent >= 0).astype(np.int64)  # pointer jumping: O(log depth) vectorised passes
        anc = np.where(parent >= 0, parent, 0)
        while anc.any():
            depth, anc = depth + depth[anc], anc[anc]
        phi = np.ones(n)
        vsum = np.zeros(n)
        ssum = np.zeros(n)
        nvis = np.bincount(parent[1:], minlength=n).astype(np.int64) if n > 1 else np.zeros(n, dtype=np.int64)
        order = np.lexsort((token[1:], parent[1:], -depth[1:])) + 1 if n > 1 else np.zeros(0, dtype=np.int64)
        dsorted = depth[order]
        level_ends = np.flatnonzero(np.diff(dsorted)) + 1 if order.size else np.zeros(0, dtype=np.int64)
        bounds = [0, *level_ends.tolist(), order.size]
        known = ~np.isnan(mass)

        def settle(nodes: np.ndarray) -> None:
            k = known[nodes]
            nk = nodes[k]
            une = np.where(nvis[nk] >= nallow[nk], eos[nk], np.maximum(eos[nk], mass[nk] - vsum[nk]))
            phi[nk] = np.minimum(1.0, une + ssum[nk])

        for a, b in zip(bounds[:-1], bounds[1:]):  # deepest level first; children of a level are final
            ch = order[a:b]
            if ch.size == 0:
                continue
            settle(ch[nvis[ch] == 0])  # leaves of this level (inner nodes were settled as parents)
            par = parent[ch]
            starts = np.flatnonzero(np.r_[True, par[1:] != par[:-1]])
            ps = par[starts]
            vsum[ps] = np.add.reduceat(p[ch], starts)
            ssum[ps] = np.add.reduceat(p[ch] * phi[ch], starts)
            settle(ps)
        if n == 1:
            settle(np.zeros(1, dtype=np.int64))
        self.phi = _darr(phi)
        self.vsum = _darr(vsum)
        self.ssum = _darr(ssum)
        self.nvis = _qarr(nvis)

    def merge(self, other: PhiTrie) -> int:
        """Add to this trie every prefix ``other`` visited that this one has not (with ``other``'s
        ``p``, ``M``, ``E`` and allowed count), fill in expansions this trie lacks, then :meth:`recompute`.

        Node indices of this trie are kept (new nodes are appended), so estimators holding indices into
        it stay valid.  ``samples`` is not changed (the caller knows how many samples are new).
        Returns the number of nodes added.
        """
        before = len(self)
        remap = np.empty(len(other), dtype=np.int64)
        remap[0] = 0
        opar, otok, op = other.parent, other.token, other.p
        omass, oeos, onal = other.mass, other.eos, other.nallow
        for j in range(len(other)):
            if j:
                u = int(remap[opar[j]])
                t = int(otok[j])
                c = self._child.get(u * _STRIDE + t)
                if c is None:
                    c = self.add_child(u, t, op[j])
                remap[j] = c
            i = int(remap[j])
            if math.isnan(self.mass[i]) and not math.isnan(omass[j]):
                self.mass[i], self.eos[i], self.nallow[i] = omass[j], oeos[j], onal[j]
        self.recompute()
        return len(self) - before

    def canonical(self) -> dict[tuple[int, ...], tuple[float, float, float, float, int]]:
        """Every node by its token path: ``path -> (p, Φ̂, M, E, allowed count)`` (for comparing tries
        node by node whatever order their nodes were created in)."""
        paths: list[tuple[int, ...]] = [()]
        for i in range(1, len(self)):
            paths.append(paths[self.parent[i]] + (self.token[i],))
        return {paths[i]: (self.p[i], self.phi[i], self.mass[i], self.eos[i], self.nallow[i])
                for i in range(len(self))}

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
            f = array("d")
            f.frombytes(np.ascontiguousarray(cols[name], dtype=np.float64).tobytes())
            setattr(t, name, f)
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
        t.sref = array("d", t.ssum)
        return t
