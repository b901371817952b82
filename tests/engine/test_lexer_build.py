"""The lexer automaton builder (:class:`gad.engine.lexer.LexerDFA`) against a plain reference.

The builder steps one byte per class of bytes that every live automaton treats alike, from cached
per-(terminal, state) rows and bit sets.  The reference here steps **every** byte of every state on
its own with the builder's generic one-byte step (``LexerDFA._step``: the semantics, one character
automaton step per terminal and guard), numbers new states in the order a breadth-first walk over
bytes 0-255 finds them, and recomputes the forks, their guards' ok-bytes, the reachable fork winners
and the start states from their definitions.  Both must give the same automaton, state for state:
on random Lark grammars (hypothesis), on the shipped grammars' contexts, on JSON-Schema grammars
(keys as literal strings beside the generic string) and on grammars naming non-ASCII characters;
with the extra start states that guards add later (``start_for``) and after a compile-cache round trip.
Each test runs twice: with the compiled build (:func:`gad.engine.kernels.explore_product`, used from the
start state where no automaton names a non-ASCII character) and with the Python one.
"""

from __future__ import annotations

import logging
import pickle
import re
from collections import deque

import lark
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from gad.engine import cachefile, compiler, kernels
from gad.engine.compiler import CompiledGrammar
from gad.engine.lexer import DEAD, START, LexerDFA, TerminalAutomaton
from gad.engine.vocab import Vocabulary
from gad.grammar import Grammar
from gad.testing.strategies import assume_lark_terminals, lark_grammars

logging.getLogger("lark").setLevel(logging.ERROR)  # Lark's own collision warnings


@pytest.fixture(autouse=True, params=["compiled", "python"])
def builder(request, monkeypatch) -> str:
    """Build the automata with the compiled product, then with the Python builder alone."""
    monkeypatch.setattr(kernels, "ENABLED", request.param == "compiled")
    return request.param


# --- the reference -----------------------------------------------------------------------------------
def _reference_fork(dfa: LexerDFA, key: tuple) -> tuple[int, frozenset] | None:
    """(winner after the keyword rule, guard) of state ``key``, or None: its lexeme cannot close."""
    main, best, guard, pend = key
    terms = dfa.terms
    if pend or best < 0 or main[best] < 0 or main[best] not in terms[best].fsm.finals:
        return None
    w = next((j for j in dfa.unless.get(best, ()) if main[j] >= 0 and main[j] in terms[j].fsm.finals), best)
    g = set(guard) | {(dfa.names[k], main[k]) for k in range(best) if main[k] >= 0}
    st = main[best]
    if any(t in terms[best].live for t in terms[best].fsm.map.get(st, {}).values()):
        g.add((dfa.names[best], st))  # the winner may still match a longer text
    return w, frozenset(g)


def _reference_ok_bytes(dfa: LexerDFA, guard: frozenset) -> np.ndarray:
    ok = np.ones(256, dtype=bool)
    for b in range(0x80):
        for name, gs in guard:
            a = dfa._guard_term(name)
            t = a.step(gs, chr(b))
            if t >= 0 and t in a.fsm.finals:
                ok[b] = False
    return ok


def _reference_keys_and_rows(dfa: LexerDFA, seeds: list[tuple]) -> tuple[list, list[tuple[int, ...]]]:
    """States (keys) and rows of a breadth-first walk stepping every byte with ``dfa._step``; ``seeds``:
    the start state, then the start states ``start_for`` added, in the order they were added."""
    keys: list = [None]
    index: dict = {}
    rows: list[tuple[int, ...]] = [(DEAD,) * 256]
    todo: deque[int] = deque()
    for seed in seeds:
        if seed not in index:
            index[seed] = len(keys)
            keys.append(seed)
            todo.append(index[seed])
        while todo:
            i = todo.popleft()
            row = []
            for b in range(256):
                nk = dfa._step(keys[i], b)
                if nk is None:
                    row.append(DEAD)
                    continue
                j = index.get(nk)
                if j is None:
                    j = index[nk] = len(keys)
                    keys.append(nk)
                    todo.append(j)
                row.append(j)
            rows.append(tuple(row))
    return keys, rows


