"""Regular expressions to character automata under a state budget (interegular).

Grammar validation (:mod:`gad.grammar.loader`) and the byte-level lexer (:mod:`gad.engine.lexer`) both
turn a terminal's regexp into an ``interegular`` FSM with :func:`regex_fsm`; the budget refuses
terminals whose subset construction would explode.  The JSON Schema translation intersects
automata (:func:`budgeted` products, :func:`minimize`) and writes the result back as a regex
(:func:`fsm_regex`).
"""

from __future__ import annotations

import _sre
import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import interegular
import interegular.fsm as _ifsm
import interegular.patterns as _ipat

from gad.grammar.regex_ast import MAX_CP, RegexUnsupported, complement, norm, parse, ranges_text, rx_lit

# Budgets on automaton sizes: a terminal such as /(a|b)*a(a|b){20}/ has 2^21 DFA states and
# /a{1000000}/ a million; building them would run for hours, so they are refused instead.
MAX_TERMINAL_STATES = 10_000  # DFA states created while compiling one terminal's regexp
MAX_REGEX_CHARS = 20_000  # characters of one terminal's regular expression
MAX_CONTEXT_STATES = 200_000  # byte-level states of one lexer context's union automaton
MAX_TERMINALS = 1_000  # terminals of one grammar, named and anonymous (each a lexer automaton; gad.grammar.loader)
MAX_DEFINITIONS = 5_000  # rule and terminal definitions of one grammar (gad.grammar.loader)


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters for an error message (``…`` and the full length added),
    so that a 200 KB pattern is never echoed whole."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


class AutomatonTooLarge(Exception):
    """A terminal's (or lexer context's) automaton exceeds its state budget."""


_crawl_lock = threading.RLock()


# Case-insensitive character groups, as Python's ``re`` reads them (Lark's ``"select"i`` and
# ``/.../i`` become ``(?i:...)``, matched by ``re``).  interegular widens each character to its
# ``str.lower()`` and ``str.upper()``: that adds two-character "symbols" (``"ß".upper() == "SS"``,
# which broke the lexer's alphabet scan) and misses what ``re`` matches besides (``ẞ`` for ``ß``,
# the Kelvin sign for ``k``, ``ſ`` for ``s``, dotted and dotless ``i``).  gad widens a group to the
# characters ``re.fullmatch("(?i)" + re.escape(x), c)`` accepts instead, then lets interegular
# build it without the flag; the candidates are the characters whose lower or upper case equals
# ``x``'s (sre's rule, with its fixed equivalences, stays inside that set).

# what ``re`` adds to an ASCII letter's two cases under IGNORECASE (checked against the full scan
# of :func:`_case_index` by tests/grammar/test_case_insensitive.py), so that ``"select"i`` needs no scan
ASCII_CASE_EXTRA = {"i": "\u0130\u0131", "k": "\u212a", "s": "\u017f"}
_CASE_INDEX: dict[str, dict[str, set[str]]] | None = None
_CASE_MEMO: dict[str, frozenset[str]] = {}
_SRE_TOLOWER = getattr(_sre, "unicode_tolower", None)  # (re's engine: Unicode's simple lower case)


def _simple_lower(c: str) -> str:
    """``c``'s one-character lower case as ``re`` takes it (Unicode's simple mapping: ``İ`` → ``i``,
    where ``str.lower`` gives two characters); ``c.lower()`` where the interpreter has no such call."""
    return chr(_SRE_TOLOWER(ord(c))) if _SRE_TOLOWER is not None else c.lower()


def _case_index() -> dict[str, dict[str, set[str]]]:
    """Every code point by its one-character lower and upper case (built once, ~0.3 s)."""
    global _CASE_INDEX
    if _CASE_INDEX is None:
        lower: dict[str, set[str]] = {}
        upper: dict[str, set[str]] = {}
        for cp in range(MAX_CP + 1):
            c = chr(cp)
            lo, up = _simple_lower(c), c.upper()
            if lo != c or up != c:
                lower.setdefault(lo, set()).add(c)
                upper.setdefault(up, set()).add(c)
        _CASE_INDEX = {"lower": lower, "upper": upper}
    return _CASE_INDEX


def case_class(x: str) -> frozenset[str]:
    """The characters Python's ``re`` matches for the one character ``x`` under ``IGNORECASE``
    (``x`` included): ``case_class("k") == {"k", "K", "\u212a"}``."""
    hit = _CASE_MEMO.get(x)
    if hit is not None:
        return hit
    if x.isascii():
        out = frozenset({x, x.lower(), x.upper(), *ASCII_CASE_EXTRA.get(x.lower(), "")})
    else:
        idx = _case_index()
        cands: set[str] = set()
        todo = [x]
        while todo:  # (closed under both cases: İ's lower case is i, whose upper case I is ı's)
            c = todo.pop()
            if c in cands or len(c) != 1:
                continue
            cands.add(c)
            lo, up = _simple_lower(c), c.upper()
            todo += [lo, up, *idx["lower"].get(lo, ()), *idx["upper"].get(up, ())]
        pat = re.compile("(?i)" + re.escape(x))
        out = frozenset(c for c in cands if len(c) == 1 and pat.fullmatch(c))
    _CASE_MEMO[x] = out
    return out


def _widened(group: Any) -> Any:
    return _ipat._CharGroup(frozenset().union(*map(case_class, group.chars)), group.negated)


_ORIG_GROUP_ALPHABET = _ipat._CharGroup._get_alphabet
_ORIG_GROUP_FSM = _ipat._CharGroup.to_fsm


def _group_alphabet(self: Any, flags: Any) -> Any:
    if flags & _ipat.REFlags.CASE_INSENSITIVE:
        return _ORIG_GROUP_ALPHABET(_widened(self), flags & ~_ipat.REFlags.CASE_INSENSITIVE)
    return _ORIG_GROUP_ALPHABET(self, flags)


