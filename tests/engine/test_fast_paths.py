"""The engine's shortcuts equal the plain computations they replace.

* Token walks derived from another state's walk equal the plain walk of every token.  A root walk
  from state ``d`` may be derived from the walk of a reference state of the same lexer context
  (:meth:`CompiledGrammar._derived_root_walk`): tokens whose first byte leads both states to the
  same state keep the reference's ends and forks, and only the others are walked.  Every derived
  walk is compared, token by token and fork by fork, with a plain walk of the whole vocabulary
  from ``d`` (:meth:`CompiledGrammar._walk`), on the real SmolLM2 vocabulary.
* The vectorised walks of a token set (and of the whole vocabulary), compiled
  (:mod:`gad.engine.kernels`) and in numpy, equal a scalar walk of each token, byte by byte, on the automaton's rows (ends, and forks passed with the next byte not
  firing the fork's guard); so does the depth-first walk of the vocabulary's byte trie
  (:meth:`CompiledGrammar._trie_walk`), which gives up past its budget of live trie nodes, and the
  selection of tokens by first byte (:meth:`CompiledGrammar._first_tokens`).
* The terminals the parser can shift (:meth:`CompiledGrammar.allowed_bits`, grouped by reduction)
  equal a probe of every terminal of the context on its own (:meth:`CompiledGrammar._can_shift`).
* Lexer automata share their states inside a UTF-8 character across ASCII-only prefixes.
"""

from __future__ import annotations

import os

import lark
import numpy as np
import pytest

import gad
from gad.engine import kernels
from gad.engine.compiler import TRUNCATED, CompiledGrammar, WalkNode
from gad.engine.lexer import DEAD, START, LexerDFA, TerminalAutomaton
from gad.engine.vocab import Vocabulary
from gad.grammar import BUILTIN_DIR, Grammar

KEYS = {"type": "object", "properties": {k: {"type": "string"} for k in
                                         ("config", "configMap", "container", "count", "名前")},
        "additionalProperties": {"type": "integer"}}


def _as_sets(node: WalkNode) -> tuple[dict[int, int], dict[int, set[tuple[int, int]]]]:
    ends = dict(zip(node.end_tok.tolist(), node.end_state.tolist()))
    assert len(ends) == node.end_tok.size  # each token ends at most once
    forks = {fid: set(zip(t.tolist(), o.tolist())) for fid, (t, o) in node.groups.items()}
    return ends, forks


def _plain(cg: CompiledGrammar, cid: int, d: int) -> WalkNode:
    content = cg._content
    return cg._walk(cid, d, content, np.zeros(content.size, dtype=np.int32))


