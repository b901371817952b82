"""Comparing LALR(1) parse tables up to the numbering of their states."""

from __future__ import annotations

from typing import Any


def canonical_parse_table(lark_obj: Any, start: str = "start") -> list[list[tuple[str, str, Any]]]:
    """A Lark LALR parser's table (``lark_obj``: a ``lark.Lark`` or its ``IntParseTable``) with its states renumbered in breadth-first order from ``start``'s
    state (actions visited by terminal/rule name): Lark numbers states in the iteration order of sets
    of item sets, which changes between builds and processes; two tables are the same parser iff
    their canonical forms are equal.  Row ``i``: ``[(symbol, "shift", state) | (symbol, "reduce",
    rule text), ...]``."""
    table = lark_obj if hasattr(lark_obj, "states") else lark_obj.parser.parser.parser.parse_table
    states, first = table.states, table.start_states[start]
    order, seen, out = [first], {first: 0}, []
    for st in order:
        row: list[tuple[str, str, Any]] = []
        for sym, (action, arg) in sorted(states[st].items(), key=lambda kv: kv[0]):
            if action.name == "Shift":
                if arg not in seen:
                    seen[arg] = len(order)
                    order.append(arg)
                row.append((sym, "shift", seen[arg]))
            else:
                row.append((sym, "reduce", str(arg)))
        out.append(row)
    return out
