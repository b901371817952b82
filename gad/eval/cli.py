"""``gad eval``: tasks × methods × N samples (see :mod:`gad.eval.harness`)."""

from __future__ import annotations

import argparse
import json

from .harness import method_names
from .harness import run as run_eval
from .tasks import task_names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``gad eval`` options to ``parser``."""
    parser.add_argument("--task", nargs="+", required=True, metavar="NAME",
                        help=f"tasks to run; known: {', '.join(task_names())}")
    parser.add_argument("--method", nargs="+", default=["gcd", "asap"], metavar="METHOD",
                        help=f"sampling methods (default gcd asap); known: {', '.join(method_names())}")
    parser.add_argument("-n", type=int, default=100, help="samples per task and method (default 100)")
    parser.add_argument("--out", default="gad-eval", help="output folder (default gad-eval)")
    parser.add_argument("--model", default="toy",
                        help="'toy' (char-level toy model), 'bundled' (SmolLM2) or a model path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=None, help="overrides each task's budget")
    parser.add_argument("--window", type=int, default=500, help="sliding window of the open-task KL")
    parser.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> int:
    """Run ``gad eval`` with parsed ``args``; prints a one-line summary per (task, method); returns 0."""
    summary = run_eval(args.task, args.method, args.n, model=args.model, out_dir=args.out, seed=args.seed,
                       batch_size=args.batch_size, max_new_tokens=args.max_new_tokens, window=args.window,
                       progress=not args.no_progress)
    for tname, t in summary["tasks"].items():
        for m, info in t["methods"].items():
            print(json.dumps({"task": tname, "method": m, "kl_final": info["kl_final"],
                              "share_finished": info["share_finished"], "valid_rate": info["valid_rate"]}))
    print(f"wrote {args.out}/samples.jsonl, summary.json, summary.csv, plots/")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m gad.eval.cli``)."""
    p = argparse.ArgumentParser(prog="gad eval", description=__doc__)
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
