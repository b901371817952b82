"""Byte-level lexer automata: one deterministic automaton per contextual-lexer context.

Lark's contextual lexer (LALR mode) lexes each lexeme with the terminals the parser accepts in its
current state, plus the ``%ignore`` terminals.  gad compiles each such terminal set into a single
**byte-level** DFA whose states are tuples of per-terminal character-automaton states
(``interegular`` FSMs) plus the bytes of a partially read UTF-8 character.

Lexing semantics: Lark's contextual lexer, exactly, on complete strings.  Lark's scanner joins the
context's terminals, in Lark's order (priority, max width, pattern length, name), into one
alternation and calls ``re.match``: the **first** terminal that matches at the position wins, with its
own match, however short; then Lark's keyword rule ("unless") may retype it as an equal string
terminal (whether ``%ignore`` drops the lexeme is decided by the terminal that matched, before the
retyping: :func:`lark_context_terminals`).  gad follows every reading that is still possible:

* the automaton state records the first terminal that has matched so far and cuts every later one;
* when that terminal matches (a *fork*), the lexeme both closes (the parser is fed, the next lexeme
  starts) and goes on; the closed reading carries a *guard*: the terminals that would override it
  (earlier ones still alive, or the winner itself, which may match a longer text); a byte that
  completes one of them kills that reading, as Lark would have lexed the text the other way;
* a lexeme never matches the empty string (Lark refuses zero-width terminals).

Building: from the start state, by a compiled breadth-first product of the terminals' automata
(:func:`gad.engine.kernels.explore_product`) wherever no terminal of the grammar names a non-ASCII
character; otherwise, and for the start states a guard adds later, in Python (a guard that dies or
fires on the next byte, as the empty object's ``{}`` after ``{``, takes the start's row instead:
:meth:`LexerDFA._guarded_start`).  All give the same states, numbered alike.

What remains different from Python's ``re`` (README "Exactness"): a terminal's own match is its
**longest** match, which is what ``re`` returns for the usual greedy patterns but not for lazy
quantifiers (``/a+?/``) or an alternation whose earlier branch is a proper prefix of a later one
(``/a|ab/``, also ``/a?(ab)?/``); ``\\d``, ``\\w``, ``\\s`` are ASCII classes (interegular), where
Python's ``re`` is Unicode-aware.
"""

from __future__ import annotations

import gc
import re
from bisect import bisect_right
from collections.abc import Collection
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, NoReturn, cast

import interegular
import numpy as np
from interegular.fsm import anything_else

from gad.engine import kernels
from gad.errors import UnsupportedGrammarError
from gad.grammar.automata import (
    MAX_CONTEXT_STATES,
    MAX_TERMINAL_STATES,
    AutomatonTooLarge,
    clip,
    coreachable,
    literal_text,
    literal_words,
    minimize,
    regex_fsm,
    words_fsm,
)

DEAD = 0
START = 1
# terminal automata with repetition and at most this many states are minimised (Moore's refinement:
# cheap at this size; the large pattern automata keep interegular's)
MINIMIZE_STATES = 64


def _minimal(fsm: interegular.FSM) -> interegular.FSM:
    """``fsm`` minimised (:func:`gad.grammar.automata.minimize`), with an initial state no move
    enters: equal futures are one state (inside a string, after its first character or its tenth),
    so that lexer states built from it coincide wherever the text read so far cannot matter; but the
    empty lexeme stays a state of its own (a lexer state whose terminals are all at their initial
    states *is* the empty lexeme: ``/a*b/`` after ``a`` must not be one).  ``fsm`` itself when the
    refinement is over its budget."""
    m = minimize(fsm)
    if m is None:
        return fsm
    if any(m.initial in row.values() for row in m.map.values()):
        fresh = max(m.states) + 1
        mp: dict[Any, dict[Any, Any]] = {**m.map, fresh: dict(m.map.get(m.initial, {}))}
        m = interegular.FSM(alphabet=m.alphabet, states=set(mp), initial=fresh, finals=set(m.finals),
                            map=mp, __no_validation__=True)
    return m

# terminal automata already built in this process, by (name, regexp), oldest first
AUTOMATA_CACHE_SIZE = 4096
_AUTOMATA: dict[tuple[str, str], TerminalAutomaton] = {}

# UTF-8 lead byte -> (continuation bytes still needed, allowed range of the next byte)  (RFC 3629 §4)
_LEAD: dict[int, tuple[int, int, int]] = {}
for _b in range(0xC2, 0xE0):
    _LEAD[_b] = (1, 0x80, 0xBF)
for _b in range(0xE0, 0xF0):
    _LEAD[_b] = (2, 0xA0 if _b == 0xE0 else 0x80, 0x9F if _b == 0xED else 0xBF)
for _b in range(0xF0, 0xF5):
    _LEAD[_b] = (3, 0x90 if _b == 0xF0 else 0x80, 0x8F if _b == 0xF4 else 0xBF)

# partial UTF-8 characters no automaton names, as the compiled build numbers them (0: none): every
# (continuation bytes still needed, allowed range of the next byte) a lead byte or a continuation starts
_PEND_KEYS: list[tuple[int, ...]] = [(), *sorted(set(_LEAD.values()) | {(1, 0x80, 0xBF), (2, 0x80, 0xBF)})]
_PEND_CODE = {k: c for c, k in enumerate(_PEND_KEYS)}
# per code: (bytes still needed, lowest and highest next byte, code after it); per byte: the code it starts
_PEND_TABLE = np.asarray([(0, 0, 0, 0)] + [(n, lo, hi, _PEND_CODE.get((n - 1, 0x80, 0xBF), 0))
                                           for n, lo, hi in _PEND_KEYS[1:]], dtype=np.int32)
_LEAD_CODE = np.zeros(256, dtype=np.int32)
for _b, _k in _LEAD.items():
    _LEAD_CODE[_b] = _PEND_CODE[_k]
# bytes >= 0x80 standing for all of them in a compiled build's table: the first lead byte of each
# code, and the first byte of each code's continuation range (kernels.product_reach)
_HIGH_REPS = np.unique(np.concatenate([np.unique(_LEAD_CODE, return_index=True)[1][1:], _PEND_TABLE[1:, 1]])).astype(np.int64)
# the compiled build keeps each state's reachable fork winners in an int64 bit set
_COMPILED_MAX_TERMS = 62
# random odd weights hashing a compiled build's key rows (LexerDFA.states_of; int64 products wrap)
_KEY_WEIGHTS = np.random.default_rng(20261202).integers(1, 1 << 62, size=_COMPILED_MAX_TERMS + 2, dtype=np.int64) | 1


def _joint_classes(classes: list[np.ndarray]) -> np.ndarray:
    """The common refinement of per-automaton ``(128,)`` byte classes: ``(128,)`` int32, two bytes in
    one class iff they are in one class of every automaton, the classes numbered by first byte."""
    return classes[0] if len(classes) == 1 else kernels.byte_classes(np.stack(classes))


# TerminalAutomaton.ascii_info: (next live state per ASCII byte, then bit sets over the ASCII bytes:
# live, one per next state two or more bytes lead to, those alone in theirs, those that reach a final
# state; then (bytes, next state) per next state, by first byte)
AsciiInfo = tuple[tuple[int, ...], int, tuple[int, ...], int, int, tuple[tuple[int, int], ...]]

# bit sets over the 256 bytes -> (their bytes, as an intp array, their runs), shared by all automata
_BITS_LIMIT = 1 << 16
_BITS: dict[int, tuple[tuple[int, ...], np.ndarray, tuple[tuple[int, int], ...]]] = {}


def _bits(mask: int) -> tuple[tuple[int, ...], np.ndarray, tuple[tuple[int, int], ...]]:
    """The bytes of bit set ``mask`` (bit ``b``: byte ``b``), ascending, as a tuple and an ``(k,)`` intp
    array, and as runs ``(first, last + 1)`` of consecutive bytes."""
    r = _BITS.get(mask)
    if r is None:
        out: list[int] = []
        runs: list[tuple[int, int]] = []
        m = mask
        while m:
            low = m & -m
            a = low.bit_length() - 1
            run = (m + low) & ~m  # the bit just above the run of ones that starts at ``a``
            e = run.bit_length() - 1
            out.extend(range(a, e))
            runs.append((a, e))
            m &= ~(run - low)
        if len(_BITS) >= _BITS_LIMIT:
            _BITS.clear()
        r = _BITS[mask] = (tuple(out), np.asarray(out, dtype=np.intp), tuple(runs))
    return r


def _put_move(row: list[int], at: list[np.ndarray], dst: list[int], c: int, j: int) -> None:
    """Record the move of the ASCII bytes of bit set ``c`` to state ``j``: in ``row`` (by byte), and
    as (bytes, target) in the scatter lists ``at`` / ``dst`` of the table."""
    low = c & -c
    if c == low:
        b = low.bit_length() - 1
        row[b] = j
        at.append(_ONE_BYTE[b])
    else:
        bs = _bits(c)
        for a, e in bs[2]:
            row[a:e] = (j,) * (e - a)
        at.append(bs[1])
    dst.append(j)


def _low_bit(mask: int) -> int:
    """The lowest set bit of ``mask`` (sorts bit sets by their first byte)."""
    return mask & -mask


def _low_bit_first(pair: tuple[int, int]) -> int:
    """The lowest set bit of ``pair[0]``."""
    return pair[0] & -pair[0]


_NO_GUARD: frozenset = frozenset()
_NO_LEADS: frozenset[int] = frozenset()
_DEAD_HIGH: tuple[int, ...] = (DEAD,) * 0x80  # bytes 0x80-0xFF of a row where they are all dead
_ONE_BYTE: list[np.ndarray] = [np.asarray([b], dtype=np.intp) for b in range(0x100)]  # _bits(1 << b)[1]


# bytes >= 0x80 outside a character: the lead bytes by their class, given the explicit lead bytes
_HIGH: dict[frozenset[int], list[int]] = {}


def _high_classes(leads: frozenset[int]) -> list[int]:
    """Bit sets (bits 0x80-0xFF) of the lead bytes that step alike at a state where some terminal can
    read a non-ASCII character: each byte of ``leads`` (first bytes of characters an automaton names)
    on its own, the others by their UTF-8 class (:data:`_LEAD`); ascending by first byte.  Continuation
    and invalid bytes cannot start a character (dead), so they are in none."""
    r = _HIGH.get(leads)
    if r is None:
        by_sig: dict[object, int] = {}
        for b in range(0x80, 0x100):
            lead = _LEAD.get(b)
            if lead is not None:
                sig: object = b if b in leads else lead
                by_sig[sig] = by_sig.get(sig, 0) | 1 << b
        r = _HIGH[leads] = sorted(by_sig.values(), key=lambda m: m & -m)
        if len(_HIGH) > 4096:
            _HIGH.clear()
    return r


