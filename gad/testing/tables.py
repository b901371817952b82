"""Comparing LALR(1) parse tables up to the numbering of their states."""

from __future__ import annotations

from typing import Any


def _bfs_states(table: Any, start: str) -> list[int]:
    """``table``'s states in breadth-first order from ``start``'s state (shifts by symbol name)."""
    states, first = table.states, table.start_states[start]
    order, seen = [first], {first}
    for st in order:
        for _sym, (action, arg) in sorted(states[st].items(), key=lambda kv: kv[0]):
            if action.name == "Shift" and arg not in seen:
                seen.add(arg)
                order.append(arg)
    return order


def canonical_contexts(tables: Any) -> list[list[str]]:
    """The contextual lexer's terminal names per parser state of ``tables``
    (:class:`gad.grammar.tables.ParserTables`), in scanning order, states in the order of
    :func:`canonical_parse_table`."""
    return [[t.name for t in tables.contexts[st]] for st in _bfs_states(tables.parse_table, tables.start)]


def canonical_parse_table(lark_obj: Any, start: str = "start") -> list[list[tuple[str, str, Any]]]:
    """A Lark LALR parser's table (``lark_obj``: a ``lark.Lark`` or its ``IntParseTable``) with its states renumbered in breadth-first order from ``start``'s
    state (actions visited by terminal/rule name): Lark numbers states in the iteration order of sets
    of item sets, which changes between builds and processes; two tables are the same parser iff
    their canonical forms are equal.  Row ``i``: ``[(symbol, "shift", state) | (symbol, "reduce",
    rule text), ...]``."""
    table = lark_obj if hasattr(lark_obj, "states") else lark_obj.parser.parser.parser.parse_table
    order = _bfs_states(table, start)
    num = {st: i for i, st in enumerate(order)}
    return [[(sym, "shift", num[arg]) if action.name == "Shift" else (sym, "reduce", str(arg))
             for sym, (action, arg) in sorted(table.states[st].items(), key=lambda kv: kv[0])]
            for st in order]
