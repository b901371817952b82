"""Generate a JSON record with the bundled SmolLM2 model under grammars/json.lark (GCD).

    python examples/json_generation.py [-n 2] [--max-new-tokens 128] [--seed 0] [--model PATH]

Every finished sample is grammatical JSON; the script checks it with ``json.loads`` and pretty-prints it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gad

ROOT = Path(__file__).resolve().parents[1]
PROMPT = ("Write a JSON object describing a fictional person, with the keys \"name\" (a string), "
          "\"age\" (a number) and \"hobbies\" (a list of strings). Reply with the JSON only.")


def main(argv: list[str] | None = None) -> int:
    """Sample ``-n`` JSON records and print them; returns 1 if a finished sample is not valid JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("-n", type=int, default=2, help="number of samples")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="token budget per sample")
    ap.add_argument("--seed", type=int, default=0, help="random seed")
    ap.add_argument("--model", default=None, help="local HF model directory (None: the bundled SmolLM2-135M-Instruct)")
    args = ap.parse_args(argv)

    lm = gad.load_model(args.model)
    samples = gad.sample(lm, "json", PROMPT, n=args.n, seed=args.seed,
                         max_new_tokens=args.max_new_tokens, progress=True)
    bad = 0
    for i, s in enumerate(samples):
        print(f"--- sample {i}: finished={s.finished} logprob={s.logprob:.2f} nats, {len(s.token_ids)} tokens")
        if not s.finished:
            print(s.text)
            print("(token budget ran out: a valid JSON prefix, not a whole document)")
            continue
        try:
            print(json.dumps(json.loads(s.text), indent=2, ensure_ascii=False))
            print("valid JSON")
        except json.JSONDecodeError as exc:  # would be a grammar/matcher bug
            bad += 1
            print(s.text)
            print(f"INVALID JSON: {exc}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
