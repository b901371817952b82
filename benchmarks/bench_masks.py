"""Mask latency and compile time of gad (and, when installed, llguidance and xgrammar) on real documents.

    python benchmarks/bench_masks.py [--grammar json|sql|both] [--limit N] [--repeat R] [--no-peers] [--json OUT]

Grammars: ``grammars/json.lark`` over the JSONTestSuite ``y_*`` files (../shared/data/jsontestsuite) and
``grammars/sql.lark`` over the Spider gold queries (../shared/data/spider/dev_queries.jsonl), each
tokenized with the bundled SmolLM2-135M-Instruct tokenizer (49,152 tokens, ``add_special_tokens=False``).

At every position of every document: time the mask (gad ``fill_next_token_bitmask`` into a
preallocated int32 bitmask, as the peers; llguidance ``unsafe_compute_mask_ptr`` into a preallocated int32 bitmask, i.e.
``fill_next_token_bitmask`` without its Python checks; xgrammar ``fill_next_token_bitmask`` into a
preallocated int32 tensor), then, separately, the accept of the document's token.  After the last
token one more mask is timed and EOS must be allowed in it.

Passes, per repetition:
  * ``pass1``: first walk over all documents with a fresh compiled object (gad: loaded from the disk
    cache, so per-state token walks and the mask LRU are cold; llguidance: a newly built LLMatcher,
    ``reset()`` between documents; xgrammar: a newly compiled grammar, a new matcher per document);
  * ``pass2``: the same documents again, fresh matchers, same compiled object (steady state);
  * ``nolru`` (gad only): pass2 with the mask LRU disabled (``mask_cache_size = 0``): every mask is a
    genuine cache miss computed from the (cached) token walks.
Compile: gad cold = ``gad.compile`` into a fresh empty cache dir (includes mapping the tokenizer's
vocabulary); cached = a second ``gad.compile`` with the same dir (loads the pickled tables);
in_process_memo = a third call, answered by gad's in-process memo (``gad.compiler._MEMO``, which the
benchmark clears before the cold and cached calls so that they really compile / load from disk);
grammar load = ``Grammar.from_file``.

The machine this runs on may be shared: every figure is the median over ``--repeat`` repetitions
(each latency percentile is computed per repetition, over all mask calls of that pass, then the
median of those is reported).  Latencies in microseconds, compile times in seconds.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gad.grammar import BUILTIN_DIR

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the checkout (a git worktree one level further down also finds it)
DATA = next((b / "shared" / "data" for b in (ROOT.parent, ROOT.parent.parent) if (b / "shared" / "data").is_dir()),
            ROOT.parent / "shared" / "data")
GRAMMARS = {"json": BUILTIN_DIR / "json.lark", "sql": BUILTIN_DIR / "sql.lark"}

# json.lark hand-translated to xgrammar's EBNF (GBNF dialect).  Lark's ``%ignore WS`` becomes explicit
# ``ws`` wherever RFC 8259 allows whitespace (around every structural token and the top value); the
# STRING and NUMBER regexps become rules with the same character classes.  Same language as json.lark.
JSON_EBNF = r'''
root ::= ws value ws
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] )
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [+-]? [0-9]+ )?
ws ::= [ \t\n\r]*
'''

pc = time.perf_counter_ns


def llguidance_lark(text: str) -> str:
    """The Lark text given to llguidance: the file with one change.

    llguidance applies ``%ignore`` only between lexemes, never before the first or after the last one,
    whereas Lark (and gad) also skip ignored whitespace at both ends of the input (JSONTestSuite has
    ``y_`` files with leading and trailing whitespace).  So ``start: X`` becomes
    ``start: EDGE_WS? X EDGE_WS?`` with ``EDGE_WS: /[ \\t\\n\\r]+/``.  Everything else is accepted
    by llguidance's Lark front end unchanged.
    """
    out, n = re.subn(r"(?m)^start:(.*)$", r"start: EDGE_WS? (\1) EDGE_WS?\nEDGE_WS: /[ \\t\\n\\r]+/", text)
    assert n == 1, "expected exactly one 'start:' rule"
    return out


# ------------------------------------------------------------------------------------------- inputs
def load_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from gad.models.hf import _resolve_model_dir

    return AutoTokenizer.from_pretrained(str(_resolve_model_dir(None, None)[0]))


def documents(kind: str, limit: int | None) -> list[tuple[str, bytes]]:
    """(name, bytes) of the real documents for ``kind``."""
    if kind == "json":
        files = sorted((DATA / "jsontestsuite").glob("y_*.json"))
        docs = [(f.name, f.read_bytes()) for f in files]
    else:
        docs = []
        with open(DATA / "spider" / "dev_queries.jsonl", encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                docs.append((f"spider#{i}", json.loads(line)["query"].encode("utf-8")))
    return docs[:limit] if limit else docs


def tokenize(tok: Any, docs: list[tuple[str, bytes]]) -> tuple[list[tuple[str, list[int]]], list[str]]:
    """Model tokenization of each document; documents that do not round-trip are skipped (named)."""
    out, skipped = [], []
    for name, data in docs:
        try:
            ids = tok.encode(data.decode("utf-8"), add_special_tokens=False)
        except UnicodeDecodeError:
            skipped.append(f"{name} (not UTF-8)")
            continue
        if tok.decode(ids, clean_up_tokenization_spaces=False).encode("utf-8") != data:
            skipped.append(f"{name} (tokenization does not round-trip)")
            continue
        out.append((name, ids))
    return out, skipped


# ------------------------------------------------------------------------------------------- timing
def pct(ns: list[int]) -> dict[str, float]:
    a = np.asarray(ns, dtype=np.float64) / 1000.0
    if a.size == 0:
        return {"n": 0}
    return {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
            "max": float(a.max()), "mean": float(a.mean())}


def walk(seqs: list[tuple[str, list[int]]], new: Callable[[], Any], mask: Callable[[Any], Any],
         accept: Callable[[Any, int], bool], eos_ok: Callable[[Any, Any], bool]) -> dict[str, Any]:
    """Time mask and accept at every position of every sequence (one pass)."""
    mask_ns: list[int] = []
    acc_ns: list[int] = []
    refused: list[str] = []
    no_eos: list[str] = []
    for name, ids in seqs:
        m = new()
        ok = True
        for i, t in enumerate(ids):
            a = pc()
            mask(m)
            b = pc()
            ok = accept(m, t)
            c = pc()
            mask_ns.append(b - a)
            acc_ns.append(c - b)
            if not ok:
                refused.append(f"{name} (token {i} = {t})")
                break
        if ok:
            a = pc()
            mk = mask(m)
            b = pc()
            mask_ns.append(b - a)
            if not eos_ok(m, mk):
                no_eos.append(name)
    return {"mask_us": pct(mask_ns), "accept_us": pct(acc_ns), "refused": refused, "eos_refused": no_eos}


def median_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over repetitions of every latency statistic; refusals taken from the first run."""
    out: dict[str, Any] = {}
    for key in ("mask_us", "accept_us"):
        stats = [r[key] for r in runs if r[key].get("n")]
        out[key] = {k: statistics.median(s[k] for s in stats) for k in stats[0]} if stats else {"n": 0}
    out["refused"] = runs[0]["refused"]
    out["eos_refused"] = runs[0]["eos_refused"]
    if "stats" in runs[0]:
        out["stats"] = runs[0]["stats"]
    out["runs"] = len(runs)
    return out


