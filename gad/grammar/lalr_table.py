"""Lark's LALR(1) table construction over integer item and state ids.

Lark builds its LALR(1) parse table (``lark.parsers.lalr_analysis.LALR_Analyzer``: LR(0) item sets,
then DeRemer and Pennello's lookaheads, *Efficient Computation of LALR(1) Look-Ahead Sets*, TOPLAS
1982) over ``RulePtr`` objects hashed through Python methods and sets of them; for a grammar made
per request from a JSON Schema that is about half of the time to its first mask.  :func:`lalr_table`
runs the same steps, in the same way (Lark's relations, its use of NULLABLE, its conflict rules and
its ``digraph``), over small integers, and returns the same ``IntParseTable`` up to the numbering of
states (tested on every shipped grammar, MaskBench's schema grammars and random grammars).
:class:`FastLALRAnalyzer` stands in for Lark's analyzer while gad builds a parser
(:func:`gad.grammar.lalr_sets.lark_uses_fast_sets`); for ``debug`` / ``strict`` parsers, grammars Lark
would refuse (undefined or duplicate rules, reduce/reduce collisions) it defers to Lark's own
analyzer, so every error is Lark's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from lark.grammar import NonTerminal, Rule
from lark.parsers.lalr_analysis import IntParseTable, LALR_Analyzer, Reduce, Shift, digraph
from lark.utils import logger

_END = "$END"


class FastLALRAnalyzer:
    """Drop-in for ``LALR_Analyzer`` in ``lark.parsers.lalr_parser``: ``compute_lalr()`` sets
    ``parse_table`` (an ``IntParseTable``) from :func:`lalr_table`, or from Lark's analyzer where
    that one must speak (see the module doc)."""

    def __init__(self, parser_conf: Any, debug: bool = False, strict: bool = False) -> None:
        self.parser_conf, self.debug, self.strict = parser_conf, debug, strict
        self.parse_table: Any = None

    def compute_lalr(self) -> None:
        table: Any = None
        if not (self.debug or self.strict):
            table = lalr_table(self.parser_conf.rules, self.parser_conf.start)
        if table is None:
            lark_own = LALR_Analyzer(self.parser_conf, debug=self.debug, strict=self.strict)
            lark_own.compute_lalr()
            table = lark_own.parse_table
        self.parse_table = table


def nullable_symbols(rules: Sequence[Any]) -> set:
    """The nonterminals (Lark symbol objects) of ``rules`` deriving the empty string: each rule waits
    on its count of body symbols not yet known nullable and fires at 0 (linear in the rules' size;
    a terminal in the body means never)."""
    nullable: set = set()
    waiting: dict[Any, list[int]] = {}
    left = []
    todo = []
    for k, rule in enumerate(rules):
        n = 0
        for sym in rule.expansion:
            if sym.is_term:
                n = -1
                break
            n += 1
            waiting.setdefault(sym, []).append(k)
        left.append(n)
        if n == 0:
            todo.append(rule.origin)
    while todo:
        x = todo.pop()
        if x in nullable:
            continue
        nullable.add(x)
        for k in waiting.get(x, ()):
            if left[k] > 0:
                left[k] -= 1
                if left[k] == 0:
                    todo.append(rules[k].origin)
    return nullable


def lalr_table(rules: Sequence[Rule], starts: Sequence[str],
               conflicts: list[tuple[int, str]] | None = None) -> IntParseTable | None:
    """Lark's LALR(1) table for ``rules`` (Lark ``Rule`` objects) and start symbols ``starts``, or
    None where Lark's own analyzer must run (its errors: duplicate / undefined rules, unknown start,
    reduce/reduce collisions).  Shift/reduce conflicts resolve as shift with Lark's debug log lines,
    each also appended to ``conflicts`` (when given) as ``(state, terminal)``.

    Items are ``base[rule] + dot``; a state is its kernel (a frozenset of items); relations are over
    nonterminal transitions numbered in discovery order.
    """
    rules = list(rules)
    if len(rules) != len(set(rules)):
        return None
    origins = {r.origin.name for r in rules}
    if any(s not in origins for s in starts):
        return None
    for r in rules:
        for x in r.expansion:
            if not x.is_term and x.name not in origins:
                return None
    roots = [Rule(NonTerminal("$root_" + s), [NonTerminal(s)]) for s in starts]
    all_rules = rules + roots
    nullable = {s.name for s in nullable_symbols(rules)}

    # items: next symbol name (None when satisfied), whether it is a nonterminal, owning rule
    base: list[int] = []
    item_next: list[str | None] = []
    item_nt: list[bool] = []
    item_rule: list[int] = []
    by_origin: dict[str, list[int]] = defaultdict(list)
    for k, r in enumerate(all_rules):
        base.append(len(item_next))
        by_origin[r.origin.name].append(k)
        for x in r.expansion:
            item_next.append(x.name)
            item_nt.append(not x.is_term)
            item_rule.append(k)
        item_next.append(None)
        item_nt.append(False)
        item_rule.append(k)

    predict: dict[str, frozenset[int]] = {}

    def predicted(nt: str) -> frozenset[int]:
        """Items ``B -> . w`` for every B reachable from ``nt`` through leftmost nonterminals
        (Lark's ``expand_rule``)."""
        hit = predict.get(nt)
        if hit is None:
            seen, todo, items = {nt}, [nt], set()
            while todo:
                x = todo.pop()
                for k in by_origin[x]:
                    i = base[k]
                    items.add(i)
                    if item_nt[i] and item_next[i] not in seen:
                        seen.add(item_next[i])  # type: ignore[arg-type]
                        todo.append(item_next[i])  # type: ignore[arg-type]
            hit = predict[nt] = frozenset(items)
        return hit

    # LR(0) item sets
    kernels: list[frozenset[int]] = []
    closures: list[frozenset[int]] = []
    index: dict[frozenset[int], int] = {}
    trans: list[dict[str, int]] = []

    def state_of(kernel: frozenset[int], closure: frozenset[int] | None = None) -> int:
        sid = index.get(kernel)
        if sid is None:
            if closure is None:
                acc = set(kernel)
                for i in kernel:
                    if item_nt[i]:
                        acc |= predicted(item_next[i])  # type: ignore[arg-type]
                closure = frozenset(acc)
            sid = index[kernel] = len(kernels)
            kernels.append(kernel)
            closures.append(closure)
            trans.append({})
        return sid

    start_state: dict[str, int] = {}
    for n_root, (start, root) in enumerate(zip(starts, roots)):
        k = len(rules) + n_root
        start_state[start] = state_of(frozenset([base[k]]), predicted(root.origin.name))
    q = 0
    while q < len(kernels):
        groups: dict[str, list[int]] = {}
        for i in closures[q]:
            sym = item_next[i]
            if sym is not None:
                groups.setdefault(sym, []).append(i + 1)
        for sym, adv in groups.items():
            trans[q][sym] = state_of(frozenset(adv))
        q += 1
    n_states = len(kernels)

    # DeRemer-Pennello relations, as Lark computes them
    nt_trans: list[tuple[int, str]] = []
    directly_reads: dict[tuple[int, str], set[str]] = defaultdict(set)
    reads: dict[tuple[int, str], set[tuple[int, str]]] = defaultdict(set)
    includes: dict[tuple[int, str], set[tuple[int, str]]] = defaultdict(set)
    lookback: dict[tuple[int, str], set[tuple[int, int]]] = defaultdict(set)
    for start, sid in start_state.items():
        directly_reads[(sid, start)] = {_END}
    for st in range(n_states):
        seen: set[str] = set()
        for i in closures[st]:
            if not item_nt[i]:
                continue
            sym = item_next[i]
            if sym in seen:
                continue
            seen.add(sym)  # type: ignore[arg-type]
            nt = (st, sym)
            nt_trans.append(nt)  # type: ignore[arg-type]
            dr = directly_reads[nt]  # type: ignore[index]
            rd = reads[nt]  # type: ignore[index]
            nxt = trans[st][sym]  # type: ignore[index]
            for i2 in closures[nxt]:
                s2 = item_next[i2]
                if s2 is None:
                    continue
                if not item_nt[i2]:
                    dr.add(s2)
                if s2 in nullable:
                    rd.add((nxt, s2))
    # suffix_null[i]: every symbol from item i's dot to the rule's end is nullable
    suffix_null = [False] * len(item_next)
    origin_of = [all_rules[k].origin.name for k in item_rule]
    for k, r in enumerate(all_rules):
        end = base[k] + len(r.expansion)
        suffix_null[end] = True
        for pos in range(end - 1, base[k] - 1, -1):
            suffix_null[pos] = suffix_null[pos + 1] and item_next[pos] in nullable
    by_origin_at: dict[int, dict[str, list[int]]] = {}  # state -> its closure's items by rule origin
    for nt in nt_trans:
        st, nonterminal = nt
        groups_here = by_origin_at.get(st)
        if groups_here is None:
            groups_here = by_origin_at[st] = {}
            for i in closures[st]:
                groups_here.setdefault(origin_of[i], []).append(i)
        inc = []
        lb = lookback[nt]
        for i in groups_here.get(nonterminal, ()):
            k = item_rule[i]
            st2 = st
            for pos in range(i, base[k] + len(all_rules[k].expansion)):
                sym = item_next[pos]
                nt2 = (st2, sym)
                st2 = trans[st2][sym]  # type: ignore[index]
                if nt2 in reads and suffix_null[pos + 1]:
                    inc.append(nt2)
            if i == base[k]:
                lb.add((st2, k))  # st2 holds the satisfied item (it is st2's kernel)
        for nt2 in inc:
            includes[nt2].add(nt)
    read_sets = digraph(nt_trans, reads, directly_reads)
    follow_sets = digraph(nt_trans, includes, read_sets)
    # lookaheads per state and satisfied rule (a state reduces by one rule in nearly every grammar:
    # its terminals then need no per-terminal set of rules)
    la_rules: dict[int, dict[int, set[str]]] = {}
    for nt, lbs in lookback.items():
        fs = follow_sets[nt]
        for st2, k in lbs:
            la_rules.setdefault(st2, {}).setdefault(k, set()).update(fs)

    # actions: shifts, then reduces (priority breaks reduce/reduce ties; shift wins over reduce)
    states: dict[int, dict[str, tuple[Any, Any]]] = {}
    for st in range(n_states):
        actions: dict[str, tuple[Any, Any]] = {sym: (Shift, nxt) for sym, nxt in trans[st].items()}
        by_rule = la_rules.get(st, {})
        reduce_on: list[tuple[str, int]] = []
        if len(by_rule) == 1:
            ((k, las),) = by_rule.items()
            reduce_on = [(la, k) for la in las]
        elif by_rule:
            rules_on: dict[str, set[int]] = {}
            for k, las in by_rule.items():
                for la in las:
                    rules_on.setdefault(la, set()).add(k)
            for la, ks in rules_on.items():
                if len(ks) > 1:
                    ranked = sorted(((all_rules[k].options.priority or 0), k) for k in ks)
                    if ranked[-1][0] > ranked[-2][0]:
                        ks = {ranked[-1][1]}
                    else:
                        return None  # a reduce/reduce collision: Lark's analyzer raises its own error
                (k,) = ks
                reduce_on.append((la, k))
        for la, k in reduce_on:
            rule = all_rules[k]
            if la in actions:
                if conflicts is not None:
                    conflicts.append((st, la))
                logger.debug("Shift/Reduce conflict for terminal %s: (resolving as shift)", la)
                logger.debug(" * %s", rule)
            else:
                actions[la] = (Reduce, rule)
        states[st] = actions

    end_states: dict[str, int] = {}
    for st in range(n_states):
        for i in closures[st]:
            if item_next[i] is None:
                origin = all_rules[item_rule[i]].origin.name
                for start in starts:
                    if origin == "$root_" + start:
                        end_states[start] = st
    return IntParseTable(states, dict(start_state), end_states)
