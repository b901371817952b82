"""Time to first mask of objects with many optional properties (the schema converter's fixed-order runs).

An object's properties come in the schema's order; each optional one may be skipped.  Written as a
chain of "this one or skip it", the LALR(1) automaton of a run of n optional properties has a number of
nonterminal transitions quadratic in n; gad writes runs of 8 or more as a balanced tree (n log n; see
docs/schema.md, "Property order").  This prints gad's time to first mask (schema in, first mask out, as
``bench_schema.py`` times it, with the SmolLM2 tokenizer) for n integer properties:

* ``closed``: ``additionalProperties: false``, none required (one run of n);
* ``last required``: only the last one required (a run of n - 1 before it);
* ``every 3rd required``: runs of 2 (the chain; the control).

    python benchmarks/bench_object_runs.py [--sizes 100 200 400]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_schema import GadEngine  # noqa: E402


def shapes(n: int) -> dict[str, dict[str, Any]]:
    props = {f"p{i}": {"type": "integer"} for i in range(n)}
    return {"closed": {"type": "object", "properties": props, "additionalProperties": False},
            "last required": {"type": "object", "properties": props, "required": [f"p{n - 1}"]},
            "every 3rd required": {"type": "object", "properties": props,
                                   "required": [f"p{i}" for i in range(0, n, 3)]}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400], help="property counts (default: %(default)s)")
    args = ap.parse_args(argv)
    from transformers import AutoTokenizer

    from gad.models.hf import _resolve_model_dir

    tok = AutoTokenizer.from_pretrained(str(_resolve_model_dir(None, None)[0]))
    engine = GadEngine(tok)
    engine.start({"type": "integer"})
    print("| shape | " + " | ".join(f"n = {n}" for n in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))
    for name in shapes(1):
        cells = []
        for n in args.sizes:
            t = time.perf_counter()
            engine.start(shapes(n)[name])
            cells.append(f"{time.perf_counter() - t:.2f} s")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