def _assert_matches_reference(dfa: LexerDFA, seeds: list[tuple]) -> None:
    keys, rows = _reference_keys_and_rows(dfa, seeds)
    n = len(keys)
    assert dfa.n_states == n and dfa._keys == keys
    assert dfa.rows == rows
    table = np.asarray(rows, dtype=np.int32)
    assert dfa.table.dtype == np.int32 and np.array_equal(dfa.table, table)
    # the compiled walks' flat view: the dead state's row all 0 (it absorbs)
    assert not table[DEAD].any() and np.array_equal(dfa.flat_table, table.ravel())
    assert np.shares_memory(dfa.flat_table, dfa.table)
    # forks: one per distinct (winner, guard), numbered in order of the states that have them
    forks: list = []
    fork_of = [-1]
    for k in keys[1:]:
        f = _reference_fork(dfa, k)
        if f is not None and f not in forks:
            forks.append(f)
        fork_of.append(-1 if f is None else forks.index(f))
    assert dfa.forks == forks and dfa.fork_list == fork_of
    assert dfa.fork_id.tolist() == fork_of + [-1]
    assert len(dfa.fork_ok_byte) == len(forks)
    for (_, g), ok in zip(forks, dfa.fork_ok_byte):
        assert np.array_equal(ok, _reference_ok_bytes(dfa, g))
    # reachable fork winners: least fixed point of reach(s) = own winner | reach of every successor
    reach = [0] + [1 << forks[f][0] if f >= 0 else 0 for f in fork_of[1:]]
    succ = [set(r) - {DEAD} for r in rows]
    changed = True
    while changed:
        changed = False
        for s in range(1, n):
            r = reach[s]
            for t in succ[s]:
                r |= reach[t]
            if r != reach[s]:
                reach[s], changed = r, True
    assert dfa.reach[1:n] == reach[1:]
    assert [dfa.reach_values[g] for g in dfa.reach_group[1:]] == dfa.reach[1:n]
    init = tuple(t.fsm.initial for t in dfa.terms)
    assert dfa.is_start.tolist() == [k is not None and k[0] == init and k[1] < 0 and not k[3] for k in keys]


def _check_context(dfa: LexerDFA, rounds: int = 2) -> bool:
    """The automaton as built, then with the start states of its forks' guards added (``rounds`` times:
    a start under a guard reaches forks with new guards)."""
    init = tuple(t.fsm.initial for t in dfa.terms)
    own_nonascii = any(t.nonascii for t in dfa.terms)  # (the grammar's other terminals do not matter)
    assert dfa.compiled_build == (kernels.ENABLED and not own_nonascii and 0 < len(dfa.terms) <= 62)
    # the start states of the first guards, added before any key is made (a compiled build's guarded
    # starts then wait apart from its keys: LexerDFA._guarded_start)
    first = sorted({g for _, g in dfa.forks if g}, key=repr)[:4]
    early = [dfa.start_for(g) for g in first]
    fast = "_more_keys" in dfa.__dict__
    if first:  # (found again, one by one and many at once, still before any key is made)
        starts = [(init, -1, g, ()) for g in first]
        assert [dfa.state_of(k) for k in starts] == early
        assert dfa.states_of([*starts, (init, -1, frozenset(), ())]) == [*early, START]
    # keys and states looked up many at once (from a compiled build's key rows, before its keys are made)
    # agree with the keys made one by one, and a key no state has is found nowhere
    n = dfa.n_states
    batch = dfa.keys_of(list(range(1, n)))
    found = dfa.states_of([*batch, (tuple([-2] * len(dfa.terms)), 99, frozenset(), ())])
    assert batch == [dfa._keys[s] for s in range(1, n)]
    assert found == [*range(1, n), None]
    seeds = [dfa._keys[START], *((init, -1, g, ()) for g in first)]
    assert early == [dfa._index[k] for k in seeds[1:]]
    _assert_matches_reference(dfa, seeds)
    for _ in range(rounds):
        guards = sorted({g for _, g in dfa.forks if g}, key=repr)[:8]
        if not guards:
            break
        for g in guards:
            seeds.append((init, -1, g, ()))
            assert dfa.start_for(g) == dfa._index[seeds[-1]]
        _assert_matches_reference(dfa, seeds)
    return fast


