"""Speculative decoding benchmark: target passes per token and tokens/s vs non-speculative GCD / ASAp.

Runs the bundled SmolLM2 (or ``--model PATH``) on the JSON prompt set (``gad/speculative/prompts``),
device-agnostic (CUDA when available, else CPU).  For every drafter × rule it reports:

* target forward passes per generated token (EOS counted as a token; the prompt pass included);
* tokens/s (wall clock, masks and drafting included) and the speed-up against non-speculative GCD;
* acceptance: accepted / drafted draft tokens.

Non-speculative baselines (``gad.sample`` with ``method=gcd`` / ``asap``) do one target pass per token
(plus the prompt), by construction.  GCD runs both first and last (``gcd`` and ``gcd (last)``): the
first run of a process pays warm-up costs (allocator, kernels, mask caches) that later runs do not, so
speed-ups are printed against both; trust a speed-up only if it holds against both orders.  Goal on JSON: <= 0.5 passes/token and >= 1.5x tokens/s vs GCD.

Schema-constrained JSON (``--schema``): the grammar is ``gad.Grammar.from_json_schema`` of a record
schema shipped here (``user``: five required keys, a bounded string, an integer range, an enum, a
boolean; ``order``: a nested object and a bounded array of objects with a pattern; ``all``: both) or of
a JSON Schema file (then ``--schema-prompt`` gives the instruction), with the prompts written here.
Keys, ``":`` / ``,"`` and the rest of an enum or ``true`` / ``false`` are forced there, and the
forced-string drafter (``forced``: :meth:`gad.engine.matcher.Matcher.forced_tokens`) drafts them for
free.  Goal (issue 11): <= 0.6 target passes per generated token with the forced-string drafter.

Usage::

    python benchmarks/bench_speculative.py --prompts 3 --max-new-tokens 48 \
        --drafters forced+ngram self:8 forced+self-greedy:8 --rules lossless greedy --tree 2,3 --out bench.json
    python benchmarks/bench_speculative.py --schema all --prompts 2 --max-new-tokens 96 \
        --drafters forced --rules lossless greedy --tree '' --no-asap --draft-k 8
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

# record schemas of the kind MaskBench / JSONSchemaBench hold (required keys, bounded strings, integer
# ranges, enums, booleans, nested objects, bounded arrays, a pattern), each with instructions
SCHEMAS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "user": ({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 24},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "role": {"enum": ["admin", "editor", "viewer"]},
            "active": {"type": "boolean"},
            "team": {"type": "string", "maxLength": 24},
        },
        "required": ["name", "age", "role", "active", "team"],
        "additionalProperties": False,
    }, [
        "Return a JSON object for a user of a web app: name, age, role (admin, editor or viewer), "
        "whether the account is active, and team. Output only JSON.",
        "Describe a new employee as JSON with the fields name, age, role, active and team.",
        "Give me one example user record in JSON (name, age, role, active, team).",
    ]),
    "order": ({
        "type": "object",
        "properties": {
            "order_id": {"type": "integer", "minimum": 1, "maximum": 99999},
            "status": {"enum": ["pending", "shipped", "delivered", "cancelled"]},
            "express": {"type": "boolean"},
            "customer": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 30}, "vip": {"type": "boolean"}},
                "required": ["name", "vip"],
                "additionalProperties": False,
            },
            "items": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
                                   "qty": {"type": "integer", "minimum": 1, "maximum": 99}},
                    "required": ["sku", "qty"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["order_id", "status", "express", "customer", "items"],
        "additionalProperties": False,
    }, [
        "Return a JSON object for an online shop order: order id, status, express shipping or not, "
        "the customer (name, vip) and the items (sku like ABC-123, qty). Output only JSON.",
        "Write a sample order as JSON with order_id, status, express, customer and items.",
        "Give me one example e-commerce order record in JSON.",
    ]),
}


def _run(fn: Any) -> tuple[list[Any], float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="model path (default: bundled SmolLM2-135M-Instruct)")
    ap.add_argument("--prompts", type=int, default=3, help="prompts used (per schema with --schema; default 3)")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--draft-k", type=int, default=4)
    ap.add_argument("--drafters", nargs="+", default=["forced+ngram", "self:8", "forced+self-greedy:8"])
    ap.add_argument("--rules", nargs="+", default=["lossless", "greedy"])
    ap.add_argument("--tree", default="2,3", help="m,d for a greedy-tree run per drafter ('' to skip)")
    ap.add_argument("--no-asap", action="store_true", help="skip the ASAp baseline")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schema", default=None,
                    help="schema-constrained JSON: user | order | all (shipped here) or a JSON Schema file")
    ap.add_argument("--schema-prompt", default=None, help="instruction used with a --schema FILE")
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)

    import gad
    from gad.eval.acceptance import load_prompts
    from gad.speculative import speculative_sample

    lm = gad.load_model(args.model)
    # (compiled grammar, prompt ids) pairs: each prompt runs under its own grammar
    jobs: list[tuple[Any, list[int]]] = []
    if args.schema is None:
        compiled = gad.compile(gad.Grammar.builtin("json"), lm.vocab)
        jobs = [(compiled, lm.encode_prompt(p["prompt"])) for p in load_prompts("json")[: args.prompts]]
    else:
        if args.schema in SCHEMAS or args.schema == "all":
            chosen = [SCHEMAS[k] for k in (SCHEMAS if args.schema == "all" else [args.schema])]
        elif Path(args.schema).is_file():
            if not args.schema_prompt:
                ap.error("--schema FILE needs --schema-prompt TEXT")
            chosen = [(json.loads(Path(args.schema).read_text(encoding="utf-8")), [args.schema_prompt])]
        else:
            ap.error(f"--schema: {args.schema!r} is neither {', '.join(SCHEMAS)}, all, nor a file")
        for schema, texts in chosen:
            t0 = time.perf_counter()
            compiled = gad.compile(gad.Grammar.from_json_schema(schema), lm.vocab)
            print(f"  compiled a schema grammar in {time.perf_counter() - t0:.1f} s", flush=True)
            jobs += [(compiled, lm.encode_prompt(t)) for t in texts[: args.prompts]]
    goal = 0.6 if args.schema else 0.5

    rows: list[dict[str, Any]] = []

    def add(name: str, rule: str, samples: list[Any], secs: float) -> None:
        toks = sum(len(s.token_ids) + int(s.finished) for s in samples)
        passes = sum(s.stats.get("target_passes", len(s.token_ids) + int(s.finished) + 1) for s in samples)
        drafted = sum(s.stats.get("drafted", 0) for s in samples)
        acc = sum(s.stats.get("accepted", 0) for s in samples)
        rows.append(dict(method=name, rule=rule, tokens=toks, seconds=secs, tok_per_s=toks / secs,
                         passes_per_token=passes / max(1, toks), drafted=drafted, accepted=acc,
                         accept_rate=acc / drafted if drafted else float("nan"),
                         finished=sum(s.finished for s in samples)))
        r = rows[-1]
        print(f"  {name:28s} {rule:10s} {r['tok_per_s']:7.2f} tok/s  {r['passes_per_token']:.3f} passes/tok  "
              f"acc {acc}/{drafted}", flush=True)

    baselines = ["gcd"] + ([] if args.no_asap else ["asap"])
    for method in baselines:
        out, secs = _run(lambda method=method: [s for cg, p in jobs for s in gad.sample(
            lm, None, p, n=1, method=method, compiled=cg, seed=args.seed,
            max_new_tokens=args.max_new_tokens)])
        add(method, "-", out, secs)
    for drafter in args.drafters:
        for rule in args.rules:
            out, secs = _run(lambda drafter=drafter, rule=rule: [s for cg, p in jobs for s in speculative_sample(
                lm, cg, p, n=1, seed=args.seed, max_new_tokens=args.max_new_tokens, drafter=drafter,
                draft_k=args.draft_k, accept=rule)])
            add(f"spec {drafter}", rule, out, secs)
        if args.tree:
            out, secs = _run(lambda drafter=drafter: [s for cg, p in jobs for s in speculative_sample(
                lm, cg, p, n=1, max_new_tokens=args.max_new_tokens, drafter=drafter,
                tree=tuple(int(x) for x in args.tree.split(",")))])
            add(f"tree{args.tree} {drafter}", "greedy", out, secs)

    out, secs = _run(lambda: [s for cg, p in jobs for s in gad.sample(
        lm, None, p, n=1, method="gcd", compiled=cg, seed=args.seed, max_new_tokens=args.max_new_tokens)])
    add("gcd (last)", "-", out, secs)

    base_first = rows[0]["tok_per_s"]
    base_last = rows[-1]["tok_per_s"]
    print()
    print(f"{'method':30s} {'rule':10s} {'tok/s':>8s} {'vs first':>9s} {'vs last':>8s} {'pass/tok':>9s} "
          f"{'accept':>8s}")
    for r in rows:
        r["speedup_vs_gcd"] = r["tok_per_s"] / base_first
        r["speedup_vs_gcd_last"] = r["tok_per_s"] / base_last
        worst = min(r["speedup_vs_gcd"], r["speedup_vs_gcd_last"])
        ok = " *" if r["passes_per_token"] <= goal and (args.schema or worst >= 1.5) else ""
        print(f"{r['method']:30s} {r['rule']:10s} {r['tok_per_s']:8.2f} {r['speedup_vs_gcd']:8.2f}x "
              f"{r['speedup_vs_gcd_last']:7.2f}x {r['passes_per_token']:9.3f} {r['accept_rate']:8.3f}{ok}")
    if args.schema:
        print("(* meets the schema goal: <= 0.6 target passes/token; GCD/ASAp passes assume one pass per token + "
              "the prompt)")
    else:
        print("(* meets the goal: <= 0.5 target passes/token and >= 1.5x tokens/s vs GCD run first and last; "
              "GCD/ASAp passes assume one pass per token + the prompt)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
