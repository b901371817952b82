"""Lexer automata built by the compiled product (numba) against the Python builder, same contexts, same process.

Every lexer context of the JSON Schema grammars of MaskBench (every ``--step``-th file, sorted by
name), and of the shipped json and sql grammars, is built from its start state twice
(:class:`gad.engine.lexer.LexerDFA` with ``gad.engine.kernels.ENABLED`` on, then off) and the two
automata are checked equal (keys, table, forks).  The contexts the compiled build takes as a trie of
literals (``LexerDFA._build_trie``: an object's keys, punctuation) are built a third time by the
compiled product and checked equal array for array (key rows, table, forks, their ok-bytes, reachable
winners); the trie and the product are timed on those contexts.  Reports the contexts each builder took, their
states, total build time and µs per state, and the same for the contexts over 300 states; each
builder's per-terminal caches are warm (each context built once before timing), as in a serving
process; contexts only the Python builder takes (a terminal naming a non-ASCII character, over 62
terminals) are counted apart.

    python benchmarks/bench_lexer_build.py [--step 8] [--data ../shared/data/maskbench]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "maskbench"


def contexts(grammar: Any) -> list[tuple]:
    """``(terminal automata, ignore flags, unless map, n_main, universe)`` of every context of ``grammar``."""
    from gad.engine.compiler import CompiledGrammar
    from gad.engine.vocab import Vocabulary

    cg = CompiledGrammar(grammar.lark, Vocabulary.from_strings(list("ab")), grammar)
    uni = cg._universe()
    return [([cg._automaton(t) for t in terms], ignore, unless, n_main, uni)
            for terms, unless, ignore, n_main in cg._ctx_specs]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MaskBench folder (default: %(default)s)")
    ap.add_argument("--step", type=int, default=8, help="every STEP-th file, sorted by name (default: %(default)s)")
    args = ap.parse_args(argv)
    import gad
    from gad.engine import kernels
    from gad.engine.lexer import LexerDFA
    from gad.errors import GadError

    if not kernels.AVAILABLE:
        print("numba is not installed: nothing to compare")
        return 2
    kernels.load()
    grammars = [gad.Grammar.builtin("json"), gad.Grammar.builtin("sql")]
    files = sorted(args.data.glob("*.json"))[:: args.step] if args.data.is_dir() else []
    if not files:
        print(f"MaskBench folder not found or empty: {args.data} (the shipped grammars only)", file=sys.stderr)
    for f in files:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                grammars.append(gad.Grammar.from_json_schema(json.loads(f.read_text())["schema"], lenient=True))
        except GadError:
            continue
    specs = [c for g in grammars for c in contexts(g)]
    rows: dict[str, dict[str, list[float]]] = {"compiled": {"t": [], "n": []}, "python": {"t": [], "n": []}}
    trie: dict[str, dict[str, list[float]]] = {"trie": {"t": [], "n": []}, "product": {"t": [], "n": []}}
    build_trie = LexerDFA._build_trie
    by_python_only = 0
    python_only = [0.0, 0]  # their build time (s) and states
    for terms, ignore, unless, n_main, uni in specs:
        for t in terms:
            t.byte_tables()  # (warm: each terminal's tables and step memos are built once per process)
        kernels.ENABLED = False
        LexerDFA(terms, ignore, unless, n_main, uni)
        built = {}
        for name, on in (("compiled", True), ("python", False)):
            kernels.ENABLED = on
            t0 = time.perf_counter()
            dfa = LexerDFA(terms, ignore, unless, n_main, uni)
            built[name] = (dfa, time.perf_counter() - t0)
        kernels.ENABLED = True
        (a, _), (b, t_python) = built["compiled"], built["python"]
        assert a._keys == b._keys and np.array_equal(a.table, b.table) and a.forks == b.forks, a.names
        if not a.compiled_build:  # (both ran the Python builder: not a comparison)
            by_python_only += 1
            python_only[0] += t_python
            python_only[1] += b.n_states
            continue
        for name, (dfa, dt) in built.items():
            rows[name]["t"].append(dt)
            rows[name]["n"].append(dfa.n_states)
        if a._trie_shape() is not None:
            try:
                LexerDFA._build_trie = lambda self: False  # type: ignore[method-assign]
                t0 = time.perf_counter()
                c = LexerDFA(terms, ignore, unless, n_main, uni)
                t_product = time.perf_counter() - t0
            finally:
                LexerDFA._build_trie = build_trie  # type: ignore[method-assign]
            for name in ("_karr", "table", "fork_id", "fork_ok", "reach_group"):
                assert np.array_equal(getattr(a, name), getattr(c, name)), (name, a.names)
            assert a.forks == c.forks and a.reach == c.reach, a.names
            trie["trie"]["t"].append(built["compiled"][1])
            trie["product"]["t"].append(t_product)
            for r in trie.values():
                r["n"].append(a.n_states)
    print(f"{len(grammars)} grammars, {len(specs)} contexts ({by_python_only} left to the Python builder: a "
          f"terminal names a non-ASCII character, or over 62 terminals; {python_only[1]:,} states, "
          f"{1e3 * python_only[0]:,.0f} ms)")
    print("| builder | contexts | states | total ms | µs per state | contexts over 300 states: ms, µs per state |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        t, n = np.asarray(r["t"]), np.asarray(r["n"])
        big = n > 300
        print(f"| {name} | {t.size} | {int(n.sum()):,} | {1e3 * t.sum():,.0f} | {1e6 * t.sum() / n.sum():.1f} | "
              f"{1e3 * t[big].sum():,.0f} ms, {1e6 * t[big].sum() / max(1, n[big].sum()):.1f} |")
    ratio = np.sum(rows["python"]["t"]) / np.sum(rows["compiled"]["t"])
    print(f"Python / compiled total build time: {ratio:.1f}x")
    n_trie = len(trie["trie"]["t"])
    if n_trie:
        t_trie, t_prod = (np.asarray(trie[k]["t"]) for k in ("trie", "product"))
        print(f"the {n_trie} contexts built as a trie of literals ({int(np.sum(trie['trie']['n'])):,} states), each "
              "checked equal to the product's: median µs per context, trie "
              f"{1e6 * np.median(t_trie):.0f} against product {1e6 * np.median(t_prod):.0f} "
              f"(total {1e3 * t_trie.sum():,.0f} against {1e3 * t_prod.sum():,.0f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