def _contexts(cg: CompiledGrammar) -> list[LexerDFA]:
    return [cg.ctx(c) for c in range(len(cg._ctx_specs))]


def _compiled(text: str, alphabet: str) -> CompiledGrammar:
    parser = lark.Lark(text, parser="lalr", lexer="contextual")
    return CompiledGrammar(parser, Vocabulary.from_strings(sorted(set(alphabet))))


# --- random grammars ---------------------------------------------------------------------------------
_grammar = lark_grammars("abc", ["a", "b", "c", "[ab]", "[bc]", "[abc]", "ab", "(ab)"], max_literal=3,
                         priorities=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_grammar)
def test_random_grammars_build_the_reference_automata(g) -> None:
    text, terms = g
    assume_lark_terminals(terms, "abc")
    try:
        cg = _compiled(text, "abc")
    except lark.exceptions.LarkError:
        assume(False)
        return
    for dfa in _contexts(cg):
        _check_context(dfa)


# --- hand-written and shipped grammars ---------------------------------------------------------------
_GRAMMARS = {
    # prefixes of one another, a regex covering a keyword (Lark's "unless"), an ignored terminal
    "keywords": ('start: item+\nitem: KW | NAME | NUM | OP\nKW: "if" | "in" | "int"\nNAME: /[a-z]+/\n'
                 'NUM: /[0-9]+(\\.[0-9]+)?/\nOP: "<" | "<=" | "<<" | "="\n%ignore " "\n', "ifnt0123.<= "),
    # guards: a terminal that would override a close is still alive after it
    "guards": ('start: (A | B | C)+\nA: "ab"\nB: /a(bc)*/\nC: /b+c?/\n', "abc"),
    # a context without the terminals that name non-ASCII characters (built by the compiled product),
    # after one that has them, a guard among them ("é" may still grow to "éé" when "é" closes)
    "non-ascii-elsewhere": ('start: (E | F) (N | W)\nE: "é"\nF: /é+/\nN: /[0-9]+/\nW: /[a-z]+/\n', "é09az"),
    # characters an automaton names (partial UTF-8 characters are remembered byte by byte)
    "non-ascii": ('start: (S | E | W)+\nS: /"[^"]*"/\nE: "é" | "日本"\nW: /[a-zà-ÿ]+/\n%ignore " "\n',
                  'aé\u20ac\U0001d11e" 日本ÿ'),
}


@pytest.mark.parametrize("name", sorted(_GRAMMARS))
def test_hand_written_grammars_build_the_reference_automata(name: str) -> None:
    text, alphabet = _GRAMMARS[name]
    dfas = _contexts(_compiled(text, alphabet))
    assert sum(len(d.forks) for d in dfas) > 0
    if name == "non-ascii-elsewhere":
        assert all(d.explicit_nonascii for d in dfas)
        assert any(d.compiled_build for d in dfas) == kernels.ENABLED  # the context of N and W
        assert any(not d.compiled_build for d in dfas)  # E and F's
    if name == "non-ascii":
        assert all(d.explicit_nonascii for d in dfas)
        assert any(isinstance(k[3][0], bytes) for d in dfas for k in d._keys[1:] if k[3])
    for dfa in dfas:
        _check_context(dfa)
    if name == "non-ascii-elsewhere":
        # E's close leaves F in a guard: the next context's start under it (in a fresh build) reads
        # "é" byte by byte
        guards = sorted({g for d in dfas if not d.compiled_build for _, g in d.forks if g}, key=repr)
        assert guards
        for dfa in _contexts(_compiled(text, alphabet)):
            if dfa.terms and not any(t.nonascii for t in dfa.terms):
                init = tuple(t.fsm.initial for t in dfa.terms)
                for g in guards:
                    dfa.start_for(g)
                _assert_matches_reference(dfa, [dfa._keys[START], *((init, -1, g, ()) for g in guards)])


