"""Where gad's slow MaskBench masks spend their time: each mask's time split over the engine's parts.

Runs gad alone the way ``bench_schema.py`` does (same files, same tokenizer, same set-up, frozen
start-up heap), with a timer around each engine part: building a lexer automaton
(``LexerDFA.__init__`` / ``_explore``; how many, and how many of them of one literal), root walks
(``CompiledGrammar.root``), child walks
(``_walk``), mask fills (``_fill``), context look-ups (``ctx``), parser queries (``allowed_bits``,
the ok states ``_ok_entry``, ``feed``) and Python's cyclic collector by generation (``gc.callbacks``); each part's time is
its own (nested parts subtracted).  Prints, for the masks over each threshold, how many there are,
their total time and each part's share, then the p99 left with each part taken out of every mask's
time (what the p99 owes to that part; the shares weigh a few very slow masks more).  The timers add a few µs per call: read the shares, not the
totals, and compare the totals with ``bench_schema.py``'s only roughly.  It ends with the process's
peak resident memory and what the process-wide store of shared lexer automata holds.

With ``--fine`` the builds are split further (each terminal's byte tables, the joint classes, the
compiled product's kernel, its forks, its reachable winners, the arrays ``_finish`` makes, the direct
build of one literal, the Python builder) and so are the root walks (by path: a compiled walk of the
trie, a trie search, a walk derived from a reference state, one translated from another automaton's,
a uniform walk, the choice of a projection).

With ``--by-path`` the masks over each threshold are also grouped by what they did: the set of
engine parts they entered among a lexer automaton build, the root walks' paths (``--fine``'s labels)
and a child walk, each group with its count, mean time and mean time per part (the fifteen largest groups).

    python benchmarks/profile_schema_tail.py [--step 8] [--gad-warm default] [--thresholds-us 340 1000] [--fine] [--by-path]
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_schema import DEFAULT_DATA, WARM, GadEngine  # noqa: E402


class PartTimer:
    """Exclusive time per labelled part, nested calls subtracted from their callers."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.stack: list[list[Any]] = []

    def enter(self, label: str) -> None:
        self.calls[label] = self.calls.get(label, 0) + 1
        self.stack.append([label, time.perf_counter(), 0.0])

    def leave(self) -> None:
        label, t0, inner = self.stack.pop()
        dt = time.perf_counter() - t0
        self.acc[label] = self.acc.get(label, 0.0) + dt - inner
        if self.stack:
            self.stack[-1][2] += dt

    def wrap_all(self, targets: list[tuple[Any, str, str]]) -> None:
        """:meth:`wrap` each ``(owner, attribute name, label)`` of ``targets``."""
        for owner, name, label in targets:
            self.wrap(owner, name, label)

    def wrap(self, cls: Any, name: str, label: str) -> None:
        fn = getattr(cls, name)

        def timed(*a: Any, **k: Any) -> Any:
            self.enter(label)
            try:
                return fn(*a, **k)
            finally:
                self.leave()

        setattr(cls, name, timed)

    def gc_callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.enter(f"gc gen{info['generation']}")
        else:
            self.leave()


