"""Where gad's time to first mask goes on MaskBench: each schema's ``start`` split over its parts.

Runs gad's ``start`` (schema in, first mask out) the way ``bench_schema.py`` does (same files, same
tokenizer, same set-up, frozen start-up heap), with a timer (``profile_schema_tail.PartTimer``, own
time, nested parts subtracted) around: the schema conversion (``json_schema.convert``), the plain-BNF
reading (``plain_bnf.compile_plain``), gad's LALR(1) table (``lalr_table.lalr_table``), the lexer
contexts read from it (``ParserTables.from_plain``), Lark's contextual lexer and the rest of Lark's
construction (where Lark's parser is built: not for plain BNF), the terminal automata (``TerminalAutomaton.build``),
the grammar checks (terminals, scanners, a non-empty language), the compiled
grammar's set-up (``CompiledGrammar.__init__``), lexer automaton builds and the rest of the first
mask; "rest" is what ``start`` spends outside them; Python's cyclic collector's passes inside ``start``
are parts of their own (``gc gen0`` / ``gen1`` / ``gen2``).  Prints the time to first mask p50 and, per part, its mean over a middle band of
schemas (the 35th to 65th percentile of the time to first mask: what a typical schema pays) and over
all of them (where the large schemas weigh).  The timers add a few µs per call: read the shares.

    python benchmarks/profile_schema_ttfm.py [--step 8] [--band 35 65] [--slowest 5]

``--slowest N`` also prints the N slowest schemas (the time to first mask's p99 region), each with its
file, its time and its largest parts.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_schema_tail import PartTimer, gad_engine, maskbench_parser  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = maskbench_parser(__doc__)
    ap.add_argument("--band", type=float, nargs=2, default=[35.0, 65.0],
                    help="percentiles of the time to first mask bounding the middle band (default: %(default)s)")
    ap.add_argument("--slowest", type=int, default=0, help="print the N slowest schemas' parts (default: none)")
    args = ap.parse_args(argv)
    set_up = gad_engine(args.data, "default")
    if set_up is None:
        return 2
    _, engine = set_up
    import lark
    import lark.parser_frontends

    from gad.engine import compiler, lexer
    from gad.grammar import json_schema, lalr_table, loader, tables

    timer = PartTimer()
    timer.wrap_all([(json_schema, "convert", "conversion"),
                    (loader, "compile_plain", "plain-BNF reading"),
                    (lalr_table, "lalr_table", "LALR(1) table"),
                    (tables, "lalr_table", "LALR(1) table"),
                    (tables.ParserTables, "from_plain", "lexer contexts"),
                    (lark.parser_frontends, "create_contextual_lexer", "Lark's contextual lexer"),
                    (lark.Lark, "__init__", "rest of Lark"),
                    (loader, "validate_terminals", "terminal and scanner checks"),
                    (loader.Grammar, "_check_terminals", "terminal and scanner checks"),
                    (loader.Grammar, "_check_scanners", "terminal and scanner checks"),
                    (loader.Grammar, "_check_nonempty", "non-empty check"),
                    (lexer.TerminalAutomaton, "build", "terminal automata"),
                    (compiler.CompiledGrammar, "__init__", "compiled grammar set-up"),
                    (lexer.LexerDFA, "__init__", "lexer automaton builds"),
                    (compiler.CompiledGrammar, "mask_for", "rest of the first mask")])
    gc.collect()
    gc.freeze()
    gc.callbacks.append(timer.gc_callback)  # (Python's collections, by generation, as parts of their own)
    rows: list[tuple[float, dict[str, float]]] = []
    names: list[str] = []
    for f in sorted(args.data.glob("*.json"))[:: args.step]:
        schema = json.loads(f.read_text())["schema"]
        timer.acc.clear()
        timer.enter("rest")
        t0 = time.perf_counter()
        try:
            engine.start(schema)
        except Exception:  # noqa: BLE001 - a refused schema is not timed
            timer.stack.clear()
            continue
        dt = time.perf_counter() - t0
        timer.leave()
        rows.append((dt, dict(timer.acc)))
        names.append(f.name)
    times = np.asarray([dt for dt, _ in rows])
    lo, hi = np.percentile(times, args.band)
    band = [parts for dt, parts in rows if lo <= dt <= hi]
    labels = sorted({k for _, parts in rows for k in parts}, key=lambda k: -sum(p.get(k, 0.0) for p in band))
    print(f"gad, every {args.step}th file: {times.size} schemas, time to first mask p50 "
          f"{1e3 * np.median(times):.1f} ms; middle band ({args.band[0]:.0f}th-{args.band[1]:.0f}th percentile): "
          f"{len(band)} schemas, mean {1e3 * np.mean([dt for dt in times if lo <= dt <= hi]):.1f} ms")
    print("| part | middle band, mean ms | all schemas, mean ms |")
    print("|---|---|---|")
    for k in labels:
        print(f"| {k} | {1e3 * np.mean([p.get(k, 0.0) for p in band]):.2f} | "
              f"{1e3 * np.mean([p.get(k, 0.0) for _, p in rows]):.2f} |")
    for k in np.argsort(-times)[: args.slowest]:
        dt, parts = rows[k]
        top = sorted(parts.items(), key=lambda kv: -kv[1])[:5]
        print(f"{names[k]}: {1e3 * dt:,.0f} ms; " + ", ".join(f"{lab} {1e3 * v:,.0f}" for lab, v in top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