@pytest.mark.parametrize("name", ["json", "json_compact", "sql", "text"])
def test_shipped_grammars_build_the_reference_automata(name: str) -> None:
    g = Grammar.builtin(name)
    cg = CompiledGrammar(g.lark, Vocabulary.from_strings(list("abc{}[]:,\" 0123")), g)
    dfas = _contexts(cg)
    assert len(dfas) > 0
    for dfa in dfas:
        _check_context(dfa, rounds=1)


_SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer"}, "idx": {"type": "number"}, "name": {"type": "string"},
    "naïve": {"type": "boolean"}, "日本": {"type": "array", "items": {"enum": ["a", "ab", 3]}},
    "tags": {"type": "object", "additionalProperties": {"type": "string"}}}, "required": ["id"]}


@pytest.mark.parametrize("whitespace", ["compact", 2])
def test_json_schema_contexts_build_the_reference_automata(whitespace, monkeypatch) -> None:
    g = Grammar.from_json_schema(_SCHEMA, whitespace=whitespace)
    cg = CompiledGrammar(g.lark, Vocabulary.from_strings(list('{}[]:," 0123abc')), g)
    dfas = _contexts(cg)
    assert any(len(d.names) >= 4 for d in dfas)  # keys as literals beside the generic string
    for dfa in dfas:
        _check_context(dfa, rounds=1)
    # the guards one context's closes leave on the next (the empty object "{}" after "{", the empty
    # array after "["), on a fresh build of every context: most last one byte, and their starts are
    # added without the builder (and without making a compiled build's keys)
    guards = sorted({g for d in dfas for _, g in d.forks if g}, key=repr)
    assert guards
    added = []
    real = LexerDFA._guarded_start

    def counted(self, key):
        i = real(self, key)
        added.append(i is not None and ("_keys" not in self.__dict__ or not self.compiled_build))
        return i

    monkeypatch.setattr(LexerDFA, "_guarded_start", counted)
    for dfa in _contexts(CompiledGrammar(g.lark, Vocabulary.from_strings(list('{}[]:," 0123abc')), g)):
        if not dfa.terms or any(t.nonascii for t in dfa.terms):
            continue
        init = tuple(t.fsm.initial for t in dfa.terms)
        got = [dfa.start_for(gd) for gd in guards]
        _assert_matches_reference(dfa, [dfa._keys[START], *((init, -1, gd, ()) for gd in guards)])
        assert got == [dfa.start_for(gd) for gd in guards]
    assert added and all(added)  # (JSON: every guard dies or fires on the next byte)


def test_automaton_read_back_from_a_cache_file_grows_like_a_fresh_one(tmp_path) -> None:
    """A lexer automaton written to a compile-cache file and read back adds start states (``start_for``)
    exactly as the one that was never stored does."""
    text, alphabet = _GRAMMARS["guards"]
    parser = lark.Lark(text, parser="lalr", lexer="contextual")
    cg = CompiledGrammar(parser, Vocabulary.from_strings(sorted(set(alphabet))))
    dfas = _contexts(cg)
    encode, resolve = compiler._cache_external(parser)
    path = tmp_path / "dfas.npz"
    cachefile.save(path, {"k": 1}, dfas, {"LexerDFA": LexerDFA}, encode)
    back = cachefile.load(path, {"k": 1}, {"LexerDFA": LexerDFA}, resolve)
    assert len(back) == len(dfas)
    grew = 0
    for fresh, loaded in zip(dfas, back):
        assert loaded.rows == fresh.rows and np.array_equal(loaded.table, fresh.table)
        n = loaded.n_states
        for _ in range(2):
            for g in sorted({g for _, g in fresh.forks if g}, key=repr):
                assert loaded.start_for(g) == fresh.start_for(g)
        grew += loaded.n_states > n
        assert loaded.n_states == fresh.n_states and loaded._keys == fresh._keys
        assert loaded.rows == fresh.rows and loaded.forks == fresh.forks and loaded.reach == fresh.reach
        assert np.array_equal(loaded.table, fresh.table) and np.array_equal(loaded.flat_table, fresh.flat_table)
        assert np.array_equal(loaded.is_start, fresh.is_start) and np.array_equal(loaded.reach_group, fresh.reach_group)
        assert all(np.array_equal(a, b) for a, b in zip(loaded.fork_ok_byte, fresh.fork_ok_byte))
    assert grew  # some automaton added start states after the round trip


