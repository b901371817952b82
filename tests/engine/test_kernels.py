"""The compiled walks' set-up (gad.engine.kernels): the byte trie node by node, and numba's cache.

The walks themselves are checked against a scalar walk of each token in test_fast_paths.py; here,
the trie layout they rely on is checked against the tokens directly, on a small vocabulary with a
repeated token, a token that is a prefix of others and non-ASCII bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from gad.engine import kernels

TOKENS = [b"a", b"ab", b"abc", b"abd", b"b", b"ba", b"ab", b"\xc3\xa9", b"\xc3", b"zz"]


def _layout() -> tuple[kernels.TrieNodes, list[bytes]]:
    order = sorted(range(len(TOKENS)), key=TOKENS.__getitem__)
    ids = np.asarray(order, dtype=np.int32)
    lens = np.asarray([len(TOKENS[i]) for i in order], dtype=np.int64)
    cols = np.zeros((int(lens.max()) + 1, len(order)), dtype=np.uint8)
    for p, i in enumerate(order):
        cols[: len(TOKENS[i]), p] = np.frombuffer(TOKENS[i], dtype=np.uint8)
    return kernels.TrieNodes(ids, lens, cols, vocab_size=len(TOKENS) + 2), [TOKENS[i] for i in order]


def test_trie_nodes_are_the_distinct_prefixes_breadth_first() -> None:
    nodes, by_pos = _layout()
    prefixes = sorted({t[:k] for t in TOKENS for k in range(1, len(t) + 1)}, key=lambda p: (len(p), p))
    m = nodes.byte.size
    assert m == len(prefixes)
    # each node's prefix, rebuilt from its parent chain, in breadth-first (length, bytes) order
    got: list[bytes] = []
    for i in range(m):
        p = int(nodes.parent[i])
        got.append((got[p] if p >= 0 else b"") + bytes([int(nodes.byte[i])]))
    assert got == prefixes
    # each token id ends at the node of its bytes; ids outside the vocabulary's tokens at the scratch node
    for t, data in enumerate(TOKENS):
        assert got[int(nodes.tok_node[t])] == data
    assert nodes.tok_node[len(TOKENS):].tolist() == [m, m]
    # the positions of the tokens going on past a node, and the first-byte ranges
    for j, i in enumerate(nodes.cont.tolist()):
        longer = [q for q, t in enumerate(by_pos) if t.startswith(got[i]) and len(t) > len(got[i])]
        assert longer == list(range(int(nodes.mid[j]), int(nodes.hi[j]))) and longer
        assert nodes.cont_depth[j] == len(got[i]) - 1
    for k in range(nodes.node_fb.shape[0]):
        for b in range(256):
            span = range(int(nodes.node_fb[k, b]), int(nodes.node_fb[k, b + 1]))
            assert all(len(got[i]) == k + 1 and got[i][0] == b for i in span)
            assert len(span) == sum(1 for p in prefixes if len(p) == k + 1 and p[0] == b)
    for b in range(256):
        span = range(int(nodes.pos_fb[b]), int(nodes.pos_fb[b + 1]))
        assert [by_pos[q] for q in span] == [t for t in by_pos if t[0] == b]


def test_without_a_place_to_cache_the_walks_compile_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """numba refuses ``cache=True`` where it finds no writable folder (a read-only install without a
    home): the functions are then compiled in each process instead of failing at import."""
    if not kernels.AVAILABLE:
        pytest.skip("numba is not installed")
    real = kernels.njit

    def no_cache(**kw: object) -> object:
        if kw.get("cache"):
            raise RuntimeError("cannot cache function 'f': no locator available for file 'f.py'")
        return real(**kw)

    monkeypatch.setattr(kernels, "njit", no_cache)

    def add_one(x: np.ndarray) -> None:
        for i in range(x.size):
            x[i] += 1

    f = kernels._jit(add_one)
    x = np.arange(3)
    f(x)
    assert x.tolist() == [1, 2, 3] and f.signatures  # compiled, not the Python function


@pytest.mark.parametrize("compiled", [True, False])
def test_mask_fills_set_exactly_the_tokens_whose_end_state_is_ok(compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """kernels.fill (token, state pairs) and kernels.fill_by_state (tokens grouped by end state by
    kernels.group_by_state, as CompiledGrammar._fill_ends groups a large walk node's: a counting sort,
    or numpy's with the compiled loops off), and a node's dense arrays (kernels.densify), against numpy, over a
    random node."""
    monkeypatch.setattr(kernels, "ENABLED", compiled)
    rng = np.random.default_rng(0)
    vocab, n_states = 500, 40
    end_tok = rng.choice(vocab, size=300, replace=False).astype(np.int32)
    end_state = rng.integers(1, n_states, size=300).astype(np.int32)
    ok = rng.random(n_states) < 0.3
    ok[0] = False
    want = np.zeros(vocab, dtype=bool)
    want[end_tok[ok[end_state]]] = True
    assert 0 < want.sum() < end_tok.size
    m = np.zeros(vocab, dtype=bool)
    kernels.fill(m, ok, end_tok, end_state)
    assert np.array_equal(m, want)
    dense, live, distinct = kernels.densify(end_tok, end_state, vocab)
    assert np.array_equal(np.flatnonzero(dense), np.sort(end_tok)) and np.array_equal(dense[end_tok], end_state)
    assert np.array_equal(live, dense != 0) and np.array_equal(distinct, np.unique(end_state))
    states, starts, toks = kernels.group_by_state(end_tok, end_state)
    assert np.array_equal(states, np.unique(end_state))
    assert np.array_equal(np.diff(starts), np.bincount(end_state)[states])
    assert np.array_equal(toks, end_tok[np.argsort(end_state, kind="stable")])
    m = np.zeros(vocab, dtype=bool)
    m[7] = True  # ORs into what is there
    kernels.fill_by_state(m, ok, states, starts, toks)
    want[7] = True
    assert np.array_equal(m, want)


# a context of ~900 states (a bounded string beside a word pattern) and a small one: the compiled
# product's resident scratch (kernels._product_scratch) grows past its first 512 rows on the first
_BIG = r"""
start: S | W
S: /"[a-z0-9 ]{0,900}"/
W: "x" /[a-z]{3,40}/ "y"
"""
_SMALL = r"""
start: "(" N ("," N)* ")"
N: /-?[0-9]{1,3}/
"""


def _product_calls(text: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """The arguments of every compiled product build that compiling ``text``'s contexts makes."""
    import lark

    from gad.engine.compiler import CompiledGrammar
    from gad.engine.vocab import Vocabulary

    calls: list[tuple] = []
    real = kernels.explore_product

    def record(*args: object) -> object:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(kernels, "explore_product", record)
    cg = CompiledGrammar(lark.Lark(text, parser="lalr", lexer="contextual"), Vocabulary.from_strings(["a", "("]))
    for c in range(len(cg._ctx_specs)):
        cg.ctx(c)
    monkeypatch.setattr(kernels, "explore_product", real)
    return calls


@pytest.mark.skipif(not kernels.ENABLED, reason="the compiled product needs numba")
def test_the_product_scratch_serves_builds_of_any_size_in_any_order_and_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    calls = _product_calls(_BIG, monkeypatch) + _product_calls(_SMALL, monkeypatch)

    def fresh(args: tuple) -> tuple[np.ndarray, np.ndarray]:  # on a new thread-local scratch of 512 rows
        monkeypatch.setattr(kernels, "_SCRATCH", threading.local())
        return kernels.explore_product(*args)

    want = [fresh(a) for a in calls]
    assert max(t.shape[0] for _, t in want) > 512 and min(t.shape[0] for _, t in want) < 64
    monkeypatch.setattr(kernels, "_SCRATCH", threading.local())
    order = list(range(len(calls))) * 2 + list(range(len(calls)))[::-1]  # small after big after small
    for i in order:  # reused: stale rows, keys or hash slots of the last build must not leak in
        keys, table = kernels.explore_product(*calls[i])
        assert np.array_equal(keys, want[i][0]) and np.array_equal(table, want[i][1])
    assert kernels._SCRATCH.bufs[0] == 2048  # grown past 512 rows, then kept
    got: list[bool] = []
    th = threading.Thread(target=lambda: got.append(all(
        np.array_equal(kernels.explore_product(*calls[i])[1], want[i][1]) for i in order)))
    th.start()
    th.join()
    assert got == [True]


def test_the_cheapest_reference_state_is_numpys_argmin_under_the_budget() -> None:
    """kernels.cheapest_reference (CompiledGrammar._reference_root's choice of the state whose root walk
    a new state's is derived from) picks what the numpy formula picks: the first candidate with the
    fewest tokens to walk (first byte live from ``d`` and leading elsewhere), if under the budget."""
    rng = np.random.default_rng(1)
    hist = rng.integers(0, 50, size=256).astype(np.int64)
    hist.setflags(write=False)
    for trial in range(200):
        n = int(rng.integers(3, 12))
        table = rng.integers(0, 4, size=(n, 256)).astype(np.int32)
        table[1:, rng.random(256) < 0.7] = 2  # (most bytes alike, as inside a key)
        d = int(rng.integers(1, n))
        cands = [s for s in rng.permutation(n).tolist() if s != d][: int(rng.integers(1, n))]
        if trial % 3 == 0:
            cands = cands + cands[:1]  # a tie: the first one wins
        cost = ((table[cands] != table[d]) & (table[d] != 0)) @ hist
        budget = int(rng.integers(0, int(cost.max()) + 2))
        want = cands[int(np.argmin(cost))] if cost.min() < budget else None
        assert kernels.cheapest_reference(table, cands, d, hist, budget) == want
