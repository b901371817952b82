"""Every test instance of the MaskBench files gad translates now but did not in a baseline run of
``schema_coverage.py --out`` (or of all files, ``--all``), checked at the text level: gad's engine over
a one-byte-per-token vocabulary accepts ``SchemaGrammar.dumps(value)`` (compact, and indented under
``whitespace="flexible"`` for valid values) iff the file's label says valid; the label is also
compared with ``jsonschema`` (gad's format checker).

    python benchmarks/schema_exact_new.py --data ../shared/data/maskbench --baseline /tmp/cov_base.json
"""

from __future__ import annotations

import argparse
import json
import signal
import time
import warnings
from pathlib import Path

from schema_coverage import DEFAULT_DATA, _alarm, _Timeout  # the same data folder and time limit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--baseline", type=Path, default=None, help="schema_coverage.py --out JSON of the baseline")
    ap.add_argument("--all", action="store_true", help="check every file gad translates")
    ap.add_argument("--limit-s", type=float, default=60.0, help="time limit per file (default: %(default)s s)")
    args = ap.parse_args(argv)
    import jsonschema

    import gad
    from gad.engine.vocab import Vocabulary
    from gad.errors import GadError
    from gad.grammar import Grammar
    from gad.grammar.json_schema import convert, format_checker

    vocab = Vocabulary(tokens=tuple(bytes([i]) for i in range(256)) + (None,), eos_ids=(256,), name="bytes")
    before: dict[str, str] = {}
    if args.baseline is not None:
        before = json.loads(args.baseline.read_text())["per_file"]
    files = sorted(args.data.glob("*.json"))
    signal.signal(signal.SIGALRM, _alarm)
    n_files = n_tests = 0
    wrong: list[str] = []
    label_vs_js: list[str] = []
    skipped: list[str] = []
    t0 = time.perf_counter()
    for f in files:
        if not args.all and before.get(f.name) == "ok":
            continue
        d = json.loads(f.read_text())
        schema = d["schema"]
        signal.setitimer(signal.ITIMER_REAL, args.limit_s)
        try:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    sg = convert(schema)
            except GadError:
                continue
            try:
                cg = gad.compile(Grammar.from_string(sg.lark_text), vocab, cache_dir=False)
                flex_sg = convert(schema, whitespace="flexible")
                flex = gad.compile(Grammar.from_string(flex_sg.lark_text), vocab, cache_dir=False)
            except GadError as e:
                skipped.append(f"{f.name}: {type(e).__name__}: {str(e)[:120]}")
                continue
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            val = cls(schema, format_checker=format_checker())
            n_files += 1
            for i, t in enumerate(d["tests"]):
                n_tests += 1
                js = val.is_valid(t["data"])
                if js != t["valid"]:
                    label_vs_js.append(f"{f.name} test {i}: label {t['valid']}, jsonschema {js}")
                text = sg.dumps(t["data"])
                m = cg.matcher()
                got = m.accept_bytes(text.encode("utf-8")) and m.is_accepting()
                if got != t["valid"]:
                    wrong.append(f"{f.name} test {i}: valid={t['valid']} accepted={got}: {text[:150]}")
                if t["valid"]:
                    text2 = flex_sg.dumps(t["data"], indent=2)
                    m = flex.matcher()
                    if not (m.accept_bytes(text2.encode("utf-8")) and m.is_accepting()):
                        wrong.append(f"{f.name} test {i}: indented valid instance rejected (flexible)")
        except _Timeout:
            skipped.append(f"{f.name}: over {args.limit_s:.0f} s")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    print(f"{n_files} files, {n_tests} tests checked in {time.perf_counter() - t0:.0f} s: {len(wrong)} wrong, "
          f"{len(label_vs_js)} labels that jsonschema disagrees with, {len(skipped)} skipped")
    for w in wrong:
        print("  WRONG", w)
    for w in label_vs_js:
        print("  LABEL", w)
    for w in skipped:
        print("  SKIPPED", w)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