def _group_fsm(self: Any, alphabet: Any = None, prefix_postfix: Any = None, flags: Any = None) -> Any:
    flags = _ipat.REFlags(0) if flags is None else flags
    if flags & _ipat.REFlags.CASE_INSENSITIVE:
        return _ORIG_GROUP_FSM(_widened(self), alphabet, prefix_postfix, flags & ~_ipat.REFlags.CASE_INSENSITIVE)
    return _ORIG_GROUP_FSM(self, alphabet, prefix_postfix, flags)


_ipat._CharGroup._get_alphabet = _group_alphabet  # type: ignore[method-assign]
_ipat._CharGroup.to_fsm = _group_fsm  # type: ignore[method-assign]

T = TypeVar("T")
_ORIG_CRAWL = _ifsm.crawl


def _budget_crawl(budget: list[int]):
    """interegular's ``crawl`` (subset construction) with a shared state budget and an index dict
    (the original looks every new state up with ``list.index``: quadratic in the number of states)."""

    def crawl(alphabet, initial, final, follow):
        states = [initial]
        index: dict = {}

        def key(x):
            # interegular's states: sets (concatenation, star), dicts (parallel: unions,
            # intersections) of substates, or plain ints
            if isinstance(x, set):
                return frozenset(x)
            if isinstance(x, dict):
                return frozenset(x.items())
            return x

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

    crawl.budget = budget  # type: ignore[attr-defined]  # (read by _parallel)
    return crawl


def _parallel(fsms: Sequence[Any], test: Callable[[list[bool]], bool]) -> Any:
    """interegular's ``parallel`` (the product behind ``&``, ``|``, ``-``, ``^``, ``equivalent``): the
    same automaton, state for state, built over integer tables instead of a ``follow`` call per state
    and symbol on dicts of substates (the product constructions of a schema's string intersections
    were most of the slowest conversions).  Each automaton's table gets a sink row standing for "this
    automaton has no move" (interegular's absent substate: not final, never left); a product state
    whose substates are all sinks is interegular's ``OblivionError`` (no move).  Under
    :func:`budgeted` each new state counts against the budget, as in :func:`_budget_crawl`."""
    alphabet, new_to_old = _ifsm.Alphabet.union(*[f.alphabet for f in fsms])
    keys = list(alphabet.by_transition)
    tables: list[list[list[int]]] = []
    finals: list[list[bool]] = []
    sinks: list[int] = []
    initial: list[int] = []
    for f, n2o in zip(fsms, new_to_old, strict=True):
        ids = {q: i for i, q in enumerate(f.states)}
        sink = len(ids)
        rows = []
        for q in f.states:
            moves = f.map.get(q, {})
            rows.append([ids[moves[n2o[k]]] if n2o[k] in moves else sink for k in keys])
        rows.append([sink] * len(keys))
        tables.append(rows)
        finals.append([q in f.finals for q in f.states] + [False])
        sinks.append(sink)
        initial.append(ids[f.initial])
    budget = getattr(_ifsm.crawl, "budget", None)
    dead = tuple(sinks)
    start = tuple(initial)
    index: dict[tuple[int, ...], int] = {start: 0}
    states = [start]
    fmap: dict[int, dict[Any, int]] = {}
    out_finals = set()
    i = 0
    while i < len(states):
        cur = states[i]
        if test([fin[q] for fin, q in zip(finals, cur, strict=True)]):
            out_finals.add(i)
        row: dict[Any, int] = {}
        nexts = zip(*[t[q] for t, q in zip(tables, cur, strict=True)], strict=True)
        for k, nxt in zip(keys, nexts, strict=True):
            if nxt == dead:
                continue
            j = index.get(nxt)
            if j is None:
                j = index[nxt] = len(states)
                states.append(nxt)
                if budget is not None:
                    budget[0] -= 1
                    if budget[0] < 0:
                        raise AutomatonTooLarge
            row[k] = j
        fmap[i] = row
        i += 1
    return _ifsm.FSM(alphabet=alphabet, states=range(len(states)), initial=0, finals=out_finals, map=fmap,
                     __no_validation__=True)


_ORIG_PARALLEL = _ifsm.parallel
_ifsm.parallel = _parallel  # (interegular's operators look the module's parallel up when called)


def regex_fsm(regexp: str, max_states: int | None = None) -> interegular.FSM:
    """``interegular.parse_pattern(regexp).to_fsm()`` under a state budget.

    Raises:
        AutomatonTooLarge: more than ``max_states`` (default :data:`MAX_TERMINAL_STATES`) automaton
            states would be built (exponential subset construction or huge repetition counts).
        Any exception interegular raises for patterns it does not support.

    Results are cached in this process by (regexp, budget) (:data:`FSM_CACHE_SIZE` entries, LRU), and
    so are the builds that ran over their budget (:data:`FSM_FAILED_SIZE`): a schema refused for one
    takes seconds to find it (10,000 states built in Python), and the same schema again — the retry
    with ``lenient=True`` — finds it at once.
    """
    budget = MAX_TERMINAL_STATES if max_states is None else max_states
    key = (regexp, budget)
    with _crawl_lock:
        hit = _FSM_CACHE.get(key)
        if hit is not None:
            _FSM_CACHE.move_to_end(key)
            return hit
        if key in _FSM_FAILED:
            _FSM_FAILED.move_to_end(key)
            raise AutomatonTooLarge
    try:
        fsm = _build_fsm(regexp, budget)
    except AutomatonTooLarge:
        with _crawl_lock:  # (over its own budget: _build_fsm's constructions each set theirs)
            _FSM_FAILED[key] = None
            while len(_FSM_FAILED) > FSM_FAILED_SIZE:
                _FSM_FAILED.popitem(last=False)
        raise
    with _crawl_lock:
        _FSM_CACHE[key] = fsm
        while len(_FSM_CACHE) > FSM_CACHE_SIZE:
            _FSM_CACHE.popitem(last=False)
    return fsm


def cached_fsm(regexp: str) -> interegular.FSM | None:
    """``regex_fsm(regexp)`` where this process has built it already (under the default budget), else
    None: builds nothing (a regexp whose build failed is not cached)."""
    with _crawl_lock:
        return _FSM_CACHE.get((regexp, MAX_TERMINAL_STATES))


