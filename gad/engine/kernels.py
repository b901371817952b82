"""Compiled loops of the engine (numba): a lexer automaton run over the vocabulary's byte trie, or over
a set of tokens from given byte offsets; and the lexer automaton itself, built as the product of a
context's terminal automata (:func:`explore_product`, for :class:`gad.engine.lexer.LexerDFA`).

These are the engine's hot loops on a state no mask has reached before: a whole-vocabulary walk
in numpy costs one pass of ~15 array operations per depth of the trie (milliseconds on 49k tokens);
the same walk compiled costs ~10 ns per trie node (`benchmarks/bench_walks.py`).  Each function returns exactly what
the numpy walk of :class:`gad.engine.compiler.CompiledGrammar` it replaces returns (tested equal,
token by token and fork by fork, against a scalar walk in ``tests/engine/test_fast_paths.py``).

The product builds the same automaton as the Python builder, state for state
(``tests/engine/test_lexer_build.py`` checks both against one reference).

numba is a dependency of gad; where it cannot be imported (a venv installed with ``--no-deps``),
:data:`AVAILABLE` is False and the engine keeps its numpy walks and Python builder.  ``GAD_KERNELS=0``
turns the compiled loops off as well (for comparisons; masks are the same either way).  Compiled code is
cached by numba beside this file (or in numba's user cache folder), like Python's own bytecode.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

try:  # pragma: no cover - exercised by the import itself
    from numba import njit

    AVAILABLE = True
except ImportError:  # pragma: no cover - numba is a dependency; a --no-deps venv may lack it
    AVAILABLE = False

#: whether the engine uses the compiled walks (numba importable and ``GAD_KERNELS`` not ``0``)
ENABLED = AVAILABLE and os.environ.get("GAD_KERNELS", "1") != "0"


def _jit(fn: Any) -> Any:
    """``fn`` compiled by numba on first call, its machine code cached on disk where numba finds a
    writable place (beside this file, else its user cache folder); compiled anew in each process
    where it finds none (numba refuses ``cache=True`` there, at decoration)."""
    if not AVAILABLE:
        return fn
    try:
        return njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available" (read-only install, no home)
        return njit(nogil=True)(fn)


# ----------------------------------------------------------------------------------- the byte trie
@_jit
def _bfs_nodes(lens: np.ndarray, lcp: np.ndarray, cols: np.ndarray, n_nodes: int, width: int
               ) -> tuple[np.ndarray, ...]:  # pragma: no cover - compiled
    # nodes in preorder first (each token opens the nodes of its bytes past the prefix it shares with
    # the token before it), with each node's depth, parent and token ranges
    byte = np.empty(n_nodes, np.uint8)
    depth = np.empty(n_nodes, np.int32)
    parent = np.empty(n_nodes, np.int64)
    lo = np.empty(n_nodes, np.int32)
    mid = np.empty(n_nodes, np.int32)
    hi = np.empty(n_nodes, np.int32)
    end_node = np.empty(lens.size, np.int64)
    path = np.full(width + 1, -1, np.int64)  # the open node at each depth
    n = lens.size
    j = 0
    for i in range(n):
        start = lcp[i] if i else 0
        for k in range(start, width + 1):  # nodes deeper than the shared prefix close before token i
            q = path[k]
            if q < 0:
                break
            hi[q] = i
            path[k] = -1
        for k in range(start, lens[i]):
            byte[j] = cols[k, i]
            depth[j] = k
            parent[j] = path[k - 1] if k else -1
            lo[j] = i
            mid[j] = i
            path[k] = j
            j += 1
        end_node[i] = path[lens[i] - 1]
        mid[end_node[i]] = i + 1  # token i ends at its last node (repeated tokens: a range)
    for k in range(width + 1):
        if path[k] >= 0:
            hi[path[k]] = n
    return byte, depth, parent, lo, mid, hi, end_node


def shared_prefix_lengths(lens: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``(n,)`` int64: the bytes each token shares with the one before it, for tokens sorted by their
    bytes (``lens``: ``(n,)`` their lengths; ``cols``: ``(width + 1, n)`` uint8, the byte at each depth,
    0 past a token's end); 0 for the first.  In that order a trie node's tokens are contiguous: token
    ``i`` opens the nodes of its bytes past ``lcp[i]``."""
    lens64 = lens.astype(np.int64)
    n = lens64.size
    lcp = np.zeros(n, dtype=np.int64)
    same = np.arange(1, n)  # the tokens still agreeing with their predecessor on bytes 0..k-1
    for k in range(cols.shape[0]):
        if not same.size:
            break
        same = same[cols[k, same] == cols[k, same - 1]]
        lcp[same] += 1
    if n:
        lcp[1:] = np.minimum(lcp[1:], np.minimum(lens64[1:], lens64[:-1]))  # (bytes past an end read as 0)
    return lcp


class TrieNodes:
    """The vocabulary's byte trie, node by node in breadth-first order (every parent before its
    children, so that one pass computes each node's state from its parent's).

    Tokens are taken in the byte order of ``gad.engine.compiler._VocabTrie`` (positions ``0..n-1``):
    the tokens below a node are a contiguous range of positions.

    Attributes:
        byte: ``(m,)`` uint8 each node's last byte; ``parent``: ``(m,)`` int64 its parent's index
            (-1 at depth 0).
        tok_node: ``(vocab,)`` int64 the node each token id ends at (``m`` for a token not walked:
            EOS, empty).
        cont: ``(c,)`` int64 the nodes some tokens go on past, with ``cont_depth`` ``(c,)`` int32 their
            depth (0: one byte) and ``mid`` / ``hi`` ``(c,)`` int32 the positions of those tokens.
        ids: ``(n,)`` int32 token id at each position; ``cols``: ``(width + 1, n)`` uint8 the byte at
            each depth of each token (0 past its end).
        n_bytes: the bytes of all tokens together (a bound on fork entries of a walk).
        node_fb, cont_fb: ``(width + 1, 257)`` int64: at depth ``k``, the nodes (the ``cont`` entries)
            whose first byte is ``b`` are ``node_fb[k, b]:node_fb[k, b + 1]``; ``pos_fb``: ``(257,)``
            the same for token positions.
    """

    def __init__(self, ids: np.ndarray, lens: np.ndarray, cols: np.ndarray, vocab_size: int) -> None:
        n = lens.size
        lens64 = lens.astype(np.int64)
        lcp = shared_prefix_lengths(lens64, cols)
        m = int(lens64.sum() - lcp[1:].sum()) if n else 0
        width = int(lens64.max()) if n else 0
        byte, depth, parent, lo, mid, hi, end_node = _bfs_nodes(lens64, lcp, cols, m, width)
        order = np.argsort(depth, kind="stable")  # breadth-first, each depth in byte order
        inv = np.empty(m + 1, dtype=np.int64)
        inv[order] = np.arange(m)
        inv[m] = -1  # (parent -1 stays -1)
        self.byte = np.ascontiguousarray(byte[order])
        self.parent = np.ascontiguousarray(inv[parent[order]])
        self.tok_node = np.full(vocab_size, m, dtype=np.int64)
        self.tok_node[ids] = inv[end_node]
        self.tok_node32 = self.tok_node.astype(np.int32)
        self.parent32 = self.parent.astype(np.int32)
        goes_on = mid[order] < hi[order]
        self.cont = np.flatnonzero(goes_on).astype(np.int64)
        self.cont_depth = np.ascontiguousarray(depth[order][goes_on])
        self.mid = np.ascontiguousarray(mid[order][goes_on])
        self.hi = np.ascontiguousarray(hi[order][goes_on])
        self.ids = np.ascontiguousarray(ids, dtype=np.int32)
        self.cols = np.ascontiguousarray(cols)
        self.n_bytes = int(lens64.sum())
        # first-byte ranges: breadth-first order is (depth, prefix) order, so at each depth the nodes
        # (and the nodes tokens go on past) of one first byte are contiguous, as are the tokens
        first = cols[0, lo[order]].astype(np.int64)  # each node's first byte
        bounds = np.arange(width + 1)[:, None] * 256 + np.arange(257)[None, :]  # (width + 1, 257)
        node_key = depth[order].astype(np.int64) * 256 + first
        self.node_fb = np.searchsorted(node_key, bounds).astype(np.int64)
        self.cont_fb = np.searchsorted(node_key[goes_on], bounds).astype(np.int64)
        self.pos_fb = np.searchsorted(cols[0].astype(np.int64), np.arange(257)).astype(np.int64)
        self._scratch: tuple[np.ndarray, ...] | None = None

    def scratch(self) -> tuple[np.ndarray, ...]:
        """Reused buffers of a walk, all int32: node states ``(m + 1,)``; fork entries (fork, token,
        offset), each ``(n_bytes,)``; ending tokens and their states, each ``(vocab,)`` (one set per
        trie: its callers hold the GIL, so walks never overlap)."""
        if self._scratch is None:
            m, v = self.byte.size, self.tok_node.size
            self._scratch = (np.empty(m + 1, np.int32), *(np.empty(self.n_bytes, np.int32) for _ in range(3)),
                             *(np.empty(v, np.int32) for _ in range(2)))
        return self._scratch


