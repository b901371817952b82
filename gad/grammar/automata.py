"""Regular expressions to character automata under a state budget (interegular).

Grammar validation (:mod:`gad.grammar.loader`) and the byte-level lexer (:mod:`gad.engine.lexer`) both
turn a terminal's regexp into an ``interegular`` FSM with :func:`regex_fsm`; the budget refuses
terminals whose subset construction would explode.  The JSON Schema translation intersects
automata (:func:`budgeted` products, :func:`minimize`) and writes the result back as a regex
(:func:`fsm_regex`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import interegular
import interegular.fsm as _ifsm

from gad.grammar.regex_ast import MAX_CP, complement, norm, ranges_text, rx_lit

# Budgets on automaton sizes: a terminal such as /(a|b)*a(a|b){20}/ has 2^21 DFA states and
# /a{1000000}/ a million; building them would run for hours, so they are refused instead.
MAX_TERMINAL_STATES = 10_000  # DFA states created while compiling one terminal's regexp
MAX_CONTEXT_STATES = 200_000  # byte-level states of one lexer context's union automaton


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters for an error message (``…`` and the full length added),
    so that a 200 KB pattern is never echoed whole."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


class AutomatonTooLarge(Exception):
    """A terminal's (or lexer context's) automaton exceeds its state budget."""


_crawl_lock = threading.RLock()
T = TypeVar("T")
_ORIG_CRAWL = _ifsm.crawl


def _budget_crawl(budget: list[int]):
    """interegular's ``crawl`` (subset construction) with a shared state budget and an index dict
    (the original looks every new state up with ``list.index``: quadratic in the number of states)."""

    def crawl(alphabet, initial, final, follow):
        states = [initial]
        index: dict = {}

        def key(x):
            return frozenset(x) if isinstance(x, set) else x

        try:
            index[key(initial)] = 0
        except TypeError:
            return _ORIG_CRAWL(alphabet, initial, final, follow)
        finals = set()
        fmap: dict = {}
        i = 0
        while i < len(states):
            state = states[i]
            if final(state):
                finals.add(i)
            fmap[i] = {}
            for transition in alphabet.by_transition:
                try:
                    nxt = follow(state, transition)
                except _ifsm.OblivionError:
                    continue
                k = key(nxt)
                j = index.get(k)
                if j is None:
                    j = len(states)
                    index[k] = j
                    states.append(nxt)
                    budget[0] -= 1
                    if budget[0] < 0:
                        raise AutomatonTooLarge
                fmap[i][transition] = j
            i += 1
        return _ifsm.FSM(alphabet=alphabet, states=range(len(states)), initial=0, finals=finals, map=fmap,
                         __no_validation__=True)

    return crawl


def regex_fsm(regexp: str, max_states: int | None = None) -> interegular.FSM:
    """``interegular.parse_pattern(regexp).to_fsm()`` under a state budget.

    Raises:
        AutomatonTooLarge: more than ``max_states`` (default :data:`MAX_TERMINAL_STATES`) automaton
            states would be built (exponential subset construction or huge repetition counts).
        Any exception interegular raises for patterns it does not support.

    Results are cached in this process by (regexp, budget) (:data:`FSM_CACHE_SIZE` entries, LRU).
    """
    budget = MAX_TERMINAL_STATES if max_states is None else max_states
    key = (regexp, budget)
    with _crawl_lock:
        hit = _FSM_CACHE.get(key)
        if hit is not None:
            _FSM_CACHE.move_to_end(key)
            return hit
    fsm = _build_fsm(regexp, budget)
    with _crawl_lock:
        _FSM_CACHE[key] = fsm
        while len(_FSM_CACHE) > FSM_CACHE_SIZE:
            _FSM_CACHE.popitem(last=False)
    return fsm


# Automata already built in this process, by (regexp, budget): the terminals of per-request grammars
# recur (a JSON Schema's strings, numbers, punctuation), and validation and the lexer both need them.
# interegular FSMs are not changed after construction, so one object serves every user.
FSM_CACHE_SIZE = 4096
_FSM_CACHE: OrderedDict[tuple[str, int], interegular.FSM] = OrderedDict()


def budgeted(fn: Callable[[], T], max_states: int) -> T:
    """``fn()`` with every interegular subset / product construction inside it sharing a budget of
    ``max_states`` new states (``&``, ``reduce``, ``parse_pattern(...).to_fsm()`` ...).

    Raises:
        AutomatonTooLarge: over the budget.
    """
    budget = [max_states]
    with _crawl_lock:
        prev = _ifsm.crawl  # (nested budgets: the outer one is back after the inner one)
        _ifsm.crawl = _budget_crawl(budget)
        try:
            return fn()
        finally:
            _ifsm.crawl = prev


def _build_fsm(regexp: str, max_states: int) -> interegular.FSM:
    budget = [max_states]
    with _crawl_lock:
        prev = _ifsm.crawl
        _ifsm.crawl = _budget_crawl(budget)
        try:
            return interegular.parse_pattern(regexp).to_fsm()
        finally:
            _ifsm.crawl = prev


# ------------------------------------------------------------------------ automaton -> regex
# A regex under construction: (text, kind); kind "eps" (the empty string), "atom" (a char, a class
# or a group: a quantifier may follow), "quant" (ends with a quantifier), "cat", "alt".
_Rx = tuple[str, str]
_EPS: _Rx = ("", "eps")


def _group(r: _Rx) -> str:
    return r[0] if r[1] == "atom" else f"(?:{r[0]})"


def _rx_alt(a: _Rx | None, b: _Rx | None) -> _Rx | None:
    if a is None:
        return b
    if b is None or a == b:
        return a
    if a[1] == "eps" or b[1] == "eps":
        x = b if a[1] == "eps" else a
        return x if x[1] == "eps" else (_group(x) + "?", "quant")
    return (f"{a[0]}|{b[0]}", "alt")


def _rx_cat(a: _Rx, b: _Rx) -> _Rx:
    if a[1] == "eps":
        return b
    if b[1] == "eps":
        return a
    left = f"(?:{a[0]})" if a[1] == "alt" else a[0]
    right = f"(?:{b[0]})" if b[1] == "alt" else b[0]
    return (left + right, "cat")


def _rx_star(a: _Rx) -> _Rx:
    return _EPS if a[1] == "eps" else (_group(a) + "*", "quant")


def fsm_regex(fsm: interegular.FSM, max_chars: int = 20_000) -> str | None:
    """A regular expression (Python / Lark syntax, no lookarounds) whose language is ``fsm``'s, by
    state elimination (Brzozowski and McCluskey 1963) with the cheapest state (fewest in x out
    edges) eliminated first; None when the language is empty or an intermediate expression grows
    over ``max_chars`` characters (regexes for automata can be exponentially larger).

    Callers that need certainty re-parse the result and compare automata (``equivalent``).
    """
    alpha = fsm.alphabet
    explicit = [s for s in alpha._symbol_mapping if isinstance(s, str)]
    other = complement(norm([(ord(c), ord(c)) for c in explicit])) if explicit else [(0, MAX_CP)]
    # live states: reachable from the initial state and reaching a final one
    fwd: dict = {}
    for s, row in fsm.map.items():
        fwd[s] = set(row.values())
    seen = {fsm.initial}
    stack = [fsm.initial]
    while stack:
        s = stack.pop()
        for t in fwd.get(s, ()):
            if t not in seen:
                seen.add(t)
                stack.append(t)
    back: dict = {}
    for s in seen:
        for t in fwd.get(s, ()):
            back.setdefault(t, set()).add(s)
    co = {s for s in seen if s in fsm.finals}
    stack = list(co)
    while stack:
        s = stack.pop()
        for t in back.get(s, ()):
            if t not in co:
                co.add(t)
                stack.append(t)
    if fsm.initial not in co:
        return None
    # edges: (p, q) -> ranges, then -> regex
    ranges: dict[tuple, list[tuple[int, int]]] = {}
    for p in co:
        for tr, q in fsm.map.get(p, {}).items():
            if q not in co:
                continue
            rs = ranges.setdefault((p, q), [])
            for sym in alpha.by_transition[tr]:
                if sym is _ifsm.anything_else:
                    rs.extend(other)
                else:
                    rs.append((ord(sym), ord(sym)))
    START, END = object(), object()
    out_e: dict = {}
    in_e: dict = {}

    def put(p: object, q: object, r: _Rx | None) -> None:
        if r is None:
            return
        cur = out_e.setdefault(p, {}).get(q)
        new = _rx_alt(cur, r)
        out_e[p][q] = new
        in_e.setdefault(q, {})[p] = new

    for (p, q), rs in ranges.items():
        rs = norm(rs)
        if len(rs) == 1 and rs[0][0] == rs[0][1]:
            put(p, q, (rx_lit(chr(rs[0][0])), "atom"))
        elif sum(hi - lo + 1 for lo, hi in rs) > 4096:
            comp = complement(rs)
            put(p, q, ("[^" + ranges_text(comp) + "]" if comp else "(?:[\\x00-\\x7f]|[^\\x00-\\x7f])", "atom"))
        else:
            put(p, q, ("[" + ranges_text(rs) + "]", "atom"))
    put(START, fsm.initial, _EPS)
    for f in co & set(fsm.finals):
        put(f, END, _EPS)
    todo = set(co)
    while todo:
        k = min(todo, key=lambda s: (len([p for p in in_e.get(s, {}) if p is not s])
                                     * len([q for q in out_e.get(s, {}) if q is not s]), repr(s)))
        todo.discard(k)
        loop = out_e.get(k, {}).get(k)
        mid = _rx_star(loop) if loop is not None else _EPS
        ins = [(p, r) for p, r in in_e.pop(k, {}).items() if p is not k]
        outs = [(q, r) for q, r in out_e.pop(k, {}).items() if q is not k]
        for p, _r in ins:
            out_e[p].pop(k, None)
        for q, _r in outs:
            in_e[q].pop(k, None)
        for p, r1 in ins:
            for q, r2 in outs:
                r = _rx_cat(_rx_cat(r1, mid), r2)
                if len(r[0]) > max_chars:
                    return None
                put(p, q, r)
                if len(out_e[p][q][0]) > max_chars:
                    return None
    final = out_e.get(START, {}).get(END)
    return None if final is None else final[0]


def minimize(fsm: interegular.FSM, max_work: int = 5_000_000) -> interegular.FSM | None:
    """The minimal DFA of ``fsm``'s live part (reachable states that reach a final one; a missing
    transition leads to the dead state), by Moore's partition refinement; None when the
    refinement would exceed ``max_work`` state-transition visits."""
    fwd = {s: dict(row) for s, row in fsm.map.items()}
    seen = {fsm.initial}
    stack = [fsm.initial]
    while stack:
        s = stack.pop()
        for t in fwd.get(s, {}).values():
            if t not in seen:
                seen.add(t)
                stack.append(t)
    back: dict = {}
    for s in seen:
        for t in fwd.get(s, {}).values():
            back.setdefault(t, set()).add(s)
    live = {s for s in seen if s in fsm.finals}
    stack = list(live)
    while stack:
        s = stack.pop()
        for t in back.get(s, ()):
            if t not in live:
                live.add(t)
                stack.append(t)
    if fsm.initial not in live:
        live = {fsm.initial}
    trs = sorted({tr for s in live for tr in fwd.get(s, {})}, key=repr)
    states = sorted(live, key=repr)
    cls = {s: int(s in fsm.finals) for s in states}
    n_cls = len(set(cls.values()))
    work = 0
    while True:
        sigs: dict = {}
        new = {}
        for s in states:
            row = fwd.get(s, {})
            sig = (cls[s],) + tuple(cls.get(row[tr], -1) if tr in row and row[tr] in live else -1 for tr in trs)
            new[s] = sigs.setdefault(sig, len(sigs))
        work += len(states) * (len(trs) + 1)
        if work > max_work:
            return None
        cls = new
        if len(sigs) == n_cls:
            break
        n_cls = len(sigs)
    mapping: dict = {}
    for s in states:
        c = cls[s]
        if c in mapping:
            continue
        row = fwd.get(s, {})
        mapping[c] = {tr: cls[t] for tr, t in row.items() if t in live}
    finals = {cls[s] for s in states if s in fsm.finals}
    return interegular.FSM(alphabet=fsm.alphabet, states=set(mapping), initial=cls[fsm.initial], finals=finals,
                           map=mapping, __no_validation__=True)