# Automata already built in this process, by (regexp, budget): the terminals of per-request grammars
# recur (a JSON Schema's strings, numbers, punctuation), and validation and the lexer both need them.
# interegular FSMs are not changed after construction, so one object serves every user.
FSM_CACHE_SIZE = 4096
_FSM_CACHE: OrderedDict[tuple[str, int], interegular.FSM] = OrderedDict()
FSM_FAILED_SIZE = 1024  # (regexp, budget) pairs whose build ran over its budget, LRU
_FSM_FAILED: OrderedDict[tuple[str, int], None] = OrderedDict()


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


# Regexps of integer ranges written by gad's schema converter, with their bounds: their automata are
# built directly (:func:`int_range_fsm`), not by interegular's construction of the regexp (an int64
# range took 0.3 s and over 10,000 intermediate states, refused as too large; int32 took 60 ms).
INT_RANGES_SIZE = 65536
_INT_RANGES: OrderedDict[str, tuple[int, int]] = OrderedDict()


def note_int_range(regexp: str, lo: int, hi: int) -> str:
    """Record that ``regexp`` denotes the JSON integer spellings of the values in ``[lo, hi]`` (what
    :func:`int_range_fsm` accepts), so that :func:`regex_fsm` builds its automaton directly; returns
    ``regexp``.  The caller vouches for the equality (``tests/grammar/test_int_ranges.py`` checks the
    schema converter's).  Kept for the last :data:`INT_RANGES_SIZE` regexps; an older one is built
    from its text again (the same language, more slowly)."""
    with _crawl_lock:
        if regexp not in _INT_RANGES:  # (a regexp's build may succeed now where it ran over its budget)
            _FSM_FAILED.clear()
        _INT_RANGES[regexp] = (lo, hi)
        _INT_RANGES.move_to_end(regexp)
        while len(_INT_RANGES) > INT_RANGES_SIZE:
            _INT_RANGES.popitem(last=False)
    return regexp


# Regexps of "a string of the frame's language but none of these words" written by gad's schema
# converter (the other keys of an object, the strings outside a ``not`` of an enum): their automata are
# built as the frame's automaton minus the words' trie (:func:`words_fsm`), not by interegular's
# construction of the regexp (three tries in lockstep, each nesting built as its own automaton: 30
# words of 4-10 letters were over 10,000 intermediate states, refused as too large).
_NOT_WORDS: OrderedDict[str, tuple[str, tuple[str, ...]]] = OrderedDict()


def note_not_words(regexp: str, frame: str, words: list[str]) -> str:
    """Record that ``regexp`` denotes the language of regexp ``frame`` without the strings ``words``,
    so that :func:`regex_fsm` builds its automaton as ``frame``'s minus ``words``'s; returns
    ``regexp``.  The caller vouches for the equality (``tests/grammar/test_schema_conditionals.py``
    checks the schema converter's against interegular's automaton of the regexp).  Kept for the last
    :data:`INT_RANGES_SIZE` regexps; an older one is built from its text again."""
    with _crawl_lock:
        if regexp not in _NOT_WORDS:  # (as note_int_range)
            _FSM_FAILED.clear()
        _NOT_WORDS[regexp] = (frame, tuple(words))
        _NOT_WORDS.move_to_end(regexp)
        while len(_NOT_WORDS) > INT_RANGES_SIZE:
            _NOT_WORDS.popitem(last=False)
    return regexp


def int_range_of(regexp: str) -> tuple[int, int] | None:
    """The bounds :func:`note_int_range` recorded for ``regexp``, or for the last branch of
    ``regexp`` when it is a union ``(?:A|B)`` with ``B`` a recorded range (see
    :func:`int_range_union`); None when neither."""
    rng = _INT_RANGES.get(regexp)
    if rng is None:
        split = int_range_union(regexp)
        rng = None if split is None else _INT_RANGES.get(split[1])
    return rng


def int_range_union(regexp: str) -> tuple[str, str] | None:
    """``(A, B)`` where ``regexp`` is ``(?:A|B)`` with ``B`` an integer range that
    :func:`note_int_range` recorded (a number whose integer spellings are bounded, beside the
    fractions: ``{"type": "number", "format": "int64"}``), else None.  Its automaton is ``A``'s
    united with ``B``'s built from the bounds.  The split is at the top level of ``regexp``: a
    ``|`` inside a group or a class of ``A`` would leave ``A`` unbalanced, which
    :func:`regex_fsm` then refuses."""
    if not (regexp.startswith("(?:") and regexp.endswith(")")) or not _INT_RANGES:
        return None
    inner = regexp[3:-1]
    i = inner.find("|")
    while i > 0:
        if inner[i + 1:] in _INT_RANGES:
            return inner[:i], inner[i + 1:]
        i = inner.find("|", i + 1)
    return None