_ARANGE = np.arange(1 << 12, dtype=np.int32)  # (literals are shorter: MAX_REGEX_CHARS is larger, but
# _chain_tables of a literal of over 4,095 bytes falls back to the general path)
_CHAIN_VECTORS: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _chain_vectors(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ae, fin, ext)`` of a literal's chain of ``n`` states (:meth:`TerminalAutomaton.byte_tables`):
    no move on another character, the last state final, every other one extendable; shared and
    read-only (one per length)."""
    r = _CHAIN_VECTORS.get(n)
    if r is None:
        ae = np.full(n, -1, dtype=np.int32)
        fin = np.zeros(n, dtype=bool)
        fin[-1] = True
        ext = ~fin
        for a in (ae, fin, ext):
            a.setflags(write=False)
        r = _CHAIN_VECTORS[n] = (ae, fin, ext)
    return r


def _alive(main: tuple[int, ...], guard: frozenset) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The automata alive in a lexer state: its live terminals' indices and its guards' names
    (what the per-character memos of :class:`LexerDFA` are keyed by, with the pending bytes)."""
    return tuple(j for j, st in enumerate(main) if st >= 0), tuple(sorted(name for name, _ in guard))


@dataclass
class TerminalAutomaton:
    """One terminal's character automaton (interegular), trimmed to live states.

    Attributes:
        name: Lark terminal name.  ``regexp``: the Python regexp Lark uses.
        step(state, ch) -> next live state or -1.
    """

    name: str
    regexp: str
    _fsm: interegular.FSM | None  # (None: an ASCII literal's chain, made on first use of ``fsm``)
    live: frozenset[int]
    nonascii: frozenset[str]
    _memo: dict[tuple[int, object], int] = field(default_factory=dict, repr=False)
    _ext: dict[int, bool] = field(default_factory=dict, repr=False)
    _na: dict[int, bool] = field(default_factory=dict, repr=False)
    _prefixes: frozenset[bytes] | None = field(default=None, repr=False)
    _prefix_classes: dict[bytes, frozenset] | None = field(default=None, repr=False)
    _info: dict[int, AsciiInfo] = field(default_factory=dict, repr=False)
    _of_class: dict[Any, int] | None = field(default=None, repr=False)
    _na_classes: tuple[Any, ...] | None = field(default=None, repr=False)
    _leads: frozenset[int] | None = field(default=None, repr=False)
    _tables: tuple | None = field(default=None, repr=False)
    _chain: tuple[bytes, tuple[int, ...]] | None = field(default=None, repr=False)  # (an ASCII literal's: set by _build)

    @classmethod
    def build(cls, name: str, regexp: str) -> TerminalAutomaton:
        """Parse ``regexp`` with interegular; one shared object per ``(name, regexp)`` in a process
        (its step memo then serves every grammar that has the terminal).

        Raises:
            UnsupportedGrammarError: lookarounds, back-references or other constructs interegular
                cannot turn into a finite automaton.
        """
        key = (name, regexp)
        hit = _AUTOMATA.get(key)
        if hit is not None:
            return hit
        a = cls._build(name, regexp)
        _AUTOMATA[key] = a
        while len(_AUTOMATA) > AUTOMATA_CACHE_SIZE:
            _AUTOMATA.pop(next(iter(_AUTOMATA)))
        return a

    @property
    def fsm(self) -> interegular.FSM:
        """The automaton (interegular): an ASCII literal's is made on first use (the compiled lexer
        build reads its chain only), as :func:`gad.grammar.automata.words_fsm` makes it: the chain of
        states ``0 .. n``."""
        f = self._fsm
        if f is None:
            text = literal_text(self.regexp)
            assert text is not None  # (only a literal's is left for later)
            f = self._fsm = words_fsm([text])
        return f

    @property
    def initial(self) -> Any:
        """The automaton's initial state (0 for an ASCII literal, without building its automaton)."""
        return 0 if self._fsm is None else self._fsm.initial

    @classmethod
    def _build(cls, name: str, regexp: str) -> TerminalAutomaton:
        text = literal_text(regexp)
        if text is not None and text.isascii() and len(text) < MAX_TERMINAL_STATES:
            # an ASCII literal (a key of an object, a punctuation mark): its automaton is the chain
            # of n + 1 states words_fsm makes, states 0 .. n (live, no non-ASCII character), so its
            # chain is known without building it
            n = len(text)
            out = cls(name, regexp, None, frozenset(range(n + 1)), frozenset())
            out._chain = (text.encode("ascii"), tuple(range(n + 1)))
            return out
        try:
            fsm = regex_fsm(regexp)
            if len(fsm.states) <= MINIMIZE_STATES and any(c in regexp for c in "*+{"):
                fsm = _minimal(fsm)  # (a literal's or an alternation's chain is minimal already)
        except AutomatonTooLarge:
            raise UnsupportedGrammarError(
                f"terminal {name} /{clip(regexp)}/ needs more than {MAX_TERMINAL_STATES:,} automaton states "
                "(exponential or huge repetition); simplify the pattern or express it with rules") from None
        except Exception as exc:  # noqa: BLE001 - interegular raises many types
            raise UnsupportedGrammarError(
                f"terminal {name} has a pattern gad cannot compile to an automaton ({clip(regexp)!r}): {clip(str(exc))}") from exc
        live = coreachable(fsm)  # the states from which a final state can be reached
        # (surrogates, which a complemented BMP class names, have no UTF-8 spelling: no text holds one)
        nonascii = frozenset(c for c in fsm.alphabet._symbol_mapping
                             if c is not anything_else and isinstance(c, str) and ord(c) >= 0x80
                             and not 0xD800 <= ord(c) <= 0xDFFF)
        if fsm.initial not in live:
            raise UnsupportedGrammarError(f"terminal {name} matches no string ({clip(regexp)!r})")
        if fsm.initial in fsm.finals:
            raise UnsupportedGrammarError(f"terminal {name} matches the empty string ({clip(regexp)!r})")
        return cls(name, regexp, fsm, frozenset(live), nonascii)

    def __getstate__(self) -> dict:
        # the step memo is a cache: rebuilt on demand, never written to the compile cache
        return {**self.__dict__, "_memo": {}, "_ext": {}, "_na": {}, "_prefixes": None, "_info": {},
                "_of_class": None, "_na_classes": None, "_leads": None, "_tables": None}

    def byte_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, list[int] | None, np.ndarray, np.ndarray]:
        """The automaton as arrays over local state numbers (the states in ascending order), for the
        compiled lexer build: ``(asc, ae, fin, initial, states)`` with ``asc`` ``(n, 128)`` int32 the
        next live state per ASCII byte (what :meth:`step` gives; -1 dead), ``ae`` ``(n,)`` int32 the
        next live state after a character the alphabet does not name (``anything_else``), ``fin``
        ``(n,)`` bool the final states, ``initial`` the initial state's number, and ``states`` the
        automaton's own state per local number (None when they are ``0 .. n-1`` already), then the
        ``(128,)`` int32 class of each ASCII byte (bytes of one alphabet class: the same column of
        ``asc``), the classes numbered by first byte, and ``(n,)`` bool: :meth:`extendable` per state."""
        r = self._tables
        if r is None:
            r = self._tables = self._chain_tables() or self._word_tables() or self._general_tables()
        return r

    def state_map(self) -> list[int] | None:
        """:meth:`byte_tables`'s ``states`` (the automaton's own state per local number, None when they
        are ``0 .. n-1``), without making an ASCII literal's tables (its chain is numbered so): a key
        context built from its literals' trie reads its keys without the byte tables of every key."""
        if self._chain is not None and self._tables is None:
            return None
        return self.byte_tables()[4]

    def chain(self) -> tuple[bytes, tuple[int, ...]] | None:
        """``(bytes, local states)`` when this terminal is an ASCII literal (an object's key, a
        punctuation mark): the chain of ``n + 1`` states ``0 .. n`` its ``n`` bytes step through (the
        automaton :attr:`fsm` makes, as in :meth:`byte_tables`); else None.  Set when it is built."""
        return self._chain

    def _chain_tables(self) -> tuple | None:
        """:meth:`byte_tables` of an ASCII literal's chain (:meth:`chain`) straight from its bytes, a few
        array operations; None for any other automaton (``tests/engine/test_lexer_build.py`` checks it
        equals the general path's)."""
        found = self.chain()
        if found is None:
            return None
        lit = found[0]
        n = len(lit) + 1
        if n > _ARANGE.size:
            return None
        asc = np.full((n, 0x80), -1, dtype=np.int32)
        asc[_ARANGE[:n - 1], np.frombuffer(lit, dtype=np.uint8)] = _ARANGE[1:n]
        ae, fin, ext = _chain_vectors(n)
        # classes by first byte: each byte of the literal its own class, every other byte one class
        # (numbered at the first byte the literal does not hold)
        named = sorted(set(lit))
        first_other = next((k for k, b in enumerate(named) if b != k), len(named))
        cls = np.full(0x80, first_other, dtype=np.int32)
        cls[named] = [k + (b > first_other) for k, b in enumerate(named)]
        return (asc, ae, fin, 0, None, cls, ext)

    def _word_tables(self) -> tuple | None:
        """:meth:`byte_tables` of a word set's trie (:func:`gad.grammar.automata.words_fsm`: a JSON
        Schema's keys and string enums; states ``0 .. n-1``, all live, one class per character, no
        move on ``anything_else``) straight from its moves, in about a third of the general path's
        time; None for any other automaton (``tests/engine/test_lexer_build.py`` checks both agree)."""
        fsm = self.fsm
        fmap: dict[Any, dict[Any, Any]] = cast(Any, fsm.map)
        n = len(fmap)
        sym = fsm.alphabet._symbol_mapping
        other = sym.get(anything_else)
        if (other is None or fsm.initial != 0 or len(self.live) != n or fsm.states != frozenset(range(n))
                or len(set(sym.values())) != len(sym)):
            return None
        byte_of = np.full(len(sym), -1, dtype=np.int64)  # per class, its ASCII byte (-1: another character)
        for ch, c in sym.items():
            if ch is not anything_else and isinstance(ch, str) and len(ch) == 1 and ord(ch) < 0x80:
                byte_of[c] = ord(ch)
        moves = np.asarray([(q, c, t) for q, row in fmap.items() for c, t in row.items()], dtype=np.int64).reshape(-1, 3)
        if (moves[:, 1] == other).any():
            return None
        byte = byte_of[moves[:, 1]]
        moves = moves[byte >= 0]
        byte = byte[byte >= 0]
        asc = np.full((n, 0x80), -1, dtype=np.int32)
        asc[moves[:, 0], byte] = moves[:, 2]
        named = byte_of >= 0
        col = np.full(0x80, other, dtype=np.int32)
        col[byte_of[named]] = np.flatnonzero(named)
        fin = np.zeros(n, dtype=bool)
        fin[list(fsm.finals)] = True
        ext = np.zeros(n, dtype=bool)
        ext[moves[:, 0]] = True
        return (asc, np.full(n, -1, dtype=np.int32), fin, 0, None, kernels.byte_classes(col[None, :]), ext)

    def _general_tables(self) -> tuple:
        """:meth:`byte_tables` of any automaton, from its alphabet classes."""
        if True:
            fsm = self.fsm
            states = sorted(cast(Any, fsm.states))
            ident = states == list(range(len(states)))
            loc = None if ident else {q: i for i, q in enumerate(states)}
            sym = fsm.alphabet._symbol_mapping
            col_of = {c: k for k, c in enumerate(dict.fromkeys(sym.values()))}
            none = len(col_of)  # a column of -1: characters in no class
            live = self.live
            moves = [(q, col_of[c], t) for q, row in fsm.map.items() for c, t in row.items() if t in live]
            dense = np.full((len(states), none + 1), -1, dtype=np.int32)
            if moves:
                at = np.asarray(moves, dtype=np.int64)
                if loc is not None:
                    at[:, 0] = [loc[q] for q in at[:, 0].tolist()]
                    at[:, 2] = [loc[t] for t in at[:, 2].tolist()]
                dense[at[:, 0], at[:, 1]] = at[:, 2]
            other = sym.get(anything_else)
            col_list = [none if other is None else col_of[other]] * 0x80
            for ch, c in sym.items():
                if isinstance(ch, str) and len(ch) == 1 and ord(ch) < 0x80:
                    col_list[ord(ch)] = col_of[c]
            col = np.asarray(col_list, dtype=np.intp)
            asc = dense.take(col, axis=1)
            ae = dense[:, none if other is None else col_of[other]].copy()
            fin = np.zeros(len(states), dtype=bool)
            fin[[q if loc is None else loc[q] for q in fsm.finals]] = True
            init = fsm.initial if loc is None else loc[fsm.initial]
            # the ASCII bytes by alphabet class (every state moves a class alike), numbered by first byte
            return (asc, ae, fin, int(cast(Any, init)), None if ident else states, kernels.byte_classes(col[None, :]),
                    (asc >= 0).any(axis=1) | (ae >= 0))

    def ascii_info(self, state: int) -> AsciiInfo:
        """What the ASCII bytes do from ``state``, as ``(row, live, multi, single, final, moves)``: ``row``
        the ``(128,)`` tuple of next live states (-1: dead), then bit sets over the 128 ASCII bytes (bit
        ``b``: byte ``b``): ``live`` the bytes ``row`` keeps alive; ``multi`` one set per next state two or
        more bytes lead to, ``single`` the bytes that alone lead to their next state; ``final`` the bytes
        after which the automaton is in a final state (a match); ``moves``: ``(bytes, next state)`` per
        live next state, by first byte."""
        r = self._info.get(state)
        if r is None and self._fsm is None:  # an ASCII literal's chain, read off its bytes
            lit = cast(tuple, self._chain)[0]
            row = [-1] * 0x80
            if state < len(lit):
                m = 1 << lit[state]
                row[lit[state]] = state + 1
                r = (tuple(row), m, (), m, m if state + 1 == len(lit) else 0, ((m, state + 1),))
            else:
                r = (tuple(row), 0, (), 0, 0, ())
            self._info[state] = r
        if r is None:
            trans: dict[Any, Any] = self.fsm.map.get(cast(Any, state), {})
            live, finals = self.live, self.fsm.finals
            of_class = self._of_class or self._class_bits()
            groups: dict[int, int] = {}  # next state -> its bytes
            for c, t in trans.items():
                m = of_class.get(c)
                if m and t in live:
                    groups[t] = groups.get(t, 0) | m
            row = [-1] * 0x80
            live_bits = single = final = 0
            multi = []
            for t, m in groups.items():
                for a, e in _bits(m)[2]:
                    row[a:e] = (t,) * (e - a)
                live_bits |= m
                if m & (m - 1):
                    multi.append(m)
                else:
                    single |= m
                if t in finals:
                    final |= m
            moves = tuple(zip(groups.values(), groups))
            if len(moves) > 1:
                moves = tuple(sorted(moves, key=_low_bit_first))
            r = self._info[state] = (tuple(row), live_bits, tuple(multi), single, final, moves)
        return r

    def _nonascii_classes(self) -> tuple[Any, ...]:
        """The alphabet classes a non-ASCII character can be in: "anything else"'s and those of the
        non-ASCII characters the alphabet names."""
        r = self._na_classes
        if r is None:
            sym = self.fsm.alphabet._symbol_mapping
            r = self._na_classes = tuple(dict.fromkeys([sym.get(anything_else), *(sym[ch] for ch in self.nonascii)]))
        return r

    def _class_bits(self) -> dict[Any, int]:
        """Alphabet class -> bit set of the ASCII bytes in it (bit ``b``: byte ``b``)."""
        r = self._of_class
        if r is None:
            r = self._of_class = {}
            named = 0  # the ASCII characters the alphabet names; the others are "anything else"
            other = None
            for ch, c in self.fsm.alphabet._symbol_mapping.items():
                if not isinstance(ch, str):  # anything_else
                    other = c
                elif len(ch) == 1 and ord(ch) < 0x80:
                    r[c] = r.get(c, 0) | 1 << ord(ch)
                    named |= 1 << ord(ch)
            rest = ((1 << 0x80) - 1) & ~named
            if other is not None and rest:
                r[other] = r.get(other, 0) | rest
        return r

    def step(self, state: int, ch: str | object) -> int:
        """Next live state after character ``ch`` (or ``anything_else``), -1 if dead."""
        key = (state, ch)
        r = self._memo.get(key)
        if r is None:
            sym = self.fsm.alphabet[ch]
            nxt = self.fsm.map.get(cast(Any, state), {}).get(sym)
            r = nxt if nxt is not None and nxt in self.live else -1
            self._memo[key] = r
        return r

    def extendable(self, state: int) -> bool:
        """Can some non-empty text be read from ``state`` and still reach a final state?"""
        r = self._ext.get(state)
        if r is None:
            r = any(t in self.live for t in self.fsm.map.get(cast(Any, state), {}).values())
            self._ext[state] = r
        return r

    def nonascii_prefixes(self) -> frozenset[bytes]:
        """The proper prefixes (1 to n-1 bytes) of the UTF-8 encodings of the non-ASCII characters
        the automaton names explicitly."""
        r = self._prefixes
        if r is None:
            r = self._prefixes = frozenset(c.encode("utf-8")[:k] for c in self.nonascii
                                           for k in range(1, len(c.encode("utf-8"))))
        return r

    def prefix_classes(self, buf: bytes) -> frozenset:
        """The alphabet classes of the non-ASCII characters the automaton names whose UTF-8
        encoding starts with ``buf`` (a proper prefix): an index made once, so that asking it for
        each pending prefix does not scan every named character ([\\u4e00-\\u9fff] names 20,992)."""
        r = self._prefix_classes
        if r is None:
            acc: dict[bytes, set] = {}
            alphabet = self.fsm.alphabet if self.nonascii else None
            for c in self.nonascii:
                e = c.encode("utf-8")
                sym = alphabet[c]  # type: ignore[index]
                for k in range(1, len(e)):
                    acc.setdefault(e[:k], set()).add(sym)
            r = self._prefix_classes = {p: frozenset(s) for p, s in acc.items()}
        return r.get(buf, frozenset())

    def explicit_leads(self) -> frozenset[int]:
        """First bytes of the UTF-8 encodings of the non-ASCII characters the automaton names."""
        r = self._leads
        if r is None:
            r = self._leads = frozenset(p[0] for p in self.nonascii_prefixes() if len(p) == 1)
        return r

    def nonascii_live(self, state: int) -> bool:
        """Can some non-ASCII character be read from ``state``?"""
        r = self._na.get(state)
        if r is None and self._fsm is None:  # (an ASCII literal reads none)
            r = self._na[state] = False
        if r is None:
            # what step() gives for "any other character" and for each non-ASCII character the alphabet names
            trans: dict[Any, Any] = self.fsm.map.get(cast(Any, state), {})
            live = self.live
            r = False
            for c in self._nonascii_classes():
                t = trans.get(c)
                if t is not None and t in live:
                    r = True
                    break
            self._na[state] = r
        return r


