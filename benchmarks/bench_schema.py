"""MaskBench: gad vs llguidance vs xgrammar on JSON Schemas, one run, the SmolLM2 tokenizer (issue 11).

For every MaskBench file (``../shared/data/maskbench``, read in place; ``--step k`` takes every k-th
file, sorted by name), each engine gets the schema cold (no cache) and reports:

* coverage: schemas compiled (and first mask out) within ``--limit-s`` seconds;
* correctness over the tests: valid instances rejected, invalid instances accepted (an instance is
  accepted iff every token of its text is allowed and EOS is allowed at the end);
* time to first mask (schema in, first mask out), p50 / p99, over the schemas the engine compiled;
* time per mask, p50 / p99, over the tokens of the valid instances, and how many took over 340 µs
  and over 1 ms (the tail in counts), and the time of all first masks and of all timed masks;
* the same two times over the schemas *every* engine of the run compiled (a second table): each
  engine's figures over one set of schemas, where the first table counts each engine's own set.

Before the first schema, gad's compiled walks are loaded (numba's cache) and the vocabulary's byte
trie is built (process start-up, as each peer's tokenizer set-up); ``--gad-warm`` picks gad's point
between time to first mask and the per-mask tail (``gad.compile(..., warm=...)``).  After set-up the
start-up heap is frozen (``gc.freeze()``, as vLLM's engine core does once started; ``--no-gc-freeze``
leaves it): Python's full collections then scan only what the run itself allocates.

Every engine sees the same text per instance: ``SchemaGrammar.dumps`` (compact, properties in the
schema's order), and its compact-whitespace JSON mode.  Compute is counted in masks as well as time.

    python benchmarks/bench_schema.py --step 8 --out results/bench_schema.json
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "maskbench"


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


#: ``--gad-warm`` -> ``gad.compile``'s ``warm=``: the default for schemas (None: every lexer automaton
#: built by compile, token walks on demand), lazy (False: automata on demand too), automata (the
#: default, named), all (True: automata and start-state walks)
WARM: dict[str, bool | str | None] = {"default": None, "lazy": False, "automata": "automata", "all": True}


class GadEngine:
    name = "gad"

    def __init__(self, tok: Any, warm: str = "default") -> None:
        import gad
        from gad.engine import kernels
        from gad.engine.vocab import Vocabulary
        from gad.grammar import Grammar

        self.gad, self.Grammar = gad, Grammar
        self.vocab = Vocabulary.from_tokenizer(tok)
        self.eos = self.vocab.eos_ids[0]
        self.warm: bool | str | None = WARM[warm]
        if warm != "default":
            self.name = f"gad (warm={warm})"
        # process start-up, as the peers' tokenizer set-up: the compiled walks loaded (numba's cache),
        # the vocabulary's byte tables and trie built (by a regex grammar no schema shares a context with)
        kernels.load()
        m = gad.compile(Grammar.from_regex("[a-z]{1,8}"), self.vocab, cache_dir=False).matcher()
        m.mask_view()
        # the mask goes into a packed int32 bitmask, as the peers' masks do (their allocate_token_bitmask)
        self.bm = np.zeros((1, -(-self.vocab.size // 32)), dtype=np.int32)

    def start(self, schema: Any) -> Any:
        g = self.Grammar.from_json_schema(schema)
        cg = self.gad.compile(g, self.vocab, cache_dir=False, warm=self.warm)
        m = cg.matcher()
        m.fill_next_token_bitmask(self.bm, 0)
        return m

    def fresh(self, handle: Any) -> Any:
        m = handle.compiled.matcher()
        return m

    def mask(self, m: Any) -> np.ndarray:
        m.fill_next_token_bitmask(self.bm, 0)
        return self.bm

    def accept(self, m: Any, t: int) -> bool:
        return m.accept_token(t)

    def eos_ok(self, m: Any) -> bool:
        return bool(m.mask_view()[self.eos])


class LLGEngine:
    name = "llguidance"

    def __init__(self, tok: Any, n_vocab: int) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy as lnp

        self.llg, self.lnp = llguidance, lnp
        self.tok = llguidance.hf.from_tokenizer(tok, n_vocab=n_vocab)
        self.eos = self.tok.eos_token
        self.n_vocab = n_vocab
        self.bm = lnp.allocate_token_bitmask(1, self.tok.vocab_size)

    def start(self, schema: Any) -> Any:
        grm = self.llg.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
        m = self.llg.LLMatcher(self.tok, grm)
        if m.is_error():
            raise RuntimeError(m.get_error())
        self.lnp.fill_next_token_bitmask(m, self.bm, 0)
        return (grm, m)

    def fresh(self, handle: Any) -> Any:
        return self.llg.LLMatcher(self.tok, handle[0])

    def mask(self, m: Any) -> Any:
        self.lnp.fill_next_token_bitmask(m, self.bm, 0)
        return self.bm

    def accept(self, m: Any, t: int) -> bool:
        return bool(m.consume_token(t)) and not m.is_error()

    def eos_ok(self, m: Any) -> bool:
        return bool(m.is_accepting())


class XGREngine:
    name = "xgrammar"

    def __init__(self, tok: Any, n_vocab: int) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=n_vocab)
        self.bm = xgr.allocate_token_bitmask(1, self.info.vocab_size)

    def start(self, schema: Any) -> Any:
        compiler = self.xgr.GrammarCompiler(self.info, cache_enabled=False, max_threads=1)
        cg = compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"), strict_mode=False)
        m = self.xgr.GrammarMatcher(cg)
        m.fill_next_token_bitmask(self.bm)
        return (cg, m)

    def fresh(self, handle: Any) -> Any:
        return self.xgr.GrammarMatcher(handle[0])

    def mask(self, m: Any) -> Any:
        m.fill_next_token_bitmask(self.bm)
        return self.bm

    def accept(self, m: Any, t: int) -> bool:
        return bool(m.accept_token(t))

    def eos_ok(self, m: Any) -> bool:
        for e in self.info.stop_token_ids:
            if m.accept_token(e):
                return True
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MaskBench folder (default: %(default)s)")
    ap.add_argument("--step", type=int, default=1, help="every STEP-th file, sorted by name (default: 1 = all)")
    ap.add_argument("--limit-s", type=float, default=30.0, help="compile time limit per schema (default: 30 s)")
    ap.add_argument("--engines", default="gad,llguidance,xgrammar", help="comma list (default: %(default)s)")
    ap.add_argument("--max-tests", type=int, default=4, help="tests per file, at most (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="write the per-engine summary as JSON here")
    ap.add_argument("--no-gc-freeze", action="store_true",
                    help="leave the start-up heap to Python's collector (default: gc.freeze() it after set-up)")
    ap.add_argument("--gad-warm", choices=list(WARM), default="default",
                    help="gad.compile's warm= for the schemas: default (None: for schemas, every lexer "
                         "automaton built by compile, token walks on demand), lazy (False: automata on "
                         "demand too), automata, or all (True: automata and start-state walks, no disk "
                         "cache) (default: %(default)s)")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"MaskBench folder not found: {args.data}", file=sys.stderr)
        return 2
    from transformers import AutoTokenizer

    from gad.errors import GadError
    from gad.grammar.json_schema import convert
    from gad.models.hf import _resolve_model_dir

    model_dir, _ = _resolve_model_dir(None, None)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    files = sorted(args.data.glob("*.json"))[:: args.step]
    engines: list[Any] = []
    for name in args.engines.split(","):
        if name == "gad":
            engines.append(GadEngine(tok, args.gad_warm))
    n_vocab = engines[0].vocab.size if engines else len(tok)
    for name in args.engines.split(","):
        try:
            if name == "llguidance":
                engines.append(LLGEngine(tok, n_vocab))
            elif name == "xgrammar":
                engines.append(XGREngine(tok, n_vocab))
        except ImportError as e:
            print(f"skipping {name}: {e}", file=sys.stderr)
    if not args.no_gc_freeze:
        # a serving process's start-up heap (torch, transformers, the tokenizers) is frozen, as vLLM's
        # engine core does after start-up: Python's full collections then skip those ~400k objects
        # (each took up to ~0.5 s here, inside whichever mask or compile set it off)
        gc.collect()
        gc.freeze()
    stats: dict[str, dict[str, Any]] = {e.name: {"compiled": 0, "ttfm": [], "per_mask": [], "valid_rejected": 0,
                                               "invalid_accepted": 0, "valid": 0, "invalid": 0, "masks": 0,
                                               "by_file": {}} for e in engines}
    for i, f in enumerate(files):
        d = json.loads(f.read_text())
        schema, tests = d["schema"], d["tests"][: args.max_tests]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sg = convert(schema, lenient=True)
            texts = [(t["valid"], sg.dumps(t["data"])) for t in tests]
        except GadError:
            texts = [(t["valid"], json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False)) for t in tests]
        toks = [(v, tok.encode(s, add_special_tokens=False)) for v, s in texts]
        for e in engines:
            st = stats[e.name]
            t0 = time.perf_counter()
            try:
                handle = e.start(schema)
            except Exception:  # noqa: BLE001 - an engine refusing a schema is a coverage miss
                continue
            dt = time.perf_counter() - t0
            if dt > args.limit_s:
                continue
            st["compiled"] += 1
            st["ttfm"].append(dt)
            n_before = len(st["per_mask"])
            for valid, ids in toks:
                m = e.fresh(handle)
                ok = True
                for t in ids:
                    t1 = time.perf_counter()
                    e.mask(m)
                    if valid:
                        st["per_mask"].append(time.perf_counter() - t1)
                    st["masks"] += 1
                    if not e.accept(m, t):
                        ok = False
                        break
                ok = ok and e.eos_ok(m)
                st["valid" if valid else "invalid"] += 1
                if valid and not ok:
                    st["valid_rejected"] += 1
                if not valid and ok:
                    st["invalid_accepted"] += 1
            st["by_file"][i] = (dt, st["per_mask"][n_before:])
        if (i + 1) % 20 == 0:
            print(f"{i + 1}/{len(files)} files", file=sys.stderr)
    rows = []
    for name, st in stats.items():
        rows.append({
            "engine": name, "files": len(files), "compiled": st["compiled"],
            "valid_rejected": st["valid_rejected"], "valid_tests": st["valid"],
            "invalid_accepted": st["invalid_accepted"], "invalid_tests": st["invalid"],
            "ttfm_p50_ms": 1e3 * pct(st["ttfm"], 50), "ttfm_p99_ms": 1e3 * pct(st["ttfm"], 99),
            "mask_p50_us": 1e6 * pct(st["per_mask"], 50), "mask_p99_us": 1e6 * pct(st["per_mask"], 99),
            "masks": st["masks"], "timed_masks": len(st["per_mask"]),
            # the tail in counts: masks slower than llguidance's usual p99 and than 1 ms
            "masks_over_340us": sum(x > 340e-6 for x in st["per_mask"]),
            "masks_over_1ms": sum(x > 1e-3 for x in st["per_mask"]),
            # the work in all: what moves between the first mask and the later ones (gad's --gad-warm)
            "ttfm_sum_s": float(sum(st["ttfm"])), "mask_sum_s": float(sum(st["per_mask"])),
        })
    print(f"| engine | schemas compiled (of {len(files)}) | valid rejected | invalid accepted | "
          "time to first mask p50 / p99 | time per mask p50 / p99 |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['engine']} | {r['compiled']} | {r['valid_rejected']} / {r['valid_tests']} | "
              f"{r['invalid_accepted']} / {r['invalid_tests']} | {r['ttfm_p50_ms']:.1f} / {r['ttfm_p99_ms']:.0f} ms | "
              f"{r['mask_p50_us']:.0f} / {r['mask_p99_us']:.0f} µs |")
    for r in rows:
        print(f"{r['engine']}: {r['timed_masks']} masks timed, {r['masks_over_340us']} over 340 µs, "
              f"{r['masks_over_1ms']} over 1 ms; time to first masks + timed masks {r['ttfm_sum_s']:.2f} + "
              f"{r['mask_sum_s']:.2f} s")
    common = set.intersection(*(set(st["by_file"]) for st in stats.values())) if stats else set()
    common_rows = []
    for name, st in stats.items():
        ttfm = [st["by_file"][i][0] for i in sorted(common)]
        per_mask = [x for i in sorted(common) for x in st["by_file"][i][1]]
        common_rows.append({"engine": name, "schemas": len(common), "timed_masks": len(per_mask),
                            "ttfm_p50_ms": 1e3 * pct(ttfm, 50), "ttfm_p99_ms": 1e3 * pct(ttfm, 99),
                            "mask_p50_us": 1e6 * pct(per_mask, 50), "mask_p99_us": 1e6 * pct(per_mask, 99)})
    if len(stats) > 1:
        print(f"\nOver the {len(common)} schemas every engine compiled:\n")
        print("| engine | masks timed | time to first mask p50 / p99 | time per mask p50 / p99 |")
        print("|---|---|---|---|")
        for r in common_rows:
            print(f"| {r['engine']} | {r['timed_masks']:,} | {r['ttfm_p50_ms']:.1f} / {r['ttfm_p99_ms']:.0f} ms | "
                  f"{r['mask_p50_us']:.0f} / {r['mask_p99_us']:.0f} µs |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows, "common": common_rows},
                                       indent=2))
    _ = statistics  # (p50 via numpy percentiles)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