def _chain_walk(fsm, text: str):
    """The reference for ``TerminalAutomaton.chain``: ``(bytes, states)`` when ``fsm`` is exactly the chain
    of ``len(text) + 1`` states ``0 .. n`` the ASCII ``text`` steps through (one alphabet class per
    character, nothing else), found by walking the automaton; else None."""
    if not text.isascii():
        return None
    sym = fsm.alphabet._symbol_mapping
    if len(fsm.states) != len(text) + 1 or len(sym) != len(set(text)) + 1 or len(set(sym.values())) != len(sym):
        return None
    chain = [fsm.initial]
    for ch in text:
        row = fsm.map.get(chain[-1], {})
        nxt = row.get(sym.get(ch, -1))
        if nxt is None or len(row) != 1:
            return None
        chain.append(nxt)
    if set(fsm.finals) != {chain[-1]} or fsm.map.get(chain[-1]) or chain != list(range(len(text) + 1)):
        return None
    return text.encode("ascii"), tuple(chain)


@settings(max_examples=80, deadline=None)
@given(text=st.text(alphabet=st.sampled_from('ab"\\:{}*+.-_9 é'), min_size=1, max_size=8))
def test_literal_chain_tables_equal_the_general_ones(text: str) -> None:
    """An ASCII literal's byte tables come straight from its bytes (TerminalAutomaton._chain_tables);
    they must be the general path's, array for array, also where the automaton was minimised (a
    literal holding ``*``, ``+`` or ``{``) and its states are numbered otherwise; a non-ASCII literal
    takes another path."""
    from gad.engine.lexer import TerminalAutomaton
    from gad.grammar.automata import coreachable

    t = TerminalAutomaton.build(f"L{abs(hash(text))}", re.escape(text))
    # (an ASCII literal's live states, chain and ASCII moves are read off its bytes, its automaton
    # made only on first use: they must be what the automaton gives)
    lazy = [t.ascii_info(q) for q in range(len(text) + 1)], [t.nonascii_live(q) for q in range(len(text) + 1)]
    # (and so must an automaton read back from the compile cache, before anything else reads it)
    back = pickle.loads(pickle.dumps(t))
    assert [back.ascii_info(q) for q in range(len(text) + 1)] == lazy[0] and back.chain() == t.chain()
    assert t.live == frozenset(coreachable(t.fsm)) and t.initial == t.fsm.initial
    assert t.chain() == _chain_walk(t.fsm, text)
    built = TerminalAutomaton(t.name, t.regexp, t.fsm, t.live, t.nonascii)
    assert lazy == ([built.ascii_info(q) for q in range(len(text) + 1)],
                    [built.nonascii_live(q) for q in range(len(text) + 1)])
    assert t.state_map() is None if t.chain() is not None else t.state_map() == t.byte_tables()[4]
    fast, general = t._chain_tables(), t._general_tables()
    assert general[4] is None or t.chain() is None  # (what state_map answers for a chain unread)
    if not text.isascii():
        assert fast is None and t.chain() is None
        return
    assert fast is not None and t.chain() is not None and t.chain()[0] == text.encode()
    for a, b in zip(fast, general, strict=True):
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        else:
            assert a == b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.text(alphabet=st.sampled_from('ab"\\:_é\x00z9'), min_size=1, max_size=6),
                      min_size=1, max_size=5, unique=True))
def test_word_set_tables_equal_the_general_ones(builder: str, words: list[str]) -> None:
    """A word set's trie (keys, string enums) gets its byte tables straight from its moves; they must
    be the general path's, array for array; a regexp with a repetition takes the general path."""
    from gad.engine.lexer import TerminalAutomaton

    regexp = "(?:" + "|".join(re.escape(w) for w in words) + ")" if len(words) > 1 else re.escape(words[0])
    t = TerminalAutomaton.build(f"W{abs(hash(regexp))}", regexp)
    fast, general = t._word_tables(), t._general_tables()
    assert fast is not None
    for a, b in zip(fast, general, strict=True):
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        else:
            assert a == b
    assert TerminalAutomaton.build("W_REP", '"[ab]+"')._word_tables() is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.sampled_from('ab"\\:_,{}\x00\x7f 9'), min_size=1, max_size=12),
       other=st.sampled_from(["", "é", "ab"]))
