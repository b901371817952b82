"""JSON Schema coverage on MaskBench, translate only: how many schemas ``gad.grammar.json_schema.convert``
turns into a grammar, and the refusals (``UnsupportedSchemaError``) counted by keyword with one example
file each, and the time to translate and the time to refuse (p50 / p99 / max over the files; a refusal
is an answer a server waits for too).  No masks: this is the converter's reach; ``bench_schema.py``
measures compile, masks and correctness.

``--vs-llguidance`` also builds each schema with llguidance (``LLMatcher`` over the SmolLM2 tokenizer,
compact JSON, first mask computed, as ``bench_schema.py`` does) and lists the files llguidance compiles
and gad refuses, tallied by gad's refusal (pointer + keyword).

    python benchmarks/schema_coverage.py --data ../shared/data/maskbench
    python benchmarks/schema_coverage.py --data ../shared/data/maskbench --vs-llguidance --out /tmp/cov.json
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "maskbench"


class _Timeout(Exception):
    pass


def _alarm(_sig: int, _frame: Any) -> None:
    raise _Timeout


def _llg_builder() -> Any:
    """A function schema -> None (compiled) / str (llguidance's error)."""
    import llguidance
    import llguidance.hf
    import llguidance.numpy as lnp
    from transformers import AutoTokenizer

    from gad.models.hf import _resolve_model_dir

    model_dir, _ = _resolve_model_dir(None, None)
    tok = llguidance.hf.from_tokenizer(AutoTokenizer.from_pretrained(str(model_dir)))
    bm = lnp.allocate_token_bitmask(1, tok.vocab_size)

    def build(schema: Any) -> str | None:
        try:
            grm = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
            m = llguidance.LLMatcher(tok, grm)
            if m.is_error():
                return m.get_error()[:160]
            lnp.fill_next_token_bitmask(m, bm, 0)
            return None
        except Exception as e:  # noqa: BLE001 - llguidance refusing a schema is a coverage miss
            return f"{type(e).__name__}: {str(e)[:160]}"

    return build




def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MaskBench folder (default: %(default)s)")
    ap.add_argument("--step", type=int, default=1, help="every STEP-th file, sorted by name (default: 1 = all)")
    ap.add_argument("--limit-s", type=float, default=30.0, help="translate time limit per schema (default: 30 s)")
    ap.add_argument("--vs-llguidance", action="store_true",
                    help="also compile with llguidance; list files it compiles and gad refuses")
    ap.add_argument("--out", type=Path, default=None, help="write the summary as JSON here")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"MaskBench folder not found: {args.data}", file=sys.stderr)
        return 2
    from gad.errors import GadError, UnsupportedSchemaError
    from gad.grammar.json_schema import convert

    llg = _llg_builder() if args.vs_llguidance else None
    files = sorted(args.data.glob("*.json"))[:: args.step]
    on_step8 = {f.name for f in sorted(args.data.glob("*.json"))[::8]}
    by_kw: collections.Counter[str] = collections.Counter()
    example: dict[str, str] = {}
    other: collections.Counter[str] = collections.Counter()
    ok = 0
    llg_ok = llg_ok8 = ok8 = 0
    gap: collections.Counter[str] = collections.Counter()  # llguidance compiles, gad refuses: by keyword
    gap_files: list[dict[str, Any]] = []
    per_file: dict[str, str] = {}
    took: dict[str, list[float]] = {"translated": [], "refused": []}  # seconds per file, by outcome
    signal.signal(signal.SIGALRM, _alarm)
    t0 = time.perf_counter()
    for f in files:
        schema = json.loads(f.read_text(encoding="utf-8"))["schema"]
        why = None  # None: translated
        kw = None
        signal.setitimer(signal.ITIMER_REAL, args.limit_s)
        t1 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                convert(schema)
            ok += 1
            ok8 += f.name in on_step8
        except UnsupportedSchemaError as e:
            kw = e.keyword or "?"
            by_kw[kw] += 1
            why = f"#{e.pointer or ''} {kw}: {str(e)[:200]}"
            example.setdefault(kw, f"{f.name}: {str(e)[:160]}")
        except GadError as e:  # invalid schema, empty language: not a refusal of a keyword
            kw = type(e).__name__
            other[kw] += 1
            why = f"{kw}: {str(e)[:200]}"
            example.setdefault(kw, f"{f.name}: {str(e)[:160]}")
        except (_Timeout, RecursionError) as e:
            kw = "timeout" if isinstance(e, _Timeout) else "RecursionError"
            other[kw] += 1
            why = kw
            example.setdefault(kw, f.name)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        took["translated" if why is None else "refused"].append(time.perf_counter() - t1)
        per_file[f.name] = "ok" if why is None else why
        if llg is not None:
            lerr = llg(schema)
            if lerr is None:
                llg_ok += 1
                llg_ok8 += f.name in on_step8
                if why is not None:
                    gap[kw or "?"] += 1
                    gap_files.append({"file": f.name, "keyword": kw, "why": why})
    dt = time.perf_counter() - t0
    print(f"translated {ok} of {len(files)} schemas ({ok / max(len(files), 1):.1%}) in {dt:.0f} s")
    for what, ts in took.items():
        if ts:
            q = np.percentile(ts, [50, 99])
            print(f"  time to {what[:-1] if what == 'translated' else 'refuse'} (translate only, one run): "
                  f"p50 {1e3 * q[0]:.1f} ms, p99 {1e3 * q[1]:.0f} ms, max {1e3 * max(ts):.0f} ms over {len(ts)} files")
    for k, n in by_kw.most_common():
        print(f"  {n:4d} refused at {k}: {example[k]}")
    for kind, n in other.most_common():
        print(f"  {n:4d} {kind}: {example[kind]}")
    if llg is not None:
        n8 = len(on_step8 & {f.name for f in files})
        print(f"llguidance compiled {llg_ok} of {len(files)}; on the step-8 files: llguidance {llg_ok8}, "
              f"gad translated {ok8} (of {n8})")
        print(f"{len(gap_files)} files llguidance compiles and gad refuses, by gad's refusal:")
        for k, n in gap.most_common():
            print(f"  {n:4d} {k}")
        for g in gap_files:
            flat = re.sub(r"\s+", " ", g["why"])
            print(f"    {g['file']}: {flat[:220]}")
    if args.out:
        args.out.write_text(json.dumps({"files": len(files), "translated": ok, "refused_by_keyword": dict(by_kw),
                                        "other_errors": dict(other),
                                        "llguidance_compiled": llg_ok if llg else None,
                                        "gap_by_keyword": dict(gap), "gap_files": gap_files,
                                        "per_file": per_file,
                                        "seconds": {k: sorted(v) for k, v in took.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
