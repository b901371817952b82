"""GCD sampling speed (tokens/s) against unconstrained ``model.generate`` on the same model and prompt.

    python benchmarks/bench_generate.py [--grammar json] [--max-new-tokens 64] [--runs 3]

Three figures, each the median over ``--runs`` after one warm-up run (grammar compiled beforehand):
  * ``generate``: unconstrained HF sampling (``do_sample=True``, temperature 1, no top-k/top-p,
    ``min_new_tokens`` = ``max_new_tokens`` so that every run decodes the same number of tokens);
  * ``gad.sample``: GCD with gad's own KV-cache loop (tokens generated, EOS included);
  * ``generate+GrammarLogitsProcessor``: HF sampling constrained by gad's logits processor.
Prints each in tokens/s and the ratios to ``generate`` (goal for gad.sample: >= 0.9).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gad

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Write a JSON object describing a fictional city: its name, population and three landmarks."


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grammar", default="json")
    ap.add_argument("--model", default=None)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    lm = gad.load_model(args.model)
    compiled = gad.compile(gad.Grammar.from_name_or_file(args.grammar), lm.vocab)
    ids = torch.tensor([lm.encode_prompt(args.prompt)], device=lm.device)
    budget = args.max_new_tokens

    def run_generate(processor: bool, seed: int) -> int:
        torch.manual_seed(seed)
        kw = {"logits_processor": [gad.GrammarLogitsProcessor(compiled)]} if processor else {
            "min_new_tokens": budget}
        out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=0, top_p=1.0,
                                temperature=1.0, max_new_tokens=budget, pad_token_id=lm.pad_id, **kw)
        return int(out.shape[1] - ids.shape[1])

    def run_gad(seed: int) -> int:
        s = gad.sample(lm, compiled, args.prompt, n=1, seed=seed, max_new_tokens=budget)[0]
        return len(s.token_ids) + int(s.finished)

    results = {}
    for name, fn in [("generate", lambda s: run_generate(False, s)), ("gad.sample (GCD)", run_gad),
                     ("generate+GrammarLogitsProcessor", lambda s: run_generate(True, s))]:
        fn(0)  # warm-up
        rates = []
        for r in range(args.runs):
            t0 = time.perf_counter()
            n_tok = fn(r + 1)
            rates.append(n_tok / (time.perf_counter() - t0))
        results[name] = statistics.median(rates)
    base = results["generate"]
    print(f"model {lm.name} on {lm.device}, grammar {Path(args.grammar).name}, budget {budget} tokens, "
          f"median of {args.runs} runs, torch threads {torch.get_num_threads()}")
    print(f"{'method':34} {'tokens/s':>9} {'ratio':>6}")
    for name, rate in results.items():
        print(f"{name:34} {rate:9.1f} {rate / base:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