def test_a_literal_context_builds_the_product_automaton(builder: str, text: str, other: str, monkeypatch) -> None:
    """A context of one ASCII literal (an object's key, a punctuation mark) is built directly
    (``LexerDFA._build_literal``): the reference automaton, and the compiled product's, array for array,
    whatever other terminal the grammar has (one naming a non-ASCII character changes how partial
    characters are read in other contexts, not here)."""
    from gad.engine.lexer import TerminalAutomaton

    lit = TerminalAutomaton.build(f"L{abs(hash(text))}", re.escape(text))
    universe = [lit] + ([TerminalAutomaton.build(f"O{abs(hash(other))}", re.escape(other))] if other else [])
    fast = LexerDFA([lit], [False], {}, 1, universe)
    assert fast._single_literal() is not None  # (taken by the compiled build only)
    _check_context(fast)
    if builder == "compiled":
        with monkeypatch.context() as mp:  # (undone before hypothesis's next example)
            mp.setattr(LexerDFA, "_single_literal", lambda self: None)
            product = LexerDFA([lit], [False], {}, 1, universe)
        _assert_same_build(fast, product)


def _assert_same_build(fast: LexerDFA, product: LexerDFA) -> None:
    for name in ("_karr", "table", "flat_table", "fork_id", "fork_ok", "is_start", "reach_group"):
        a, b = getattr(fast, name), getattr(product, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in ("forks", "fork_list", "reach", "reach_values", "n_states", "_keys", "rows", "compiled_build"):
        assert getattr(fast, name) == getattr(product, name), name


# general terminals a key context may start with: a JSON string (reads non-ASCII characters), an ASCII
# one, one whose final states may go on (left to the product: a guard at its forks), one that dies
# inside some keys, and one whose states recur across the trie without a loop
_GENERAL = ['"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"', '"[a-z: ]*"', '"[ab]+"?', '"[ab]*"', '[ab"]+',
            '"(?:ab|ba){1}"']


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.text(alphabet=st.sampled_from('ab"\\: _\x00z'), min_size=1, max_size=6),
                      min_size=1, max_size=6, unique=True),
       general=st.sampled_from([None, *_GENERAL]), quoted=st.booleans())
# a trie node whose children take every byte the general terminal reads ("a: ", a, b), and one where
# only a byte the first node of its general state had as a child ("b: a) leaves the trie
@example(words=["a", "aa", "ab", "b", "bb"], general='"[ab]*"', quoted=True)
# the first node of a general state ("ab) leaves the trie on a byte a later one ("ba) has as a child,
# its only move out of the trie there
@example(words=["abz", "ba"], general='"(?:ab|ba){1}"', quoted=True)
def test_a_context_of_literals_builds_as_their_trie(builder: str, words: list[str], general: str | None,
                                                      quoted: bool, monkeypatch) -> None:
    """A context of ASCII literals (an object's keys without additional properties, punctuation), or of a
    general terminal with the literals as its keyword targets (an object's keys beside the general key),
    is built as the literals' trie (``LexerDFA._build_trie``, :func:`gad.engine.kernels.trie_product`):
    the reference automaton, and the compiled product's, array for array.  Literals one of which is a
    prefix of another (without a general terminal), or a general terminal that may go on after a match,
    take the product."""
    from gad.engine.lexer import TerminalAutomaton

    if quoted:  # (keys: quoted, so no one a prefix of another)
        words = [f'"{w}"' for w in words]
    lits = [TerminalAutomaton.build(f"L{abs(hash(w))}", re.escape(w)) for w in words]
    if general is None:
        terms, unless, n_main = lits, {}, len(lits)
    else:
        terms = [TerminalAutomaton.build(f"G{abs(hash(general))}", general), *lits]
        unless, n_main = {0: list(range(1, len(terms)))}, 1
    ignore = [False] * len(terms)
    fast = LexerDFA(terms, ignore, unless, n_main, terms)
    if builder == "compiled" and len(terms) > 1:
        _compare_trie_build(fast, words, general, monkeypatch)
    _check_context(fast)


