"""Throughput of gad inside vLLM against vLLM's own structured outputs (xgrammar) and unconstrained vLLM.

Runs in the vLLM venv (``scripts/vllm_env.sh``)::

    $(bash scripts/vllm_env.sh) benchmarks/bench_vllm.py [--batch 1 8 32] [--max-tokens 64] [--reps 2]
        [--grammar json] [--model DIR] [--json OUT]

One engine serves every configuration (gad's plug-in is loaded through its entry point and touches only
the requests that carry gad arguments):

* ``unconstrained`` — plain sampling;
* ``xgrammar`` — ``StructuredOutputsParams(grammar=<the same Lark text>)`` (vLLM's default backend);
* ``gad-gcd`` / ``gad-asap`` — ``extra_args={"gad": {"grammar": ..., "method": ...}}``.

Each batch size ``B`` sends ``B`` copies of the same chat prompt (temperature 1; per-request seeds, the
same for every configuration, new ones each repetition) in one ``LLM.generate`` call, after a warm-up
call per configuration (grammar compilation excluded); the configurations take turns in a rotated order
so that load changes on a shared machine hit them alike; tokens/s = generated tokens / wall seconds,
best of ``--reps``.  Different
configurations generate different texts, so tokens per request are reported too.  For gad, the
plug-in's own seconds (matcher sync, masks, ASAp, fill; from ``GAD_VLLM_PROFILE``) are reported per
generated token and as a share of the wall time.  Prints one JSON object per measurement, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Write a JSON object describing a person, with a name, an age and a list of hobbies."


def default_model() -> str:
    root = Path(os.environ.get("GAD_CACHE_DIR") or Path.home() / ".cache" / "gad") / "models"
    found = sorted(root.glob("SmolLM2-135M-Instruct*/config.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        sys.exit(f"no converted SmolLM2 under {root}: run `python -c 'import gad; gad.load_model()'` once")
    return str(found[-1].parent)


def read_profile(path: str) -> dict[str, float]:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", default=None, help="HF model directory (default: the converted bundled SmolLM2)")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32], help="batch sizes (requests per call)")
    ap.add_argument("--max-tokens", type=int, default=64, help="token budget per request")
    ap.add_argument("--reps", type=int, default=2, help="timed calls per configuration and batch (best kept)")
    ap.add_argument("--grammar", default="json", help="a grammar shipped with gad (gad/grammar/builtin/NAME.lark)")
    ap.add_argument("--configs", nargs="+", default=["unconstrained", "xgrammar", "gad-gcd", "gad-asap"],
                    help="configurations to run")
    ap.add_argument("--json", default=None, help="also write the measurements to this file")
    args = ap.parse_args()

    profile = os.path.join(tempfile.mkdtemp(prefix="gad-bench-vllm-"), "profile.json")
    os.environ["GAD_VLLM_PROFILE"] = profile  # read by the plug-in in the engine process
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from gad.grammar import BUILTIN_DIR

    lark_text = (BUILTIN_DIR / f"{args.grammar}.lark").read_text()
    t0 = time.perf_counter()
    llm = LLM(model=args.model or default_model(), dtype="float32", max_model_len=1024, enforce_eager=True,
              max_num_seqs=max(args.batch), seed=0)
    start_s = time.perf_counter() - t0
    tok = llm.get_tokenizer()
    prompt = {"prompt_token_ids": tok.apply_chat_template([{"role": "user", "content": PROMPT}], tokenize=True,
                                                          add_generation_prompt=True, return_dict=False)}

    def params(config: str, seed: int) -> Any:
        base = dict(temperature=1.0, seed=seed, max_tokens=args.max_tokens)
        if config == "xgrammar":
            return SamplingParams(structured_outputs=StructuredOutputsParams(grammar=lark_text), **base)
        if config.startswith("gad-"):
            return SamplingParams(extra_args={"gad": {"grammar": args.grammar, "method": config[4:]}}, **base)
        return SamplingParams(**base)

    rows = []
    for b in args.batch:
        failed: set[str] = set()
        for config in args.configs:  # warm-up: grammars compiled (seeds not used when timing)
            try:
                llm.generate([prompt] * b, [params(config, 10_000 + s) for s in range(b)], use_tqdm=False)
            except Exception as exc:  # noqa: BLE001 - a peer that cannot take the grammar is reported
                failed.add(config)
                rows.append({"config": config, "batch": b, "error": f"{type(exc).__name__}: {exc}"[:300]})
                print(json.dumps(rows[-1]), flush=True)
        best: dict[str, dict[str, Any]] = {}
        live = [c for c in args.configs if c not in failed]
        for rep in range(args.reps):
            # the configurations take turns, in a rotated order each repetition, so that a change in the
            # machine's load hits them alike; every repetition uses new seeds (new texts: masks of new
            # grammar states are computed, not replayed from the warm-up's cache)
            order = live[rep % len(live):] + live[:rep % len(live)] if live else []
            for config in order:
                ps = [params(config, 1000 * (rep + 1) + s) for s in range(b)]
                before = read_profile(profile)
                t = time.perf_counter()
                outs = llm.generate([prompt] * b, ps, use_tqdm=False)
                wall = time.perf_counter() - t
                after = read_profile(profile)
                n_tok = sum(len(o.outputs[0].token_ids) for o in outs)
                parts = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in ("sync_s", "mask_s", "asap_s", "fill_s")}
                rec = {"config": config, "batch": b, "tokens": n_tok, "tokens_per_request": n_tok / b,
                       "wall_s": wall, "tokens_per_s": n_tok / wall,
                       "finished": sum(o.outputs[0].finish_reason == "stop" for o in outs)}
                if config.startswith("gad-"):
                    plug = sum(parts.values())
                    rec.update(plugin_s=plug, plugin_share=plug / wall, plugin_us_per_token=1e6 * plug / max(n_tok, 1),
                               plugin_breakdown_s=parts)
                if config not in best or rec["tokens_per_s"] > best[config]["tokens_per_s"]:
                    best[config] = rec
        for config in live:
            rows.append(best[config])
            print(json.dumps(best[config]), flush=True)
    # the table: tokens/s and the ratio against xgrammar and unconstrained at the same batch size
    by = {(r["config"], r["batch"]): r for r in rows if "error" not in r}
    print(f"\nengine start {start_s:.0f} s; grammar {args.grammar}; max_tokens {args.max_tokens}; best of {args.reps}")
    print(f"{'config':<14}{'batch':>6}{'tok/s':>9}{'tok/req':>9}{'vs xgr':>8}{'vs free':>8}{'plug-in share':>15}")
    for r in rows:
        if "error" in r:
            print(f"{r['config']:<14}{r['batch']:>6}  error: {r['error'][:80]}")
            continue
        x, u = by.get(("xgrammar", r["batch"])), by.get(("unconstrained", r["batch"]))
        vx = f"{r['tokens_per_s'] / x['tokens_per_s']:.2f}" if x else "-"
        vu = f"{r['tokens_per_s'] / u['tokens_per_s']:.2f}" if u else "-"
        share = f"{100 * r['plugin_share']:.0f} %" if "plugin_share" in r else ""
        print(f"{r['config']:<14}{r['batch']:>6}{r['tokens_per_s']:>9.1f}{r['tokens_per_request']:>9.1f}"
              f"{vx:>8}{vu:>8}{share:>15}")
    if args.json:
        Path(args.json).write_text(json.dumps({"engine_start_s": start_s, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