# the last universe indexed (every context of a grammar passes the same list): (it, its length, index)
_LAST_UNIVERSE: list[Any] = [None, -1, ({}, False)]


def universe_index(universe: list[TerminalAutomaton]) -> tuple[dict[str, str], bool]:
    """``({name: regexp}`` (the first of each name), whether any names a non-ASCII character)`` of
    ``universe``; the last result is kept (a grammar's contexts all pass its one universe list).
    Patterns, not automata: a dict of strings is not followed by Python's collector, and a shared
    lexer automaton keeps one entry per terminal of every grammar that used it."""
    last = _LAST_UNIVERSE
    if last[0] is universe and last[1] == len(universe):
        return last[2]
    index: dict[str, str] = {}
    explicit = False
    for t in universe:
        if t.name not in index:
            index[t.name] = t.regexp
            explicit = explicit or bool(t.nonascii)
    r = (index, explicit)
    last[:] = [universe, len(universe), r]
    return r


class _NoRows:
    """Stands for rows not made yet: what is written to it is dropped."""

    def __setitem__(self, i: int, row: tuple) -> None:
        pass


_NO_ROWS = _NoRows()


class LexerDFA:
    """The byte-level automaton of one lexer context under Lark's first-match rule.

    A state is ``(main, best, guard, pending)``:

    * ``main``: one state per terminal of the context (``-1``: dead, or cut because it can no longer
      win), Lark's order;
    * ``best``: the first terminal (in that order) that has matched a prefix of the lexeme so far, or
      ``-1``; every later terminal is cut — Lark's scanner takes the first alternative that matches;
    * ``guard``: pairs ``(terminal name, state)`` left by an *earlier* lexeme that was closed while a
      terminal that would have overridden that close was still alive (an earlier terminal that may
      still match, or the winner that may still match a longer text); reading a byte that completes
      any of them kills this hypothesis, since Lark would have lexed the earlier text differently;
    * ``pending``: the bytes of a partially read UTF-8 character.

    A **fork** state is one where the ``best`` terminal has just matched: the lexeme may close here
    (as ``forks[fork_id[s]] = (winner, guard)``, the winner after Lark's keyword rule, the guard the
    terminals that could still override the close) or go on.  Walks and matchers follow both.

    Attributes:
        names: terminal names in Lark's order (index = terminal id within this context).
        ignore: bool per terminal: an ``%ignore`` terminal (its lexemes are dropped).
        table: ``(n_states, 256)`` int32 transition table; state 0 is dead, 1 the empty lexeme with
            no guard; :meth:`start_for` adds the empty lexeme under a guard (states grow on demand).
        fork_id: ``(n_states + 1,)`` int32 index into ``forks`` or -1 (the extra entry: -1).
        fork_ok_byte: per fork, ``(256,)`` bool: the bytes after which its guard has not fired (a
            lexeme closed there may be followed by them); ``fork_ok``: the same as one
            ``(n_forks, 256)`` bool matrix.
        is_start: ``(n_states,)`` bool, the empty lexeme (under some guard).
        reach: per state, a bit set (Python int) of the winners of the forks reachable from it.
        reach_group / reach_values: states grouped by identical ``reach`` sets (vectorised checks).
        n_states: number of states so far; ``version`` grows with it (keys caches of ``ok_states``).
        compiled_build: the states reached from the start were built by the compiled product (their
            keys, key index and tuple rows are then made on first use).

    Building: states are numbered breadth-first, each state's successors in the order of the first
    byte leading to them (what stepping bytes 0-255 one by one would give; ``tests/engine/
    test_lexer_build.py`` checks exactly that against such a reference).  Only one byte per class of
    bytes that every automaton alive in the state treats alike is stepped: the ASCII classes come from
    each terminal state's cached bit sets (:meth:`TerminalAutomaton.ascii_info`), the bytes >= 0x80 go
    by their UTF-8 class (:data:`_LEAD`).
    """

    table: np.ndarray  # (states, 256) int32 byte transitions, grown lazily
    fork_ok: np.ndarray  # (forks, 256) bool
    serial: int  # process-wide number of a shared automaton (gad.engine.compiler), 0 otherwise
    shared_walks: dict[tuple, Any]  # token walks of a shared automaton, by (vocabulary, EOS ids, state)
    shared_key: tuple | None = None  # its key in the process-wide store while stored there (gad.engine.compiler)
    shared_bytes: int = 0  # what it holds there: tables and root walks
    walked: dict[tuple, list[int]]  # the states of those walks in the order walked, by (vocabulary, EOS ids)
    is_start: np.ndarray  # (states,) bool
    reach_group: np.ndarray

    def __init__(self, terminals: list[TerminalAutomaton], ignore: list[bool],
                 unless: dict[int, list[int]], n_main: int | None = None,
                 universe: list[TerminalAutomaton] | None = None) -> None:
        self.names = [t.name for t in terminals]
        self.terms = terminals
        self.n_main = len(terminals) if n_main is None else n_main
        self.ignore = np.asarray(ignore, dtype=bool)
        self.ignore_bits = sum(1 << i for i, ig in enumerate(ignore) if ig)
        self.unless = unless
        self._no_cut = frozenset(j for js in unless.values() for j in js)
        base, explicit = universe_index(universe or [])
        uni = dict(base)
        for t in terminals:
            if t.name not in uni:
                uni[t.name] = t.regexp
                explicit = explicit or bool(t.nonascii)
        # the pattern of every terminal a guard may hold (byte classes must separate their bytes),
        # by name: its automaton is _guard_term's
        self._uni = uni
        self.explicit_nonascii = explicit
        self.forks: list[tuple[int, frozenset]] = []
        self._fork_index: dict[tuple[int, frozenset], int] = {}
        self.fork_ok_byte: list[np.ndarray] = []
        self.serial = 0
        self.shared_walks = {}
        self.walked = {}
        self._build()

    # ----------------------------------------------------------------------------------- building
    def _guard_term(self, name: str) -> TerminalAutomaton:
        """The automaton of terminal ``name``, which a guard may hold: the process's shared one
        (:meth:`TerminalAutomaton.build`, made again if its store dropped it)."""
        return TerminalAutomaton.build(name, self._uni[name])

    def _step_char(self, key: tuple, ch: object) -> tuple | None:
        main, best, guard, _ = key
        ng = []
        for name, gs in guard:
            a = self._guard_term(name)
            t = a.step(gs, ch)
            if t < 0:
                continue
            if t in a.fsm.finals:
                return None  # an overriding terminal matched: Lark lexed the earlier text otherwise
            ng.append((name, t))
        out = [-1 if st < 0 else t.step(st, ch) for t, st in zip(self.terms, main)]
        nb = best
        for j in range(self.n_main if best < 0 else best + 1):
            if out[j] >= 0 and out[j] in self.terms[j].fsm.finals:
                nb = j
                break
        if nb >= 0:
            for j in range(nb + 1, self.n_main):
                if j not in self._no_cut:
                    out[j] = -1
        if not any(out[j] >= 0 for j in range(self.n_main)):
            return None
        return (tuple(out), nb, frozenset(ng), ())

    def _step(self, key: tuple, b: int) -> tuple | None:
        main, best, guard, pend = key
        if not pend:
            if b < 0x80:
                return self._step_char(key, chr(b))
            lead = _LEAD.get(b)
            if lead is None or not any(st >= 0 and t.nonascii_live(st)
                                       for t, st in zip(self.terms[:self.n_main], main)):
                return None
            n, lo, hi = lead
            # terminals that cannot read any non-ASCII character here are dead after this one: cut
            # them now, so that the states inside a character do not copy every ASCII-only state
            # (the keys of an object: one set of them per key prefix otherwise)
            main = tuple(st if st >= 0 and t.nonascii_live(st) else -1 for t, st in zip(self.terms, main))
            if self.explicit_nonascii and self._explicit_prefix((main, best, guard, pend), bytes([b])):
                return (main, best, guard, (self._pending(main, guard, bytes([b])),))
            return (main, best, guard, (n, lo, hi))
        if isinstance(pend[0], bytes):  # the bytes so far of a character some automaton names
            buf = pend[0] + bytes([b])
            n, lo, hi = _LEAD[buf[0]]
            pos = len(buf) - 1  # index of this continuation byte
            if not ((lo <= b <= hi) if pos == 1 else (0x80 <= b <= 0xBF)):
                return None
            if len(buf) == n + 1:
                return self._step_char(key, buf.decode("utf-8"))
            if not self._pending_live(main, buf):
                return None
            if self._explicit_prefix(key, buf):
                return (main, best, guard, (self._pending(main, guard, buf),))
            return (main, best, guard, (n - pos, 0x80, 0xBF))  # now only "any other character"
        n, lo, hi = pend
        if not lo <= b <= hi:
            return None
        if n == 1:
            return self._step_char(key, anything_else)
        return (main, best, guard, (n - 1, 0x80, 0xBF))

    def _last_byte_classes(self, key: tuple) -> list[int]:
        """Bit sets of the continuation bytes after ``key``'s pending bytes that step alike: one per
        byte, except where the byte completes the character, where bytes group by the alphabet class
        of their character in every live automaton (:meth:`_step_char` reads a character through its
        classes only).  Bytes outside the valid UTF-8 range are left out (dead)."""
        main, _, guard, pend = key
        buf = pend[0]
        n, lo, hi = _LEAD[buf[0]]
        if len(buf) == n:
            return self._final_byte_sigs(main, guard, buf)[1]
        if len(buf) > 1:
            lo, hi = 0x80, 0xBF
        # not yet the last byte: a byte after which the bytes so far start no character a live
        # automaton names reaches the same "any other character" state (or none), whatever the
        # byte; one that leaves the last byte to read steps as its pending state's stand-in
        # (:meth:`_pending`: equal classes for every last byte, so equal liveness too); the
        # others step on their own
        live = (buf, *_alive(main, guard))
        memo = self.__dict__.setdefault("_mid_memo", {})
        r = memo.get(live)
        if r is None:
            groups: dict[object, int] = {}
            for b in range(lo, hi + 1):
                nb = buf + bytes((b,))
                if not self._explicit_prefix(key, nb):
                    g: object = None
                elif len(nb) == n:
                    g = self._pending(main, guard, nb)
                else:
                    g = b
                groups[g] = groups.get(g, 0) | 1 << b
            r = memo[live] = list(groups.values())
        return r

    def _final_byte_sigs(self, main: tuple[int, ...], guard: frozenset, buf: bytes) -> tuple[tuple, list[int]]:
        """For ``buf``, all of a character's bytes but its last: the alphabet classes, in every
        automaton alive in ``main`` and ``guard``, of the characters ``buf + b`` for b = 0x80..0xBF
        (the last byte's range, whatever the lead), and the bit sets of the bytes alike under them."""
        live = (buf, *_alive(main, guard))
        memo = self.__dict__.setdefault("_fbs_memo", {})
        r = memo.get(live)
        if r is None:
            alphabets = [self.terms[j].fsm.alphabet for j in live[1]]
            alphabets += [self._guard_term(name).fsm.alphabet for name in live[2]]
            sigs = []
            groups: dict[tuple, int] = {}
            for b in range(0x80, 0xC0):
                ch = (buf + bytes((b,))).decode("utf-8")
                sig = tuple(a[ch] for a in alphabets)
                sigs.append(sig)
                groups[sig] = groups.get(sig, 0) | 1 << b
            r = memo[live] = (tuple(sigs), list(groups.values()))
        return r

    def _pending(self, main: tuple[int, ...], guard: frozenset, buf: bytes) -> bytes:
        """The pending bytes a state keeps for ``buf``: where the next byte ends the character, the
        first ``buf`` seen with the same classes for every last byte (:meth:`_final_byte_sigs`), so
        that leads which read alike share one state ([\\u0080-\\u07ff] inside a larger pattern:
        30 states per lexer state, one per lead byte, and a first mask of minutes); else ``buf``."""
        if len(buf) < _LEAD[buf[0]][0]:
            return buf
        sigs = self._final_byte_sigs(main, guard, buf)[0]
        canon = self.__dict__.setdefault("_canon_pending", {})
        return canon.setdefault((sigs, *_alive(main, guard)), buf)

    def _explicit_prefix(self, key: tuple, buf: bytes) -> bool:
        """Does an automaton alive in state ``key`` (a live terminal or a guard's) name a non-ASCII
        character whose UTF-8 encoding starts with ``buf``?  If none does, the character being read
        can only be "any other character" for all of them, and its bytes need not be remembered
        (a 4-byte character would otherwise leave one state per prefix: 20,000 per lexer state)."""
        main, _, guard, _ = key
        for t, st in zip(self.terms, main):
            if st >= 0 and buf in t.nonascii_prefixes():
                return True
        return any(buf in self._guard_term(name).nonascii_prefixes() for name, _ in guard)

    def _pending_live(self, main: tuple[int, ...], buf: bytes) -> bool:
        for t, st in zip(self.terms[:self.n_main], main):
            if st < 0:
                continue
            if t.step(st, anything_else) >= 0:
                return True
            classes = t.prefix_classes(buf)
            if classes:
                trans: dict[Any, Any] = t.fsm.map.get(cast(Any, st), {})
                if any(trans.get(c) in t.live for c in classes):
                    return True
        return False

    def _fork(self, key: tuple) -> int:
        """The fork id of state ``key`` (-1 when its lexeme cannot close here)."""
        main, best, guard, pend = key
        if pend or best < 0 or main[best] < 0 or main[best] not in self.terms[best].fsm.finals:
            return -1
        w = best
        for j in self.unless.get(best, ()):
            sj = main[j]
            if sj >= 0 and sj in self.terms[j].fsm.finals:
                w = j
                break
        g = set(guard)
        for k in range(best):
            if main[k] >= 0:
                g.add((self.names[k], main[k]))
        if self.terms[best].extendable(main[best]):
            g.add((self.names[best], main[best]))
        fk = (w, frozenset(g))
        fid = self._fork_index.get(fk)
        if fid is None:
            fid = len(self.forks)
            self._fork_index[fk] = fid
            self.forks.append(fk)
            self.fork_ok_byte.append(self._guard_ok_bytes(fk[1]))
        return fid

    def _guard_ok_bytes(self, guard: frozenset) -> np.ndarray:
        """``(256,)`` bool: bytes after which ``guard`` has not fired (lead bytes of multi-byte
        characters always pass: the character decides)."""
        kill = 0
        for name, gs in guard:
            kill |= self._guard_term(name).ascii_info(gs)[4]
        ok = np.ones(256, dtype=bool)
        if kill:
            ok[_bits(kill)[1]] = False
        return ok

    def _plain_moves(self, key: tuple, row: list[int], at: list[np.ndarray], dst: list[int]) -> bool:
        """Fill ``row`` (bytes 0-0x7F) with the ASCII moves of state ``key`` (no partial character) and
        append each move's bytes and next state to ``at`` and ``dst`` (by first byte; dead bytes are left
        out).  Returns whether a main terminal alive in ``key`` can read a non-ASCII character (else
        every byte >= 0x80 is dead).

        Bytes that every automaton alive in ``key`` (its terminals and its guard's) leads to the same
        next state step alike, so one byte per class is stepped: the classes are the bytes some main
        terminal can read (less those that complete a guard's terminal: dead), split by each automaton's
        groups of bytes with one next state (:meth:`TerminalAutomaton.ascii_info`).  A byte alone in its
        group in any automaton is a class of its own."""
        main, best, guard, _ = key
        n_main, terms = self.n_main, self.terms
        alive = [j for j, st in enumerate(main) if st >= 0]
        infos = []
        live = 0
        hi_live = False
        for j in alive:
            t, st = terms[j], main[j]
            inf = t._info.get(st) or t.ascii_info(st)
            infos.append(inf)
            if j < n_main:
                live |= inf[1]
                if not hi_live:
                    na = t._na.get(st)
                    hi_live = t.nonascii_live(st) if na is None else na
        ginfo: list[tuple[str, AsciiInfo]] = []
        if guard:
            for name, gs in guard:
                inf = self._guard_term(name).ascii_info(gs)
                live &= ~inf[4]  # a byte completing an overriding terminal: Lark lexed the earlier text otherwise
                ginfo.append((name, inf))
        if not live:
            return hi_live
        if len(infos) == 1 and not ginfo:
            self._single_moves(key, alive[0], infos[0], row, at, dst)
            return hi_live
        else:
            classes = [live]
            single = 0
            seen: set[int] = set()
            for inf in infos + [g for _, g in ginfo] if ginfo else infos:
                single |= inf[3]
                for m in inf[2]:
                    if m & live and m not in seen:
                        seen.add(m)
                        split = []
                        for c in classes:
                            x = c & m
                            if x and x != c:
                                split.append(x)
                                split.append(c ^ x)
                            else:
                                split.append(c)
                        classes = split
            single &= live
            if single:
                classes = [r for r in (c & ~single for c in classes) if r]
                classes += [1 << b for b in _bits(single)[0]]
        if len(classes) > 1:
            classes.sort(key=_low_bit)
        # the terminals that may match first (in Lark's order: those before the best match so far)
        lim = n_main if best < 0 else best + 1
        first = [(j, inf[4]) for j, inf in zip(alive, infos) if j < lim]
        cut = self._cut
        index = self._index
        pairs = list(zip(alive, [inf[0] for inf in infos]))
        for c in classes:
            low = c & -c
            b = low.bit_length() - 1
            out = list(main)
            for j, r in pairs:
                out[j] = r[b]
            nb = best
            for j, fin in first:
                if fin & low:
                    nb = j
                    break
            if nb >= 0:
                for j in cut[nb]:
                    out[j] = -1
            if max(out[:n_main]) < 0:
                continue
            ng = frozenset([(name, gt) for name, inf in ginfo if (gt := inf[0][b]) >= 0]) if ginfo else _NO_GUARD
            nk = (tuple(out), nb, ng, ())
            found = index.get(nk)
            _put_move(row, at, dst, c, self._add(nk) if found is None else found)
        return hi_live

    def _single_moves(self, key: tuple, j0: int, inf: AsciiInfo, row: list[int], at: list[np.ndarray],
                      dst: list[int]) -> None:
        """:meth:`_plain_moves` of a state with one live terminal ``j0`` (a main one) and no guard: that
        automaton's groups are the classes, and no other terminal is left to cut (the later main ones
        are dead already, or keyword targets)."""
        main, best, _, _ = key
        fin = inf[4] if best < 0 or j0 <= best else 0
        pre, post = main[:j0], main[j0 + 1:]
        index = self._index
        for c, t in inf[5]:
            low = c & -c
            nk = (pre + (t,) + post, j0 if fin & low else best, _NO_GUARD, ())
            j = index.get(nk)
            _put_move(row, at, dst, c, self._add(nk) if j is None else j)

    def _high_moves(self, key: tuple) -> tuple[tuple[int, ...], list[np.ndarray], list[int]]:
        """The moves of the bytes >= 0x80 of state ``key`` (no partial character; some main terminal
        can read a non-ASCII character; no automaton names one): the lead bytes by their UTF-8 class,
        to the state inside that character.  Returns (the row of bytes 0x80-0xFF, each move's bytes,
        each move's next state).  The terminals that cannot read a non-ASCII character are cut (what
        :meth:`_step` does), so states that differ only in them share these moves (memo)."""
        main, best, guard, _ = key
        terms = self.terms
        cm = list(main)
        for j, st in enumerate(main):
            if st >= 0:
                t = terms[j]
                na = t._na.get(st)
                if not (t.nonascii_live(st) if na is None else na):
                    cm[j] = -1
        hk = (tuple(cm), best, guard)
        r = self._high_memo.get(hk)
        if r is None:
            index = self._index
            row = [DEAD] * 0x80
            at: list[np.ndarray] = []
            dst: list[int] = []
            for m in _high_classes(_NO_LEADS):
                nk = hk + (_LEAD[(m & -m).bit_length() - 1],)
                found = index.get(nk)
                j = self._add(nk) if found is None else found
                bs = _bits(m)
                for a, e in bs[2]:
                    row[a - 0x80:e - 0x80] = (j,) * (e - a)
                at.append(bs[1])
                dst.append(j)
            r = self._high_memo[hk] = (tuple(row), at, dst)
        return r

    def _move(self, key: tuple, b: int, mask: int, row: list[int], at: list[np.ndarray], dst: list[int]) -> None:
        """Step ``key`` by byte ``b`` (:meth:`_step`); unless dead, the bytes of ``mask`` move to the next
        state: set in ``row``, appended to ``at`` and ``dst``."""
        nk = self._step(key, b)
        if nk is not None:
            j = self._index.get(nk)
            if j is None:
                j = self._add(nk)
            bs = _bits(mask)
            for a, e in bs[2]:
                row[a:e] = (j,) * (e - a)
            at.append(bs[1])
            dst.append(j)

    def _build(self) -> None:
        start: tuple[Any, ...] = (tuple(t.initial for t in self.terms), -1, frozenset(), ())
        self._keys: list = [None, start]
        self._index: dict = {start: START}
        # rows[s][b]: the table as tuples of ints (scalar steps; a tuple of ints is not followed by
        # Python's garbage collector, which otherwise visits 256 slots per state at every full pass);
        # after a compiled build, made on first use (__getattr__)
        self.rows: list[tuple[int, ...]] = [(DEAD,) * 256, ()]
        self._fork_list: list[int] = [-1, -1]
        # the states explored since the last _finish: their moves (bytes, next state), how many each,
        # and their successor states
        self._new_at: list[np.ndarray] = []
        self._new_dst: list[int] = []
        self._new_n: list[int] = []
        self._succ: dict[int, set[int]] = {}
        # moves of bytes >= 0x80 by the state inside a character they lead to (_high_moves)
        self._high_memo: dict[tuple, tuple[tuple[int, ...], list[np.ndarray], list[int]]] = {}
        self._reach_list: list[int] = [0, 0]
        self.n_states = 0
        self.version = 0
        # (a terminal of another context naming a non-ASCII character matters only in a guard, and
        # the compiled build makes the states without one: its own terminals decide)
        self.compiled_build = (kernels.ENABLED and not any(t.nonascii for t in self.terms)
                               and 0 < len(self.terms) <= _COMPILED_MAX_TERMS)
        if self.compiled_build:
            lit = self._single_literal()
            if lit is not None:
                self._build_literal(*lit)
            elif not self._build_trie():
                self._explore_compiled()
        else:
            self._explore(0)

    def _single_literal(self) -> tuple[bytes, tuple[int, ...]] | None:
        """``(bytes, local states)`` of this context's one terminal when it is an ASCII literal (a key of
        an object, a punctuation mark) read on its own (no ignore flag, no keyword map) and its
        automaton is the chain of ``n + 1`` states the literal's ``n`` bytes step through, nothing else
        (the local states: each chain state's rank among the automaton's, as in
        :meth:`TerminalAutomaton.byte_tables`); else None."""
        if len(self.terms) != 1 or self.n_main != 1 or self.unless or bool(self.ignore[0]):
            return None
        return self.terms[0].chain()

    def _build_literal(self, lit: bytes, local: tuple[int, ...]) -> None:
        """What :meth:`_explore_compiled` builds for a context of one ASCII literal (:meth:`_single_literal`),
        made directly: the dead state, the empty lexeme, then one state per byte read, the last one a
        fork with no guard (a literal cannot go on) whose reach is the terminal; no partial characters
        (the literal reads no byte >= 0x80).  ``tests/engine/test_lexer_build.py`` checks it equals the
        compiled product's build, array for array."""
        n = len(lit)
        total = n + 2
        karr = np.zeros((total, 3), dtype=np.int32)  # (local state, best terminal, partial-character code)
        karr[DEAD] = -1
        karr[START:, 0] = local
        karr[START:, 1] = -1
        karr[total - 1, 1] = 0
        table = np.zeros((total, 256), dtype=np.int32)
        table[np.arange(START, n + 1), np.frombuffer(lit, dtype=np.uint8)] = np.arange(START + 1, total, dtype=np.int32)
        for name in ("_keys", "_index", "rows"):
            self.__dict__.pop(name, None)
        self._karr = karr
        fork_ok = np.ones((1, 256), dtype=bool)
        self._fork_index[(0, _NO_GUARD)] = 0
        self.forks.append((0, _NO_GUARD))
        self.fork_ok_byte.extend(fork_ok)
        self._fork_list = [-1] * (total - 1) + [0]
        self._reach_list = [0] + [1] * (total - 1)
        self._finish(0, table, fork_ok)

    def _trie_shape(self) -> tuple[list[bytes], list[int], tuple | None] | None:
        """``(literals, their terminal indices, general)`` when this context is one that
        :func:`gad.engine.kernels.trie_product` builds (no ignore flag): ASCII literals alone, main, no
        one a prefix of another (an object's keys without additional properties, punctuation), with
        ``general`` None; or a general terminal whose final states cannot go on, first and the only
        main one, with the literals after it as its keyword targets (an object's keys beside the
        general key), ``general`` its ``(asc, ae, fin, initial)`` tables.  Else None."""
        terms = self.terms
        k = len(terms)
        if k < 2 or self.ignore_bits:
            return None
        chains = [t.chain() for t in terms]
        if chains[0] is not None:
            if self.n_main != k or self.unless or any(c is None for c in chains):
                return None
            words = [cast(tuple, c)[0] for c in chains]
            srt = sorted(words)
            if any(b.startswith(a) for a, b in zip(srt, srt[1:])):
                return None
            return words, list(range(k)), None
        if self.n_main != 1 or self.unless != {0: list(range(1, k))} or any(c is None for c in chains[1:]):
            return None
        asc, ae, fin, init, _, _, ext = terms[0].byte_tables()
        if (ext & fin).any():  # (a guard at its forks: left to the product)
            return None
        return [cast(tuple, c)[0] for c in chains[1:]], list(range(1, k)), (asc, ae, fin, init)

    def _build_trie(self) -> bool:
        """Build the context with :func:`gad.engine.kernels.trie_product` when it has one of the shapes
        :meth:`_trie_shape` names (then True; the same states, keys, rows and forks as
        :meth:`_explore_compiled`, checked array for array in ``tests/engine/test_lexer_build.py``);
        False otherwise.  An object's key context is the trie of its keys: the product's key table,
        each literal's byte tables and joint byte classes, and the per-fork Python loop cost it ~0.3-0.6
        ms in a MaskBench run (the first mask that reaches the object's keys)."""
        shape = self._trie_shape()
        if shape is None:
            return False
        words, cols, general = shape
        order = sorted(range(len(words)), key=words.__getitem__)
        data = b"".join(words[j] for j in order)
        lens = [len(words[j]) for j in order]
        lit_off = np.fromiter(accumulate(lens, initial=0), dtype=np.int64, count=len(lens) + 1)
        col = np.asarray([cols[j] for j in order], dtype=np.int64)
        built = kernels.trie_product(np.frombuffer(data, dtype=np.uint8), lit_off, col, len(self.terms), general,
                                     _PEND_TABLE, _LEAD_CODE, MAX_CONTEXT_STATES)
        if built is None:
            self._too_many_states()
        karr, table, win, reach = built
        for name in ("_keys", "_index", "rows"):
            self.__dict__.pop(name, None)
        self._karr = karr
        # forks: no guard (no terminal before the winner is alive at a leaf, and the general terminal
        # cannot go on at a final state), numbered in order of the states that have them
        at = np.flatnonzero(win >= 0)
        winners = win[at].tolist()
        forks = [-1] * karr.shape[0]
        index = self._fork_index
        new = 0
        for s, w in zip(at.tolist(), winners):
            fid = index.get((w, _NO_GUARD))
            if fid is None:
                fid = index[(w, _NO_GUARD)] = len(self.forks)
                self.forks.append((w, _NO_GUARD))
                new += 1
            forks[s] = fid
        fork_ok = np.ones((new, 256), dtype=bool)
        self.fork_ok_byte.extend(fork_ok)
        self._fork_list = forks
        self._reach_list = reach.tolist()
        self._finish(0, table, fork_ok if new else None)
        return True

    def _explore_compiled(self) -> None:
        """Build every state the start state reaches with the compiled product
        (:func:`gad.engine.kernels.explore_product`): the same states, keys, rows and forks as
        :meth:`_explore` (``tests/engine/test_lexer_build.py`` checks both against one reference).  It
        covers states without a guard and without a character some automaton names, which is every
        state reached from the start when no terminal of the context names a non-ASCII character
        (one of another context can be alive only in a guard); the start states :meth:`start_for`
        adds under a guard are built by :meth:`_explore`."""
        terms = self.terms
        n_terms = len(terms)
        tabs = [t.byte_tables() for t in terms]
        off = np.fromiter(accumulate([tb[0].shape[0] for tb in tabs[:-1]], initial=0), dtype=np.int64, count=n_terms)
        no_cut = np.asarray([j in self._no_cut for j in range(n_terms)], dtype=bool)
        start = np.asarray([tb[3] for tb in tabs], dtype=np.int32)
        if n_terms == 1:  # (one automaton: its own tables, no copies)
            asc, ae, fin = tabs[0][:3]
        else:
            asc, ae, fin = (np.concatenate([tb[k] for tb in tabs]) for k in range(3))
        cls_of = _joint_classes([tb[5] for tb in tabs])
        built = kernels.explore_product(asc, ae, fin, off, self.n_main, no_cut, _PEND_TABLE, _LEAD_CODE,
                                        cls_of, start, MAX_CONTEXT_STATES)
        if built is None:
            self._too_many_states()
        karr, table = built
        n = karr.shape[0]
        # keys, their index and the rows as tuples are made on first use (__getattr__): a context that
        # only the compiled walks read never needs them
        for name in ("_keys", "_index", "rows"):
            self.__dict__.pop(name, None)
        self._karr = karr
        best = karr[:, n_terms]
        cand = (karr[:, n_terms + 1] == 0) & (best >= 0)
        cand[DEAD] = False
        at = np.flatnonzero(cand)
        st = karr[at, best[at]]
        at = at[(st >= 0) & fin[off[best[at]] + np.maximum(st, 0)]]
        forks = [-1] * n
        reach = np.zeros(n, dtype=np.int64)
        fork_ok = self._compiled_forks(karr, at, tabs, off, asc, fin, forks, reach) if at.size else None
        self._fork_list = forks
        # (every successor of a state is in the column of its byte class's first byte, or of a
        # representative byte >= 0x80)
        # (classes numbered by first byte: a class's first byte is where the running maximum grows)
        grows = np.empty(0x80, dtype=bool)
        grows[0] = True
        np.greater(cls_of[1:], np.maximum.accumulate(cls_of[:-1]), out=grows[1:])
        kernels.product_reach(table, reach, np.concatenate([np.flatnonzero(grows), _HIGH_REPS]))
        self._reach_list = reach.tolist()
        self._finish(0, table, fork_ok)

    def _compiled_forks(self, karr: np.ndarray, at: np.ndarray, tabs: list[tuple], off: np.ndarray,
                        asc: np.ndarray, fin: np.ndarray, forks: list[int], reach: np.ndarray) -> np.ndarray | None:
        """:meth:`_fork` of the states ``at`` of a compiled build (their lexeme may close), from its key
        rows ``karr``: ids into ``forks``, winner bits into ``reach``; the new forks' ok-bytes from the
        terminals' stacked tables (``asc``, ``fin``, rows at ``off``) at once, appended to
        ``fork_ok_byte`` and returned as one ``(new forks, 256)`` bool array (None if none is new)."""
        n_terms = len(self.terms)
        names, unless = self.names, self.unless
        maps = [tb[4] for tb in tabs]
        offs = off.tolist()
        fin_l = fin.tolist()
        ext_l = np.concatenate([tb[6] for tb in tabs]).tolist() if n_terms > 1 else tabs[0][6].tolist()
        index = self._fork_index
        new_entries: list[list[tuple[int, int]]] = []  # per new fork, its guard's (table row, terminal offset)
        for s, r in zip(at.tolist(), karr[at].tolist()):
            b = r[n_terms]
            w = b
            for j in unless.get(b, ()):
                if r[j] >= 0 and fin_l[offs[j] + r[j]]:
                    w = j
                    break
            local = [(k, r[k]) for k in range(b) if r[k] >= 0]
            if ext_l[offs[b] + r[b]]:  # the winner may still match a longer text
                local.append((b, r[b]))
            guard = frozenset((names[k], q if maps[k] is None else maps[k][q]) for k, q in local)
            fk = (w, guard)
            fid = index.get(fk)
            if fid is None:
                fid = index[fk] = len(self.forks)
                self.forks.append(fk)
                new_entries.append([(offs[k] + q, offs[k]) for k, q in local])
            forks[s] = fid
            reach[s] = 1 << self.forks[fid][0]
        if new_entries:
            ok = np.ones((len(new_entries), 256), dtype=bool)
            entries = [e for es in new_entries for e in es]
            if entries:
                at_off = np.asarray(entries, dtype=np.intp)  # (entries, 2): table row, terminal's offset
                nxt = asc[at_off[:, 0]]  # (entries, 128) next local states
                # a byte completing an overriding terminal
                kill = (nxt >= 0) & fin[at_off[:, 1:] + np.maximum(nxt, 0)]
                lens = [len(es) for es in new_entries]
                has = [i for i, k in enumerate(lens) if k]
                starts = np.fromiter(accumulate([lens[i] for i in has[:-1]], initial=0), dtype=np.intp, count=len(has))
                ok[has, :0x80] = ~np.logical_or.reduceat(kill, starts, axis=0)
            self.fork_ok_byte.extend(ok)
            return ok
        return None

    def __getattr__(self, name: str) -> Any:
        # the keys, their index and the rows of a compiled build, made on first use (then plain attributes)
        if name == "_cut":  # per terminal i, those a match of i cuts (the later main ones, less keyword
            # targets): for the Python builder only (quadratic in the terminals: ~0.4 ms at 100)
            cuts = [j for j in range(self.n_main) if j not in self._no_cut]
            self._cut = [cuts[bisect_right(cuts, i):] for i in range(self.n_main)]
            return self._cut
        karr = self.__dict__.get("_karr")
        if karr is None or name not in ("_keys", "_index", "rows"):
            raise AttributeError(name)
        if name == "rows":
            r: Any = list(map(tuple, self.table.tolist()))
        elif name == "_index":
            keys = self._keys
            r = dict(zip(keys[1:], range(1, len(keys))))
        else:  # (then the guarded start states added since the build, _guarded_start)
            r = [None, *self._compiled_keys(karr[1:]), *self.__dict__.pop("_more_keys", ())]
        self.__dict__[name] = r
        return r

    @property
    def flat_table(self) -> np.ndarray:
        """:attr:`table` as one ``(n_states * 256,)`` int32 array (a view): state ``s``'s move on byte ``b``
        at ``(s << 8) | b``, as the compiled walks read it.  The dead state's row is all 0, so a walk that
        steps on from it stays dead.  (Until session 17 the walks read a second copy of the table with a
        sink state past the last one; the dead state absorbs as well, and the copy doubled what each
        automaton kept.)"""
        return self.table.reshape(-1)

    def flat_view(self) -> memoryview:
        """The table as one flat int32 memoryview: ``view[(s << 8) | b]`` is the next state of ``s`` on
        byte ``b``, a Python int (for scalar steps: a token, a byte string).  One object per automaton,
        made anew when the table grows.  (Until session 21 each state's row was its own memoryview, made
        on first read and kept: two objects Python's cyclic collector tracks per row, ~45,000 after a
        MaskBench --step 8 run and ~45% of the time of each full collection, 40-50 ms.)"""
        view = self.__dict__.get("_row_view")
        if view is None:
            view = self._row_view = memoryview(cast(Any, self.flat_table))
        return view

    def uniform_successor(self, data: bytes) -> np.ndarray:
        """``(n_states,)`` int32: per state, the one state every byte of ``data`` moves it to (DEAD
        included), or -1 where they part ways.  Kept per ``data`` until the automaton grows."""
        memo = self.__dict__.setdefault("_uniform", {})
        r = memo.get(data)
        have = 0 if r is None else r.shape[0]
        if have != self.n_states:  # (rows never change once built: only the new states' are computed)
            cols = self.table[have:, np.frombuffer(data, dtype=np.uint8)]
            more = np.where((cols == cols[:, :1]).all(axis=1), cols[:, 0], -1).astype(np.int32)
            r = more if r is None else np.concatenate([r, more])
            memo[data] = r
        return r

    def __getstate__(self) -> dict:
        # the row view, the uniform successors, the key-row look-up and the start states by guard are
        # caches: never written to the compile cache
        # (nor its place in the process-wide store of shared automata)
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_row_view", "_uniform", "_karr_look", "_starts", "shared_key", "shared_bytes")}

    def key(self, d: int) -> tuple | None:
        """The key ``(main, best, guard, pending)`` of state ``d`` (None for the dead state), without
        making every key of a compiled build."""
        return self.keys_of([d])[0]

    def keys_of(self, states: list[int]) -> list[tuple | None]:
        """:meth:`key` of each of ``states`` at once: on a compiled build whose keys are not made yet,
        made from its key rows of those states alone (every key is made when a state past them is asked)."""
        karr = self.__dict__.get("_karr")
        if "_keys" in self.__dict__ or karr is None or (states and max(states) >= karr.shape[0]):
            return [self._keys[s] for s in states]
        live = [s for s in states if s != DEAD]
        made = iter(self._compiled_keys(karr[live]) if live else [])
        return [None if s == DEAD else next(made) for s in states]

    def _key_row(self, key: tuple) -> list[int] | None:
        """Key ``key`` as a compiled build's key row (local states, best terminal, partial-character
        code), or None where no compiled state can have it (a guard, a named partial character)."""
        main, best, guard, pend = key
        code = _PEND_CODE.get(pend)
        if guard or code is None or len(main) != len(self.terms):
            return None
        return [*main, best, code]

    def state_of(self, key: tuple) -> int | None:
        """The state whose key is ``key``, or None.  On a compiled build whose keys are not made yet, a
        search of its key rows (tens of µs) instead of making every key and their index."""
        index = self.__dict__.get("_index")
        if index is not None or "_karr" not in self.__dict__:
            return self._index.get(key)
        if key[2]:  # (a guard: only a start state added since the build can have one, _guarded_start)
            if "_keys" in self.__dict__:
                return self._index.get(key)
            more = self.__dict__.get("_more_keys", [])
            return self._karr.shape[0] + more.index(key) if key in more else None
        row = self._key_row(key)
        if row is None:
            return None
        if any(t.state_map() is not None for t, q in zip(self.terms, key[0]) if q >= 0):
            return self._index.get(key)  # (automaton states not numbered 0..n-1: the index itself)
        hit = np.flatnonzero((self._karr == np.asarray(row, dtype=np.int32)).all(axis=1))
        return int(hit[0]) if hit.size else None

    def states_of(self, keys: list[tuple]) -> list[int | None]:
        """:meth:`state_of` of each of ``keys`` at once: on a compiled build whose keys are not made yet,
        one look-up per key in its key rows sorted by a hash (made once), not a search of every row."""
        karr = self.__dict__.get("_karr")
        if "_index" in self.__dict__ or karr is None or len(keys) < 2 \
                or any(t.state_map() is not None for t in self.terms):
            return [self.state_of(k) for k in keys]
        n_terms = len(self.terms)
        out: list[int | None] = [None] * len(keys)
        rows, at = [], []
        for j, key in enumerate(keys):
            row = self._key_row(key)
            if row is not None:
                rows.append(row)
                at.append(j)
            elif key[2]:
                out[j] = self.state_of(key)
        if not rows:
            return out
        weights = _KEY_WEIGHTS[: n_terms + 2]
        look = self.__dict__.get("_karr_look")
        if look is None:
            h = karr.astype(np.int64) @ weights
            order = np.argsort(h, kind="stable")
            look = self._karr_look = (h[order], order)
        hs, order = look
        want = np.asarray(rows, dtype=np.int32)
        hw = want.astype(np.int64) @ weights
        lo = np.searchsorted(hs, hw)
        n = hs.shape[0]
        # the first row of each key's hash, compared in full at once (the usual case: it is the key)
        first = np.minimum(lo, n - 1)
        cand = order[first]
        same = hs[first] == hw
        hit = same & (cand != DEAD) & (karr[cand] == want).all(axis=1)
        for r in np.flatnonzero(hit).tolist():
            out[at[r]] = int(cand[r])
        for r in np.flatnonzero(same & ~hit).tolist():  # (other rows of that hash: one by one)
            a, h = int(lo[r]) + 1, hw[r]
            while a < n and hs[a] == h:
                s = int(order[a])
                if s != DEAD and (karr[s] == want[r]).all():
                    out[at[r]] = s
                    break
                a += 1
        return out

    def _keys_between(self, lo: int, hi: int) -> list[tuple | None]:
        """The keys of states ``lo`` to ``hi - 1``, without making a compiled build's keys for states
        past it (the guarded starts waiting in ``_more_keys``)."""
        karr = self.__dict__.get("_karr")
        if "_keys" not in self.__dict__ and karr is not None and lo >= karr.shape[0]:
            more = self.__dict__.get("_more_keys", [])
            return more[lo - karr.shape[0]:hi - karr.shape[0]]
        return self._keys[lo:hi]

    def _compiled_keys(self, karr: np.ndarray) -> list[tuple]:
        """The state keys ``(main, best, guard, pending)`` of key rows ``karr`` of a compiled build
        (no dead row)."""
        n_terms = len(self.terms)
        maps = [t.state_map() for t in self.terms]
        mapped = any(m is not None for m in maps)
        pend = _PEND_KEYS
        keys: list[tuple] = []
        paused = gc.isenabled()  # (as in _explore: many small tuples, no cycles)
        if paused:
            gc.disable()
        try:
            for r in karr.tolist():
                main = r[:n_terms]
                if mapped:  # (back to the automata's own state numbers)
                    main = [m[v] if m is not None and v >= 0 else v for m, v in zip(maps, main)]
                keys.append((tuple(main), r[n_terms], _NO_GUARD, pend[r[n_terms + 1]]))
        finally:
            if paused:
                gc.enable()
        return keys

    def _too_many_states(self) -> NoReturn:
        raise UnsupportedGrammarError(
            f"the lexer automaton of terminals {', '.join(self.names)} needs more than "
            f"{MAX_CONTEXT_STATES:,} states; simplify their patterns")

    def start_for(self, guard: frozenset) -> int:
        """The state of the empty lexeme under ``guard`` (added, with what it reaches, on first use)."""
        if not guard:
            return START
        memo: dict[frozenset, int] | None = self.__dict__.get("_starts")
        if memo is None:
            memo = {}
            self._starts = memo
        i = memo.get(guard)
        if i is None:
            key = (tuple(t.initial for t in self.terms), -1, guard, ())
            i = self.state_of(key)
            if i is None:
                i = self._guarded_start(key)
            if i is None:
                i = self._add(key)
                self._explore(i)
            memo[guard] = i
        return i

    def _guarded_start(self, key: tuple) -> int | None:
        """Add the empty lexeme under a guard (``key``, not a state yet) without the builder, where its
        guard lasts one byte: on every byte the start state can read, each guard terminal either dies or
        completes (then the byte is dead: Lark lexed the earlier text otherwise), so the new state's
        row is the start state's with those bytes dead and it leads to no new state; and no byte >= 0x80
        is live from the start (else its partial characters would carry the guard).  Returns the new
        state, or None where the guard can last longer (the builder adds it).  This is the empty object's
        ``{}`` guarding the context after ``{`` in every JSON-Schema grammar: the builder made every key
        of a compiled build and stepped each of its terminals (0.3-0.8 ms at an object's first key).
        ``tests/engine/test_lexer_build.py`` checks the result against the reference, state for state."""
        start = self.table[START]
        if start[0x80:].any():
            return None
        kill = cont = 0
        for name, gs in key[2]:
            inf = self._guard_term(name).ascii_info(gs)
            kill |= inf[4]
            cont |= inf[1] & ~inf[4]
        row = start.copy()
        if kill:
            row[_bits(kill)[1]] = DEAD
        if cont and row[_bits(cont)[1]].any():
            return None
        i = self._add(key)
        rows = self.__dict__.get("rows")
        if rows is not None:
            rows[i] = tuple(row.tolist())
        at = np.flatnonzero(row)
        dst = row[at]
        nxt = np.unique(dst).tolist()
        for d in nxt:
            self._new_at.append(at[dst == d])
            self._new_dst.append(d)
        self._new_n.append(len(nxt))
        self._succ[i] = set(nxt)
        self._finish(i)
        return i

    def _add(self, key: tuple) -> int:
        """Number ``key`` as the next state, with its fork (its row and reach are the caller's to make).  On a
        compiled build whose keys are not made yet (only a guarded start comes here then: ``start_for``),
        the key waits in ``_more_keys`` until they are (``__getattr__``)."""
        j = len(self._fork_list)  # (one entry per state)
        if j >= MAX_CONTEXT_STATES:
            self._too_many_states()
        if "_keys" in self.__dict__ or "_karr" not in self.__dict__:
            self._index[key] = j
            self._keys.append(key)
        else:
            self.__dict__.setdefault("_more_keys", []).append(key)
        rows = self.__dict__.get("rows")  # (a compiled build's are made on first use, from the table)
        if rows is not None:
            rows.append(())
        self._fork_list.append(-1 if key[3] or key[1] < 0 else self._fork(key))  # no match yet, or in a character
        self._reach_list.append(0)
        return j

    def _explore(self, first: int) -> None:
        """Build the rows of every state from ``first`` on (new ones are appended as found).

        Python's cyclic garbage collector is paused meanwhile: the build makes no reference cycles,
        but its many small tuples (state keys, rows) would otherwise set off collections, full ones
        among them, that walk every object of the process (a quarter of the build time in a process
        holding compiled grammars)."""
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            self._explore_states(first)
        finally:
            if paused:
                gc.enable()

    def _explore_states(self, first: int) -> None:
        i = max(first, START)
        # rows of a compiled build not made yet are made from the table when first read
        keys, rows, succ = self._keys, self.__dict__.get("rows", _NO_ROWS), self._succ
        at, dst, n_moves = self._new_at, self._new_dst, self._new_n
        explicit = self.explicit_nonascii
        while i < len(keys):
            key = keys[i]
            main, _, guard, pend = key
            k = len(dst)
            if not pend:
                row = [DEAD] * 0x80
                # bytes >= 0x80: dead unless a main terminal can read a non-ASCII character here; then
                # lead bytes step alike by their UTF-8 class (_LEAD), except the first bytes of characters
                # an automaton names (kept apart); continuation and invalid bytes cannot start a character
                if self._plain_moves(key, row, at, dst):
                    if explicit:
                        leads = frozenset().union(*(t.explicit_leads() for t, st in zip(self.terms, main) if st >= 0),
                                                  *(self._guard_term(n).explicit_leads() for n, _ in guard))
                        row += _DEAD_HIGH
                        for m in _high_classes(leads):
                            self._move(key, (m & -m).bit_length() - 1, m, row, at, dst)
                        rows[i] = tuple(row)
                    else:
                        high, h_at, h_dst = self._high_moves(key)
                        rows[i] = tuple(row) + high
                        at += h_at
                        dst += h_dst
                else:
                    rows[i] = tuple(row) + _DEAD_HIGH
            elif isinstance(pend[0], bytes):
                # inside a character some automaton names: each continuation byte on its own, the rest
                # dead; where the byte ends the character, bytes whose characters every live automaton
                # reads alike (one alphabet class each) step once ([\u0080-\u07ff] names 1,920
                # characters of one class: stepped one by one, a first mask took 90 s)
                row = [DEAD] * 0x100
                for m in self._last_byte_classes(key):
                    self._move(key, (m & -m).bit_length() - 1, m, row, at, dst)
                rows[i] = tuple(row)
            else:
                # inside a character no automaton names: every byte of the allowed range steps alike
                # (only the count of continuation bytes still needed matters), every other one is dead
                _, lo, hi = pend
                row = [DEAD] * 0x100
                self._move(key, lo, (1 << (hi + 1)) - (1 << lo), row, at, dst)
                rows[i] = tuple(row)
            succ[i] = set(dst[k:])
            n_moves.append(len(dst) - k)
            i += 1
        self._finish(first)

    def _finish(self, first: int, table: np.ndarray | None = None, fork_ok: np.ndarray | None = None) -> None:
        """Extend the arrays with the states from ``first`` on (older states never change).  ``table``:
        the whole ``(n_states, 256)`` table of a compiled build, whose reachable winners are in
        ``_reach_list`` already, its forks' ok-bytes in ``fork_ok`` ``(forks, 256)`` bool (None: no fork)."""
        n = len(self._fork_list) if table is None else table.shape[0]
        old = self.n_states
        new_rows = np.zeros((n - old, 256), dtype=np.int32) if table is None else table
        if table is None and self._new_at:
            # the moves of the new states (all but the dead one, which has none), scattered into the table
            at = self._new_at
            cnt = np.fromiter(map(len, at), dtype=np.intp, count=len(at))
            src = np.repeat(np.arange(max(old, START) - old, n - old), self._new_n)
            new_rows[np.repeat(src, cnt), np.concatenate(at)] = np.repeat(np.asarray(self._new_dst, dtype=np.int32), cnt)
        self.table = new_rows if not old else np.vstack([self.table, new_rows])
        if old:
            self.__dict__.pop("_row_view", None)  # (it views the old table: made anew from this one)
        self.fork_id = np.asarray(self._fork_list + [-1], dtype=np.int32)
        self.fork_list = self._fork_list
        have = self.fork_ok.shape[0] if old else 0
        if fork_ok is not None and not old and len(self.fork_ok_byte) == fork_ok.shape[0]:
            self.fork_ok = fork_ok  # (a compiled build's forks: one array already)
        elif not old or len(self.fork_ok_byte) > have:
            more = self.fork_ok_byte[have:]
            add = np.stack(more) if more else np.zeros((0, 256), dtype=bool)
            self.fork_ok = np.vstack([self.fork_ok, add]) if old else add
        if table is not None:  # from the start state without a guard: no other empty lexeme
            self.is_start = np.zeros(n, dtype=bool)
            self.is_start[START] = True
        else:
            init = tuple(t.initial for t in self.terms)
            starts = [k is not None and k[0] == init and k[1] < 0 and not k[3] for k in self._keys_between(old, n)]
            self.is_start = np.concatenate([self.is_start, np.asarray(starts, dtype=bool)]) if old \
                else np.asarray(starts, dtype=bool)
        # reachable fork winners: fixed point over the new states (old states' sets are final)
        reach = self._reach_list
        lo = max(old, 1)
        if table is None:
            for s in range(lo, n):
                f = self._fork_list[s]
                reach[s] = 1 << self.forks[f][0] if f >= 0 else 0
        succ = self._succ
        changed = table is None
        while changed:
            changed = False
            for s in range(n - 1, lo - 1, -1):
                r = reach[s]
                for t in succ[s]:
                    r |= reach[t]
                if r != reach[s]:
                    reach[s] = r
                    changed = True
        self.reach = reach
        if not old:
            self._reach_ids: dict[int, int] = {}
            self.reach_values = []
        ids = self._reach_ids
        new_reach = reach[old:n]
        for r in dict.fromkeys(new_reach):  # (the new sets in order of first state)
            ids.setdefault(r, len(ids))
        self.reach_values = list(ids)
        g = np.fromiter(map(ids.__getitem__, new_reach), dtype=np.int32, count=n - old)
        self.reach_group = np.concatenate([self.reach_group, g]) if old else g
        self.n_states = n
        self.version += 1
        self._new_at, self._new_dst, self._new_n = [], [], []
        self._succ = {}
        self._high_memo = {}

    # ------------------------------------------------------------------------------------ queries
    def finite(self) -> bool:
        """Whether every terminal of the context matches finitely many strings, all of them written
        out (keys of an object, string enums, punctuation: :func:`gad.grammar.automata.literal_words`);
        a walk of the vocabulary's byte trie from any state then meets few live nodes.  Made on first
        use and kept."""
        r = self.__dict__.get("_finite")
        if r is None:
            r = self._finite = all(literal_words(t.regexp) is not None for t in self.terms)
        return r

    def ok_states(self, allowed_bits: int) -> np.ndarray:
        """``(n_states,)`` bool: states from which a lexeme whose type is in ``allowed_bits``
        (a bit set of terminal ids; ignore terminals are always allowed) can still be completed."""
        bits = allowed_bits | self.ignore_bits
        ok_group = np.fromiter((bool(v & bits) for v in self.reach_values), dtype=bool,
                               count=len(self.reach_values))
        out = ok_group[self.reach_group]
        out[DEAD] = False
        return out