def int_range_fsm(lo: int, hi: int) -> interegular.FSM:
    """The minimal automaton of the JSON integer spellings (RFC 8259: an optional ``-``, no leading
    zeros; ``-0`` is zero) of the values in ``[lo, hi]`` (``lo <= hi``), over an alphabet of the ten
    digits, ``-`` and ``anything_else``.

    A state is the language of what may follow: per number ``k`` of digits still to read, the
    interval of their values (clipped to ``[0, 10**k - 1]``), so equal states are equal languages
    and the automaton is minimal; a digit ``d`` maps the interval for ``k`` digits to the one for
    ``k - 1`` by subtracting ``d * 10**(k - 1)``.  About 60 states for the int64 range, built in a
    few ms.

    Raises:
        ValueError: ``lo > hi``.
    """
    if lo > hi:
        raise ValueError(f"empty integer range [{lo}, {hi}]")
    digits = "0123456789"
    symbols: dict[Any, int] = {c: i for i, c in enumerate(digits + "-")}
    symbols[_ifsm.anything_else] = len(symbols)
    index: dict[Any, int] = {}
    fmap: dict[int, dict[int, int]] = {}
    finals: set[int] = set()
    todo: list[Any] = []

    def state(key: Any, final: bool) -> int:
        j = index.get(key)
        if j is None:
            j = index[key] = len(index)
            fmap[j] = {}
            if final:
                finals.add(j)
            todo.append(key)
        return j

    def after_first(a: int, b: int, d: int) -> tuple | None:
        """The key after a natural's first digit ``d`` (1-9), the natural in ``[a, b]``."""
        out: list[tuple[int, int] | None] = []
        for k in range(len(str(b))):  # k digits still to read: the value is d * 10**k + (their value)
            base, top = d * 10 ** k, 10 ** k - 1
            x, y = max(0, a - base), min(top, b - base)
            out.append((x, y) if x <= y else None)
        return _trim(out)

    def step(key: tuple, d: int) -> tuple | None:
        out: list[tuple[int, int] | None] = []
        for k in range(1, len(key)):
            iv = key[k]
            if iv is None:
                out.append(None)
                continue
            base, top = d * 10 ** (k - 1), 10 ** (k - 1) - 1
            x, y = max(iv[0] - base, 0), min(iv[1] - base, top)
            out.append((x, y) if x <= y else None)
        return _trim(out)

    def _trim(out: list) -> tuple | None:
        while out and out[-1] is None:
            out.pop()
        return tuple(out) if out else None

    start = state(("start",), False)
    ranges: list[tuple[str | None, int, int]] = []  # (sign or None, natural range): positive, negative spellings
    if hi >= 0:
        ranges.append((None, max(lo, 0), hi))
    if lo <= 0:
        ranges.append(("-", max(-hi, 0), -lo))
    for sign, a, b in ranges:
        src = start
        if sign is not None:
            src = state(("minus",), False)
            fmap[start][symbols["-"]] = src
        if a == 0:  # "0" / "-0": zero, and nothing may follow
            fmap[src][symbols["0"]] = state(("zero",), True)
        for d in range(1, 10):
            key = after_first(a, b, d)
            if key is not None:
                fmap[src][symbols[str(d)]] = state(("n", key), key[0] is not None and key[0][0] == 0)
    i = 0
    while i < len(todo):
        key = todo[i]
        i += 1
        if key[0] != "n":
            continue
        j = index[key]
        for d in range(10):
            nk = step(key[1], d)
            if nk is not None:
                fmap[j][symbols[str(d)]] = state(("n", nk), nk[0] is not None and nk[0][0] == 0)
    return _ifsm.FSM(alphabet=_ifsm.Alphabet(symbols), states=range(len(fmap)), initial=start,  # type: ignore[arg-type]
                     finals=finals, map=fmap, __no_validation__=True)


# RFC 8259's string spellings: a terminal of a lookahead intersection must lie inside them (meet_parts)
_JSON_STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'


def _ends_in_quote(text: str) -> bool:
    """``text`` ends in a literal ``"`` (not the escaped quote of an odd run of backslashes)."""
    if not text.endswith('"'):
        return False
    k = len(text) - 1
    while k > 0 and text[k - 1] == "\\":
        k -= 1
    return (len(text) - 1 - k) % 2 == 0


def meet_parts(regexp: str) -> list[str] | None:
    """The terminals ``"A"``, ..., ``"C"`` of a terminal written ``"(?=A")...C"`` (a JSON string whose
    content matches each of A, ... and C), or None for a regexp of any other shape, a negative
    lookahead included (:func:`meet_split` reads those)."""
    split = meet_split(regexp)
    return None if split is None or split[1] else split[0]


def meet_split(regexp: str) -> tuple[list[str], list[str]] | None:
    """``(kept, dropped)`` of a terminal written ``"(?=A")(?!N")...C"``: the terminals ``"A"``, ...,
    ``"C"`` whose strings it keeps (the positive lookaheads' and the rest, last) and ``"N"``, ... whose
    strings it takes out (the negative lookaheads'), or None for a regexp of any other shape.

    Where each of those terminals spells only JSON strings (checked by :func:`regex_fsm`, which then
    builds the intersection of the kept ones less the dropped ones), Python's ``re`` (Lark's scanner)
    reads the terminal as exactly that: a lookahead's ``A"`` cannot end before or after the token's
    closing quote, since a string of JSON content units (each a character other than a quote or
    backslash, or a whole escape) followed by a quote has its first unescaped quote there.  The JSON
    Schema converter writes a pattern / length / format intersection so where the product automaton
    is too large to write back as one regex, and a ``not`` of a pattern (a difference) likewise."""
    if not regexp.startswith(('"(?=', '"(?!')):
        return None
    kept: list[str] = []
    dropped: list[str] = []
    signs: list[bool] = []
    i = 1
    while regexp.startswith(("(?=", "(?!"), i):
        j = _group_end(regexp, i) + 1
        if not j:
            return None
        inner = regexp[i + 3:j - 1]
        if not _ends_in_quote(inner):
            return None
        positive = regexp[i + 2] == "="
        (kept if positive else dropped).append('"' + inner)  # (a sequence ending in its quote: checked below)
        signs.append(positive)
        i = j
    rest = regexp[i:]
    if not _ends_in_quote(rest):
        return None
    kept.append('"' + rest)
    try:  # the text's split agrees with Python's reading: a quote, the lookaheads, the rest
        items = parse(regexp)
    except RegexUnsupported:
        return None
    k = len(signs)
    looks = items[1:1 + k]
    if (str(items[0][0]) != "LITERAL" or items[0][1] != 34 or str(items[-1][0]) != "LITERAL" or items[-1][1] != 34
            or any(str(op) != ("ASSERT" if pos else "ASSERT_NOT") or av[0] != 1 or not av[1].data
                   or str(av[1].data[-1][0]) != "LITERAL" or av[1].data[-1][1] != 34
                   for (op, av), pos in zip(looks, signs, strict=True))):
        return None  # (each lookahead a sequence ending in its quote: "(?=a|")" is a or a quote)
    return kept, dropped