def maskbench_parser(doc: str) -> argparse.ArgumentParser:
    """The command line the MaskBench profiles share: ``--data`` (the folder) and ``--step``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MaskBench folder (default: %(default)s)")
    ap.add_argument("--step", type=int, default=8, help="every STEP-th file, sorted by name (default: %(default)s)")
    return ap


def gad_engine(data: Path, warm: str) -> tuple[Any, GadEngine] | None:
    """``(SmolLM2 tokenizer, bench_schema.GadEngine)`` set up as ``bench_schema.py`` does, or None (with
    a message) when the MaskBench folder ``data`` is missing."""
    if not data.is_dir():
        print(f"MaskBench folder not found: {data}", file=sys.stderr)
        return None
    from transformers import AutoTokenizer

    from gad.models.hf import _resolve_model_dir

    tok = AutoTokenizer.from_pretrained(str(_resolve_model_dir(None, None)[0]))
    return tok, GadEngine(tok, warm)


def main(argv: list[str] | None = None) -> int:
    ap = maskbench_parser(__doc__)
    ap.add_argument("--max-tests", type=int, default=4, help="tests per file, at most (default: %(default)s)")
    ap.add_argument("--gad-warm", choices=list(WARM), default="default",
                    help="gad.compile's warm= for the schemas, as in bench_schema.py (default: %(default)s)")
    ap.add_argument("--thresholds-us", type=float, nargs="+", default=[340.0, 1000.0],
                    help="report the masks slower than each (default: %(default)s)")
    ap.add_argument("--fine", action="store_true",
                    help="split the lexer automaton builds and the root walks into their parts (see above)")
    ap.add_argument("--by-path", action="store_true",
                    help="group the slow masks by the builds and walks they ran (implies --fine; see above)")
    args = ap.parse_args(argv)
    args.fine = args.fine or args.by_path
    set_up = gad_engine(args.data, args.gad_warm)
    if set_up is None:
        return 2
    tok, engine = set_up
    from gad.engine import compiler, lexer
    from gad.grammar.json_schema import convert

    timer = PartTimer()
    timer.wrap_all([(lexer.LexerDFA, "__init__", "lexer automaton build"),
                    (lexer.LexerDFA, "_explore", "lexer automaton build"),
                    (compiler.CompiledGrammar, "root", "root walk"),
                    (compiler.CompiledGrammar, "_walk", "child walk"),
                    (compiler.CompiledGrammar, "_fill", "mask fill"),
                    (compiler.CompiledGrammar, "ctx", "context look-up"),
                    (compiler.CompiledGrammar, "allowed_bits", "parser queries"),
                    (compiler.CompiledGrammar, "feed", "parser queries"),
                    (compiler.CompiledGrammar, "_ok_entry", "parser queries")])
    if args.fine:
        from gad.engine import kernels
        timer.wrap_all([(lexer.TerminalAutomaton, "byte_tables", "build: byte tables"),
                        (lexer, "_joint_classes", "build: joint classes"),
                        (kernels, "explore_product", "build: product kernel"),
                        (lexer.LexerDFA, "_compiled_forks", "build: forks"),
                        (kernels, "product_reach", "build: reach"),
                        (lexer.LexerDFA, "_finish", "build: finish"),
                        (lexer.LexerDFA, "_build_literal", "build: one literal"),
                        (lexer.LexerDFA, "_explore_states", "build: Python builder"),
                        (compiler.CompiledGrammar, "_level_walk", "root: trie walk"),
                        (compiler.CompiledGrammar, "_trie_walk", "root: trie search"),
                        (compiler.CompiledGrammar, "_derived_root_walk", "root: derived"),
                        (compiler.CompiledGrammar, "_term_walk", "root: translated"),
                        (compiler.CompiledGrammar, "_keep_term_walk", "root: translated"),
                        (compiler.CompiledGrammar, "_uniform_walk", "root: uniform"),
                        (compiler.CompiledGrammar, "_projection", "root: projection")])
    # the lexer automata the masks build, by kind (a context of one literal is built directly)
    in_mask = [False]
    built = {"one literal": 0, "other": 0}
    build = lexer.LexerDFA._build

    def counted_build(dfa: Any) -> None:
        build(dfa)
        if in_mask[0]:
            built["one literal" if dfa.compiled_build and dfa._single_literal() is not None else "other"] += 1

    lexer.LexerDFA._build = counted_build  # type: ignore[method-assign]
    gc.collect()
    gc.freeze()
    gc.callbacks.append(timer.gc_callback)
    masks: list[tuple[float, dict[str, float]]] = []
    paths: list[frozenset[str]] = []  # per mask: the builds and walks it entered (--by-path)
    for f in sorted(args.data.glob("*.json"))[:: args.step]:
        d = json.loads(f.read_text())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sg = convert(d["schema"], lenient=True)
            handle = engine.start(d["schema"])
        except Exception:  # noqa: BLE001 - a refused schema (GadError) or a peer-style failure is not timed
            continue
        for t in d["tests"][: args.max_tests]:
            if not t["valid"]:
                continue
            m = engine.fresh(handle)
            for i in tok.encode(sg.dumps(t["data"]), add_special_tokens=False):
                timer.acc.clear()
                timer.enter("rest of mask_for")
                in_mask[0] = True
                t0 = time.perf_counter()
                engine.mask(m)
                dt = time.perf_counter() - t0
                in_mask[0] = False
                timer.leave()
                masks.append((dt, dict(timer.acc)))
                paths.append(frozenset(k for k in timer.calls
                                       if k.startswith("root:") or k in ("lexer automaton build", "child walk")))
                timer.calls.clear()
                if not engine.accept(m, i):
                    break
    gc.callbacks.remove(timer.gc_callback)
    times = np.asarray([dt for dt, _ in masks])
    print(f"gad (warm={args.gad_warm}), every {args.step}th file: {times.size:,} masks timed, "
          f"p50 {1e6 * np.percentile(times, 50):.0f} µs, p99 {1e6 * np.percentile(times, 99):,.0f} µs; "
          f"lexer automata built in them: {sum(built.values()):,} ({built['one literal']:,} of one literal, built directly)")
    labels = sorted({k for _, parts in masks for k in parts})
    print("| masks over | count | total s | " + " | ".join(labels) + " |")
    print("|---|---|---|" + "---|" * len(labels))
    for thr in args.thresholds_us:
        sel = [(dt, parts) for dt, parts in masks if dt > thr * 1e-6]
        total = sum(dt for dt, _ in sel) or 1.0
        share = {k: sum(p.get(k, 0.0) for _, p in sel) / total for k in labels}
        print(f"| {thr:,.0f} µs | {len(sel):,} | {total:.2f} | " + " | ".join(f"{share[k]:.0%}" for k in labels) + " |")
    if args.by_path:
        for thr in args.thresholds_us:
            groups: dict[frozenset[str], list[int]] = {}
            for k, (dt, _) in enumerate(masks):
                if dt > thr * 1e-6:
                    groups.setdefault(paths[k], []).append(k)
            print(f"\nmasks over {thr:,.0f} µs by what they ran (count, mean µs: the parts' mean µs):")
            for path, ks in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:15]:
                mean = {lab: sum(masks[k][1].get(lab, 0.0) for k in ks) / len(ks) for lab in labels}
                top = sorted(((v, lab) for lab, v in mean.items() if v > 5e-6), reverse=True)[:8]
                print(f"  {len(ks):5,} {1e6 * sum(masks[k][0] for k in ks) / len(ks):7,.0f}  "
                      f"{' + '.join(sorted(path)) or '(no build or walk)'}: "
                      + ", ".join(f"{lab} {1e6 * v:,.0f}" for v, lab in top))
    # a rank statistic: a few very slow masks weigh in the shares above but not in the p99; this is
    # the p99 each part leaves behind (every mask's time less that part's)
    from gad.engine import compiler as _compiler

    print(f"peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB; "
          f"shared lexer automata kept: {len(_compiler._SHARED_DFAS):,} "
          f"({_compiler._SHARED_BYTES[0] / 2**20:.0f} MB counted)")
    print("p99 without each part (µs): " + ", ".join(
        f"{k} {1e6 * np.percentile([dt - p.get(k, 0.0) for dt, p in masks], 99):,.0f}" for k in labels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