def _compare_trie_build(fast: LexerDFA, words: list[str], general: str | None, monkeypatch) -> None:
    terms, ignore, unless, n_main = fast.terms, [False] * len(fast.terms), fast.unless, fast.n_main
    srt = sorted(w.encode() for w in words)
    prefix = any(b.startswith(a) for a, b in zip(srt, srt[1:]))
    ext = general is not None and bool((lambda t: (t[6] & t[2]).any())(terms[0].byte_tables()))
    assert (fast._trie_shape() is not None) == (not ext if general is not None else not prefix)
    with monkeypatch.context() as mp:  # (undone before hypothesis's next example)
        mp.setattr(LexerDFA, "_build_trie", lambda self: False)
        product = LexerDFA(terms, ignore, unless, n_main, terms)
    _assert_same_build(fast, product)


def test_the_flat_view_reads_the_table_before_and_after_the_automaton_grows(builder: str) -> None:
    # scalar steps read the table through one flat memoryview (LexerDFA.flat_view: view[(s << 8) | b]),
    # which gives the table's moves and, after start states under a guard grow the table, is made
    # anew on the grown table (every state's moves, old and new), none kept on the old one
    text, alphabet = _GRAMMARS["guards"]
    grew = 0
    for dfa in _contexts(_compiled(text, alphabet)):
        view = dfa.flat_view()
        assert view.tolist() == dfa.table.ravel().tolist() and view.format == "i"
        assert dfa.flat_view() is view  # (kept while the table stands)
        n = dfa.n_states
        for g in sorted({g for _, g in dfa.forks if g}, key=repr):
            dfa.start_for(g)
        if dfa.n_states == n:
            continue
        grew += 1
        view = dfa.flat_view()
        assert len(view) == dfa.n_states * 256
        assert [view[(s << 8) | b] for s in range(dfa.n_states) for b in range(256)] == dfa.table.ravel().tolist()
        assert view.obj.base is dfa.table
    assert grew


def test_states_found_many_at_once_survive_hash_collisions(builder: str, monkeypatch) -> None:
    """LexerDFA.states_of looks keys up by a hash of their key rows, comparing the first row of each
    hash at once and any others one by one: with every hash equal (zero weights) each key takes the
    one-by-one path, and still finds its state (a key no state has: None)."""
    from gad.engine import lexer

    text, alphabet = _GRAMMARS["keywords"]
    monkeypatch.setattr(lexer, "_KEY_WEIGHTS", np.zeros_like(lexer._KEY_WEIGHTS))
    checked = 0
    for dfa in _contexts(_compiled(text, alphabet)):
        n = dfa.n_states
        if n < 3 or "_karr" not in dfa.__dict__:
            continue
        keys = dfa.keys_of(list(range(1, n)))
        junk = (tuple([-2] * len(dfa.terms)), 99, frozenset(), ())
        assert dfa.states_of([*keys[::-1], junk]) == [*range(n - 1, 0, -1), None]
        checked += 1
    assert checked or builder == "python"


def test_prefix_classes_index_agrees_with_a_scan_of_the_named_characters() -> None:
    """``TerminalAutomaton.prefix_classes`` (the index behind a pending prefix's liveness) against the
    scan it replaced, which read every named character per prefix (a GBNF alternation of a CJK and an
    astral class: over 20 s to a first mask, session 28's adversarial run)."""
    t = TerminalAutomaton.build("A", "(?:[\u4e00-\u4fff]|[\U00010000-\U000103ff]x|\u00e9|[\u0400-\u04ff]y)+")
    alphabet = t.fsm.alphabet
    prefixes = set(t.nonascii_prefixes()) | {b"\xe5", b"\xf0\x91", b"\xc3", b"\xd0"}
    assert len(t.nonascii_prefixes()) > 30
    for buf in prefixes:
        scan = {alphabet[c] for c in t.nonascii if c.encode("utf-8").startswith(buf)}
        assert t.prefix_classes(buf) == scan, buf
    assert t.prefix_classes(b"\xe4\xb8") and not t.prefix_classes(b"\xe5")
