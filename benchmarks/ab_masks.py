"""Interleaved A/B of gad's masks: the checkout against an earlier commit, in one process.

On a shared machine the load moves between runs by more than most changes move the masks, so two
runs of ``bench_masks.py`` or ``bench_schema.py`` compare badly.  This loads the earlier commit's
``gad`` package as ``gad_ab_old`` (``git archive`` of its ``gad/`` folder, the package's own imports
renamed) beside the checkout's ``gad`` and times both on the same documents, alternating which goes
first per document (per schema), so that both see the same moments of load.  Times are per mask, in
µs (``Matcher.mask()`` for the grammars; for MaskBench, as ``bench_schema.py``, the mask written into
a packed int32 bitmask by ``fill_next_token_bitmask`` where the package has it, else ``mask_view()``), as thread CPU time for the grammars (a descheduled thread is not charged) and wall time
for MaskBench (as ``bench_schema.py``).

    python benchmarks/ab_masks.py --old 2c82279 --bench sql      # Spider dev queries, sql.lark
    python benchmarks/ab_masks.py --old 2c82279 --bench json     # JSONTestSuite y_ files, json.lark
    python benchmarks/ab_masks.py --old 2c82279 --bench schema --step 8   # MaskBench, schemas compiled lazily

``sql`` / ``json``: a fresh compiled grammar each (compiled into an empty cache folder, then loaded
from it, as ``bench_masks.py``'s pass1), ``pass1`` over all documents, then ``nolru`` (the mask cache
off: every mask computed afresh from the cached walks).  ``schema``: per MaskBench file, the schema
compiled (time to first mask, ms) and every valid test instance's tokens masked (µs).  Both packages
share nothing but the tokenizer (each has its own automata store and numba kernels).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

OLD = "gad_ab_old"


def load_old(rev: str, into: Path) -> Any:
    """Import ``gad/`` of git revision ``rev`` as package :data:`OLD` (its imports of gad renamed)."""
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "gad"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    pkg = into / OLD
    (into / "gad").rename(pkg)
    pattern = re.compile(r"\bfrom gad\b|\bimport gad\b|\bgad\.(?=[a-z_])|\"gad\.(?=\{)")
    swap = {"from gad": f"from {OLD}", "import gad": f"import {OLD}", "gad.": f"{OLD}.", '"gad.': f'"{OLD}.'}
    for f in pkg.rglob("*.py"):
        text = f.read_text()
        f.write_text(pattern.sub(lambda m: swap[m.group(0)], text))
    sys.path.insert(0, str(into))
    return importlib.import_module(OLD)


def summary(xs: list[float], unit: str = "µs") -> str:
    """One line of figures for per-mask times ``xs`` (µs): count, p50 / p90 / p99, max, the masks over
    340 µs and 1 ms, and the sum in seconds."""
    a = np.asarray(xs)
    if a.size == 0:
        return "none"
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return (f"n {a.size}  p50 {p50:.1f}  p90 {p90:.0f}  p99 {p99:.0f}  max {a.max():.0f} {unit}  "
            f"over 340 µs {int((a > 340).sum())}  over 1 ms {int((a > 1000).sum())}  sum {a.sum() / 1e6:.3f} s")


def bench_grammar(kind: str, pkgs: dict[str, Any], tok: Any) -> None:
    """Print ``pass1`` and ``nolru`` per-mask thread CPU times (µs) of each package in ``pkgs`` on
    ``bench_masks.py``'s documents of ``kind`` ("sql" or "json"), the packages alternating per document."""
    import bench_masks as bm

    seqs, _ = bm.tokenize(tok, bm.documents(kind, None))
    cgs, masks = {}, {}
    for who, pkg in pkgs.items():
        importlib.import_module(pkg.__name__ + ".engine.kernels").load()
        grammar = pkg.Grammar.from_file(bm.GRAMMARS[kind])
        tmp = tempfile.mkdtemp()
        pkg.compile(grammar, tok, cache_dir=tmp)
        importlib.import_module(pkg.__name__ + ".engine.compiler")._MEMO.clear()
        cgs[who] = pkg.compile(grammar, tok, cache_dir=tmp)
        masks[who] = importlib.import_module(pkg.__name__ + ".engine.matcher").Matcher.mask
    gc.collect()
    gc.freeze()  # the start-up heap (tokenizer, both packages, the compiled grammars) out of the collector's way
    clock = time.thread_time_ns
    for mode in ("pass1", "nolru"):
        if mode == "nolru":
            for cg in cgs.values():
                cg._masks.clear()
                cg.mask_cache_size = 0
        ns: dict[str, list[float]] = {w: [] for w in pkgs}
        for j, (_, ids) in enumerate(seqs):
            for who in (list(pkgs) if j % 2 == 0 else list(pkgs)[::-1]):
                cg, mask, out = cgs[who], masks[who], ns[who]
                m = cg.matcher()
                for t in [*ids, None]:
                    a = clock()
                    mask(m)
                    out.append((clock() - a) / 1e3)
                    if t is not None:
                        m.accept_token(t)
        for who in pkgs:
            print(f"{kind} {mode:5s} {who:3s}  {summary(ns[who])}")


