"""gad.compile's warm= modes on one schema of many lexer contexts, each mode in a fresh process.

The schema is an object of ``--props`` required properties, each an enum of ``--values`` strings (every
property its own key context and enum context).  Per mode (``default``: None, which builds a schema's
lexer automata at compile; ``lazy``: False), in a fresh process (an empty store of shared automata),
after the SmolLM2 vocabulary and gad's compiled walks are set up and the start-up heap is frozen: the
conversion (``Grammar.from_json_schema``), ``gad.compile``, the first mask, and the masks of one
instance (every property's fourth value), in ms.  Modes alternate over ``--repeat`` rounds.

    python benchmarks/bench_schema_warm.py [--props 20] [--values 20] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import gc, json, sys, time
from transformers import AutoTokenizer
import gad
from gad.engine import kernels
from gad.engine.vocab import Vocabulary
from gad.models.hf import _resolve_model_dir
props, values, warm = int(sys.argv[1]), int(sys.argv[2]), {"default": None, "lazy": False}[sys.argv[3]]
tok = AutoTokenizer.from_pretrained(str(_resolve_model_dir(None, None)[0]))
kernels.load()
vocab = Vocabulary.from_tokenizer(tok)
gad.compile(gad.Grammar.from_regex("[a-z]{1,8}"), vocab, cache_dir=False).matcher().mask()  # (set-up)
gc.collect()
gc.freeze()
schema = {"type": "object", "properties": {f"f{i}": {"enum": [f"val{i}_{j}" for j in range(values)]}
                                           for i in range(props)}, "required": [f"f{i}" for i in range(props)]}
ids = tok.encode(json.dumps({f"f{i}": f"val{i}_{min(3, values - 1)}" for i in range(props)},
                            separators=(",", ":")), add_special_tokens=False)
t0 = time.perf_counter()
g = gad.Grammar.from_json_schema(schema)
t1 = time.perf_counter()
cg = gad.compile(g, vocab, cache_dir=False, warm=warm)
t2 = time.perf_counter()
m = cg.matcher()
m.mask()
t3 = time.perf_counter()
for t in ids:
    m.mask()
    assert m.accept_token(t)
t4 = time.perf_counter()
print(json.dumps({"convert": 1e3 * (t1 - t0), "compile": 1e3 * (t2 - t1), "first_mask": 1e3 * (t3 - t2),
                  "masks": 1e3 * (t4 - t3), "tokens": len(ids)}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--props", type=int, default=20, help="required properties (default: %(default)s)")
    ap.add_argument("--values", type=int, default=20, help="strings in each property's enum (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds, modes alternating (default: %(default)s)")
    args = ap.parse_args(argv)
    print(f"object of {args.props} required properties, each an enum of {args.values} strings; ms")
    print("| warm | conversion | compile | first mask | compile + first mask | masks of one instance |")
    print("|---|---|---|---|---|---|")
    for _ in range(args.repeat):
        for mode in ("default", "lazy"):
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.props), str(args.values), mode],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"| {mode} | {r['convert']:.1f} | {r['compile']:.1f} | {r['first_mask']:.1f} | "
                  f"{r['compile'] + r['first_mask']:.1f} | {r['masks']:.1f} ({r['tokens']} tokens) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