_REPEAT = re.compile(r"\{(?:\d+(?:,\d*)?|,\d+)\}")  # {m}, {m,}, {m,n}, {,n} (Python's repeat counts)
_GROUP_TAGS = (("(?=", "a lookahead"), ("(?!", "a negative lookahead"), ("(?<=", "a lookbehind"),
               ("(?<!", "a negative lookbehind"), ("(?P=", "a back-reference"), ("(?>", "an atomic group"),
               ("(?(", "a conditional group"))


def unsupported_feature(regexp: str) -> str | None:
    """Name the first construct of ``regexp`` that no automaton gad builds reads as Python's ``re`` does
    (a lookaround, back-reference, anchor, atomic group, conditional, or possessive quantifier such as
    ``a*+``, which interegular would read as ``(a*)+``), or None.  A lookahead intersection of JSON
    strings (:func:`meet_parts`) is read exactly: its parts are checked instead."""
    split = meet_split(regexp)
    if split is not None:
        return next((bad for bad in map(unsupported_feature, split[0] + split[1]) if bad), None)
    i, n, in_class, after_quant = 0, len(regexp), False, False
    while i < n:
        c = regexp[i]
        quant = False
        if c == "\\":
            nxt = regexp[i + 1:i + 2]
            if not in_class:
                if nxt in "123456789" and nxt:
                    return "a back-reference"
                if nxt in ("b", "B", "A", "Z", "z", "G"):
                    return f"the anchor \\{nxt}"
            i += 2
            after_quant = False
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            if regexp[i + 1:i + 2] == "^":
                i += 1
            if regexp[i + 1:i + 2] == "]":
                i += 1
        elif c == "(":
            for tag, what in _GROUP_TAGS:
                if regexp.startswith(tag, i):
                    return what
            if regexp.startswith("(?", i):
                i += 1  # (the group's "?" is no quantifier)
        elif c in "^$":
            return f"the anchor {c}"
        elif c == "+" and after_quant:
            return "a possessive quantifier"
        elif c in "*+?":
            quant = not (c == "?" and after_quant)  # (a lazy "?" ends the quantifier)
        elif c == "{":
            m = _REPEAT.match(regexp, i)  # (a repeat count; any other "{" is a literal brace)
            if m is not None:
                i, quant = m.end() - 1, True
        after_quant = quant
        i += 1
    return None


def _meet_fsm(parts: list[str], max_states: int, minus: Sequence[str] = ()) -> interegular.FSM:
    """The intersection of the terminals ``parts`` less those of ``minus`` (:func:`meet_split`), each
    checked to spell only JSON strings.

    The product may build up to twice ``max_states`` states before it is minimised (a length bound
    times a pattern's states: most of them merge); it is not tried where the two automata's sizes
    multiply to over ten times ``max_states`` (building it would take seconds, in Python).

    Raises:
        AutomatonTooLarge: over ``max_states`` (minimised), or over twice that while built.
        ValueError: a part spells something other than a JSON string (the lookahead could then read
            past the token: no exact automaton).
    """
    json_string = regex_fsm(_JSON_STRING)

    def spells_json(f: interegular.FSM) -> bool:
        return bool((f - json_string).empty())

    def part_fsm(part: str) -> interegular.FSM:
        f = regex_fsm(part, max_states)
        if not budgeted(partial(spells_json, f), max_states):
            raise ValueError(f"the lookahead terminal's part {clip(part)} spells more than JSON strings")
        return f

    def step(out: interegular.FSM, op: Callable[[Any, Any], Any], f: interegular.FSM) -> interegular.FSM:
        if len(out.map) * len(f.map) > 10 * max_states:
            raise AutomatonTooLarge
        out = budgeted(partial(op, out, f), 2 * max_states)
        small = minimize(out)
        out = out if small is None else small
        if len(out.map) > max_states:
            raise AutomatonTooLarge
        return out

    fsms = sorted(map(part_fsm, parts), key=lambda f: len(f.map))
    out = fsms[0]
    for f in fsms[1:]:
        out = step(out, operator.and_, f)
    for part in minus:
        out = step(out, operator.sub, part_fsm(part))
    return out


def _build_fsm(regexp: str, max_states: int) -> interegular.FSM:
    meet = meet_split(regexp)
    if meet is not None:
        return _meet_fsm(meet[0], max_states, meet[1])
    not_words = _NOT_WORDS.get(regexp)
    if not_words is not None:
        frame, noted = not_words
        trie = words_fsm(list(noted))
        if len(trie.states) > max_states:
            raise AutomatonTooLarge
        outer = _build_fsm(frame, max_states)
        rest = budgeted(lambda: outer.difference(trie), max_states)
        small = minimize(rest)
        return rest if small is None else small
    rng = _INT_RANGES.get(regexp)
    if rng is not None:
        direct = int_range_fsm(*rng)
        if len(direct.states) > max_states:
            raise AutomatonTooLarge
        return direct
    union = int_range_union(regexp)
    if union is not None:
        try:
            a: interegular.FSM | None = _build_fsm(union[0], max_states)
        except AutomatonTooLarge:
            raise
        except Exception:  # noqa: BLE001 - not a top-level split after all: A is no regexp alone
            a = None
        if a is not None:
            b = _build_fsm(union[1], max_states)
            both = budgeted(lambda: a | b, max_states)
            small = minimize(both)
            return both if small is None else small
    words = literal_words(regexp)
    if words is not None:
        trie = words_fsm(words)  # (linear in the words' length: a regexp is at most MAX_REGEX_CHARS)
        if len(trie.states) > max_states:  # (its states, not the words' total length: prefixes are shared)
            raise AutomatonTooLarge
        return trie
    parts = repeat_parts(regexp)
    if parts is not None:
        fsm = repeat_fsm(*parts, max_states=max_states)
        if fsm is not None:
            return fsm
    budget = [max_states]
    with _crawl_lock:
        prev = _ifsm.crawl
        _ifsm.crawl = _budget_crawl(budget)
        try:
            return interegular.parse_pattern(regexp).to_fsm()
        finally:
            _ifsm.crawl = prev


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


_COUNT = re.compile(r"\{(\d+)(?:(,)(\d*))?\}")


