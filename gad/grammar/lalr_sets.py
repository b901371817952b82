"""NULLABLE, FIRST and FOLLOW sets of a context-free grammar, computed by propagation.

Lark computes these sets (``lark.parsers.grammar_analysis.calculate_sets``) by re-scanning every rule
until nothing changes, building a new set for each prefix test; on the few hundred rules of a grammar
made from a JSON Schema that scan is about a third of Lark's parser construction, which a schema pays
per request.  :func:`calculate_sets` returns the same three sets (the definitions of Aho, Lam, Sethi
and Ullman, *Compilers*, 2nd ed., §4.4.2) from one pass that derives the inclusion edges
(``FIRST(X) ⊇ FIRST(Y)``, ``FOLLOW(Y) ⊇ FOLLOW(X)``, ``FOLLOW(Y) ⊇ FIRST(Z)``) and a work-list that
pushes each new symbol along them once.  :func:`lark_uses_fast_sets` swaps it into Lark for the
duration of a parser build (gad builds Lark parsers under one lock).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from lark.parsers import grammar_analysis as _ga
from lark.parsers import lalr_parser as _lalr_parser

from gad.grammar.lalr_table import FastLALRAnalyzer, nullable_symbols


def calculate_sets(rules: Sequence[Any]) -> tuple[dict[Any, set], dict[Any, set], set]:
    """``(FIRST, FOLLOW, NULLABLE)`` of Lark ``Rule`` objects, equal to Lark's ``calculate_sets``.

    ``FIRST[s]`` / ``FOLLOW[s]`` are sets of terminals (symbol objects) for every symbol ``s`` of the
    rules; a terminal's FIRST is itself.  ``NULLABLE`` is the set of nonterminals deriving the empty
    string.  Cost: O(rules x expansion length^2) to build the edges, plus one push per (symbol,
    terminal) pair.
    """
    symbols = {sym for rule in rules for sym in rule.expansion} | {rule.origin for rule in rules}
    first: dict[Any, set] = {s: ({s} if s.is_term else set()) for s in symbols}
    follow: dict[Any, set] = {s: set() for s in symbols}

    nullable = nullable_symbols(rules)

    # edges: FIRST(origin) ⊇ FIRST(Y_i) for each nullable-prefixed Y_i; FOLLOW(Y_i) ⊇ FOLLOW(origin)
    # when the rest is nullable; FOLLOW(Y_i) ⊇ FIRST(Y_j) when Y_{i+1..j-1} are nullable
    first_into: dict[Any, set] = {}      # Y -> {X : FIRST(X) ⊇ FIRST(Y)}
    follow_into: dict[Any, set] = {}     # X -> {Y : FOLLOW(Y) ⊇ FOLLOW(X)}
    first_to_follow: dict[Any, set] = {}  # Z -> {Y : FOLLOW(Y) ⊇ FIRST(Z)}
    for rule in rules:
        body = rule.expansion
        x = rule.origin
        for sym in body:
            first_into.setdefault(sym, set()).add(x)
            if sym not in nullable:
                break
        for i, sym in enumerate(body):
            if all(s in nullable for s in body[i + 1:]):
                follow_into.setdefault(x, set()).add(sym)
            for j in range(i + 1, len(body)):
                first_to_follow.setdefault(body[j], set()).add(sym)
                if body[j] not in nullable:
                    break

    # FIRST: each terminal pushed up the FIRST edges; FOLLOW: seeded from FIRST, pushed along its edges
    _propagate(first, first_into, [(s, s) for s in symbols if s.is_term])
    _propagate(follow, follow_into, [(y, t) for z, ys in first_to_follow.items() for y in ys for t in first[z]])
    return first, follow, nullable


def _propagate(sets: dict[Any, set], edges: dict[Any, set], seeds: list[tuple[Any, Any]]) -> None:
    """Close ``sets`` under ``sets[y] ⊇ sets[x]`` for ``y in edges[x]``, after adding each seed
    ``(x, t)`` (``t`` into ``sets[x]``); every (symbol, terminal) pair is pushed at most once."""
    stack = []
    for x, t in seeds:
        if t not in sets[x] or x is t:
            sets[x].add(t)
            stack.append((x, t))
    while stack:
        x, t = stack.pop()
        for y in edges.get(x, ()):
            sy = sets[y]
            if t not in sy:
                sy.add(t)
                stack.append((y, t))


@contextlib.contextmanager
def lark_uses_fast_sets() -> Iterator[None]:
    """Within the block, Lark's LALR parsers get their tables from
    :class:`gad.grammar.lalr_table.FastLALRAnalyzer`, and Lark's own analyzer (which that one defers
    to for ``debug`` / ``strict`` parsers and for grammars Lark refuses) calls :func:`calculate_sets`
    and remembers ``expand_rule`` results per analyzer.  Not thread-safe: hold the lock under which
    Lark parsers are built."""
    saved = getattr(_ga, "calculate_sets", None)
    if saved is None:  # a Lark without this function: leave it alone
        yield
        return
    saved_expand = _ga.GrammarAnalyzer.expand_rule
    saved_analyzer = _lalr_parser.LALR_Analyzer
    _ga.calculate_sets = calculate_sets
    _ga.GrammarAnalyzer.expand_rule = _memo_expand_rule(saved_expand)  # type: ignore[method-assign]
    _lalr_parser.LALR_Analyzer = FastLALRAnalyzer  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        _ga.calculate_sets = saved
        _ga.GrammarAnalyzer.expand_rule = saved_expand  # type: ignore[method-assign]
        _lalr_parser.LALR_Analyzer = saved_analyzer  # type: ignore[misc]


def _memo_expand_rule(expand: Any) -> Any:
    """Lark's ``GrammarAnalyzer.expand_rule`` (the LR(0) closure items a nonterminal predicts, a
    breadth-first search) remembered per analyzer and nonterminal: Lark's LR(0) construction asks
    again for every item set whose kernel has the nonterminal next, about half of its time on a
    schema grammar.  Callers only read the returned set (``closure |= ...``, copied into item sets)."""

    def expand_rule(self: Any, source_rule: Any, rules_by_origin: Any = None) -> Any:
        memo = self.__dict__.setdefault("_gad_expand_memo", {})
        key = (source_rule, id(rules_by_origin))
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = expand(self, source_rule, rules_by_origin)
        return hit

    return expand_rule