def med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------------------------------------- gad
def bench_gad(kind: str, tok: Any, seqs: list[tuple[str, list[int]]], repeat: int) -> dict[str, Any]:
    import gad
    import gad.engine.compiler
    from gad.engine.matcher import Matcher
    from gad.engine.vocab import Vocabulary

    path = GRAMMARS[kind]
    load, cold, cached, in_process, vocab_t = [], [], [], [], []
    # process start-up, timed apart (as the peers' tokenizer set-up): the compiled walks loaded from
    # numba's cache (compiled into it on the first run after a change of gad/engine/kernels.py)
    from gad.engine import kernels

    t0 = time.perf_counter()
    kernels.load()
    kernels_t = time.perf_counter() - t0
    for _ in range(repeat):
        t0 = time.perf_counter()
        grammar = gad.Grammar.from_file(path)
        load.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        Vocabulary.from_tokenizer(tok)
        vocab_t.append(time.perf_counter() - t0)
    runs: dict[str, list[dict[str, Any]]] = {"pass1": [], "pass2": [], "nolru": []}
    memo = getattr(gad.engine.compiler, "_MEMO", None)  # gad's in-process memo of compiled grammars
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            if memo is not None:
                memo.clear()
            t0 = time.perf_counter()
            gad.compile(grammar, tok, cache_dir=tmp)
            cold.append(time.perf_counter() - t0)
            if memo is not None:
                memo.clear()
            t0 = time.perf_counter()
            cg = gad.compile(grammar, tok, cache_dir=tmp)
            cached.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            again = gad.compile(grammar, tok, cache_dir=tmp)
            in_process.append(time.perf_counter() - t0)
            assert memo is None or again is cg
        bitmask = np.zeros((1, -(-cg.vocab_size // 32)), dtype=np.int32)

        def mask(m: Any, out: np.ndarray = bitmask) -> np.ndarray:
            m.fill_next_token_bitmask(out, 0)
            return out

        def eos_ok(m: Any, mk: np.ndarray, eos: tuple[int, ...] = cg.eos_ids) -> bool:
            return all((int(mk[0, e >> 5]) >> (e & 31)) & 1 for e in eos) and m.is_accepting()

        for name in ("pass1", "pass2", "nolru"):
            if name == "nolru":
                lru_size = cg.mask_cache_size
                cg._masks.clear()
                cg.mask_cache_size = 0
            before = dict(cg.stats)
            r = walk(seqs, cg.matcher, mask, Matcher.accept_token, eos_ok)
            r["stats"] = {k: cg.stats[k] - before.get(k, 0) for k in cg.stats}
            runs[name].append(r)
        cg.mask_cache_size = lru_size
    if memo is not None:
        memo.clear()
    return {"engine": "gad", "grammar": str(path.relative_to(ROOT)),
            "compile_s": {"kernels_load": kernels_t, "grammar_load": med(load), "vocab_map": med(vocab_t), "cold": med(cold),
                          "cached": med(cached), "in_process_memo": med(in_process) if memo is not None else None},
            **{k: median_runs(v) for k, v in runs.items()}}


# --------------------------------------------------------------------------------------- llguidance
def bench_llguidance(kind: str, tok: Any, seqs: list[tuple[str, list[int]]], repeat: int) -> dict[str, Any]:
    import llguidance
    import llguidance.hf
    import llguidance.numpy as lln

    path = GRAMMARS[kind]
    text = llguidance_lark(path.read_text(encoding="utf-8"))
    tok_t, build_t = [], []
    lltok = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        lltok = llguidance.hf.from_tokenizer(tok)
        tok_t.append(time.perf_counter() - t0)
    grammar = llguidance.LLMatcher.grammar_from_lark(text)
    err = llguidance.LLMatcher.validate_grammar(grammar, lltok)
    if err:
        return {"engine": "llguidance", "error": f"grammar rejected: {err}"}
    bm = lln.allocate_token_bitmask(1, lltok.vocab_size)
    ptr, nbytes = bm.ctypes.data, bm.nbytes
    eos_ids = [int(tok.eos_token_id)]

    def mask(m: Any) -> np.ndarray:
        m.unsafe_compute_mask_ptr(ptr, nbytes)
        return bm

    def accept(m: Any, t: int) -> bool:
        return m.consume_token(t)

    def eos_ok(m: Any, b: np.ndarray) -> bool:
        return all((int(b[0, e >> 5]) >> (e & 31)) & 1 for e in eos_ids) and m.is_accepting()

    runs: dict[str, list[dict[str, Any]]] = {"pass1": [], "pass2": []}
    for _ in range(repeat):
        t0 = time.perf_counter()
        template = llguidance.LLMatcher(lltok, grammar, log_level=0)
        build_t.append(time.perf_counter() - t0)
        if template.is_error():
            return {"engine": "llguidance", "error": template.get_error()}
        # a pristine copy per document (reset() does not clear llguidance's error state after a refusal)
        for name in runs:
            runs[name].append(walk(seqs, template.deep_copy, mask, accept, eos_ok))
    return {"engine": "llguidance", "grammar": f"{path.relative_to(ROOT)} via llguidance_lark()",
            "compile_s": {"tokenizer": med(tok_t), "cold": med(build_t)},
            **{k: median_runs(v) for k, v in runs.items()}}


# ----------------------------------------------------------------------------------------- xgrammar
def bench_xgrammar(kind: str, tok: Any, seqs: list[tuple[str, list[int]]], repeat: int,
                   variant: str) -> dict[str, Any]:
    import xgrammar as xgr

    tok_t, cold_t, cached_t = [], [], []
    info = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok))
        tok_t.append(time.perf_counter() - t0)
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    bm_np = bm.numpy()  # shares memory with the tensor
    eos_ids = list(info.stop_token_ids)

    def do_compile(compiler: Any) -> Any:
        if variant == "builtin":
            return compiler.compile_builtin_json_grammar()
        return compiler.compile_grammar(JSON_EBNF)

    def mask(m: Any) -> np.ndarray:
        m.fill_next_token_bitmask(bm)
        return bm_np

    def accept(m: Any, t: int) -> bool:
        return m.accept_token(t)

    def eos_ok(m: Any, b: np.ndarray) -> bool:
        return all((int(b[0, e >> 5]) >> (e & 31)) & 1 for e in eos_ids) and m.is_completed()

    runs: dict[str, list[dict[str, Any]]] = {"pass1": [], "pass2": []}
    for _ in range(repeat):
        compiler = xgr.GrammarCompiler(info, max_threads=2, cache_enabled=True)
        try:
            t0 = time.perf_counter()
            cg = do_compile(compiler)
            cold_t.append(time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - a peer that cannot compile is reported, not fatal
            return {"engine": f"xgrammar-{variant}", "error": f"compile failed: {exc}"}
        t0 = time.perf_counter()
        do_compile(compiler)
        cached_t.append(time.perf_counter() - t0)
        for name in runs:
            runs[name].append(walk(seqs, lambda cg=cg: xgr.GrammarMatcher(cg), mask, accept, eos_ok))
    desc = ("xgrammar builtin JSON grammar" if variant == "builtin"
            else "json.lark hand-translated to EBNF (JSON_EBNF in this script)")
    return {"engine": f"xgrammar-{variant}", "grammar": desc,
            "compile_s": {"tokenizer": med(tok_t), "cold": med(cold_t), "cached": med(cached_t)},
            **{k: median_runs(v) for k, v in runs.items()}}


# -------------------------------------------------------------------------------------------- report
def fmt(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def print_table(kind: str, n_docs: int, n_tok: int, skipped: list[str], results: list[dict[str, Any]],
                notes: list[str]) -> None:
    print(f"\n== {kind}: {n_docs} documents, {n_tok} tokens (+1 final mask each) ==")
    for s in skipped:
        print(f"  skipped: {s}")
    hdr = (f"{'engine':<20} {'pass':<6} {'mask p50':>9} {'p99':>9} {'max':>9} {'mean':>9} "
           f"{'accept p50':>10} {'p99':>8}  compile cold / cached (s)")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        if "error" in r:
            print(f"{r['engine']:<20} {r['error']}")
            continue
        c = r["compile_s"]
        comp = f"{fmt(c.get('cold'), 3)} / {fmt(c.get('cached'), 3)}"
        for p in ("pass1", "pass2", "nolru"):
            if p not in r:
                continue
            mk, ac = r[p]["mask_us"], r[p]["accept_us"]
            print(f"{r['engine']:<20} {p:<6} {fmt(mk.get('p50')):>9} {fmt(mk.get('p99')):>9} "
                  f"{fmt(mk.get('max')):>9} {fmt(mk.get('mean')):>9} {fmt(ac.get('p50')):>10} "
                  f"{fmt(ac.get('p99')):>8}  {comp}")
            comp = ""
    for r in results:
        if "error" in r:
            continue
        extra = ", ".join(f"{k} {fmt(v, 3)}" for k, v in r["compile_s"].items() if k not in ("cold", "cached"))
        if extra:
            print(f"  {r['engine']}: also {extra} s")
        if r["engine"] == "gad":
            for p in ("pass1", "pass2", "nolru"):
                print(f"  gad {p} cache stats: {r[p]['stats']}")
        for p in ("pass1",):
            if r[p]["refused"]:
                print(f"  {r['engine']} refused {len(r[p]['refused'])} document(s): "
                      + "; ".join(r[p]["refused"][:10]) + (" ..." if len(r[p]["refused"]) > 10 else ""))
            if r[p]["eos_refused"]:
                print(f"  {r['engine']} refused EOS at the end of {len(r[p]['eos_refused'])} document(s): "
                      + "; ".join(r[p]["eos_refused"][:10]))
    gad_r = next((r for r in results if r["engine"] == "gad" and "error" not in r), None)
    if gad_r:
        for r in results:
            if r is gad_r or "error" in r:
                continue
            parts = []
            for p in ("pass1", "pass2"):
                for s in ("p50", "p99"):
                    a, b = gad_r[p]["mask_us"].get(s), r[p]["mask_us"].get(s)
                    if a and b:
                        parts.append(f"{p} {s} {a / b:.2f}x")
            a, b = gad_r["compile_s"]["cold"], r["compile_s"].get("cold")
            if a and b:
                parts.append(f"compile cold {a / b:.2f}x")
            print(f"  ratio gad/{r['engine']}: " + ", ".join(parts))
    for n in notes:
        print(f"  note: {n}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grammar", choices=["json", "sql", "both"], default="both")
    ap.add_argument("--limit", type=int, default=None, help="first N documents only")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions; medians are reported (default 3)")
    ap.add_argument("--no-peers", action="store_true", help="skip llguidance and xgrammar")
    ap.add_argument("--json", metavar="OUT", help="write all figures to this JSON file")
    args = ap.parse_args(argv)

    tok = load_tokenizer()
    report: dict[str, Any] = {"repeat": args.repeat, "limit": args.limit, "vocab_size": len(tok),
                              "python": sys.version.split()[0], "grammars": {}}
    for kind in (["json", "sql"] if args.grammar == "both" else [args.grammar]):
        docs = documents(kind, args.limit)
        seqs, skipped = tokenize(tok, docs)
        n_tok = sum(len(ids) for _, ids in seqs)
        results = [bench_gad(kind, tok, seqs, args.repeat)]
        notes: list[str] = []
        if not args.no_peers:
            try:
                results.append(bench_llguidance(kind, tok, seqs, args.repeat))
            except ImportError as exc:
                notes.append(f"llguidance not installed ({exc}); pip install -e '.[bench]'")
            try:
                import xgrammar  # noqa: F401
            except ImportError as exc:
                notes.append(f"xgrammar not installed ({exc}); pip install -e '.[bench]'")
            else:
                if kind == "json":
                    results.append(bench_xgrammar(kind, tok, seqs, args.repeat, "builtin"))
                    results.append(bench_xgrammar(kind, tok, seqs, args.repeat, "ebnf"))
                else:
                    notes.append("xgrammar skipped for sql: it takes EBNF, not Lark, and sql.lark has no "
                                 "EBNF translation here (case-insensitive keywords reserved against NAME "
                                 "by Lark's contextual lexer have no direct EBNF equivalent)")
        print_table(kind, len(seqs), n_tok, skipped, results, notes)
        report["grammars"][kind] = {"documents": len(seqs), "tokens": n_tok, "skipped": skipped,
                                    "results": results, "notes": notes}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