def _states(cg: CompiledGrammar, cid: int, limit: int) -> list[int]:
    dfa = cg.ctx(cid)
    keys = dfa._keys
    real = [s for s in range(START, dfa.n_states) if not keys[s][3]]  # not inside a character
    step = max(1, len(real) // limit)
    return real[::step][:limit]


def _compiled(which: str, tok) -> CompiledGrammar:
    if which == "keys":
        return gad.compile(Grammar.from_json_schema(KEYS), tok, cache_dir=False, warm=False)
    return gad.compile(Grammar.from_file(BUILTIN_DIR / f"{which}.lark"), tok, cache_dir=False, warm=False)


def _scalar_walk(cg: CompiledGrammar, cid: int, d: int, tok: np.ndarray,
                 off: np.ndarray) -> tuple[dict[int, int], dict[int, set[tuple[int, int]]]]:
    dfa = cg.ctx(cid)
    ends: dict[int, int] = {}
    forks: dict[int, set[tuple[int, int]]] = {}
    for t, o in zip(tok.tolist(), off.tolist()):
        data = cg.vocab.tokens[t]
        s = d
        for p in range(o, len(data)):
            s = dfa.rows[s][data[p]]
            if s == DEAD:
                break
            if p == len(data) - 1:
                ends[t] = s
            elif dfa.fork_list[s] >= 0 and dfa.fork_ok_byte[dfa.fork_list[s]][data[p + 1]]:
                forks.setdefault(dfa.fork_list[s], set()).add((t, p + 1))
    return ends, forks


@pytest.fixture(params=["compiled", "numpy"])
def walks(request, monkeypatch) -> str:
    """Run a test with the compiled walks (gad.engine.kernels) and again with the numpy ones."""
    monkeypatch.setattr(kernels, "ENABLED", request.param == "compiled")
    return request.param


def test_the_compiled_walks_are_in_use() -> None:
    """The test environment has numba (a dependency): the compiled walks are what the suite checks
    (with GAD_KERNELS=0 the engine keeps its numpy walks, checked below as well)."""
    assert kernels.AVAILABLE
    assert kernels.ENABLED == (os.environ.get("GAD_KERNELS", "1") != "0")


@pytest.mark.parametrize("which", ["json", "sql", "keys"])
def test_vectorised_walks_equal_scalar_walks(which: str, walks: str, smollm2_tokenizer) -> None:
    cg = _compiled(which, smollm2_tokenizer)
    rng = np.random.default_rng(1)
    checked = 0
    for cid in range(len(cg._ctx_specs))[:10]:
        for d in _states(cg, cid, 4):
            for size in (1, 9, 400):
                tok = rng.choice(cg._content, size=size, replace=False)
                off = (rng.random(size) * cg._lens[tok]).astype(np.int32)
                assert _as_sets(cg._walk(cid, d, tok, off)) == _scalar_walk(cg, cid, d, tok, off), (cid, d)
                checked += 1
    assert checked > 30
    # ... and the root walk of the whole vocabulary, from the first context's start
    content = cg._content
    assert _as_sets(cg._root_walk(0, START)) == _scalar_walk(cg, 0, START, content, np.zeros(content.size, np.int32))


BOUNDED = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                           "note": {"type": "string"}, "n": {"type": "integer"}}}


@pytest.mark.parametrize("which", ["json", "sql", "bounded"])
def test_level_walks_of_the_vocabulary_equal_scalar_walks(which: str, walks: str, smollm2_tokenizer) -> None:
    """The whole-vocabulary walk down the byte trie by depth (:meth:`CompiledGrammar._level_walk`,
    the longer tokens one by one, runs of one byte that leave a state unchanged skipped) equals a
    scalar walk of every token: inside plain strings (whose states loop on a run of spaces), in
    length-bounded ones (which count every space, so the run cannot be skipped) and elsewhere."""
    if which == "bounded":
        cg = gad.compile(Grammar.from_json_schema(BOUNDED), smollm2_tokenizer, cache_dir=False, warm=False)
    else:
        cg = _compiled(which, smollm2_tokenizer)
    content = cg._content
    zeros = np.zeros(content.size, dtype=np.int32)
    lv = cg._trie().levels(cg.vocab.tokens)
    assert lv.long_ids and lv.depth < int(cg._lens[lv.long_ids].max())  # (numpy) some tokens go the scalar way
    tail_alive = dense_walks = 0
    for cid in range(len(cg._ctx_specs))[:12]:
        dfa = cg.ctx(cid)
        for d in _states(cg, cid, 5):
            got = cg._level_walk(dfa, d)
            assert np.all(np.diff(got.end_tok) > 0)  # sorted by token id
            if got.base is not None:  # (its dense arrays are made only when read: not yet)
                assert got.base.codes is not None and got.base.dense_end is None
            want = _scalar_walk(cg, cid, d, content, zeros)
            assert _as_sets(got) == want, (cid, d)
            if got.dense_end is not None:  # (the compiled walk hands _fill its dense arrays ready)
                assert np.array_equal(np.flatnonzero(got.dense_end), got.end_tok)
                assert np.array_equal(got.dense_end[got.end_tok], got.end_state)
                assert np.array_equal(got.end_states, np.unique(got.end_state))
                assert got.dense_any is not None and np.array_equal(got.dense_any, got.dense_end != DEAD)
                dense_walks += 1
            tail_alive += sum(1 for t in lv.long_ids if t in want[0])
    assert tail_alive > 0
    assert (dense_walks > 0) == (walks == "compiled")


