"""Token walks, compiled (gad.engine.kernels, numba) against numpy, same states, same process.

For a few lexer states of a JSON Schema grammar (inside a string: the whole vocabulary live; inside
a number and inside an object's key: few first bytes live), the root walk of every token from the
state: compiled, numpy by trie depth (``CompiledGrammar._level_walk`` with the kernels off) and the
Python search of the byte trie (``_trie_walk``, unbudgeted); then the walk of 1,000 and 10,000 random
tokens from byte 0 (``_walk``).  Median µs over ``--repeat`` calls each, the SmolLM2 tokenizer;
every pair of results is checked equal first.

    python benchmarks/bench_walks.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "number"},
                                           "config": {"type": "integer"}, "count": {"type": "integer"}},
          "additionalProperties": False}
STATES = [("inside a string", b'{"name":"'), ("inside a number", b'{"name":"x","n":12'),
          ("inside a key", b'{"name":"x","n":1,"c')]


def median_us(repeat: int, fn: Any, *fn_args: Any) -> float:
    fn(*fn_args)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*fn_args)
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def same(a: Any, b: Any) -> bool:
    def sets(n: Any) -> tuple:
        return (dict(zip(n.end_tok.tolist(), n.end_state.tolist())),
                {f: set(zip(t.tolist(), o.tolist())) for f, (t, o) in n.groups.items()})
    return sets(a) == sets(b)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20, help="calls per timing, median taken (default: %(default)s)")
    args = ap.parse_args(argv)
    from transformers import AutoTokenizer

    import gad
    from gad.engine import kernels
    from gad.models.hf import _resolve_model_dir

    if not kernels.AVAILABLE:
        print("numba is not installed: nothing to compare")
        return 2
    model_dir, _ = _resolve_model_dir(None, None)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    kernels.load()
    cg = gad.compile(gad.Grammar.from_json_schema(SCHEMA), tok, cache_dir=False)
    print("| walk | live first bytes | compiled µs | numpy µs | Python trie search µs |")
    print("|---|---|---|---|---|")
    for label, text in STATES:
        m = cg.matcher()
        assert m.accept_bytes(text), text
        stack, d = m.state
        cid = cg.state_ctx[cg.top(stack)]
        dfa = cg.ctx(cid)
        kernels.ENABLED = True
        fast = cg._level_walk(dfa, d)
        t_fast = median_us(args.repeat, cg._level_walk, dfa, d)
        kernels.ENABLED = False
        slow = cg._level_walk(dfa, d)
        t_slow = median_us(args.repeat, cg._level_walk, dfa, d)
        search = cg._trie_walk(dfa, d, 1 << 30)
        t_search = median_us(max(1, args.repeat // 10), cg._trie_walk, dfa, d, 1 << 30)
        kernels.ENABLED = True
        assert search is not None and same(fast, slow) and same(fast, search), label
        print(f"| vocabulary, {label} | {int((dfa.table[d] != 0).sum())} | {t_fast:,.0f} | {t_slow:,.0f} | "
              f"{t_search:,.0f} |")
    m = cg.matcher()
    assert m.accept_bytes(STATES[0][1])
    stack, d = m.state
    cid = cg.state_ctx[cg.top(stack)]
    rng = np.random.default_rng(0)
    for size in (1000, 10000):
        toks = rng.choice(cg._content, size=size, replace=False)
        off = np.zeros(size, dtype=np.int32)
        kernels.ENABLED = True
        fast = cg._walk(cid, d, toks, off)
        t_fast = median_us(args.repeat, cg._walk, cid, d, toks, off)
        kernels.ENABLED = False
        slow = cg._walk(cid, d, toks, off)
        t_slow = median_us(args.repeat, cg._walk, cid, d, toks, off)
        kernels.ENABLED = True
        assert same(fast, slow), size
        print(f"| {size:,} random tokens, {STATES[0][0]} | – | {t_fast:,.0f} | {t_slow:,.0f} | – |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