def _group_end(regexp: str, i: int) -> int:
    """Index of the ``)`` closing the group opened at ``regexp[i]`` (escapes and classes skipped), -1 if none."""
    depth, k, n = 0, i, len(regexp)
    while k < n:
        c = regexp[k]
        if c == "\\":
            k += 2
            continue
        if c == "[":
            k += 1
            if k < n and regexp[k] == "^":
                k += 1
            if k < n and regexp[k] == "]":
                k += 1
            while k < n and regexp[k] != "]":
                k += 2 if regexp[k] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return k
        k += 1
    return -1


def repeat_parts(regexp: str) -> tuple[str, str, int, int | None, str] | None:
    """``(P, BODY, m, n, S)`` for a regexp ``P(?:BODY){m,n}S`` (``{m}``: n = m; ``{m,}``: n = None)
    with literal (possibly empty) ``P`` and ``S``; None for any other shape.  JSON strings under
    ``minLength`` / ``maxLength`` come out of the schema converter in this shape."""
    i = regexp.find("(?:")
    if i < 0:
        return None
    head = regexp[:i]
    pre = literal_text(head) if head else ""
    j = _group_end(regexp, i)
    if pre is None or j < 0:
        return None
    m = _COUNT.match(regexp, j + 1)
    if m is None:
        return None
    lo = int(m.group(1))
    hi: int | None = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
    if hi is not None and hi < lo:
        return None
    tail = regexp[m.end():]
    post = literal_text(tail) if tail else ""
    if post is None:
        return None
    return pre, regexp[i + 3:j], lo, hi, post


def repeat_fsm(pre: str, body: str, lo: int, hi: int | None, post: str,
               max_states: int = MAX_TERMINAL_STATES) -> interegular.FSM | None:
    """The automaton of ``pre (?:body){lo,hi} post`` built directly: ``hi`` (or ``lo + 1``, the
    last looping) copies of ``body``'s automaton chained where a copy ends, between a chain for
    ``pre`` and one for ``post``.  Exact when ``body``'s automaton never continues after a match
    (its final states have no transitions, as for one JSON string character) and ``post`` cannot
    start where another copy could; None otherwise (then interegular builds it).  The same language
    as interegular's automaton (tested), without its product constructions (~190 ms for ``{0,127}``).

    Raises:
        AutomatonTooLarge: more than ``max_states`` states.
    """
    b = regex_fsm(body, max_states)
    rows: dict[Any, dict[Any, Any]] = b.map
    init, finals = b.initial, b.finals
    if init in finals or any(rows.get(f) for f in finals):
        return None
    old = b.alphabet._symbol_mapping
    special = set(pre) | set(post)
    mapping: dict = {}
    old_of: dict[int, int] = {}  # new class -> body's class
    merged: dict[int, int] = {}
    for ch, oc in old.items():
        if ch in special:
            continue
        nc = merged.get(oc)
        if nc is None:
            nc = merged[oc] = len(old_of)
            old_of[nc] = oc
        mapping[ch] = nc
    other = old[_ifsm.anything_else]
    if _ifsm.anything_else not in mapping:
        return None
    for ch in sorted(special):
        mapping[ch] = len(old_of)
        old_of[len(old_of)] = old.get(ch, other)
    if post and rows.get(init, {}).get(old_of[mapping[post[0]]]) is not None:
        return None  # post could start where a copy of body could: not a deterministic chain
    copies = hi if hi is not None else lo + 1
    accept = {k for k in range(copies) if k >= lo}
    # state keys: ("p", i) / ("r", k, s) / ("end",) / ("s", i); numbered in discovery order
    first: tuple = ("p", 0) if pre else (("r", 0, init) if copies else ("end",))
    index: dict[tuple, int] = {first: 0}
    order = [first]
    fmap: dict[int, dict[int, int]] = {}
    fin: set[int] = set()

    def after_pre() -> tuple:
        return ("r", 0, init) if copies else ("end",)

    def to_post() -> tuple | None:
        return ("s", 0) if post else None

    q = 0
    while q < len(order):
        key = order[q]
        sid = q
        q += 1
        out: dict[int, tuple] = {}
        accepting = False
        if key[0] == "p":
            i = key[1]
            out[mapping[pre[i]]] = ("p", i + 1) if i + 1 < len(pre) else after_pre()
        elif key[0] == "r":
            k, st = key[1], key[2]
            row = rows.get(st, {})
            for nc, body_class in old_of.items():
                t: Any = row.get(body_class)
                if t is None:
                    continue
                if t in finals:
                    nxt: tuple = ("r", k + 1, init) if k + 1 < copies else (("r", k, init) if hi is None else ("end",))
                else:
                    nxt = ("r", k, t)
                out[nc] = nxt
            accepting = st == init and k in accept
        elif key[0] == "end":
            accepting = hi is None or hi >= lo
        else:  # ("s", i): i characters of post read
            i = key[1]
            if i < len(post):
                out[mapping[post[i]]] = ("s", i + 1)
            else:
                fin.add(sid)
        if accepting:
            if post:
                out[mapping[post[0]]] = ("s", 1) if len(post) > 1 else ("s", len(post))
            else:
                fin.add(sid)
        row_ids: dict[int, int] = {}
        for nc, nxt in out.items():
            j = index.get(nxt)
            if j is None:
                j = index[nxt] = len(order)
                order.append(nxt)
                if len(order) > max_states:
                    raise AutomatonTooLarge
            row_ids[nc] = j
        fmap[sid] = row_ids
    return _ifsm.FSM(alphabet=_ifsm.Alphabet(mapping), states=range(len(order)), initial=0, finals=fin,
                     map=fmap, __no_validation__=True)


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


def _weight(s: object, in_e: dict, out_e: dict) -> int:
    """Characters that eliminating state ``s`` adds to the expression (Delgado and Morais 2004): each
    incoming expression is copied once per outgoing edge and each outgoing one once per incoming
    edge, the loop once per pair."""
    ins = [len(r[0]) for p, r in in_e.get(s, {}).items() if p is not s]
    outs = [len(r[0]) for q, r in out_e.get(s, {}).items() if q is not s]
    loop = out_e.get(s, {}).get(s)
    n_in, n_out = len(ins), len(outs)
    return (sum(ins) * (n_out - 1) + sum(outs) * (n_in - 1)
            + (len(loop[0]) if loop is not None else 0) * (n_in * n_out - 1))