@pytest.mark.skipif(not kernels.ENABLED, reason="the compiled walks are off (GAD_KERNELS=0 or no numba)")
def test_flat_vocabulary_walk_equals_the_walk_by_first_byte(smollm2_tokenizer) -> None:
    """The whole-vocabulary walk in flat passes over every trie node (``kernels._trie_walk_all``, taken
    where nearly every first byte is live: inside a string) returns the same arrays, in the same order,
    as the walk of the live first bytes' subtrees, from every state of json.lark's and a schema's
    contexts, wide or not; and the default picks it inside a string."""
    picked = 0
    for cg in (_compiled("json", smollm2_tokenizer),
               gad.compile(Grammar.from_json_schema(BOUNDED), smollm2_tokenizer, cache_dir=False, warm=False)):
        nodes = cg._trie().nodes(cg.vocab_size)
        for cid in range(len(cg._ctx_specs)):
            dfa = cg.ctx(cid)
            for d in _states(cg, cid, 8):
                by_byte = kernels.walk_vocabulary(dfa, d, nodes, cg._dense_min, flat=False)
                flat = kernels.walk_vocabulary(dfa, d, nodes, cg._dense_min, flat=True)
                for a, b in zip(by_byte, flat):
                    if isinstance(a, dict):
                        assert list(a) == list(b) and all(np.array_equal(a[f][i], b[f][i]) for f in a for i in (0, 1))
                    elif isinstance(a, np.ndarray):
                        assert np.array_equal(a, b), (cid, d)
                    else:
                        assert a == b, (cid, d)
                live = np.flatnonzero(dfa.table[d])
                picked += int(nodes.pos_fb[live + 1].sum() - nodes.pos_fb[live].sum()) * 8 > nodes.ids.size * 7
    assert picked >= 2


UNIFORM = {"type": "object", "properties": {
    "short": {"type": "string", "maxLength": 5}, "long": {"type": "string", "maxLength": 70},
    "exact": {"type": "string", "minLength": 90, "maxLength": 90}, "free": {"type": "string"},
    "code": {"type": "string", "pattern": "^[a-z]{3}$"}, "n": {"type": "number"}}}


def test_uniform_walks_equal_scalar_walks(walks: str, smollm2_tokenizer) -> None:
    """The root walk of a state that moves alike on every plain byte, chained (:meth:`CompiledGrammar.
    _uniform_walk`: plain tokens by their length, the others walked) equals a scalar walk of every
    token, in strings bounded below the longest plain token (whose counter dies inside the chain),
    above it (a chunk terminal closing inside the chain), exactly, unbounded, and refuses the states where plain bytes part ways (a pattern, a
    number, a key) or where nothing plain goes on."""
    cg = gad.compile(Grammar.from_json_schema(UNIFORM), smollm2_tokenizer, cache_dir=False, warm=False)
    content = cg._content
    zeros = np.zeros(content.size, dtype=np.int32)
    longest = cg._trie().plain().longest
    assert 30 < longest < 90
    used = refused = forked = coded = 0
    rng = np.random.default_rng(4)
    for cid in range(len(cg._ctx_specs)):
        for d in _states(cg, cid, 400):
            got = cg._uniform_walk(cid, d)
            if got is None:
                refused += 1
                continue
            if got.base is not None:  # (its dense arrays are made only when read: not yet)
                assert got.base.codes is not None and got.base.dense_end is None
            want = _scalar_walk(cg, cid, d, content, zeros)
            assert _as_sets(got) == want, (cid, d)
            # plain tokens passing a fork inside the chain (a long string's chunk terminal closing)
            forked += any(t.size > 1000 for t, _ in got.groups.values())
            assert np.all(np.diff(got.end_tok) > 0)
            if got.base is not None:  # wide: the walked tokens over the plain tokens' shared length codes
                coded += 1
                assert set(np.unique(got.end_state).tolist()) <= set(got.end_states.tolist())
                # a mask fill (all end states allowed, some) equals the plain ends' over any mask
                for share in (1.0, 0.6):
                    ok = rng.random(cg.ctx(cid).n_states) < share
                    ok[DEAD] = False
                    m0 = rng.random(cg.vocab_size) < 0.1
                    fill, exp = m0.copy(), m0.copy()
                    cg._fill_ends(fill, ok, got)
                    exp[[t for t, st in want[0].items() if ok[st]]] = True
                    assert np.array_equal(fill, exp), (cid, d, share)
            used += 1
    assert used > 30 and refused > 10 and forked > 5 and coded > 10