def lark_context_terminals(terminals: list, g_regex_flags: int = 0, ignore: Collection[str] = ()
                           ) -> tuple[list, dict[int, list[int]], int, list[bool]]:
    """The terminals of one context of Lark's contextual lexer (``terminals``: Lark ``TerminalDef``
    objects in its scanning order, as a ``BasicLexer`` holds them; ``g_regex_flags``: its global regex
    flags; ``ignore``: the names of the ``%ignore`` terminals), after Lark's keyword ("unless") rule.

    Returns ``(terminal_defs, unless, n_main, ignored)`` where ``unless[i]`` lists the ids (in the
    returned order) of string terminals that turn a match of regex terminal ``i`` into their own type
    when the lexeme equals them, the first ``n_main`` terminals are those Lark's scanner tries (the rest
    are the strings Lark drops from the scanner because a regex covers them, and the twins below: only
    keyword targets), and ``ignored[i]`` whether a lexeme that closes as terminal ``i`` is dropped.
    Mirrors ``lark.lexer._create_unless`` and ``BasicLexer.next_token`` (Lark 1.x), where whether a
    lexeme is dropped is decided by the type the scanner matched, *before* the keyword rule retypes it:

    * an ignored regex's lexemes are dropped whatever string they equal: it gets no ``unless`` entry
      (the strings it covers still leave the scanner);
    * a kept regex's lexeme equal to an ignored string reaches the parser typed as that string: the
      target is a twin of the string (the same terminal, not ignored), after all the others.
    """
    from lark.lexer import PatternRE, PatternStr

    terminals = list(terminals)
    dropped = frozenset(ignore)
    embedded: set[str] = set()
    unless_names: dict[str, list[str]] = {}
    for retok in terminals:
        if not isinstance(retok.pattern, PatternRE):
            continue
        for strtok in terminals:
            if not isinstance(strtok.pattern, PatternStr) or strtok.priority != retok.priority:
                continue
            s = strtok.pattern.value
            m = re.match(retok.pattern.to_regexp(), s, g_regex_flags)
            if m and m.group(0) == s:
                if retok.name not in dropped:
                    unless_names.setdefault(retok.name, []).append(strtok.name)
                if set(strtok.pattern.flags) <= set(retok.pattern.flags):
                    embedded.add(strtok.name)
    kept = [t for t in terminals if t.name not in embedded]
    # embedded strings are still reachable as unless-targets: keep them after the others so
    # their automata run (they never win on their own, a regex covering them comes first)
    extra = [t for t in terminals if t.name in embedded]
    ordered = kept + extra
    pos = {t.name: i for i, t in enumerate(ordered)}
    ignored = [t.name in dropped for t in ordered]
    twin: dict[str, int] = {}
    for ss in unless_names.values():
        for name in ss:
            if name in dropped and name not in twin:
                twin[name] = len(ordered)
                ordered.append(ordered[pos[name]])
                ignored.append(False)
    unless = {pos[r]: [twin.get(s, pos[s]) for s in ss] for r, ss in unless_names.items()}
    return ordered, unless, len(kept), ignored