def reachable(fsm: interegular.FSM, start: Any = None) -> set[Any]:
    """The states of ``fsm`` reachable from ``start`` (default: its initial state), ``start`` included."""
    first = fsm.initial if start is None else start
    seen = {first}
    stack = [first]
    while stack:
        for t in fsm.map.get(stack.pop(), {}).values():
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return seen


def coreachable(fsm: interegular.FSM, among: set[Any] | None = None) -> set[Any]:
    """The states of ``fsm`` from which a final state can be reached (only through the states of
    ``among`` when it is given: ``coreachable(fsm, reachable(fsm))`` is the live part)."""
    back: dict[Any, set[Any]] = {}
    for s in fsm.map if among is None else among:
        for t in fsm.map.get(s, {}).values():
            back.setdefault(t, set()).add(s)
    live = set(fsm.finals) if among is None else {s for s in among if s in fsm.finals}
    stack = list(live)
    while stack:
        for p in back.get(stack.pop(), ()):
            if p not in live:
                live.add(p)
                stack.append(p)
    return live


def _edge_atoms(fsm: interegular.FSM) -> tuple[list[Any], dict[Any, int], dict[tuple[Any, Any], _Rx]] | None:
    """The live part of ``fsm`` as regex atoms: ``(states, canon, atoms)`` with the live states in
    a breadth-first order from the initial one (``canon``: state -> number) and one atom (a char or
    a class) per live move ``(p, q)``; None when the language is empty.

    The numbering depends on the automaton, not on how the process happened to number its states
    (product automata number them by hash order), so the regexes written from it do too."""
    alpha = fsm.alphabet
    explicit = [s for s in alpha._symbol_mapping if isinstance(s, str)]
    other = complement(norm([(ord(c), ord(c)) for c in explicit])) if explicit else [(0, MAX_CP)]
    co = coreachable(fsm, reachable(fsm))  # live states: reachable, and reaching a final one
    if fsm.initial not in co:
        return None

    def tr_key(tr: Any) -> list[str]:
        return sorted(repr(x) for x in alpha.by_transition[tr])

    canon = {fsm.initial: 0}
    queue = [fsm.initial]
    for s in queue:
        for _tr, q in sorted(fsm.map.get(s, {}).items(), key=lambda it: tr_key(it[0])):
            if q not in canon:
                canon[q] = len(canon)
                queue.append(q)
    ranges: dict[tuple, list[tuple[int, int]]] = {}
    order = sorted(co, key=canon.__getitem__)
    for p in order:
        for tr, q in sorted(fsm.map.get(p, {}).items(), key=lambda it: tr_key(it[0])):
            if q not in co:
                continue
            rs = ranges.setdefault((p, q), [])
            for sym in alpha.by_transition[tr]:
                if sym is _ifsm.anything_else:
                    rs.extend(other)
                else:
                    rs.append((ord(sym), ord(sym)))
    atoms: dict[tuple[Any, Any], _Rx] = {}
    for (p, q), rs in ranges.items():
        rs = norm(rs)
        if len(rs) == 1 and rs[0][0] == rs[0][1]:
            atoms[p, q] = (rx_lit(chr(rs[0][0])), "atom")
        elif sum(hi - lo + 1 for lo, hi in rs) > 4096:
            comp = complement(rs)
            atoms[p, q] = ("[^" + ranges_text(comp) + "]" if comp else "(?:[\\x00-\\x7f]|[^\\x00-\\x7f])", "atom")
        else:
            atoms[p, q] = ("[" + ranges_text(rs) + "]", "atom")
    return order, canon, atoms


def fsm_regex(fsm: interegular.FSM, max_chars: int = 20_000) -> str | None:
    """A regular expression (Python / Lark syntax, no lookarounds) whose language is ``fsm``'s, by
    state elimination (Brzozowski and McCluskey 1963), the state that adds the fewest characters
    (:func:`_weight`) eliminated first, ties broken by a breadth-first numbering of the states
    (so that the same automaton gives the same regex in every process); None when the language is empty or an intermediate expression grows
    over ``max_chars`` characters (regexes for automata can be exponentially larger).

    Callers that need certainty re-parse the result and compare automata (``equivalent``).
    """
    edges = _edge_atoms(fsm)
    if edges is None:
        return None
    order, canon, atoms = edges
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

    for (p, q), r in atoms.items():
        put(p, q, r)
    put(START, fsm.initial, _EPS)
    for f in order:
        if f in fsm.finals:
            put(f, END, _EPS)
    todo = set(order)
    while todo:
        k = min(todo, key=lambda s: (_weight(s, in_e, out_e), canon[s]))
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


class _TooLong(Exception):
    """An expression of :func:`greedy_regex` grew over its character budget."""