@pytest.mark.parametrize("which", ["json", "sql", "keys"])
def test_trie_walks_equal_scalar_walks(which: str, walks: str, smollm2_tokenizer) -> None:
    """The depth-first trie walk (:meth:`CompiledGrammar._trie_walk`; its loop compiled,
    :func:`kernels.trie_search`, and in Python) equals a scalar walk of every token, and gives up past
    its budget of live trie nodes."""
    cg = _compiled(which, smollm2_tokenizer)
    content = cg._content
    zeros = np.zeros(content.size, dtype=np.int32)
    checked = gave_up = 0
    for cid in range(len(cg._ctx_specs))[:12]:
        for d in _states(cg, cid, 6):
            got = cg._trie_walk(cg.ctx(cid), d, 400)
            if got is None:  # more than 400 live trie nodes: a string's or a name's inside
                gave_up += 1
                continue
            assert _as_sets(got) == _scalar_walk(cg, cid, d, content, zeros), (cid, d)
            assert np.all(np.diff(got.end_tok) > 0)  # sorted by token id, as the numpy root walks
            checked += 1
    assert checked > 10 and gave_up > 0


@pytest.mark.parametrize("which", ["json", "sql", "keys"])
def test_lockstep_trie_derivations_equal_plain_walks(which: str, walks: str, smollm2_tokenizer) -> None:
    """A root walk derived by walking the trie from two states at once (visiting only where they
    differ, :meth:`CompiledGrammar._trie_derived`; its loop compiled, :func:`kernels.lockstep`, and in
    Python) equals the plain walk, whatever the reference."""
    cg = _compiled(which, smollm2_tokenizer)
    rng = np.random.default_rng(5)
    done = 0
    for cid in range(len(cg._ctx_specs))[:12]:
        states = _states(cg, cid, 8)
        for d in states:
            want = _as_sets(_plain(cg, cid, d))
            for ref in rng.choice(states, size=min(4, len(states)), replace=False).tolist():
                if ref == d:
                    continue
                got = cg._trie_derived(cid, d, int(ref), 3000)
                if got is not None:
                    assert _as_sets(got) == want, (cid, d, ref)
                    done += 1
    assert done > 10


def test_walks_shared_across_schemas_equal_plain_walks(smollm2_tokenizer) -> None:
    """Inside a string read alone, a schema's automaton takes its walk from another schema's
    (translated through the terminal's own states, :meth:`CompiledGrammar._term_walk`), and a key
    state takes its walk from its projection onto the any-string terminal: both equal plain walks."""
    tok = smollm2_tokenizer
    first = {"type": "object", "properties": {"alpha": {"type": "string"}, "beta": {"type": "integer"}}}
    second = {"type": "object", "properties": {"gamma": {"type": "string"}, "delta": {"type": "string"},
                                               "alphabet": {"type": "boolean"}}}
    projections = coded = 0
    for schema, text in ((first, '{"alpha":"x y","beta":3,"zeta":"q"}'),
                         (second, '{"alphabet":true,"gamma":"g\\u00e9","zz":"ab","delta":"d"}')):
        cg = gad.compile(Grammar.from_json_schema(schema), tok, cache_dir=False, warm=False)
        m = cg.matcher()
        for t in tok.encode(text, add_special_tokens=False):
            m.mask()
            assert m.accept_token(t)
        rng = np.random.default_rng(2)
        for (cid, d), node in list(cg._roots.items()):
            assert _as_sets(node) == _as_sets(_plain(cg, cid, d)), (cid, d)
            coded += (node.base or node).codes is not None  # (a uniform or a translated walk)
            # a mask fill of the walk's ends (a coded walk's from the shared codes) = the plain ones'
            n_states = cg.ctx(cid).n_states
            for share in (1.0, 0.5):
                ok = rng.random(n_states) < share
                ok[DEAD] = False
                m0 = rng.random(cg.vocab_size) < 0.2
                got, want = m0.copy(), m0.copy()
                cg._fill_ends(got, ok, node)
                ends, _ = _as_sets(node)
                want[[t for t, st in ends.items() if ok[st]]] = True
                assert np.array_equal(got, want), (cid, d, share)
        projections += cg.stats.get("projections", 0)
    assert cg.stats.get("term_walks", 0) > 0  # the second schema reused the first one's string walks
    assert coded > 0
    assert projections > 0


