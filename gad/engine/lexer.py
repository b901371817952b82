"""Byte-level lexer automata: one deterministic automaton per contextual-lexer context.

Lark's contextual lexer (LALR mode) lexes each lexeme with the terminals the parser accepts in its
current state, plus the ``%ignore`` terminals.  gad compiles each such terminal set into a single
**byte-level** DFA whose states are tuples of per-terminal character-automaton states
(``interegular`` FSMs) plus the bytes of a partially read UTF-8 character.

Lexing semantics (emulating Lark on complete strings; see README "Exactness"):

* a lexeme is extended greedily while the next byte keeps some terminal of the context alive
  (maximal munch with one byte of look-ahead, no backtracking);
* when the next byte kills every terminal and the current text is accepted, the lexeme closes with
  the *winner*: the first accepting terminal in Lark's order (priority, max width, pattern length,
  name), after Lark's keyword rule (a string terminal of equal priority fully matched by a regex
  terminal turns that regex's match into the string's type, "unless" in Lark's source);
* a lexeme never matches the empty string (Lark refuses zero-width terminals).

Divergences from Lark's ``re``-based scanner (documented, tested on the shipped grammars): Lark
tries terminals in order and takes the first that matches a prefix, with Python's backtracking
match; gad takes the longest match and breaks ties by the same order, and never backtracks more
than one byte.  ``\\d``, ``\\w``, ``\\s`` are ASCII classes (interegular), where Python's ``re`` is
Unicode-aware.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, cast

import interegular
import numpy as np
from interegular.fsm import anything_else

from gad.errors import UnsupportedGrammarError
from gad.grammar.automata import MAX_CONTEXT_STATES, MAX_TERMINAL_STATES, AutomatonTooLarge, regex_fsm

DEAD = 0
START = 1

# UTF-8 lead byte -> (continuation bytes still needed, allowed range of the next byte)  (RFC 3629 §4)
_LEAD: dict[int, tuple[int, int, int]] = {}
for _b in range(0xC2, 0xE0):
    _LEAD[_b] = (1, 0x80, 0xBF)
for _b in range(0xE0, 0xF0):
    _LEAD[_b] = (2, 0xA0 if _b == 0xE0 else 0x80, 0x9F if _b == 0xED else 0xBF)
for _b in range(0xF0, 0xF5):
    _LEAD[_b] = (3, 0x90 if _b == 0xF0 else 0x80, 0x8F if _b == 0xF4 else 0xBF)


@dataclass
class TerminalAutomaton:
    """One terminal's character automaton (interegular), trimmed to live states.

    Attributes:
        name: Lark terminal name.  ``regexp``: the Python regexp Lark uses.
        step(state, ch) -> next live state or -1.
    """

    name: str
    regexp: str
    fsm: interegular.FSM
    live: frozenset[int]
    nonascii: frozenset[str]
    _memo: dict[tuple[int, object], int] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, name: str, regexp: str) -> TerminalAutomaton:
        """Parse ``regexp`` with interegular.

        Raises:
            UnsupportedGrammarError: lookarounds, back-references or other constructs interegular
                cannot turn into a finite automaton.
        """
        try:
            fsm = regex_fsm(regexp)
        except AutomatonTooLarge:
            raise UnsupportedGrammarError(
                f"terminal {name} /{regexp}/ needs more than {MAX_TERMINAL_STATES:,} automaton states "
                "(exponential or huge repetition); simplify the pattern or express it with rules") from None
        except Exception as exc:  # noqa: BLE001 - interegular raises many types
            raise UnsupportedGrammarError(
                f"terminal {name} has a pattern gad cannot compile to an automaton ({regexp!r}): {exc}") from exc
        # co-reachable states: those from which a final state can be reached
        rev: dict[int, set[int]] = {}
        for s, trans in fsm.map.items():
            for t in trans.values():
                rev.setdefault(t, set()).add(s)
        live: set[Any] = set(fsm.finals)
        todo: list[Any] = list(live)
        while todo:
            s = todo.pop()
            for p in rev.get(s, ()):
                if p not in live:
                    live.add(p)
                    todo.append(p)
        nonascii = frozenset(c for c in fsm.alphabet._symbol_mapping
                             if c is not anything_else and isinstance(c, str) and ord(c) >= 0x80)
        if fsm.initial not in live:
            raise UnsupportedGrammarError(f"terminal {name} matches no string ({regexp!r})")
        if fsm.initial in fsm.finals:
            raise UnsupportedGrammarError(f"terminal {name} matches the empty string ({regexp!r})")
        return cls(name, regexp, fsm, frozenset(live), nonascii)

    def __getstate__(self) -> dict:
        # the step memo is a cache: rebuilt on demand, never written to the compile cache
        return {**self.__dict__, "_memo": {}}

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

    def nonascii_live(self, state: int) -> bool:
        """Can some non-ASCII character be read from ``state``?"""
        if self.step(state, anything_else) >= 0:
            return True
        return any(self.step(state, c) >= 0 for c in self.nonascii)


class LexerDFA:
    """The byte-level union automaton of one lexer context.

    Attributes:
        names: terminal names in Lark's order (index = terminal id within this context).
        ignore: bool per terminal: an ``%ignore`` terminal (its lexemes are dropped).
        table: ``(n_states, 256)`` int32 transition table; state 0 is dead, 1 the empty lexeme.
        accepting: ``(n_states,)`` bool; ``winner``: ``(n_states,)`` int16 terminal id or -1.
        reach: per state, a bit set (Python int) of the winners reachable from it (itself included).
        reach_group / reach_values: states grouped by identical ``reach`` sets (vectorised checks).
    """

    def __init__(self, terminals: list[TerminalAutomaton], ignore: list[bool],
                 unless: dict[int, list[int]]) -> None:
        self.names = [t.name for t in terminals]
        self.terms = terminals
        self.ignore = np.asarray(ignore, dtype=bool)
        self.ignore_bits = sum(1 << i for i, ig in enumerate(ignore) if ig)
        self.unless = unless
        self.explicit_nonascii = any(t.nonascii for t in terminals)
        self._build()

    # ----------------------------------------------------------------------------------- building
    def _step_char(self, states: tuple[int, ...], ch: object) -> tuple[int, ...] | None:
        out = tuple(-1 if s < 0 else t.step(s, ch) for t, s in zip(self.terms, states))
        return out if any(s >= 0 for s in out) else None

    def _step(self, key: tuple, b: int) -> tuple | None:
        states, pend = key
        if not pend:
            if b < 0x80:
                nxt = self._step_char(states, chr(b))
                return None if nxt is None else (nxt, ())
            lead = _LEAD.get(b)
            if lead is None or not any(s >= 0 and t.nonascii_live(s) for t, s in zip(self.terms, states)):
                return None
            n, lo, hi = lead
            if self.explicit_nonascii:
                return (states, (bytes([b]),))
            return (states, (n, lo, hi))
        if self.explicit_nonascii:
            buf = pend[0] + bytes([b])
            n, lo, hi = _LEAD[buf[0]]
            pos = len(buf) - 1  # index of this continuation byte
            if not ((lo <= b <= hi) if pos == 1 else (0x80 <= b <= 0xBF)):
                return None
            if len(buf) == n + 1:
                ch = buf.decode("utf-8")
                nxt = self._step_char(states, ch)
                return None if nxt is None else (nxt, ())
            if self._pending_live(states, buf):
                return (states, (buf,))
            return None
        n, lo, hi = pend
        if not lo <= b <= hi:
            return None
        if n == 1:
            nxt = self._step_char(states, anything_else)
            return None if nxt is None else (nxt, ())
        return (states, (n - 1, 0x80, 0xBF))

    def _pending_live(self, states: tuple[int, ...], buf: bytes) -> bool:
        for t, s in zip(self.terms, states):
            if s < 0:
                continue
            if t.step(s, anything_else) >= 0:
                return True
            if any(c.encode("utf-8").startswith(buf) and t.step(s, c) >= 0 for c in t.nonascii):
                return True
        return False

    def _winner(self, states: tuple[int, ...]) -> int:
        for i, (t, s) in enumerate(zip(self.terms, states)):
            if s >= 0 and s in t.fsm.finals:
                for j in self.unless.get(i, ()):
                    sj = states[j]
                    if sj >= 0 and sj in self.terms[j].fsm.finals:
                        return j
                return i
        return -1

    def _byte_classes(self) -> list[int]:
        """Representative byte of each byte's equivalence class (bytes every terminal treats alike)."""
        sig_to_rep: dict[tuple, int] = {}
        rep = [0] * 256
        for b in range(256):
            if b < 0x80:
                sig: tuple = ("a",) + tuple(t.fsm.alphabet[chr(b)] for t in self.terms)
            elif b in _LEAD:
                sig = ("l", b) if self.explicit_nonascii else ("l",) + _LEAD[b]
            elif b <= 0xBF:
                sig = ("c", b) if self.explicit_nonascii else ("c", b >= 0x90, b >= 0xA0)
            else:
                sig = ("x",)
            rep[b] = sig_to_rep.setdefault(sig, b)
        return rep

    def _build(self) -> None:
        start = (tuple(t.fsm.initial for t in self.terms), ())
        keys: list = [None, start]
        index = {start: START}
        rows: list[list[int]] = [[DEAD] * 256, []]
        rep = self._byte_classes()
        reps = sorted(set(rep))
        i = START
        while i < len(keys):
            key = keys[i]
            out: dict[int, int] = {}
            for b in reps:
                nk = self._step(key, b)
                if nk is None:
                    out[b] = DEAD
                    continue
                j = index.get(nk)
                if j is None:
                    if len(keys) >= MAX_CONTEXT_STATES:
                        raise UnsupportedGrammarError(
                            f"the lexer automaton of terminals {', '.join(self.names)} needs more than "
                            f"{MAX_CONTEXT_STATES:,} states; simplify their patterns")
                    j = len(keys)
                    index[nk] = j
                    keys.append(nk)
                    rows.append([])
                out[b] = j
            rows[i] = [out[rep[b]] for b in range(256)]
            i += 1
        n = len(keys)
        self.n_states = n
        self.rows = rows
        self.table = np.asarray(rows, dtype=np.int32)
        # the same table plus a sink state (index n): the dead state moves to the sink, so that a
        # walk sees DEAD exactly once, at the byte where a token dies
        sink_rows = np.vstack([self.table, np.full((1, 256), n, dtype=np.int32)])
        sink_rows[DEAD, :] = n
        self.flat_sink = sink_rows.ravel()
        winner = np.full(n, -1, dtype=np.int16)
        for s in range(START, n):
            states, pend = keys[s]
            if not pend:
                winner[s] = self._winner(states)
        self.winner = winner
        self.winner_list = winner.tolist()
        self.accepting = winner >= 0
        # reachable winners: fixed point over the transition graph
        succ = [set(r) - {DEAD} for r in rows]
        reach = [0] * n
        for s in range(n):
            if winner[s] >= 0:
                reach[s] = 1 << int(winner[s])
        changed = True
        while changed:
            changed = False
            for s in range(n - 1, 0, -1):
                r = reach[s]
                for t in succ[s]:
                    r |= reach[t]
                if r != reach[s]:
                    reach[s] = r
                    changed = True
        self.reach = reach
        values: dict[int, int] = {}
        group = np.zeros(n, dtype=np.int32)
        for s in range(n):
            group[s] = values.setdefault(reach[s], len(values))
        self.reach_group = group
        self.reach_values = list(values)

    # ------------------------------------------------------------------------------------ queries
    def ok_states(self, allowed_bits: int) -> np.ndarray:
        """``(n_states,)`` bool: states from which a lexeme whose type is in ``allowed_bits``
        (a bit set of terminal ids; ignore terminals are always allowed) can still be completed."""
        bits = allowed_bits | self.ignore_bits
        ok_group = np.fromiter((bool(v & bits) for v in self.reach_values), dtype=bool,
                               count=len(self.reach_values))
        out = ok_group[self.reach_group]
        out[DEAD] = False
        return out