def greedy_regex(fsm: interegular.FSM, max_chars: int = 20_000) -> str | None:
    """A regular expression for ``fsm``'s language whose leftmost-first match (Python's ``re``,
    Lark's lexer) on any string is the longest prefix in the language -- what gad's lexer reads
    (maximal munch), so a terminal written with it means the same to Lark and to gad.  None when the
    language is empty or the expression grows over ``max_chars`` characters.

    ``fsm_regex`` writes unions such as ``(?:0|[1-9][0-9]*|[0-9]+\\.[0-9]+)`` whose first branch
    stops Python at ``2`` in ``2.5``.  Here the language read from state ``q`` (avoiding the states
    on the path that led to ``q``) is written ``(?:B)*E``: ``B`` the words that return to ``q`` for
    the first time, ``E`` those that leave ``q`` for good, an alternation over ``q``'s moves -- one
    per next state, so the next character picks at most one -- made optional (greedy ``?``, tried
    last) when ``q`` is final.  Every match through one more ``B`` ends after every match of ``E``
    (the path is fixed by the input), and greedy operators try the longer first, so the first
    match found is the longest.  The expression is a tree over the automaton's simple paths:
    exponential in the worst case, linear for the trees and self-loops of number automata.
    Callers that need certainty re-parse the result and compare automata (``equivalent``).
    """
    edges = _edge_atoms(fsm)
    if edges is None:
        return None
    order, canon, atoms = edges
    moves: dict[Any, list[tuple[Any, _Rx]]] = {p: [] for p in order}
    for (p, q), r in atoms.items():
        moves[p].append((q, r))
    for p in order:
        moves[p].sort(key=lambda m: canon[m[0]])
    # the states reachable from p (p included; only live states can be in a memo key's ``avoid``)
    reach = {p: frozenset(reachable(fsm, p)) for p in order}
    memo: dict[tuple[Any, frozenset[Any], Any], _Rx | None] = {}
    finals = fsm.finals

    def words(q: Any, avoid: frozenset[Any], target: Any) -> _Rx | None:
        # the words read from q through states outside ``avoid`` that end in a final state
        # (target None) or on the move into ``target`` (a state of ``avoid``); None: no word
        key = (q, avoid & reach[q], target)
        if key in memo:
            return memo[key]
        inner = avoid | {q}
        loops: list[_Rx] = []
        leave: list[_Rx] = []
        for d, atom in moves[q]:
            if target is not None and d == target:
                leave.append(atom)
            elif d == q:
                loops.append(atom)
            elif d not in avoid:
                back = words(d, inner, q)
                if back is not None:
                    loops.append(_rx_cat(atom, back))
                on = words(d, inner, target)
                if on is not None:
                    leave.append(_rx_cat(atom, on))
        out = _alts(leave)
        if target is None and q in finals:
            out = _EPS if out is None else _rx_alt(out, _EPS)  # greedy ``?``: stopping is tried last
        body = _alts(loops)
        if out is not None and body is not None:
            out = _rx_cat(_rx_star(body), out)
        if out is not None and len(out[0]) > max_chars:
            raise _TooLong
        memo[key] = out
        return out

    try:
        top = words(fsm.initial, frozenset(), None)
    except (_TooLong, RecursionError):
        return None
    return None if top is None else top[0]


def _alts(rs: list[_Rx]) -> _Rx | None:
    """The alternation of ``rs`` in their order (None for none)."""
    if not rs:
        return None
    if len(rs) == 1:
        return rs[0]
    return ("|".join(r[0] for r in rs), "alt")


def _coarsest_partition(states: list, trs: list, fwd: dict, finals: Any, max_work: int) -> list[int] | None:
    """Per state of ``states`` (the live ones), its block of the coarsest partition that separates
    final from other states and is stable under every transition of ``trs`` (a transition to a state
    outside ``states``, or none, goes to a dead sink); None past ``max_work`` transitions visited."""
    n = len(states)
    index = {st: i for i, st in enumerate(states)}
    sink = n
    # pre[k][t]: the states whose transition k leads to t (the sink's own moves lead to it)
    pre: list[dict[int, list[int]]] = [{} for _ in trs]
    for i, st in enumerate(states):
        row = fwd.get(st, {})
        for k, tr in enumerate(trs):
            t = row.get(tr)
            j = index.get(t, sink) if t is not None else sink
            pre[k].setdefault(j, []).append(i)
    for k in range(len(trs)):
        pre[k].setdefault(sink, []).append(sink)
    fin = {i for i, st in enumerate(states) if st in finals}
    blocks: list[set[int]] = [b for b in (fin, set(range(n + 1)) - fin) if b]
    block_of = [0] * (n + 1)
    for b, members in enumerate(blocks):
        for i in members:
            block_of[i] = b
    todo: list[tuple[int, int]] = []
    waiting: set[tuple[int, int]] = set()
    if len(blocks) == 2:
        small = 0 if len(blocks[0]) <= len(blocks[1]) else 1
        for k in range(len(trs)):
            todo.append((small, k))
            waiting.add((small, k))
    work = 0
    while todo:
        splitter = todo.pop()
        waiting.discard(splitter)
        a, k = splitter
        pk = pre[k]
        hit: dict[int, list[int]] = {}
        for t in list(blocks[a]):
            for s in pk.get(t, ()):
                hit.setdefault(block_of[s], []).append(s)
                work += 1
        if work > max_work:
            return None
        for y, xs in hit.items():
            if len(xs) == len(blocks[y]):
                continue
            z = len(blocks)
            moved = set(xs)
            blocks[y] -= moved
            blocks.append(moved)
            for s in xs:
                block_of[s] = z
            smaller = z if len(moved) <= len(blocks[y]) else y
            for c in range(len(trs)):
                if (y, c) in waiting:
                    todo.append((z, c))
                    waiting.add((z, c))
                else:
                    todo.append((smaller, c))
                    waiting.add((smaller, c))
    return block_of[:n]


def minimize(fsm: interegular.FSM, max_work: int = 5_000_000) -> interegular.FSM | None:
    """The minimal DFA of ``fsm``'s live part (reachable states that reach a final one; a missing
    transition leads to the dead state), by Hopcroft's partition refinement (*An n log n algorithm
    for minimizing states in a finite automaton*, 1971): each state's class is its block of the
    coarsest partition, the classes numbered in the order of their first state (by ``repr``).  None
    when the refinement would visit more than ``max_work`` transitions (a bounded string's chain of
    a few hundred states takes a few thousand)."""
    fwd = {s: dict(row) for s, row in fsm.map.items()}
    live = coreachable(fsm, reachable(fsm))
    if fsm.initial not in live:
        live = {fsm.initial}
    trs = sorted({tr for s in live for tr in fwd.get(s, {})}, key=repr)
    states = sorted(live, key=repr)
    block = _coarsest_partition(states, trs, fwd, fsm.finals, max_work)
    if block is None:
        return None
    first: dict[int, int] = {}
    cls = {st: first.setdefault(b, len(first)) for st, b in zip(states, block)}
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