def test_first_byte_selection_equals_a_mask_over_the_vocabulary(smollm2_tokenizer) -> None:
    cg = _compiled("json", smollm2_tokenizer)
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 7, 40, 256):
        first_ok = np.zeros(256, dtype=bool)
        first_ok[rng.choice(256, size=n, replace=False)] = True
        want = {t for t in cg._content.tolist() if first_ok[cg.vocab.tokens[t][0]]}
        got = cg._first_tokens(first_ok).tolist()
        assert len(got) == len(want) and set(got) == want, n


@pytest.mark.parametrize("which", ["json", "sql", "keys"])
def test_derived_root_walks_equal_plain_walks(which: str, walks: str, smollm2_tokenizer) -> None:
    cg = _compiled(which, smollm2_tokenizer)
    rng = np.random.default_rng(0)
    checked = derived = dense_refs = 0
    for cid in range(len(cg._ctx_specs))[:12]:
        states = _states(cg, cid, 12)
        for d in states:
            want = _as_sets(_plain(cg, cid, d))
            # whatever route root() takes (plain, first-byte candidates or a reference state) ...
            assert _as_sets(cg.root(cid, d)) == want, (cid, d)
            # ... and a derivation from any other state of the context, forced
            for ref in rng.choice(states, size=min(3, len(states)), replace=False).tolist():
                got = cg._derived_root_walk(cid, d, int(ref))
                assert _as_sets(got) == want, (cid, d, ref)
                derived += 1
                base = cg.root(cid, int(ref))
                if base.end_tok.size > cg._dense_min:
                    # ... also from a reference holding its dense array (a mask's, or the compiled
                    # walk's own): copied, not rebuilt, and left intact
                    if base.dense_end is None:
                        base.dense_end = np.zeros(cg.vocab_size, dtype=np.int32)
                        base.dense_end[base.end_tok] = base.end_state
                    assert _as_sets(cg._derived_root_walk(cid, d, int(ref))) == want, (cid, d, ref)
                    assert np.array_equal(base.dense_end[base.end_tok], base.end_state)  # left intact
                    assert np.count_nonzero(base.dense_end) == base.end_tok.size
                    dense_refs += 1
            checked += 1
    assert checked > 20 and derived > 20 and dense_refs > 0


def test_overlay_nodes_fill_as_their_patched_copies(walks: str, smollm2_tokenizer) -> None:
    """A wide walk derived from another is an overlay on it (:attr:`WalkNode.base`, no arrays of its
    own): its ends, and every mask fill of them (all end states allowed, some, none; over a mask
    already holding other tokens), equal those of the same changes made to a copy, also for an
    overlay derived from an overlay (changes merged on the first base, the last change winning)."""
    cg = _compiled("json", smollm2_tokenizer)
    cid, d = next((c, s) for c in range(len(cg._ctx_specs)) for s in _states(cg, c, 40)
                  if cg.root(c, s).n_end > 4 * cg._dense_min)
    base = cg.root(cid, d)
    rng = np.random.default_rng(11)
    n_states = cg.ctx(cid).n_states
    ends = dict(zip(base.end_tok.tolist(), base.end_state.tolist()))
    want = dict(ends)
    node = base
    overlays = 0
    for k in (3, 3, 30, 3):  # few changes (merged in a dict), then more (np.unique), over the first's
        have = np.fromiter(want, dtype=np.int32)
        fix_t = np.unique(rng.choice(have, k)).astype(np.int32)
        fix_s = rng.integers(START, n_states, fix_t.size).astype(np.int32)
        drop = np.unique(rng.choice(have, k)).astype(np.int32)
        add_t = np.unique(np.concatenate([drop[:2], rng.choice(np.setdiff1d(cg._content, have), k)])).astype(np.int32)
        add_s = rng.integers(START, n_states, add_t.size).astype(np.int32)
        for t, st in zip(fix_t.tolist(), fix_s.tolist()):
            want[t] = st
        for t in drop.tolist():
            want.pop(t, None)
        for t, st in zip(add_t.tolist(), add_s.tolist()):
            want[t] = st
        node = cg._patched(node, fix_t, fix_s, drop, add_t, add_s)
        overlays += node.base is (base.base or base)  # (on the first base: a uniform walk is an overlay too)
        assert node.base is None or node.base.base is None
        assert dict(zip(node.end_tok.tolist(), node.end_state.tolist())) == want
        assert node.n_end == len(want)
        copy = WalkNode(np.fromiter(want, dtype=np.int32), np.fromiter(want.values(), dtype=np.int32), {}, {})
        order = np.argsort(copy.end_tok)
        copy.end_tok, copy.end_state = copy.end_tok[order], copy.end_state[order]
        for share in (1.0, 0.5, 0.0):
            ok = rng.random(n_states) < share
            ok[DEAD] = False
            m0 = rng.random(cg.vocab_size) < 0.3
            got, exp = m0.copy(), m0.copy()
            cg._fill_ends(got, ok, node)
            exp[copy.end_tok[ok[copy.end_state]]] = True
            assert np.array_equal(got, exp), share
    assert overlays == 4
    assert np.array_equal(base.end_tok, np.fromiter(ends, dtype=np.int32))  # the base is left intact