def lark_context_terminals(lexer) -> tuple[list, dict[int, list[int]]]:
    """Terminals of one Lark ``BasicLexer`` in scanning order, after Lark's keyword ("unless") rule.

    Returns ``(terminal_defs, unless)`` where ``unless[i]`` lists the ids (in the returned order) of
    string terminals that turn a match of regex terminal ``i`` into their own type when the lexeme
    equals them.  Mirrors ``lark.lexer._create_unless`` (Lark 1.x).
    """
    from lark.lexer import PatternRE, PatternStr

    terminals = list(lexer.terminals)  # already sorted by Lark
    embedded: set[str] = set()
    unless_names: dict[str, list[str]] = {}
    for retok in terminals:
        if not isinstance(retok.pattern, PatternRE):
            continue
        for strtok in terminals:
            if not isinstance(strtok.pattern, PatternStr) or strtok.priority != retok.priority:
                continue
            s = strtok.pattern.value
            m = re.match(retok.pattern.to_regexp(), s, lexer.g_regex_flags)
            if m and m.group(0) == s:
                unless_names.setdefault(retok.name, []).append(strtok.name)
                if set(strtok.pattern.flags) <= set(retok.pattern.flags):
                    embedded.add(strtok.name)
    kept = [t for t in terminals if t.name not in embedded]
    # embedded strings are still reachable as unless-targets: keep them after the others so
    # their automata run (they never win on their own, a regex covering them comes first)
    extra = [t for t in terminals if t.name in embedded]
    ordered = kept + extra
    pos = {t.name: i for i, t in enumerate(ordered)}
    unless = {pos[r]: [pos[s] for s in ss] for r, ss in unless_names.items()}
    return ordered, unless