@_jit
def _trie_walk(flat: np.ndarray, fork_id: np.ndarray, ok_byte: np.ndarray, d: int,
               live: np.ndarray, byte: np.ndarray, parent: np.ndarray, node_fb: np.ndarray,
               ids: np.ndarray, pos_fb: np.ndarray, tok_node: np.ndarray, cont: np.ndarray, cont_fb: np.ndarray,
               cont_depth: np.ndarray, mid: np.ndarray, hi: np.ndarray, cols: np.ndarray, st: np.ndarray,
               dense: np.ndarray, out_t: np.ndarray, out_s: np.ndarray, seen: np.ndarray,
               gf: np.ndarray, gt: np.ndarray, go: np.ndarray) -> tuple[int, int]:  # pragma: no cover - compiled
    # only the subtrees of the first bytes ``live`` from d; in them, three passes, the first two without
    # unpredictable branches: every node's state (its parent's is known: breadth-first order), every
    # token's end state, then the nodes tokens go on past.  The ending tokens come out sorted by id:
    # through ``dense`` (by id, zero elsewhere; its size > 1) or, for few tokens, sorted at the end.
    for k in range(node_fb.shape[0]):
        for b in live:
            for i in range(node_fb[k, b], node_fb[k, b + 1]):
                p = parent[i]
                s0 = d if p < 0 else st[p]
                st[i] = flat[(s0 << 8) | byte[i]]  # (the dead state's row is all 0: it stays dead)
    ne = 0
    if dense.size > 1:
        for b in live:
            for a in range(pos_fb[b], pos_fb[b + 1]):
                s = st[tok_node[ids[a]]]
                dense[ids[a]] = s
        for t in range(dense.size):  # (the caller reads the ends from ``dense``)
            v = dense[t]
            seen[v] = True
            ne += v != 0
    else:
        for b in live:
            for a in range(pos_fb[b], pos_fb[b + 1]):
                s = st[tok_node[ids[a]]]
                if s != 0:
                    seen[s] = True
                    out_t[ne] = ids[a]
                    out_s[ne] = s
                    ne += 1
        order = np.argsort(out_t[:ne])
        t_sorted = out_t[:ne][order]
        s_sorted = out_s[:ne][order]
        out_t[:ne] = t_sorted
        out_s[:ne] = s_sorted
    return ne, _fork_pass(st, live, cont_fb, cont, fork_id, ok_byte, cont_depth, mid, hi, ids, cols, gf, gt, go)


@_jit
def _fork_pass(st: np.ndarray, live: np.ndarray, cont_fb: np.ndarray, cont: np.ndarray, fork_id: np.ndarray,
               ok_byte: np.ndarray, cont_depth: np.ndarray, mid: np.ndarray, hi: np.ndarray, ids: np.ndarray,
               cols: np.ndarray, gf: np.ndarray, gt: np.ndarray, go: np.ndarray) -> int:  # pragma: no cover - compiled
    # a trie walk's last pass: the nodes tokens go on past, below the first bytes ``live``, depth by
    # depth (breadth-first order); at a node whose state has a fork, its tokens going on pass it,
    # unless their next byte fires the fork's guard.  Returns the count of fork entries written.  With
    # every first byte live, the ranges are all of ``cont`` in order: one range.
    ng = 0
    whole = live.size == 256
    for k in range(1 if whole else cont_fb.shape[0]):
        for bi in range(1 if whole else live.size):
            lo, up = (0, cont.size) if whole else (cont_fb[k, live[bi]], cont_fb[k, live[bi] + 1])
            for j in range(lo, up):
                s = st[cont[j]]
                if s == 0:
                    continue
                f = fork_id[s]
                if f >= 0:
                    k1 = cont_depth[j] + 1
                    for a in range(mid[j], hi[j]):
                        if ok_byte[f, cols[k1, a]]:
                            gf[ng] = f
                            gt[ng] = ids[a]
                            go[ng] = k1
                            ng += 1
    return ng


_ALL_BYTES = np.arange(256, dtype=np.int64)  # (every first byte: _trie_walk_all's fork pass)


@_jit
def _trie_walk_all(flat: np.ndarray, fork_id: np.ndarray, ok_byte: np.ndarray, d: int,
                   byte: np.ndarray, parent: np.ndarray, n_top: int, tok_node: np.ndarray, cont: np.ndarray,
                   cont_fb: np.ndarray, cont_depth: np.ndarray, mid: np.ndarray, hi: np.ndarray, ids: np.ndarray, cols: np.ndarray,
                   st: np.ndarray, dense: np.ndarray, seen: np.ndarray,
                   gf: np.ndarray, gt: np.ndarray, go: np.ndarray) -> tuple[int, int]:  # pragma: no cover - compiled
    # _trie_walk when most first bytes are live: three flat passes over every node, every token id
    # and every node tokens go on past, without the per-(depth, first byte) ranges.  A dead first
    # byte's subtree walks the dead state's row (all 0): its nodes stay dead, at the cost of a few
    # nodes' work.  Same ends, same fork entries in the same order (the last pass is _trie_walk's over
    # every first byte).
    m = byte.size
    d8 = d << 8
    for i in range(n_top):
        st[i] = flat[d8 | byte[i]]
    for i in range(n_top, m):
        st[i] = flat[(st[parent[i]] << 8) | byte[i]]
    st[m] = 0  # (tokens not walked: EOS, empty)
    ne = 0
    for t in range(dense.size):
        v = st[tok_node[t]]
        dense[t] = v
        seen[v] = True
        ne += v != 0
    return ne, _fork_pass(st, _ALL_BYTES, cont_fb, cont, fork_id, ok_byte, cont_depth, mid, hi, ids, cols, gf, gt, go)


@_jit
def _token_walk(flat: np.ndarray, fork_id: np.ndarray, ok_byte: np.ndarray, d: int,
                mat: np.ndarray, lens: np.ndarray, tok: np.ndarray, off: np.ndarray,
                out_t: np.ndarray, out_s: np.ndarray, gf: np.ndarray, gt: np.ndarray, go: np.ndarray
                ) -> tuple[int, int]:  # pragma: no cover - compiled
    ne = 0
    ng = 0
    for j in range(tok.size):
        t = tok[j]
        last = lens[t] - 1
        s = d
        for p in range(off[j], last + 1):
            s = flat[(s << 8) | mat[t, p]]
            if s == 0:
                break
            if p == last:
                out_t[ne] = t
                out_s[ne] = s
                ne += 1
                break
            f = fork_id[s]
            if f >= 0 and ok_byte[f, mat[t, p + 1]]:
                if ng == gf.size:
                    return ne, -1
                gf[ng] = f
                gt[ng] = t
                go[ng] = p + 1
                ng += 1
    return ne, ng


