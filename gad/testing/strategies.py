"""Hypothesis strategies for random Lark grammars over small alphabets (tests of the lexer, the masks and
jump-forward against Lark as the oracle).  Imports ``hypothesis`` (the ``test`` extra): import this module
directly, it is not re-exported by :mod:`gad.testing`."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st


def lark_grammars(alphabet: Sequence[str], atoms: Sequence[str], *, max_literal: int = 3,
                  priorities: bool = False) -> Any:
    """A strategy of ``(lark_text, terms)``: ``start: item`` or ``start: item+`` with 1-4 alternatives of
    1-3 of 2-4 terminals; each terminal (``terms[i] = (kind, body)``) a literal over ``alphabet`` (``kind
    "lit"``, up to ``max_literal`` characters) or a regexp of 1-3 ``atoms`` with ``+ * ?`` (``"re"``);
    ``priorities``: some terminals get ``.2``.  Callers filter with Lark (zero-width terminals, conflicts)
    and with :func:`longest_match_consistent`."""

    @st.composite
    def terminal(draw: Any) -> tuple[str, str]:
        if draw(st.booleans()):
            return "lit", "".join(draw(st.lists(st.sampled_from(list(alphabet)), min_size=1, max_size=max_literal)))
        items = draw(st.lists(st.tuples(st.sampled_from(list(atoms)), st.sampled_from(["", "+", "*", "?"])),
                              min_size=1, max_size=3))
        return "re", "".join(a + q for a, q in items)

    @st.composite
    def grammar(draw: Any) -> tuple[str, list[tuple[str, str]]]:
        n = draw(st.integers(2, 4))
        terms = draw(st.lists(terminal(), min_size=n, max_size=n, unique=True))
        prios = (draw(st.lists(st.sampled_from(["", "", ".2"]), min_size=n, max_size=n)) if priorities
                 else [""] * n)
        names = [f"T{i}" for i in range(n)]
        alts = draw(st.lists(st.lists(st.sampled_from(names), min_size=1, max_size=3).map(tuple),
                             min_size=1, max_size=4, unique=True))
        lines = ["start: item+" if draw(st.booleans()) else "start: item",
                 "item: " + " | ".join(" ".join(a) for a in alts)]
        for name, (kind, body), pr in zip(names, terms, prios):
            lines.append(f'{name}{pr}: "{body}"' if kind == "lit" else f"{name}{pr}: /{body}/")
        return "\n".join(lines) + "\n", terms

    return grammar()


def longest_match_consistent(regexp: str, alphabet: Sequence[str], max_len: int) -> bool:
    """On every string over ``alphabet`` up to ``max_len`` characters, Python's leftmost-first match of
    ``regexp`` is the longest matching prefix (gad's documented rule for one terminal's own match;
    regexps where the two differ are left out of random tests)."""
    r = re.compile(regexp)
    for k in range(max_len + 1):
        for p in itertools.product(alphabet, repeat=k):
            s = "".join(p)
            m = r.match(s)
            longest = max((i for i in range(1, len(s) + 1) if r.fullmatch(s[:i])), default=None)
            if (m.end() if m and m.end() > 0 else None) != longest:
                return False
    return True


def assume_lark_terminals(terms: Sequence[tuple[str, str]], alphabet: Sequence[str], max_len: int = 5) -> None:
    """``hypothesis.assume`` that every regex terminal of a :func:`lark_grammars` draw is one Lark
    accepts (not zero-width) and whose longest match is Python's (:func:`longest_match_consistent`:
    the lexer semantics gad matches exactly, README "Exactness")."""
    for kind, body in terms:
        if kind == "re":
            assume(re.fullmatch(body, "") is None)  # Lark refuses zero-width terminals
            assume(longest_match_consistent(body, alphabet, max_len))