def test_keys_prefixes_pick_a_reference_and_mask_as_before(walks: str, smollm2_tokenizer) -> None:
    """Inside an object's key, most tokens leave only the any-string terminal alive: the walk from a
    longer key prefix is derived from an earlier prefix's walk, walking a few hundred tokens, and the
    masks along a record equal those of an eager compile of the same grammar."""
    tok = smollm2_tokenizer
    lazy = _compiled("keys", tok)
    eager = gad.compile(Grammar.from_json_schema(KEYS), tok, cache_dir=False, warm=True)
    ids = tok.encode('{"configMap":"x","count":"y","zz":7}', add_special_tokens=False)
    ml, me = lazy.matcher(), eager.matcher()
    for t in ids:
        assert np.array_equal(ml.mask(), me.mask())
        assert ml.accept_token(t) and me.accept_token(t)
    assert np.array_equal(ml.mask(), me.mask())
    # a state deep in a key prefix has a reference whose walk differs on few first bytes
    m = lazy.matcher()
    assert m.accept_token(tok.encode("{", add_special_tokens=False)[0])
    for t in tok.encode('"con', add_special_tokens=False):
        assert m.accept_token(t)
    stack, d = m._states[-1]
    cid = lazy.state_ctx[lazy.top(stack)]
    lazy.root(cid, d)
    step = lazy.ctx(cid).table[d][ord("f")]  # '"conf'
    ref = lazy._reference_root(cid, int(step), lazy._content.size // 4)
    assert ref is not None


def test_states_inside_a_character_are_shared_across_ascii_prefixes() -> None:
    """A lead byte kills the terminals that cannot read a non-ASCII character from their state, so
    the states inside a character after different key prefixes are one state (the any-string
    terminal's), not one per prefix."""
    string = TerminalAutomaton.build("S", r'"[^"]*"')
    keys = [TerminalAutomaton.build(f"K{i}", f'"{k}"') for i, k in enumerate(("alpha", "alps", "beta"))]
    terms = [string, *keys]
    dfa = LexerDFA(terms, [False] * 4, {}, 4, terms)
    after = set()
    for prefix in (b'"a', b'"al', b'"alp', b'"b', b'"x'):  # the string automaton's state is one
        s = START
        for b in prefix:
            s = dfa.rows[s][b]
        inside = dfa.rows[s][0xC3]  # first byte of a two-byte character
        assert inside and dfa._keys[inside][3]
        after.add(inside)
        # ... and reading the character completes back into the string alone
        out = dfa.rows[inside][0xA9]
        assert dfa._keys[out][0][1:] == (-1, -1, -1)
    assert len(after) == 1
    assert len(dfa._index) < 30  # 14 key prefixes and the any-string state, few inside a character


def _probe(cg: CompiledGrammar, stack: int) -> int:
    dfa = cg.ctx(cg.state_ctx[cg.top(stack)])
    return sum(1 << i for i, name in enumerate(dfa.names) if not dfa.ignore[i] and cg._can_shift(stack, name))


@pytest.mark.parametrize("which", ["json", "sql"])
def test_allowed_bits_equal_a_probe_of_every_terminal(which: str, smollm2_tokenizer) -> None:
    tok = smollm2_tokenizer
    cg = _compiled(which, tok)
    text = ('{"a": [1, -2.5e3, {"b": null}], "c": "d\\u00e9", "e": [[], {}, true]}' if which == "json" else
            "SELECT T1.name, count(*) FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.sid "
            "WHERE T2.year > 2014 AND NOT (T1.age < 30 OR T1.name LIKE 'a%') GROUP BY T1.name "
            "HAVING count(*) >= 2 ORDER BY T1.name DESC LIMIT 3")
    m = cg.matcher()
    for t in tok.encode(text, add_special_tokens=False):
        m.mask()
        assert m.accept_token(t)
    assert len(cg._allowed_memo) > (5 if which == "json" else 40)
    for stack, bits in list(cg._allowed_memo.items()):
        if TRUNCATED not in cg.stack_states(stack):  # (a suffix memo's stack: its bottom is unknown)
            assert bits == _probe(cg, stack), stack


def test_allowed_bits_after_a_deep_chain_of_reductions() -> None:
    """``x: "a" x | "a"`` reduces once per ``a`` before ``;``: 300 chained reductions (past the
    depth the grouped computation goes, where each terminal is probed on its own), and the stacks
    interned stay linear in the input (not one per reduction per token)."""
    parser = lark.Lark('start: x ";"\nx: "a" x | "a"\n', parser="lalr", lexer="contextual")
    cg = CompiledGrammar(parser, Vocabulary([b"a", b";", b"a;", None], eos_ids=[3]))
    m = cg.matcher()
    for _ in range(300):
        assert m.accept_token(0)
    stack, _ = m._states[-1]
    assert cg.allowed_bits(stack) == _probe(cg, stack)
    assert len(cg._stk_state) < 300 * 40
    assert m.mask().tolist() == [True, True, True, False]  # EOS (id 3) only after the ";"
    assert m.accept_token(1) and m.is_accepting()


SUFFIX_TEXTS = {
    "sql": ["SELECT a - - - - - 1 FROM t", "SELECT 1 ---------------- 2, -(((((-3))))) FROM t WHERE b = ++++4",
            "SELECT x FROM t WHERE (((a = 1) AND (b < 2)) OR NOT (c >= 3)) ORDER BY x DESC LIMIT 3",
            "SELECT count(*) FROM (SELECT a FROM (SELECT a FROM t WHERE a IN (1, 2))) GROUP BY a"],
    "json": ['[[[[[[[[[[1]]]]]]]]]]', '{"a": [[[[-1, [[[]]]]]]], "b": {"c": [{"d": [[[[[]]]]]}]}}'],
}


@pytest.mark.parametrize("which", ["sql", "json"])
def test_suffix_memo_fills_as_the_whole_stack(which: str, smollm2_tokenizer, data_dir, monkeypatch) -> None:
    """A fork's child walk filled from the memo kept per top-of-stack LR states
    (:meth:`CompiledGrammar._suffix_fill`) gives the mask of a fill at the whole stack: every mask of
    real Spider queries and of deep nesting and chains of repeated terminals (a token of 16 dashes is
    16 unary minuses), computed afresh (no mask cache) with the memo and without it, on one compiled
    grammar whose memo grows with the texts before each."""
    import json

    import gad.engine.compiler as compiler

    tok = smollm2_tokenizer
    texts = list(SUFFIX_TEXTS[which])
    if which == "sql":
        lines = (data_dir / "spider" / "dev_queries.jsonl").read_text().splitlines()
        texts += [json.loads(line)["query"] for line in lines[:40:2]]
    cg = _compiled(which, tok)
    cg.mask_cache_size = 0
    seqs = [tok.encode(t, add_special_tokens=False) for t in texts]

    def masks() -> list[np.ndarray]:
        out = []
        for ids in seqs:
            m = cg.matcher()
            for t in ids:
                out.append(m.mask())
                assert m.accept_token(t)
            out.append(m.mask())
        return out

    monkeypatch.setattr(compiler, "SUFFIX_MEMO_TOKENS", -1)
    plain = masks()
    monkeypatch.setattr(compiler, "SUFFIX_MEMO_TOKENS", 4096)
    hits = cg.stats.get("suffix_hits", 0)
    memo = masks()
    served = cg.stats.get("suffix_hits", 0) - hits  # the memo served (on SQL, several walks per mask)
    assert served > (len(plain) if which == "sql" else 10), served
    for i, (a, b) in enumerate(zip(plain, memo)):
        assert np.array_equal(a, b), i
    depths = {e[0] for e in cg._suffix_memo.values()}
    assert depths & {4, 8, 16, 0} if which == "sql" else True  # some walks read below two states


def test_suffix_memo_reads_as_deep_as_the_nesting() -> None:
    """A token of ``j`` closing brackets is allowed after ``k`` open ones iff ``j <= k``: the fill of
    its fork walk reads the stack ``j`` levels down, past any suffix the memo first tries (two LR
    states, then 4, 8, 16, then none). Masks at every nesting depth up to 40, visited in an order that
    fills the memo shallow first and deep after, equal the expected ones."""
    parser = lark.Lark('start: e\ne: "(" e ")" | "x"\n', parser="lalr", lexer="contextual")
    closes = [")" * j for j in range(1, 41)]
    toks = ["(", "x", *closes, "x)", "x))", "x" + ")" * 20, None]
    vocab = Vocabulary([t.encode() if t else None for t in toks], eos_ids=[len(toks) - 1])
    cg = CompiledGrammar(parser, vocab)
    cg.mask_cache_size = 0
    for k in [*range(0, 41), *range(40, -1, -3)]:
        m = cg.matcher()
        for _ in range(k):
            assert m.accept_token(0)
        mask = m.mask()  # before the x: "(" and "x", and "x" followed by up to k brackets
        want = [toks[i] is not None and (toks[i] in ("(", "x") or (toks[i][0] == "x" and len(toks[i]) - 1 <= k))
                for i in range(len(toks))]
        assert mask.tolist() == want, k
        assert m.accept_token(1)
        mask = m.mask()  # after the x: up to k brackets, EOS only when k == 0
        want = [toks[i] is not None and toks[i][0] == ")" and len(toks[i]) <= k for i in range(len(toks))]
        want[-1] = k == 0
        assert mask.tolist() == want, k
    assert cg.stats.get("suffix_hits", 0) > 0


@pytest.mark.parametrize("which", ["json", "keys"])
def test_compiled_trie_loops_equal_the_python_loops(which: str, smollm2_tokenizer, monkeypatch) -> None:
    """:func:`kernels.lockstep` and :func:`kernels.trie_search` give :meth:`CompiledGrammar._trie_derived`
    and :meth:`CompiledGrammar._trie_walk` what their Python loops give: the same end tokens and
    states, the same fork groups in the same order, and None past the same budget of trie nodes."""
    cg = _compiled(which, smollm2_tokenizer)
    compared = 0
    for cid in range(len(cg._ctx_specs))[:12]:
        states = _states(cg, cid, 6)
        for d in states:
            for budget in (3, 40, 3000):
                walked = []
                for enabled in (True, False):
                    monkeypatch.setattr(kernels, "ENABLED", enabled)
                    got = cg._trie_walk(cg.ctx(cid), d, budget)
                    walked.append(None if got is None else (
                        got.end_tok.tolist(), got.end_state.tolist(),
                        [(f, t.tolist(), o.tolist()) for f, (t, o) in got.groups.items()]))
                assert walked[0] == walked[1], (cid, d, budget)
            for ref in states:
                if ref == d:
                    continue
                for budget in (3, 40, 3000):
                    out = []
                    for enabled in (True, False):
                        monkeypatch.setattr(kernels, "ENABLED", enabled)
                        got = cg._trie_derived(cid, d, ref, budget)
                        out.append(None if got is None else (
                            got.end_tok.tolist(), got.end_state.tolist(),
                            [(f, t.tolist(), o.tolist()) for f, (t, o) in got.groups.items()]))
                    assert out[0] == out[1], (cid, d, ref, budget)
                    compared += out[0] is not None
    assert compared > 20