# ------------------------------------------------------------------------------ the engine's calls
def split_by_fork(gf: np.ndarray, gt: np.ndarray, go: np.ndarray, n_forks: int
                  ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Fork id -> (tokens, offsets) from parallel ``(k,)`` entry arrays (fork ids below ``n_forks``,
    token ids, offsets of the next lexeme), each fork's entries in their order in the arrays."""
    if not gf.size:
        return {}
    order = np.argsort(gf.astype(np.int16) if n_forks < 1 << 15 else gf, kind="stable")  # int16: radix sort
    f, t, o = gf[order], gt[order], go[order]
    cuts = np.flatnonzero(f[1:] != f[:-1]) + 1
    lo = [0, *cuts.tolist()]
    hi = [*cuts.tolist(), f.size]
    return {int(f[a]): (t[a:b], o[a:b]) for a, b in zip(lo, hi)}


def walk_vocabulary(dfa: Any, d: int, nodes: TrieNodes, dense_over: int, flat: bool | None = None
                    ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None, np.ndarray,
                               dict[int, tuple[np.ndarray, np.ndarray]], int]:
    """Every content token of the trie walked from state ``d`` of lexer automaton ``dfa``.

    Returns ``(end_tok, end_state, dense, end_states, groups, k)``: when the ``k`` tokens ending inside
    the lexeme are more than ``dense_over``, ``dense`` their ``(vocab,)`` int32 end states by token id (0:
    none) and no sparse arrays (None, None: a wide walk keeps the dense array only, and sparse copies
    would cost ~0.4 MB of fresh pages); else the tokens ``(k,)`` int32 sorted by id with their states
    ``(k,)`` int32, and ``dense`` None.  Then the distinct end states, sorted ``(e,)`` int32, and fork id ->
    ``(tokens, offsets)`` int32 of the tokens passing that fork before their last byte (offset: where
    the next lexeme starts), unless that byte fires the fork's guard.

    ``flat``: walk every node of the trie in three flat passes (:func:`_trie_walk_all`: inside a
    string, 0.36 -> 0.25 ms in ``benchmarks/bench_walks.py``) or only the subtrees of the live first
    bytes (:func:`_trie_walk`); None (the default) picks the flat passes where the tokens starting with
    a live byte are over 7/8 of the vocabulary.  Both give the same arrays, in the same order."""
    st, gf, gt, go, out_t, out_s = nodes.scratch()
    live = np.flatnonzero(dfa.table[d])  # the first bytes not dead from d
    n_live = int(nodes.pos_fb[live + 1].sum() - nodes.pos_fb[live].sum())  # tokens starting with one
    seen = np.zeros(dfa.n_states + 1, dtype=bool)
    if flat if flat is not None else n_live * 8 > nodes.ids.size * 7:  # nearly every subtree: flat passes
        dense = np.empty(nodes.tok_node.size, dtype=np.int32)
        ne, ng = _trie_walk_all(dfa.flat_table, dfa.fork_id, dfa.fork_ok, d, nodes.byte, nodes.parent32,
                                int(nodes.node_fb[0, 256]), nodes.tok_node32, nodes.cont, nodes.cont_fb, nodes.cont_depth,
                                nodes.mid, nodes.hi, nodes.ids, nodes.cols, st, dense, seen, gf, gt, go)
    else:
        dense = np.zeros(nodes.tok_node.size if n_live > dense_over else 1, dtype=np.int32)
        ne, ng = _trie_walk(dfa.flat_table, dfa.fork_id, dfa.fork_ok, d, live, nodes.byte,
                        nodes.parent, nodes.node_fb, nodes.ids, nodes.pos_fb, nodes.tok_node, nodes.cont,
                        nodes.cont_fb, nodes.cont_depth, nodes.mid, nodes.hi, nodes.cols, st, dense, out_t, out_s,
                        seen, gf, gt, go)
    seen[0] = False
    groups = split_by_fork(gf[:ng], gt[:ng], go[:ng], len(dfa.forks))
    states = np.flatnonzero(seen).astype(np.int32)
    if dense.size > 1:  # (the ends are in ``dense`` alone)
        if ne > dense_over:
            return None, None, dense, states, groups, ne
        end_tok = np.flatnonzero(dense).astype(np.int32)
        return end_tok, dense[end_tok], None, states, groups, ne
    return out_t[:ne].copy(), out_s[:ne].copy(), None, states, groups, ne


def walk_tokens(dfa: Any, d: int, mat: np.ndarray, lens: np.ndarray, tok: np.ndarray, off: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Tokens ``tok`` ``(n,)`` walked from state ``d`` of ``dfa``, each from byte ``off`` ``(n,)`` on
    (``mat``: ``(vocab, width)`` uint8 token bytes, ``lens``: ``(vocab,)`` their lengths).

    Returns ``(end_tok, end_state, groups)``: the tokens ending inside the lexeme, in ``tok``'s order,
    with their states, and fork id -> ``(tokens, offsets)`` as :func:`walk_vocabulary`."""
    tok32 = np.array(tok, dtype=np.int32)  # (copies: writable, as load() compiles them)
    off32 = np.array(off, dtype=np.int32)
    n = tok32.size
    out_t = np.empty(n, dtype=np.int32)
    out_s = np.empty(n, dtype=np.int32)
    cap = max(64, 2 * n)
    while True:
        gf = np.empty(cap, dtype=np.int32)
        gt = np.empty(cap, dtype=np.int32)
        go = np.empty(cap, dtype=np.int32)
        ne, ng = _token_walk(dfa.flat_table, dfa.fork_id, dfa.fork_ok, d, mat, lens, tok32, off32,
                             out_t, out_s, gf, gt, go)
        if ng >= 0:
            break
        cap = int(lens[tok32].sum()) + 1 if n else 1  # (a bound: one entry per byte at most)
    return out_t[:ne].copy(), out_s[:ne].copy(), split_by_fork(gf[:ng], gt[:ng], go[:ng], len(dfa.forks))


@_jit
def _fill_sparse(m: np.ndarray, ok: np.ndarray, end_tok: np.ndarray, end_state: np.ndarray
                 ) -> None:  # pragma: no cover - compiled
    for i in range(end_tok.size):
        if ok[end_state[i]]:
            m[end_tok[i]] = True


@_jit
def _count_sort(end_tok: np.ndarray, end_state: np.ndarray, starts: np.ndarray, toks: np.ndarray
                ) -> None:  # pragma: no cover - compiled
    for i in range(end_state.size):
        starts[end_state[i] + 1] += 1
    for s in range(1, starts.size):
        starts[s] += starts[s - 1]
    at = starts[:-1].copy()
    for i in range(end_tok.size):
        s = end_state[i]
        toks[at[s]] = end_tok[i]
        at[s] += 1


def group_by_state(end_tok: np.ndarray, end_state: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tokens ``end_tok`` ``(n,)`` int32 grouped by their end states ``end_state`` ``(n,)`` int32,
    for :func:`fill_by_state`: ``(states (k,) int32 ascending, starts (k + 1,) int64, token ids (n,)
    int32)``, the tokens of ``states[i]`` at ``starts[i]:starts[i + 1]`` in their order in ``end_tok``.
    A counting sort (O(n + max state)): a stable argsort of 48k int32 states takes ~2 ms."""
    n_states = int(end_state.max()) + 1 if end_state.size else 1
    if ENABLED:
        full = np.zeros(n_states + 1, dtype=np.int64)
        toks = np.empty(end_tok.size, dtype=np.int32)
        _count_sort(end_tok, end_state, full, toks)
    else:
        key = end_state.astype(np.int16) if n_states < 1 << 15 else end_state  # int16: radix sort
        toks = end_tok[np.argsort(key, kind="stable")].astype(np.int32)
        full = np.concatenate([[0], np.cumsum(np.bincount(end_state, minlength=n_states))]).astype(np.int64)
    states = np.flatnonzero(full[1:] != full[:-1]).astype(np.int32)
    return states, np.append(full[states], full[-1]), toks


@_jit
def _densify(end_tok: np.ndarray, end_state: np.ndarray, dense: np.ndarray, live: np.ndarray,
             seen: np.ndarray) -> None:  # pragma: no cover - compiled
    for i in range(end_tok.size):
        t = end_tok[i]
        s = end_state[i]
        dense[t] = s
        live[t] = True
        seen[s] = True


def densify(end_tok: np.ndarray, end_state: np.ndarray, vocab_size: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A walk node's end tokens ``end_tok`` ``(n,)`` int32 and states ``end_state`` ``(n,)`` int32 (no
    token twice, no state 0) as dense arrays: ``(vocab_size,)`` int32 end state by token id (0: none),
    ``(vocab_size,)`` bool the tokens that end, and the distinct end states ``(k,)`` int32 ascending.
    One pass (numpy's scatter, bincount and comparison take ~0.4 ms on 48k tokens)."""
    dense = np.zeros(vocab_size, dtype=np.int32)
    end_tok = np.asarray(end_tok, dtype=np.int32)  # (no copy when int32 already: one compiled signature)
    end_state = np.asarray(end_state, dtype=np.int32)
    if ENABLED:
        live = np.zeros(vocab_size, dtype=bool)
        seen = np.zeros(int(end_state.max()) + 1 if end_state.size else 1, dtype=bool)
        _densify(end_tok, end_state, dense, live, seen)
        return dense, live, np.flatnonzero(seen).astype(np.int32)
    dense[end_tok] = end_state
    return dense, dense != 0, np.flatnonzero(np.bincount(end_state)).astype(np.int32)


@_jit
def fill_by_state(m: np.ndarray, ok: np.ndarray, states: np.ndarray, starts: np.ndarray,
                  toks: np.ndarray) -> None:  # pragma: no cover - compiled
    """Set ``m[t]`` ``(vocab,)`` bool for the tokens of every end state ``s`` with ``ok[s]``, the tokens
    grouped by end state: ``toks[starts[i]:starts[i + 1]]`` end in ``states[i]`` (``(k,)`` int32,
    ``starts`` ``(k + 1,)`` int64).  Touches only the tokens that are set, not the whole vocabulary."""
    for i in range(states.size):
        if ok[states[i]]:
            for j in range(starts[i], starts[i + 1]):
                m[toks[j]] = True


def fill(m: np.ndarray, ok: np.ndarray, end_tok: np.ndarray, end_state: np.ndarray) -> None:
    """Set ``m[t]`` ``(vocab,)`` bool for every token ``t`` ending in a state ``s`` with ``ok[s]``
    (``ok``: ``(n_states,)`` bool, False at the dead state 0), from ``end_tok`` / ``end_state``
    ``(k,)`` int32."""
    _fill_sparse(m, ok, end_tok, end_state)


# ------------------------------------------------------------------- lexer automata (the product)
@_jit
def _key_hash(row: np.ndarray, alive: np.ndarray, na: int, n_terms: int) -> tuple[int, int]:  # pragma: no cover - compiled
    # a key's hash and its number of live terminal states, over those states (position and state) at
    # the positions alive[:na] (ascending; every live position among them), its best terminal and its
    # partial-character code: equal keys hash alike whatever their dead positions
    h = np.int64(1469598103934665603)
    m = 0
    for k in range(na):
        j = alive[k]
        v = row[j]
        if v >= 0:
            h = (h ^ np.int64(j)) * np.int64(1099511628211)
            h = (h ^ np.int64(v)) * np.int64(1099511628211)
            m += 1
    h = (h ^ np.int64(row[n_terms] + 2)) * np.int64(1099511628211)
    h = (h ^ np.int64(row[n_terms + 1] + 2)) * np.int64(1099511628211)
    h ^= h >> 29  # (the low bits, which pick the slot, then depend on every value's high bits too)
    h *= np.int64(-4658895280553007687)
    return h ^ (h >> 32), m


@_jit
def _find_or_add(tmp: np.ndarray, alive: np.ndarray, na: int, keys: np.ndarray, n_live: np.ndarray,
                 slots: np.ndarray, cnt: np.ndarray) -> int:  # pragma: no cover - compiled
    # the id of key ``tmp`` (open addressing over ``slots``), added as state cnt[0] when new; the live
    # positions of tmp are among alive[:na], and n_live holds each state's number of live positions, so
    # a state with as many, equal at alive[:na], is equal everywhere
    n_terms = keys.shape[1] - 2
    h, m = _key_hash(tmp, alive, na, n_terms)
    mask = slots.size - 1
    s = h & mask
    while True:
        sid = slots[s]
        if sid < 0:
            n = cnt[0]
            for k in range(n_terms + 2):
                keys[n, k] = tmp[k]
            n_live[n] = m
            slots[s] = n
            cnt[0] = n + 1
            return n
        if n_live[sid] == m and keys[sid, n_terms] == tmp[n_terms] and keys[sid, n_terms + 1] == tmp[n_terms + 1]:
            same = True
            for k in range(na):
                j = alive[k]
                if keys[sid, j] != tmp[j]:
                    same = False
                    break
            if same:
                return sid
        s = (s + 1) & mask


@_jit
def _rehash(keys: np.ndarray, n: int, slots: np.ndarray) -> None:  # pragma: no cover - compiled
    n_terms = keys.shape[1] - 2
    every = np.arange(n_terms)
    mask = slots.size - 1
    for sid in range(1, n):
        h, _ = _key_hash(keys[sid], every, n_terms, n_terms)
        s = h & mask
        while slots[s] >= 0:
            s = (s + 1) & mask
        slots[s] = sid


@_jit
def _close_char(tmp: np.ndarray, alive: np.ndarray, na: int, best: int, n_main: int, no_cut: np.ndarray,
                fin: np.ndarray, off: np.ndarray) -> int:  # pragma: no cover - compiled
    # after one character (``tmp``: the terminals' next states at the alive positions): the first
    # terminal that matches (Lark's order, up to the best one so far), the later main ones cut;
    # returns the new best, or -2 when no main terminal is left alive
    lim = n_main if best < 0 else best + 1
    nb = best
    for k in range(na):
        j = alive[k]
        if j >= lim:
            break
        t = tmp[j]
        if t >= 0 and fin[off[j] + t]:
            nb = j
            break
    if nb >= 0:
        for k in range(na):
            j = alive[k]
            if j > nb and j < n_main and not no_cut[j]:
                tmp[j] = -1
    for k in range(na):
        j = alive[k]
        if j < n_main and tmp[j] >= 0:
            return nb
    return -2


@_jit
def _product_explore(asc: np.ndarray, ae: np.ndarray, fin: np.ndarray, off: np.ndarray, n_main: int,
                     no_cut: np.ndarray, pend: np.ndarray, lead_code: np.ndarray, cls_of: np.ndarray,
                     keys: np.ndarray, n_live: np.ndarray, table: np.ndarray, slots: np.ndarray, cnt: np.ndarray,
                     i: int) -> int:  # pragma: no cover - compiled
    n_terms = off.size
    width = n_terms + 2
    cap = keys.shape[0]
    tmp = np.empty(width, np.int32)
    prev = np.empty(width, np.int32)
    alive = np.empty(n_terms, np.int64)
    base = np.empty(n_terms, np.int64)
    code_id = np.empty(pend.shape[0], np.int64)
    n_cls = 0
    for b in range(128):
        n_cls = max(n_cls, cls_of[b] + 1)
    reps = np.full(n_cls, 128, np.int64)  # each class's first byte
    for b in range(127, -1, -1):
        reps[cls_of[b]] = b
    cls_sid = np.empty(n_cls, np.int64)
    while i < cnt[0]:
        if cnt[0] + 260 > cap:  # room for every successor of this state
            return i
        best = keys[i, n_terms]
        p = keys[i, n_terms + 1]
        na = 0
        for j in range(n_terms):
            tmp[j] = -1
            if keys[i, j] >= 0:
                alive[na] = j
                base[na] = off[j] + keys[i, j]  # (its row in the stacked tables)
                na += 1
        for b in range(128 if p == 0 else 0, 256):  # (a state outside a character writes every ASCII byte below)
            table[i, b] = 0
        if p == 0:
            # one byte per class of ASCII bytes every automaton of the context treats alike, the
            # classes by first byte (so new states are numbered as a byte-by-byte walk finds them)
            have_prev = False
            prev_id = 0
            for c in range(reps.size):
                b = reps[c]
                for k in range(na):
                    tmp[alive[k]] = asc[base[k], b]
                nb = _close_char(tmp, alive, na, best, n_main, no_cut, fin, off)
                if nb == -2:
                    have_prev = False
                    cls_sid[c] = 0
                    continue
                tmp[n_terms] = nb
                tmp[n_terms + 1] = 0
                if have_prev and prev[n_terms] == nb:
                    same = True
                    for k in range(na):
                        if tmp[alive[k]] != prev[alive[k]]:
                            same = False
                            break
                    if same:
                        cls_sid[c] = prev_id
                        continue
                prev_id = _find_or_add(tmp, alive, na, keys, n_live, slots, cnt)
                cls_sid[c] = prev_id
                for k in range(na):
                    prev[alive[k]] = tmp[alive[k]]
                prev[n_terms] = nb
                have_prev = True
            for b in range(128):
                table[i, b] = cls_sid[cls_of[b]]
            # bytes >= 0x80: lead bytes by their UTF-8 class, when a main terminal can read a
            # non-ASCII character; the terminals that cannot are cut inside the character
            hi = False
            for k in range(na):
                if alive[k] < n_main and ae[base[k]] >= 0:
                    hi = True
                    break
            if hi:
                for k in range(na):
                    j = alive[k]
                    tmp[j] = keys[i, j] if ae[base[k]] >= 0 else -1
                tmp[n_terms] = best
                for c in range(code_id.size):
                    code_id[c] = -1
                for b in range(128, 256):
                    c = lead_code[b]
                    if c == 0:
                        continue
                    if code_id[c] < 0:
                        tmp[n_terms + 1] = c
                        code_id[c] = _find_or_add(tmp, alive, na, keys, n_live, slots, cnt)
                    table[i, b] = code_id[c]
        else:
            # inside a character no automaton names: the allowed range of bytes steps alike
            if pend[p, 0] == 1:
                for k in range(na):
                    tmp[alive[k]] = ae[base[k]]
                nb = _close_char(tmp, alive, na, best, n_main, no_cut, fin, off)
                sid = 0
                if nb != -2:
                    tmp[n_terms] = nb
                    tmp[n_terms + 1] = 0
                    sid = _find_or_add(tmp, alive, na, keys, n_live, slots, cnt)
            else:
                for k in range(na):
                    j = alive[k]
                    tmp[j] = keys[i, j]
                tmp[n_terms] = best
                tmp[n_terms + 1] = pend[p, 3]
                sid = _find_or_add(tmp, alive, na, keys, n_live, slots, cnt)
            for b in range(pend[p, 1], pend[p, 2] + 1):
                table[i, b] = sid
        i += 1
    return i


@_jit
def _product_reach(table: np.ndarray, n: int, reach: np.ndarray, cols: np.ndarray) -> None:  # pragma: no cover - compiled
    changed = True
    while changed:
        changed = False
        for s in range(n - 1, 0, -1):
            r = reach[s]
            for k in range(cols.size):
                r |= reach[table[s, cols[k]]]
            if r != reach[s]:
                reach[s] = r
                changed = True


@_jit
def _byte_classes(rows: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    n_rows, n_bytes = rows.shape
    cls = np.empty(n_bytes, np.int32)
    reps = np.empty(n_bytes, np.int64)
    n_cls = 0
    for b in range(n_bytes):
        found = -1
        for c in range(n_cls):
            r = reps[c]
            same = True
            for k in range(n_rows):
                if rows[k, b] != rows[k, r]:
                    same = False
                    break
            if same:
                found = c
                break
        if found < 0:
            reps[n_cls] = b
            found = n_cls
            n_cls += 1
        cls[b] = found
    return cls


def byte_classes(rows: np.ndarray) -> np.ndarray:
    """The classes of the columns of ``rows`` ``(k, bytes)`` int32: ``(bytes,)`` int32, two bytes in one
    class iff their columns are equal, the classes numbered by first byte."""
    return _byte_classes(np.ascontiguousarray(rows, dtype=np.int32))


def _slots_for(cap: int) -> int:
    """Hash slots for up to ``cap`` states: a power of two (slot = hash & (size - 1)), at most half full."""
    return 1 << (2 * cap - 1).bit_length()


def _product_buffers(cap: int, width: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Buffers for ``cap`` states with key rows of up to ``width``: ``(cap, flat keys (cap * width,),
    table (cap, 256), n_live (cap,), hash slots)``, all int32 and unwritten."""
    return (cap, np.empty(cap * width, dtype=np.int32), np.empty((cap, 256), dtype=np.int32),
            np.empty(cap, dtype=np.int32), np.empty(_slots_for(cap), dtype=np.int32))


KEY_WIDTH_MAX = 64  # key row width (terminals + 2) the scratch holds: the compiled build takes <= 62 terminals
SCRATCH_MAX_ROWS = 2048  # (a 2 MB table)
_SCRATCH = threading.local()


def _product_scratch() -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The compiled product's working buffers (:func:`_product_buffers`), kept resident per thread.

    A build writes its states into a table of ``cap`` rows that it then copies out; made afresh per
    build, those pages were new to the process each time (a build of 840 states took ~500 page faults,
    2-5 µs each on the project's VM: most of its time in a MaskBench run).  Kept here, only the copy
    out touches new memory.  :func:`explore_product` replaces them with a grown build's up to
    :data:`SCRATCH_MAX_ROWS` rows (larger builds grow buffers of their own)."""
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = _product_buffers(512, KEY_WIDTH_MAX)
    return bufs


def explore_product(asc: np.ndarray, ae: np.ndarray, fin: np.ndarray, off: np.ndarray, n_main: int,
                    no_cut: np.ndarray, pend: np.ndarray, lead_code: np.ndarray, cls_of: np.ndarray,
                    start: np.ndarray, max_states: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The lexer automaton of one context from its empty lexeme (no guard), as
    :class:`gad.engine.lexer.LexerDFA` builds it in Python, state for state: a breadth-first walk over
    bytes 0-255, states numbered as found (0 dead, 1 the start).

    The terminals' automata come as one stacked table: terminal ``j``'s local state ``q`` is row
    ``off[j] + q`` of ``asc`` ``(rows, 128)`` int32 (next local state per ASCII byte, -1 dead), ``ae``
    ``(rows,)`` int32 (next local state after a non-ASCII character, -1 dead) and ``fin`` ``(rows,)``
    bool (a match).  ``n_main``: the terminals Lark's scanner tries (the others are keyword targets);
    ``no_cut`` ``(terms,)`` bool: never cut by an earlier match (keyword targets).  ``pend``
    ``(codes, 4)`` int32: per partial-character code (0: none) its continuation bytes still needed,
    the allowed range of the next byte and the code after it; ``lead_code`` ``(256,)`` int32 the code
    a lead byte starts (0: not a lead byte).  ``cls_of`` ``(128,)`` int32: a class per ASCII byte, the
    classes numbered by first byte, such that every automaton moves the bytes of a class alike (one
    byte per class is stepped).  ``start`` ``(terms,)`` int32: the initial local states.

    Returns ``(keys, table)``: ``(n, terms + 2)`` int32 rows (local states, -1 dead; best terminal so
    far; partial-character code) and the ``(n, 256)`` int32 transition table; None when the automaton
    needs more than ``max_states`` states."""
    n_terms = off.size
    width = n_terms + 2
    scratch = width <= KEY_WIDTH_MAX  # (the per-thread buffers hold key rows up to that width)
    # (grown 4x when full; rows are written as states are found: no initial values needed)
    cap, flat, table, n_live, slots = _product_scratch() if scratch else _product_buffers(512, width)
    keys = flat[: cap * width].reshape(cap, width)
    keys[0] = -1  # (the dead state: never looked up)
    table[0] = 0
    keys[1, :n_terms] = start
    keys[1, n_terms] = -1
    keys[1, n_terms + 1] = 0
    n_live[1] = int((start >= 0).sum())  # n_live: per state, its live terminal states
    slots.fill(-1)
    _rehash(keys, 2, slots)
    cnt = np.array([2], dtype=np.int64)
    i = 1
    while True:
        i = _product_explore(asc, ae, fin, off, n_main, no_cut, pend, lead_code, cls_of, keys, n_live, table, slots,
                             cnt, i)
        n = int(cnt[0])
        if n > max_states:
            return None
        if i >= n:
            break
        # (the rows found so far copied over; the rest is written as states are found)
        grown = _product_buffers(cap * 4, KEY_WIDTH_MAX if scratch else width)
        cap, flat = grown[0], grown[1]
        old_keys, old_table, old_live = keys, table, n_live
        keys = flat[: cap * width].reshape(cap, width)
        table, n_live, slots = grown[2], grown[3], grown[4]
        keys[:n] = old_keys[:n]
        table[:n] = old_table[:n]
        n_live[:n] = old_live[:n]
        slots.fill(-1)
        _rehash(keys, n, slots)
        if scratch and cap <= SCRATCH_MAX_ROWS:
            _SCRATCH.bufs = grown
    return keys[:n].copy(), table[:n].copy()


def product_reach(table: np.ndarray, reach: np.ndarray, cols: np.ndarray | None = None) -> None:
    """Close ``reach`` ``(n,)`` int64 (bit sets of fork winners, one per state) under the transitions
    of ``table`` ``(n, 256)`` int32 in place: each state's set then holds every winner reachable from it
    (the least fixed point; state 0, dead, keeps its own).  ``cols`` ``(k,)`` int64: bytes whose columns
    hold every successor of every state but the dead one (default: all 256); :func:`explore_product`'s
    table needs only a byte per class of ``cls_of``, per lead code and per continuation range."""
    if cols is None:
        cols = np.arange(256, dtype=np.int64)
    _product_reach(table, table.shape[0], reach, cols)


@_jit
def _blank_row(n: int, karr: np.ndarray, table: np.ndarray) -> None:  # pragma: no cover - compiled
    # a new state's key row (every terminal dead) and transitions (all to the dead state)
    for c in range(karr.shape[1]):
        karr[n, c] = -1
    for b in range(256):
        table[n, b] = 0


@_jit
def _alone_state(g: int, best: int, p: int, n_codes: int, amap: np.ndarray, karr: np.ndarray, table: np.ndarray,
                 st: np.ndarray, cnt: np.ndarray) -> int:  # pragma: no cover - compiled
    # the id of the state where the general terminal alone is alive (local state g, best so far, partial
    # character p; every literal dead), added as state cnt[0] when new; -1 when the buffers are full
    at = (g * 2 + best + 1) * n_codes + p
    sid = amap[at]
    if sid >= 0:
        return sid
    n = cnt[0]
    if n >= karr.shape[0]:
        return -1
    w = karr.shape[1] - 2
    _blank_row(n, karr, table)
    karr[n, 0] = g
    karr[n, w] = best
    karr[n, w + 1] = p
    st[n, 0] = -1
    st[n, 3] = g
    st[n, 4] = best
    st[n, 5] = p
    amap[at] = n
    cnt[0] = n + 1
    return n


@_jit
def _trie_child(jj: int, kk: int, d: int, g2: int, nb: int, parent: int, has_g: bool, col: np.ndarray,
                karr: np.ndarray, table: np.ndarray, st: np.ndarray, cnt: np.ndarray) -> int:  # pragma: no cover - compiled
    # a new state for the trie node of the literals [jj, kk) at depth d (general state g2, best nb), a
    # child of state parent; -1 when the buffers are full
    n = cnt[0]
    if n >= karr.shape[0]:
        return -1
    w = karr.shape[1] - 2
    _blank_row(n, karr, table)
    st[n, 0] = jj
    st[n, 1] = kk
    st[n, 2] = d
    st[n, 3] = g2
    st[n, 4] = nb
    st[n, 5] = 0
    st[n, 6] = parent
    for j in range(jj, kk):
        karr[n, col[j]] = d
    if has_g:
        karr[n, 0] = g2
    karr[n, w] = nb
    karr[n, w + 1] = 0
    cnt[0] = n + 1
    return n


@_jit
def _run_end(lits: np.ndarray, lit_off: np.ndarray, jj: int, hi: int, d: int) -> int:  # pragma: no cover - compiled
    # the end of the run of literals from jj (sorted, all longer than d) with the same byte at d
    b = lits[lit_off[jj] + d]
    kk = jj + 1
    while kk < hi and lits[lit_off[kk] + d] == b:
        kk += 1
    return kk


@_jit
def _trie_product(lits: np.ndarray, lit_off: np.ndarray, col: np.ndarray, has_g: bool, g_asc: np.ndarray,
                  g_ae: np.ndarray, g_fin: np.ndarray, g_start: int, pend: np.ndarray, lead_code: np.ndarray,
                  karr: np.ndarray, table: np.ndarray, st: np.ndarray, win: np.ndarray, reach: np.ndarray) -> int:  # pragma: no cover - compiled
    k = lit_off.size - 1
    w = karr.shape[1] - 2
    n_codes = pend.shape[0]
    n_g = g_asc.shape[0] if has_g else 1
    amap = np.full(n_g * 2 * n_codes, -1, np.int64)
    # st, per state: trie range lo, hi (lo -1: the general terminal alone), depth, general state, best,
    # partial character, and the parent of a trie node; alone, per trie node: a move out of the trie
    alone = np.zeros(karr.shape[0], np.bool_)
    # a trie node's row where it leaves the trie depends on (general state, best) alone: made at the
    # first node with them (its own children's bytes, where the general terminal lives, marked -2 and
    # listed in unk), then copied; the -2 bytes and the node's children are filled in byte order
    row_of = np.full(n_g * 2, -1, np.int64)
    rows = np.empty((n_g * 2, 256), np.int32)
    unk = np.empty((n_g * 2, 128), np.int64)
    n_unk = np.zeros(n_g * 2, np.int64)
    n_out = np.zeros(n_g * 2, np.int64)  # per row made: its moves out of the trie (bytes)
    cnt = np.array([2], np.int64)
    _blank_row(0, karr, table)
    _blank_row(1, karr, table)
    win[0] = -1
    reach[0] = 0
    st[1, 0] = 0
    st[1, 1] = k
    st[1, 2] = 0
    st[1, 3] = g_start
    st[1, 4] = -1
    st[1, 5] = 0
    st[1, 6] = 0
    for j in range(k):
        karr[1, col[j]] = 0
    if has_g:
        karr[1, 0] = g_start
    karr[1, w] = -1
    karr[1, w + 1] = 0
    i = 1
    while i < cnt[0]:
        lo = st[i, 0]
        g = st[i, 3]
        best = st[i, 4]
        p = st[i, 5]
        win[i] = -1
        if lo >= 0:  # a node of the literals' trie: the literals [lo, hi) (sorted) share its d bytes
            hi = st[i, 1]
            d = st[i, 2]
            jj = lo
            while jj < hi and lit_off[jj + 1] - lit_off[jj] == d:  # (literals ending here sort first)
                if best >= 0 and (win[i] < 0 or col[jj] < win[i]) and (not has_g or g_fin[g]):
                    win[i] = col[jj] if has_g else best
                jj += 1
            if not has_g:  # only the children move (prefix-free: a literal ending at a child is alone there)
                while jj < hi:
                    kk = _run_end(lits, lit_off, jj, hi, d)
                    nb = -1
                    for j in range(jj, kk):
                        if lit_off[j + 1] - lit_off[j] == d + 1:
                            nb = col[j]
                    sid = _trie_child(jj, kk, d + 1, 0, nb, i, False, col, karr, table, st, cnt)
                    if sid < 0:
                        return -1
                    table[i, lits[lit_off[jj] + d]] = sid
                    jj = kk
                i += 1
                continue
            if best >= 0 and g_fin[g] and win[i] < 0:
                win[i] = 0
            rc = g * 2 + best + 1
            if row_of[rc] < 0:  # the first node with (g, best): every byte in order
                row_of[rc] = i
                for b in range(128):
                    while jj < hi and lits[lit_off[jj] + d] < b:  # (a child the general terminal dies on)
                        jj += 1
                    g2 = g_asc[g, b]
                    if g2 < 0:
                        rows[rc, b] = 0
                        continue
                    nb = 0 if g_fin[g2] else best
                    if jj < hi and lits[lit_off[jj] + d] == b:
                        kk = _run_end(lits, lit_off, jj, hi, d)
                        sid = _trie_child(jj, kk, d + 1, g2, nb, i, True, col, karr, table, st, cnt)
                        if sid < 0:
                            return -1
                        table[i, b] = sid
                        rows[rc, b] = -2
                        unk[rc, n_unk[rc]] = b
                        n_unk[rc] += 1
                        jj = kk
                        continue
                    sid = amap[(g2 * 2 + nb + 1) * n_codes]
                    if sid < 0:
                        sid = _alone_state(g2, nb, 0, n_codes, amap, karr, table, st, cnt)
                        if sid < 0:
                            return -1
                    table[i, b] = sid
                    rows[rc, b] = sid
                    n_out[rc] += 1
                for b in range(128, 256):
                    rows[rc, b] = 0
                if g_ae[g] >= 0:  # lead bytes >= 0x80: the literals (ASCII) die
                    for b in range(128, 256):
                        c = lead_code[b]
                        if c != 0:
                            sid = _alone_state(g, best, c, n_codes, amap, karr, table, st, cnt)
                            if sid < 0:
                                return -1
                            table[i, b] = sid
                            rows[rc, b] = sid
                            n_out[rc] += 1
                alone[i] = n_out[rc] > 0
            else:
                for b in range(256):
                    table[i, b] = rows[rc, b]
                out = n_out[rc]
                a = 0
                na = n_unk[rc]
                while a < na or jj < hi:
                    bu = unk[rc, a] if a < na else 256
                    bc = lits[lit_off[jj] + d] if jj < hi else 256
                    if bc <= bu:  # a child here
                        kk = _run_end(lits, lit_off, jj, hi, d)
                        g2 = g_asc[g, bc]
                        if rows[rc, bc] > 0:  # (a move out of the trie at the first node)
                            out -= 1
                        if g2 >= 0:
                            sid = _trie_child(jj, kk, d + 1, g2, 0 if g_fin[g2] else best, i, True, col, karr, table, st, cnt)
                            if sid < 0:
                                return -1
                            table[i, bc] = sid
                        jj = kk
                        if bc == bu:
                            a += 1
                    else:  # a child of the first node, not of this one: out of the trie
                        g2 = g_asc[g, bu]
                        nb = 0 if g_fin[g2] else best
                        sid = amap[(g2 * 2 + nb + 1) * n_codes]
                        if sid < 0:
                            sid = _alone_state(g2, nb, 0, n_codes, amap, karr, table, st, cnt)
                            if sid < 0:
                                return -1
                        table[i, bu] = sid
                        out += 1
                        a += 1
                alone[i] = out > 0
        elif p == 0:  # the general terminal alone
            if best >= 0 and g_fin[g]:
                win[i] = 0
            for b in range(128):
                g2 = g_asc[g, b]
                if g2 >= 0:
                    nb = 0 if g_fin[g2] else best
                    sid = amap[(g2 * 2 + nb + 1) * n_codes]
                    if sid < 0:
                        sid = _alone_state(g2, nb, 0, n_codes, amap, karr, table, st, cnt)
                        if sid < 0:
                            return -1
                    table[i, b] = sid
            if g_ae[g] >= 0:  # lead bytes >= 0x80
                for b in range(128, 256):
                    c = lead_code[b]
                    if c != 0:
                        sid = _alone_state(g, best, c, n_codes, amap, karr, table, st, cnt)
                        if sid < 0:
                            return -1
                        table[i, b] = sid
        else:  # inside a character no automaton names: its allowed bytes step alike
            sid = 0
            if pend[p, 0] == 1:
                g2 = g_ae[g]
                if g2 >= 0:
                    sid = _alone_state(g2, 0 if g_fin[g2] else best, 0, n_codes, amap, karr, table, st, cnt)
            else:
                sid = _alone_state(g, best, pend[p, 3], n_codes, amap, karr, table, st, cnt)
            if sid < 0:
                return -1
            for b in range(pend[p, 1], pend[p, 2] + 1):
                table[i, b] = sid
        i += 1
    n = cnt[0]
    # reachable winners: the states out of the trie (the general terminal alone) to a fixed point over
    # their rows; a trie node's are its own, its children's and, when it moves out of the trie, those of
    # the states out of it -- the general terminal's alone ({0}: its states are live, so each reaches a
    # final one), checked here (else reach[0] = -1: the caller closes reach itself)
    for s in range(1, n):
        reach[s] = (1 << win[s]) if win[s] >= 0 else 0
    changed = True
    while changed:
        changed = False
        for s in range(n - 1, 0, -1):
            if st[s, 0] >= 0:
                continue
            r = reach[s]
            for b in range(256):
                r |= reach[table[s, b]]
            if r != reach[s]:
                reach[s] = r
                changed = True
    for s in range(2, n):
        if st[s, 0] < 0 and reach[s] != 1:
            reach[0] = -1
            return n
    for s in range(n - 1, 1, -1):
        if st[s, 0] >= 0:
            if alone[s]:
                reach[s] |= 1
            reach[st[s, 6]] |= reach[s]
    if alone[1]:
        reach[1] |= 1
    return n


def _trie_buffers(cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`trie_product`'s per-state work arrays for ``cap`` states, unwritten: ``(cap, 7)`` int64 (trie
    range, depth, general state, best, partial character, parent), then ``(cap,)`` int64 winners and
    reachable winners."""
    return np.empty((cap, 7), dtype=np.int64), np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)


def trie_product(lits: np.ndarray, lit_off: np.ndarray, col: np.ndarray, n_terms: int,
                 general: tuple[np.ndarray, np.ndarray, np.ndarray, int] | None, pend: np.ndarray,
                 lead_code: np.ndarray, max_states: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The lexer automaton of a context of ASCII literals, with or without one general terminal before
    them, built as the trie of the literals: what :func:`explore_product` builds for it, state for
    state, without a hash table of key rows (each trie node is a state of its own).

    Two shapes (the caller checks them): ``general`` None: the literals are all the context's
    terminals, main, no one a prefix of another (a leaf is where one matches, alone); else the context
    is a general terminal ``G`` (column 0, the only main one) and the literals are its keyword targets
    (Lark's "unless": a lexeme of ``G`` equal to one of them takes its type), as an object's key context
    is with additional properties allowed.  ``general``: G's ``(asc (g, 128) int32, ae (g,) int32,
    fin (g,) bool, initial local state)`` from :meth:`gad.engine.lexer.TerminalAutomaton.byte_tables`.

    ``lits`` ``(bytes,)`` uint8: the literals sorted (as byte strings), concatenated; ``lit_off``
    ``(k + 1,)`` int64 their offsets; ``col`` ``(k,)`` int64 each one's terminal index (its key column).
    ``pend`` / ``lead_code``: as for :func:`explore_product`.

    Returns ``(keys, table, winner, reach)``: the key rows ``(n, n_terms + 2)`` int32 and table
    ``(n, 256)`` int32 as :func:`explore_product` returns them, ``winner`` ``(n,)`` int64 the terminal a
    lexeme closing at each state is (after the keyword rule; -1: it cannot close there), ``reach``
    ``(n,)`` int64 the bit set of the winners reachable from each state (what :func:`product_reach`
    closes); None when the automaton needs more than ``max_states`` states."""
    has_g = general is not None
    if general is None:
        g_asc = np.full((1, 128), -1, dtype=np.int32)
        g_ae = np.full(1, -1, dtype=np.int32)
        g_fin = np.zeros(1, dtype=bool)
        g_start = 0
        cap = lits.size + 2
    else:
        g_asc, g_ae, g_fin, g_start = general
        cap = lits.size + 2 + 2 * g_asc.shape[0] * pend.shape[0]
    cap = min(cap, max_states + 1)
    width = n_terms + 2
    scratch = cap <= SCRATCH_MAX_ROWS and width <= KEY_WIDTH_MAX
    if scratch:  # (the product's resident buffers, and this walk's: no page new to the process)
        size, flat, table, _, _ = _product_scratch()
        if size < cap:
            grown = _product_buffers(max(cap, 4 * size), KEY_WIDTH_MAX)
            size, flat, table = grown[0], grown[1], grown[2]
            _SCRATCH.bufs = grown
        work = getattr(_SCRATCH, "trie", None)
        if work is None or work[0].shape[0] < size:
            work = _SCRATCH.trie = _trie_buffers(size)
        karr = flat[: cap * width].reshape(cap, width)
        table = table[:cap]
    else:
        karr = np.empty((cap, width), dtype=np.int32)
        table = np.empty((cap, 256), dtype=np.int32)
        work = _trie_buffers(cap)
    st, win, reach = work[0][:cap], work[1][:cap], work[2][:cap]
    n = _trie_product(lits, lit_off, col, has_g, g_asc, g_ae, g_fin, g_start, pend, lead_code, karr, table, st,
                      win, reach)
    if n < 0:
        return None
    table = table[:n].copy()
    win = win[:n].copy()
    if reach[0] < 0:  # (not closed by the kernel)
        reach = np.zeros(n, dtype=np.int64)
        at = np.flatnonzero(win >= 0)
        reach[at] = np.left_shift(1, win[at])
        product_reach(table, reach)
    else:
        reach = reach[:n].copy()
    return karr[:n].copy(), table, win, reach


@_jit
def _upper(col: np.ndarray, b: int, a: int, hi: int) -> int:  # pragma: no cover - compiled
    # bisect_right(col, b, a, hi) on the sorted run col[a:hi]
    while a < hi:
        m = (a + hi) >> 1
        if col[m] <= b:
            a = m + 1
        else:
            hi = m
    return a


@_jit
def _lower(col: np.ndarray, b: int, a: int, hi: int) -> int:  # pragma: no cover - compiled
    # bisect_left(col, b, a, hi)
    while a < hi:
        m = (a + hi) >> 1
        if col[m] < b:
            a = m + 1
        else:
            hi = m
    return a


@_jit
def _spans(col: np.ndarray, lo: int, hi: int, table: np.ndarray, s: int, r: int, spans: np.ndarray
           ) -> int:  # pragma: no cover - compiled
    # the children of trie node col[lo:hi] (the tokens' bytes at its depth, sorted) whose byte moves
    # states s and r apart, ascending, as rows (byte, lo, hi) of spans; their number.  r = 0 (the dead
    # state, whose row is all 0): the bytes that keep s alive
    n = 0
    if hi - lo <= 48:  # few tokens: their bytes are the children
        a = lo
        while a < hi:
            b = col[a]
            z = _upper(col, b, a, hi)
            if table[s, b] != table[r, b]:
                spans[n, 0] = b
                spans[n, 1] = a
                spans[n, 2] = z
                n += 1
            a = z
    else:
        for b in range(256):
            if table[s, b] != table[r, b]:
                a = _lower(col, b, lo, hi)
                if a < hi and col[a] == b:
                    spans[n, 0] = b
                    spans[n, 1] = a
                    spans[n, 2] = _upper(col, b, a, hi)
                    n += 1
    return n


@_jit
def _emit(out: np.ndarray, n: int, kind: int, x0: int, x1: int, x2: int, x3: int) -> int:  # pragma: no cover
    out[n, 0] = kind
    out[n, 1] = x0
    out[n, 2] = x1
    out[n, 3] = x2
    out[n, 4] = x3
    return n + 1


@_jit
def _lockstep(cols: np.ndarray, lens: np.ndarray, ids: np.ndarray, table: np.ndarray, fork_id: np.ndarray,
              d: int, ref: int, budget: int, out: np.ndarray, counts: np.ndarray) -> int:  # pragma: no cover
    # the loop of CompiledGrammar._trie_derived, in its order: out rows (kind, x0, x1, x2, x3) with kind
    # 0 fix (token, state), 1 cut (lo, hi, k), 2 unfork (fork, lo, hi, k), 3 fork group (fork, lo, hi, k),
    # 4 fresh (lo, hi, k, state); returns the nodes visited, -1 past budget, -2 past out's rows
    cap = out.shape[0]
    todo = np.empty((budget + 1, 5), np.int64)
    spans = np.empty((256, 3), np.int64)
    todo[0, 0], todo[0, 1], todo[0, 2], todo[0, 3], todo[0, 4] = 0, ids.shape[0], 0, d, ref
    nt = 1
    seen = 0
    n = 0
    while nt > 0:
        nt -= 1
        lo, hi, k, s, r = todo[nt, 0], todo[nt, 1], todo[nt, 2], todo[nt, 3], todo[nt, 4]
        for i in range(_spans(cols[k], lo, hi, table, s, r, spans)):
            b, a, z = spans[i, 0], spans[i, 1], spans[i, 2]
            seen += 1
            if seen > budget:
                return -1
            if n + 2 > cap:
                return -2
            sn = table[s, b]
            rn = table[r, b]
            if sn == 0:
                n = _emit(out, n, 1, a, z, k + 1, 0)
                continue
            if rn == 0:
                n = _emit(out, n, 4, a, z, k, s)
                continue
            while a < z and lens[a] == k + 1:
                if n + 2 > cap:
                    return -2
                n = _emit(out, n, 0, ids[a], sn, 0, 0)
                a += 1
            if a < z:
                fs = fork_id[sn]
                fr = fork_id[rn]
                if fs != fr:
                    if n + 2 > cap:
                        return -2
                    if fr >= 0:
                        n = _emit(out, n, 2, fr, a, z, k + 1)
                    if fs >= 0:
                        n = _emit(out, n, 3, fs, a, z, k + 1)
                todo[nt, 0], todo[nt, 1], todo[nt, 2], todo[nt, 3], todo[nt, 4] = a, z, k + 1, sn, rn
                nt += 1
    counts[0] = n
    return seen


def _rows(kernel: Any, *args: Any, budget: int) -> tuple[int, np.ndarray] | None:
    """``kernel(*args, out, counts)`` with a rows buffer grown until it fits (the kernel returns -2
    when it does not): ``(nodes visited, rows used)``, or None when the kernel returns -1 (past
    ``budget`` nodes)."""
    out = np.empty((4 * max(budget, 0) + 64, 5), np.int64)
    counts = np.zeros(1, np.int64)
    while True:
        seen = kernel(*args, out, counts)
        if seen != -2:
            break
        out = np.empty((2 * out.shape[0], 5), np.int64)
    if seen < 0:
        return None
    return seen, out[: counts[0]]


def lockstep(cols: np.ndarray, lens: np.ndarray, ids: np.ndarray, table: np.ndarray, fork_id: np.ndarray,
             d: int, ref: int, budget: int) -> tuple[int, np.ndarray] | None:
    """The byte trie walked in lockstep from states ``d`` and ``ref`` of one lexer automaton,
    visiting only the nodes where their states differ (:meth:`gad.engine.compiler.CompiledGrammar._trie_derived`,
    which reads the result; its Python loop is the reference).  ``cols`` ``(width + 1, n)`` uint8,
    ``lens`` ``(n,)`` int64, ``ids`` ``(n,)`` int32: the trie (:class:`gad.engine.compiler._VocabTrie`);
    ``table`` ``(n_states, 256)`` int32 and ``fork_id`` ``(n_states + 1,)`` int32: the automaton.

    Returns ``(nodes visited, rows)`` with rows ``(m, 5)`` int64 ``(kind, ...)`` in the loop's order
    (kind 0: a token equal to a prefix and its state from ``d``; 1: a range cut where ``d`` dies; 2: a
    range leaving the reference's fork; 3: a range passing ``d``'s fork; 4: a range to walk afresh
    from a state of ``d``), or None past ``budget`` nodes."""
    return _rows(_lockstep, cols, lens, ids, table, fork_id, d, ref, budget, budget=budget)


@_jit
def _trie_search(cols: np.ndarray, lens: np.ndarray, ids: np.ndarray, table: np.ndarray, fork_id: np.ndarray,
                 todo0: np.ndarray, budget: int, out: np.ndarray, counts: np.ndarray) -> int:  # pragma: no cover
    # the loop of CompiledGrammar._trie_search, in its order: out rows (kind, x0, x1, x2, x3) with kind 0
    # an end (token, state), 1 a range passing a fork (fork, lo, hi, offset); returns the nodes visited,
    # -1 past budget, -2 past out's rows
    cap = out.shape[0]
    todo = np.empty((budget + todo0.shape[0] + 1, 4), np.int64)
    nt = todo0.shape[0]
    todo[:nt] = todo0
    spans = np.empty((256, 3), np.int64)
    seen = 0
    n = 0
    while nt > 0:
        nt -= 1
        lo, hi, k, s = todo[nt, 0], todo[nt, 1], todo[nt, 2], todo[nt, 3]
        for i in range(_spans(cols[k], lo, hi, table, s, 0, spans)):
            b, a, z = spans[i, 0], spans[i, 1], spans[i, 2]
            seen += 1
            if seen > budget:
                return -1
            sn = table[s, b]
            while a < z and lens[a] == k + 1:
                if n + 2 > cap:
                    return -2
                n = _emit(out, n, 0, ids[a], sn, 0, 0)
                a += 1
            if a < z:
                f = fork_id[sn]
                if f >= 0:
                    if n + 2 > cap:
                        return -2
                    n = _emit(out, n, 1, f, a, z, k + 1)
                todo[nt, 0], todo[nt, 1], todo[nt, 2], todo[nt, 3] = a, z, k + 1, sn
                nt += 1
    counts[0] = n
    return seen


def trie_search(cols: np.ndarray, lens: np.ndarray, ids: np.ndarray, table: np.ndarray, fork_id: np.ndarray,
                todo: list[tuple[int, int, int, int]], budget: int) -> tuple[int, np.ndarray] | None:
    """Depth-first walk of the byte trie below ``todo``'s ``(lo, hi, k, state)`` ranges along the live
    bytes of one lexer automaton (:meth:`gad.engine.compiler.CompiledGrammar._trie_search`, whose
    Python loop is the reference; the arrays as for :func:`lockstep`).  Returns ``(nodes visited,
    rows)`` with rows ``(m, 5)`` int64 in the loop's order — ``(0, token, state, 0, 0)`` a token
    ending inside the lexeme, ``(1, fork, lo, hi, offset)`` a range passing a fork — or None past
    ``budget`` nodes."""
    todo0 = np.asarray(todo, dtype=np.int64).reshape(-1, 4)
    return _rows(_trie_search, cols, lens, ids, table, fork_id, todo0, max(budget, 0), budget=budget)


@_jit
def _cheapest_reference(table: np.ndarray, cands: np.ndarray, d: int, hist: np.ndarray, budget: int
                        ) -> int:  # pragma: no cover - compiled
    best = budget
    at = -1
    row = table[d]
    for ci in range(cands.size):
        c = cands[ci]
        cost = 0
        for b in range(256):
            if row[b] != 0 and table[c, b] != row[b]:
                cost += hist[b]
                if cost >= best:
                    break
        if cost < best:
            best = cost
            at = ci
    return at


def cheapest_reference(table: np.ndarray, cands: list[int], d: int, hist: np.ndarray, budget: int) -> int | None:
    """The first of states ``cands`` (of a lexer automaton with ``table`` ``(n_states, 256)`` int32) that
    minimises the tokens to walk from state ``d`` when its root walk is derived from theirs: the sum of
    ``hist`` ``(256,)`` int64 (content tokens per first byte) over the bytes live from ``d`` that lead
    ``d`` elsewhere than the candidate; None unless that sum is below ``budget``
    (:meth:`gad.engine.compiler.CompiledGrammar._reference_root`, whose numpy code is the reference).
    A candidate is dropped as soon as its sum reaches the best so far."""
    at = _cheapest_reference(table, np.asarray(cands, dtype=np.int64), d, hist, budget)
    return cands[at] if at >= 0 else None


@_jit
def _patch_ends(prior_tok: np.ndarray, prior_state: np.ndarray, fix_t: np.ndarray, fix_s: np.ndarray,
                drop: np.ndarray, add_t: np.ndarray, add_s: np.ndarray, codes: np.ndarray, by_code: np.ndarray,
                dense: np.ndarray, out_t: np.ndarray, out_s: np.ndarray, ch_s: np.ndarray
                ) -> tuple[int, int, int]:  # pragma: no cover - compiled
    # the changes in order (fixes, drops, additions), the last one of a token winning
    nf, nd, na = fix_t.size, drop.size, add_t.size
    m = nf + nd + na
    t_all = np.empty(m, np.int32)
    s_all = np.empty(m, np.int32)
    t_all[:nf] = fix_t
    s_all[:nf] = fix_s
    t_all[nf:nf + nd] = drop
    s_all[nf:nf + nd] = 0
    t_all[nf + nd:] = add_t
    s_all[nf + nd:] = add_s
    order = np.argsort(t_all, kind="mergesort")
    ch_t = np.empty(m, np.int32)
    k = 0
    for i in range(m):
        j = order[i]
        if i + 1 < m and t_all[order[i + 1]] == t_all[j]:
            continue
        ch_t[k] = t_all[j]
        ch_s[k] = s_all[j]
        k += 1
    # merged with the prior changes (ascending, distinct), the new ones winning; a token left ending
    # where the root ends it is no change
    i = 0
    j = 0
    n = 0
    delta = 0
    np_ = prior_tok.size
    use_codes = codes.size > 0
    while i < np_ or j < k:
        if j >= k or (i < np_ and prior_tok[i] < ch_t[j]):
            t = prior_tok[i]
            st = prior_state[i]
            i += 1
        else:
            t = ch_t[j]
            st = ch_s[j]
            if i < np_ and prior_tok[i] == t:
                i += 1
            j += 1
        w = by_code[codes[t]] if use_codes else dense[t]
        if st != w:
            out_t[n] = t
            out_s[n] = st
            n += 1
            delta += (st != 0) - (w != 0)
    return n, delta, k


def patch_ends(prior_tok: np.ndarray | None, prior_state: np.ndarray | None, fix_t: np.ndarray, fix_s: np.ndarray,
               drop: np.ndarray | None, add_t: np.ndarray, add_s: np.ndarray, codes: np.ndarray | None,
               by_code: np.ndarray | None, dense: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """The end-state changes of a walk derived from a wide root walk
    (:meth:`gad.engine.compiler.CompiledGrammar._patched`, whose numpy code is the reference): the
    base's own changes ``prior_tok`` / ``prior_state`` (ascending, distinct; None: none), then tokens
    ``fix_t`` ending in ``fix_s``, tokens ``drop`` ending nowhere and tokens ``add_t`` ending in
    ``add_s`` (int32; the last change of a token wins), kept only where they differ from the root's
    end state: ``by_code[codes[t]]`` where ``codes`` is given, else ``dense[t]`` (0: none).

    Returns ``(tokens ascending, their end states, change in the number of end tokens, the end
    states of this call's changes)`` (int32 arrays)."""
    none = np.zeros(0, dtype=np.int32)
    pt = none if prior_tok is None else prior_tok.astype(np.int32, copy=False)
    ps = none if prior_state is None else prior_state.astype(np.int32, copy=False)
    dr = none if drop is None else drop.astype(np.int32, copy=False)
    size = pt.size + fix_t.size + dr.size + add_t.size
    out_t = np.empty(size, dtype=np.int32)
    out_s = np.empty(size, dtype=np.int32)
    ch_s = np.empty(fix_t.size + dr.size + add_t.size, dtype=np.int32)
    if codes is not None and by_code is not None:  # (int32 or int64 codes: each its own compiled version)
        c, b, dn = codes, by_code.astype(np.int32, copy=False), none
    else:
        assert dense is not None
        c, b, dn = none, none, dense.astype(np.int32, copy=False)
    n, delta, k = _patch_ends(pt, ps, fix_t.astype(np.int32, copy=False), fix_s.astype(np.int32, copy=False), dr,
                              add_t.astype(np.int32, copy=False), add_s.astype(np.int32, copy=False), c, b, dn,
                              out_t, out_s, ch_s)
    return out_t[:n], out_s[:n], int(delta), ch_s[:k]


def load() -> None:
    """Compile (or load from numba's cache) every compiled walk now, on tiny inputs, instead of on
    the first mask that needs one (a one-off cost per process: ~0.1-1 s, seconds when nothing is
    cached).  A no-op without numba."""
    if not AVAILABLE:
        return
    i32 = np.zeros(1, dtype=np.int32)
    i64 = np.zeros(1, dtype=np.int64)
    flat = np.zeros(512, dtype=np.int32)
    ok = np.zeros((1, 256), dtype=bool)
    cols = np.zeros((2, 1), dtype=np.uint8)
    _bfs_nodes(np.ones(1, dtype=np.int64), i64, cols, 1, 1)
    fb = np.zeros((2, 257), dtype=np.int64)
    _trie_walk(flat, i32, ok, 1, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.uint8),
               np.full(1, -1, dtype=np.int64), fb, i32, np.zeros(257, dtype=np.int64), i64, i64, fb, i32, i32,
               i32, cols, np.zeros(2, dtype=np.int32), i32.copy(), i32.copy(), i32.copy(), np.zeros(2, dtype=bool),
               i32.copy(), i32.copy(), i32.copy())
    _trie_walk_all(flat, i32, ok, 1, np.zeros(1, dtype=np.uint8), i32, 1, i32, i64, fb, i32, i32, i32, i32, cols,
                   np.zeros(2, dtype=np.int32), i32.copy(), np.zeros(2, dtype=bool), i32.copy(), i32.copy(), i32.copy())
    mat = np.zeros((1, 1), dtype=np.uint8)
    lens = np.ones(1, dtype=np.int32)
    _token_walk(flat, i32, ok, 1, mat, lens, i32, i32, i32.copy(), i32.copy(), i32.copy(), i32.copy(), i32.copy())
    # the engine's vocabulary tables are read-only, except as read back from a compile-cache file:
    # both kinds of arrays are their own specialisation (compiled, ~0.2 s, where first met otherwise)
    mat.setflags(write=False)
    lens.setflags(write=False)
    _token_walk(flat, i32, ok, 1, mat, lens, i32, i32, i32.copy(), i32.copy(), i32.copy(), i32.copy(), i32.copy())
    m = np.zeros(1, dtype=bool)
    fill_by_state(m, np.zeros(1, dtype=bool), i32, np.zeros(2, dtype=np.int64), i32)
    group_by_state(i32, i32)
    densify(i32, np.ones(1, dtype=np.int32), 1)
    _fill_sparse(m, np.zeros(1, dtype=bool), i32, i32)
    pend = np.zeros((2, 4), dtype=np.int32)
    one = np.zeros((1, 128), dtype=np.int32)
    byte_classes(one)
    product = explore_product(one, i32, np.ones(1, dtype=bool), i64, 1, np.zeros(1, dtype=bool), pend,
                              np.zeros(256, dtype=np.int32), np.zeros(128, dtype=np.int32), i32, 4)
    if product is not None:
        product_reach(product[1], np.zeros(product[1].shape[0], dtype=np.int64))
    # a context of literals, and of a general terminal with them (the literals' bytes are read-only)
    lits, lit_off, col = np.frombuffer(b"ab", dtype=np.uint8), np.array([0, 1, 2], dtype=np.int64), np.arange(2)
    trie_product(lits, lit_off, col, 2, None, pend, np.zeros(256, dtype=np.int32), 4)
    trie_product(lits, lit_off, col + 1, 3, (one, i32, np.ones(1, dtype=bool), 0), pend, np.zeros(256, dtype=np.int32), 8)
    lockstep(cols, np.ones(1, dtype=np.int64), i32, np.zeros((2, 256), dtype=np.int32), np.full(3, -1, dtype=np.int32),
             1, 1, 4)
    trie_search(cols, np.ones(1, dtype=np.int64), i32, np.zeros((2, 256), dtype=np.int32), np.full(3, -1, dtype=np.int32),
                [(0, 1, 0, 1)], 4)
    patch_ends(i32, i32, i32, i32, i32, i32, i32, None, None, i32)
    hist = np.zeros(256, dtype=np.int64)
    cheapest_reference(np.zeros((2, 256), dtype=np.int32), [1], 1, hist, 4)
    hist.setflags(write=False)  # (the engine's: read-only)
    cheapest_reference(np.zeros((2, 256), dtype=np.int32), [1], 1, hist, 4)
    patch_ends(None, None, i32, i32, None, i32, i32, i32, i32, None)
    patch_ends(None, None, i32, i32, None, i32, i32, i64, i32, None)