def schema_mask_call(pkg: Any, vocab: Any) -> Any:
    """The per-mask call ``bench_schema.py`` times for ``pkg``'s matchers: the mask written into a
    preallocated ``(1, words)`` int32 bitmask (as the peers do) where its Matcher has
    ``fill_next_token_bitmask``, else the read-only bool ``mask_view()`` (older commits)."""
    matcher_cls = importlib.import_module(pkg.__name__ + ".engine.matcher").Matcher
    if hasattr(matcher_cls, "fill_next_token_bitmask"):
        bitmask = np.zeros((1, -(-vocab.size // 32)), dtype=np.int32)
        return lambda m: m.fill_next_token_bitmask(bitmask, 0)
    return matcher_cls.mask_view


def bench_schema(data: Path, step: int, pkgs: dict[str, Any], tok: Any) -> None:
    """Print each package's per-mask wall times (µs) and times to first mask (ms) on every ``step``-th
    MaskBench file of ``data`` (valid instances, at most 4 tests a file), alternating per schema."""
    from gad.errors import GadError
    from gad.grammar.json_schema import convert

    engines = {}
    for who, pkg in pkgs.items():
        importlib.import_module(pkg.__name__ + ".engine.kernels").load()
        vocab = importlib.import_module(pkg.__name__ + ".engine.vocab").Vocabulary.from_tokenizer(tok)
        grammar_cls = importlib.import_module(pkg.__name__ + ".grammar").Grammar
        pkg.compile(grammar_cls.from_regex("[a-z]{1,8}"), vocab, cache_dir=False).matcher().mask_view()
        engines[who] = (pkg, grammar_cls, vocab, schema_mask_call(pkg, vocab))
    gc.collect()
    gc.freeze()  # as bench_schema.py: the start-up heap out of the collector's way
    files = sorted(data.glob("*.json"))[::step]
    ttfm: dict[str, list[float]] = {w: [] for w in pkgs}
    per_mask: dict[str, list[float]] = {w: [] for w in pkgs}
    by_file: dict[str, dict[int, tuple[float, list[float]]]] = {w: {} for w in pkgs}  # file -> (ttfm, masks)
    clock = time.perf_counter
    for i, f in enumerate(files):
        d = json.loads(f.read_text())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sg = convert(d["schema"], lenient=True)
        except GadError:
            continue
        toks = [tok.encode(sg.dumps(t["data"]), add_special_tokens=False) for t in d["tests"][:4] if t["valid"]]
        for who in (list(pkgs) if i % 2 == 0 else list(pkgs)[::-1]):
            pkg, grammar_cls, vocab, mask = engines[who]
            t0 = clock()
            try:
                cg = pkg.compile(grammar_cls.from_json_schema(d["schema"]), vocab, cache_dir=False, warm=None)
                cg.matcher().mask_view()
            except Exception:  # noqa: BLE001 - a refused schema is a coverage miss, as in bench_schema.py
                continue
            ttfm[who].append((clock() - t0) * 1e3)
            mine: list[float] = []
            for ids in toks:
                m = cg.matcher()
                for t in ids:
                    a = clock()
                    mask(m)
                    mine.append((clock() - a) * 1e6)
                    if not m.accept_token(t):
                        break
            per_mask[who].extend(mine)
            by_file[who][i] = (ttfm[who][-1], mine)
    for who in pkgs:
        print(f"schema masks {who:3s}  {summary(per_mask[who])}")
        a = np.asarray(ttfm[who])
        print(f"schema ttfm  {who:3s}  n {a.size}  p50 {np.percentile(a, 50):.1f}  p99 {np.percentile(a, 99):.0f} ms")
    common = sorted(set.intersection(*(set(by_file[w]) for w in pkgs)))
    if any(len(by_file[w]) != len(common) for w in pkgs):  # (one compiles schemas the other refuses)
        print(f"on the {len(common)} schemas both compile:")
        for who in pkgs:
            masks = [x for i in common for x in by_file[who][i][1]]
            a = np.asarray([by_file[who][i][0] for i in common])
            print(f"schema masks {who:3s}  {summary(masks)}")
            print(f"schema ttfm  {who:3s}  n {a.size}  p50 {np.percentile(a, 50):.1f}  p99 {np.percentile(a, 99):.0f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="git revision to compare the checkout with")
    ap.add_argument("--bench", choices=["sql", "json", "schema"], default="sql")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "maskbench",
                    help="MaskBench folder for --bench schema (default: %(default)s)")
    ap.add_argument("--step", type=int, default=8, help="every STEP-th MaskBench file (default: %(default)s)")
    args = ap.parse_args(argv)
    from transformers import AutoTokenizer

    import gad
    from gad.models.hf import _resolve_model_dir

    tok = AutoTokenizer.from_pretrained(str(_resolve_model_dir(None, None)[0]))
    with tempfile.TemporaryDirectory() as tmp:
        pkgs = {"old": load_old(args.old, Path(tmp)), "new": gad}
        print(f"old = {args.old}, new = the checkout ({ROOT})")
        if args.bench == "schema":
            if not args.data.is_dir():
                print(f"MaskBench folder not found: {args.data}", file=sys.stderr)
                return 2
            bench_schema(args.data, args.step, pkgs, tok)
        else:
            bench_grammar(args.bench, pkgs, tok)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
