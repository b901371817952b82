"""Regular expressions to character automata under a state budget (interegular).

Grammar validation (:mod:`gad.grammar.loader`) and the byte-level lexer (:mod:`gad.engine.lexer`) both
turn a terminal's regexp into an ``interegular`` FSM with :func:`regex_fsm`; the budget refuses
terminals whose subset construction would explode.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import interegular
import interegular.fsm as _ifsm

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


_crawl_lock = threading.Lock()
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


def _build_fsm(regexp: str, max_states: int) -> interegular.FSM:
    words = literal_words(regexp)
    if words is not None:
        if sum(map(len, words)) + 1 > max_states:
            raise AutomatonTooLarge
        return words_fsm(words)
    budget = [max_states]
    with _crawl_lock:
        _ifsm.crawl = _budget_crawl(budget)
        try:
            return interegular.parse_pattern(regexp).to_fsm()
        finally:
            _ifsm.crawl = _ORIG_CRAWL


_META = frozenset(".^$*+?{}[]|()")


def literal_text(regexp: str) -> str | None:
    """The string a regexp without operators matches (``\\,`` -> ``,``, ``re.escape(s)`` -> ``s``),
    or None when ``regexp`` has any operator, class, group or letter/digit escape (``\\d``, ``\\x41``)."""
    out = []
    i, n = 0, len(regexp)
    while i < n:
        c = regexp[i]
        if c == "\\":
            if i + 1 >= n:
                return None
            nxt = regexp[i + 1]
            if nxt.isascii() and nxt.isalnum():
                return None
            out.append(nxt)
            i += 2
            continue
        if c in _META:
            return None
        out.append(c)
        i += 1
    return "".join(out) if out else None


def literal_words(regexp: str) -> list[str] | None:
    """The finite language of ``P(?:A1|A2|...)S`` or ``P`` with literal ``P``, ``Ai``, ``S`` (as
    :func:`literal_text` reads them; an ``Ai`` may be empty), as a list of strings; None for any other
    regexp.  JSON Schema ``enum``s of strings and object keys come out of the converter in this shape."""
    text = literal_text(regexp)
    if text is not None:
        return [text]
    i = regexp.find("(?:")
    if i < 0:
        return None
    j = regexp.rfind(")")
    head, body, tail = regexp[:i], regexp[i + 3:j], regexp[j + 1:]
    pre = literal_text(head) if head else ""
    post = literal_text(tail) if tail else ""
    if pre is None or post is None:
        return None
    alts: list[str] = []
    start = k = 0
    while k <= len(body):  # split at "|" outside escapes; any other operator fails literal_text
        if k == len(body) or body[k] == "|":
            part = body[start:k]
            word = literal_text(part) if part else ""
            if word is None:
                return None
            alts.append(word)
            start = k + 1
        elif body[k] == "\\":
            k += 1
        k += 1
    words = [pre + a + post for a in alts]
    return words if all(words) else None


def words_fsm(words: list[str]) -> interegular.FSM:
    """The automaton of a finite set of non-empty strings, built directly as their trie (one state per
    distinct prefix) over an alphabet of their characters and ``anything_else``: the same language
    as interegular's automaton of the alternation (tested), without its product construction."""
    symbols: dict = {}
    for w in words:
        for ch in w:
            symbols.setdefault(ch, len(symbols))
    symbols[_ifsm.anything_else] = len(symbols)
    fmap: dict[int, dict[int, int]] = {0: {}}
    finals = set()
    for w in words:
        state = 0
        for ch in w:
            sym = symbols[ch]
            nxt = fmap[state].get(sym)
            if nxt is None:
                nxt = len(fmap)
                fmap[state][sym] = nxt
                fmap[nxt] = {}
            state = nxt
        finals.add(state)
    return _ifsm.FSM(alphabet=_ifsm.Alphabet(symbols), states=range(len(fmap)), initial=0,
                     finals=finals, map=fmap, __no_validation__=True)
