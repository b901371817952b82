"""Decode-step time of many rows after one long prompt: gad's sessions against ``transformers``' own
``DynamicCache`` loop, bundled model.

    python benchmarks/bench_kvcache.py [--prompt-file ../shared/data/gad-bench/SLIA/firstname_small.prompt.txt]
                                       [--batch 1 8 16] [--steps 24] [--runs 3]

For each batch size ``B`` three loops feed ``--steps`` tokens to ``B`` rows that share the prompt (the
prompt pass is excluded; each figure is the median over ``--runs`` of the mean seconds per step):
  * ``hf``: ``DynamicCache`` filled by the prompt pass, ``batch_repeat_interleave(B)``, then one
    ``model(...)`` call per step (``torch.cat`` of the whole cache per step and layer; every row holds
    its own copy of the prompt's keys/values);
  * ``gad-grow``: :class:`gad.hf.HFSession` without the shared prefix (growing buffers only);
  * ``gad``: :class:`gad.hf.HFSession` as ``gad.sample`` uses it (growing buffers, the prompt's
    keys/values stored once and read once per step for all rows).
gad's steps include ``logprobs()`` (float64 log-softmax over the vocabulary, copied to numpy), which
the ``hf`` loop does not do.  Prints one JSON object per batch size, with ``hf / gad`` ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench_threads import step_seconds  # one timed decoding loop for both benchmarks

import gad

ROOT = Path(__file__).resolve().parents[1]
PROMPT_FILE = ROOT.parent / "shared" / "data" / "gad-bench" / "SLIA" / "firstname_small.prompt.txt"


def _hf_loop(lm, prompt: list[int], batch: int, steps: int) -> float:
    import torch
    from transformers import DynamicCache

    cache = DynamicCache(config=lm.model.config)
    ids = torch.tensor([prompt], dtype=torch.long, device=lm.device)
    kw = {lm._cache_kw: cache, "use_cache": True, "logits_to_keep": 1}
    with torch.inference_mode():
        lm.model(input_ids=ids, **kw)
        if batch > 1:
            cache.batch_repeat_interleave(batch)
        tok = torch.full((batch, 1), 28, dtype=torch.long, device=lm.device)
        t0 = time.perf_counter()
        for _ in range(steps):
            lm.model(input_ids=tok, **kw)
    return (time.perf_counter() - t0) / steps


def _gad_loop(lm, prompt: list[int], batch: int, steps: int, shared: bool) -> float:
    saved = lm.shared_prefix
    lm.shared_prefix = shared and saved
    try:
        return step_seconds(lm, prompt, batch, steps)
    finally:
        lm.shared_prefix = saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model directory or .gguf (default: the bundled SmolLM2)")
    ap.add_argument("--prompt-file", default=str(PROMPT_FILE))
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 16])
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    lm = gad.load_model(args.model)
    prompt = lm.encode_prompt(Path(args.prompt_file).read_text(encoding="utf-8"))
    lm.session(prompt, batch=1)  # prompt pass stored once (excluded from every figure)
    for b in args.batch:
        runs: dict[str, list[float]] = {"hf": [], "gad-grow": [], "gad": []}
        for _ in range(args.runs):
            runs["hf"].append(_hf_loop(lm, prompt, b, args.steps))
            runs["gad-grow"].append(_gad_loop(lm, prompt, b, args.steps, shared=False))
            runs["gad"].append(_gad_loop(lm, prompt, b, args.steps, shared=True))
        med = {k: statistics.median(v) for k, v in runs.items()}
        print(json.dumps({"bench": "decode_step", "prompt_tokens": len(prompt), "batch": b,
                          "shared_prefix_enabled": lm.shared_prefix,
                          **{f"{k}_s_per_step": round(v, 4) for k, v in med.items()},
                          "hf_over_gad": round(med["hf"] / med["gad"], 2),
                          "hf_over_gad_grow": round(med["hf"] / med["gad-grow"], 2)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
