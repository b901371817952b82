"""gad's meta-schema check against jsonschema's own, per draft, on MaskBench's schemas.

Each MaskBench schema (``../shared/data/maskbench``, read in place) is checked against its draft's
meta-schema (the draft ``jsonschema.validators.validator_for`` picks, 2020-12 by default) three ways,
in one process, alternately per schema: gad's ``gad.grammar.schema_meta.check_schema`` (the direct
reading, falling back to ``jsonschema`` where it is unsure), ``jsonschema``'s own ``check_schema``,
and, for 2020-12, ``jsonschema`` run on gad's flattened meta-schema (what gad used before its direct
reading).  Prints per draft: schemas, how many the direct reading took alone, verdicts that differ
(must be 0), and the median and mean ms of each way (best of ``--repeat``).

    python benchmarks/bench_schema_check.py [--data ../shared/data/maskbench] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema

from gad.grammar.schema_meta import _VALIDATOR, check_schema, plainly_valid

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "maskbench"


def _verdict(fn: Any, schema: Any) -> bool:
    try:
        fn(schema)
    except jsonschema.exceptions.SchemaError:
        return False
    return True


def _best(fn: Any, schema: Any, repeat: int) -> tuple[float, bool]:
    best, ok = float("inf"), True
    for _ in range(repeat):
        t = time.perf_counter()
        ok = _verdict(fn, schema)
        best = min(best, time.perf_counter() - t)
    return best, ok


def _flat(schema: Any) -> None:
    for error in _VALIDATOR.iter_errors(schema):
        raise jsonschema.exceptions.SchemaError.create_from(error)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MaskBench folder (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="timings per schema and way, best kept (default: 3)")
    args = ap.parse_args()
    files = sorted(args.data.glob("*.json"))
    if not files:
        raise SystemExit(f"no MaskBench files in {args.data}")
    rows: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    direct: dict[str, int] = defaultdict(int)
    differ: dict[str, int] = defaultdict(int)
    for f in files:
        schema = json.loads(f.read_text())["schema"]
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        name = cls.__name__.replace("Validator", "")
        t_gad, ok_gad = _best(lambda s, cls=cls: check_schema(cls, s), schema, args.repeat)
        t_js, ok_js = _best(cls.check_schema, schema, args.repeat)
        rows[name]["gad"].append(t_gad)
        rows[name]["jsonschema"].append(t_js)
        if cls is jsonschema.Draft202012Validator:
            rows[name]["jsonschema, flattened"].append(_best(_flat, schema, args.repeat)[0])
        direct[name] += plainly_valid(cls, schema)
        differ[name] += ok_gad != ok_js
    print(f"{len(files)} MaskBench schemas, each against its own draft's meta-schema (ms, best of {args.repeat})")
    print("| draft | schemas | read directly | verdicts differing | way | median ms | mean ms |")
    print("|---|---|---|---|---|---|---|")
    for name in sorted(rows):
        for way, ts in rows[name].items():
            print(f"| {name} | {len(ts)} | {direct[name]} | {differ[name]} | {way} | "
                  f"{1e3 * statistics.median(ts):.3f} | {1e3 * statistics.fmean(ts):.3f} |")


if __name__ == "__main__":
    main()
