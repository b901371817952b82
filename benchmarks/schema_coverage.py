"""JSON Schema coverage on MaskBench, translate only: how many schemas ``gad.grammar.json_schema.convert``
turns into a grammar, and the refusals (``UnsupportedSchemaError``) counted by keyword with one example
file each.  No tokenizer, no masks: this is the converter's reach; ``bench_schema.py`` measures
compile, masks and correctness.

    python benchmarks/schema_coverage.py --data ../shared/data/maskbench
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "maskbench"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MaskBench folder (default: %(default)s)")
    ap.add_argument("--step", type=int, default=1, help="every STEP-th file, sorted by name (default: 1 = all)")
    ap.add_argument("--out", type=Path, default=None, help="write the summary as JSON here")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"MaskBench folder not found: {args.data}", file=sys.stderr)
        return 2
    from gad.errors import GadError, UnsupportedSchemaError
    from gad.grammar.json_schema import convert

    files = sorted(args.data.glob("*.json"))[:: args.step]
    by_kw: collections.Counter[str] = collections.Counter()
    example: dict[str, str] = {}
    other: collections.Counter[str] = collections.Counter()
    ok = 0
    t0 = time.perf_counter()
    for f in files:
        schema = json.loads(f.read_text(encoding="utf-8"))["schema"]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                convert(schema)
            ok += 1
        except UnsupportedSchemaError as e:
            by_kw[e.keyword or "?"] += 1
            example.setdefault(e.keyword or "?", f"{f.name}: {str(e)[:160]}")
        except GadError as e:  # invalid schema, empty language: not a refusal of a keyword
            other[type(e).__name__] += 1
            example.setdefault(type(e).__name__, f"{f.name}: {str(e)[:160]}")
    dt = time.perf_counter() - t0
    print(f"translated {ok} of {len(files)} schemas ({ok / max(len(files), 1):.1%}) in {dt:.0f} s")
    for kw, n in by_kw.most_common():
        print(f"  {n:4d} refused at {kw}: {example[kw]}")
    for kind, n in other.most_common():
        print(f"  {n:4d} {kind}: {example[kind]}")
    if args.out:
        args.out.write_text(json.dumps({"files": len(files), "translated": ok, "refused_by_keyword": dict(by_kw),
                                        "other_errors": dict(other)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
