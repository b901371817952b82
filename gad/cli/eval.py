"""``gad eval``: tasks × methods × N samples (see :mod:`gad.eval.harness`)."""

from __future__ import annotations

import argparse
import json

from gad.cli import args as types
from gad.eval.harness import SPEC_DEFAULTS, method_names
from gad.eval.harness import run as run_eval
from gad.eval.tasks import task_names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``gad eval`` options to ``parser``."""
    parser.add_argument("--task", nargs="+", required=True, metavar="NAME",
                        help=f"tasks to run; known: {', '.join(task_names())}")
    parser.add_argument("--method", nargs="+", default=["gcd", "asap"], metavar="METHOD",
                        help=f"sampling methods (default gcd asap); known: {', '.join(method_names())}")
    parser.add_argument("-n", type=types.positive_int, default=100, help="samples per task and method (default 100)")
    parser.add_argument("--out", default="gad-eval", help="output folder (default gad-eval)")
    parser.add_argument("--model", default="toy",
                        help="'toy' (char-level toy model; the default), 'bundled' (SmolLM2-135M-Instruct) "
                             "or a local model path")
    parser.add_argument("--seed", type=types.seed, default=0, help="random seed (default 0)")
    parser.add_argument("--batch-size", type=types.positive_int, default=None)
    parser.add_argument("--max-new-tokens", type=types.positive_int, default=None, help="overrides each task's budget")
    parser.add_argument("--window", type=types.positive_int, default=500, help="sliding window of the open-task KL")
    parser.add_argument("--exact-max-len", type=types.positive_int, default=None, metavar="T",
                        help="enumeration bound (tokens) of Q* on exact tasks; overrides each task's own")
    parser.add_argument("--no-progress", action="store_true")

    spec = parser.add_argument_group("speculative methods (spec-gcd, spec-asap, spec-exact)")
    spec.add_argument("--drafter", type=types.drafter, default=SPEC_DEFAULTS["drafter"], metavar="D",
                      help="forced, ngram[:N], self[:L], self-greedy[:L], a draft model path, or a+b "
                           f"(default {SPEC_DEFAULTS['drafter']})")
    spec.add_argument("--accept", type=types.accept_rule, default=SPEC_DEFAULTS["accept"], metavar="RULE",
                      help="lossless | greedy | additive:δ | multiplicative:α | topm:m | typical:ε,δ "
                           f"(default {SPEC_DEFAULTS['accept']})")
    spec.add_argument("--draft-k", type=types.positive_int, default=SPEC_DEFAULTS["draft_k"], metavar="K",
                      help=f"tokens drafted per step (default {SPEC_DEFAULTS['draft_k']})")


def run(args: argparse.Namespace) -> int:
    """Run ``gad eval`` with parsed ``args``; prints a one-line JSON summary per (task, method) — KL/TV,
    and for the speculative methods acceptance rate, mean accepted length without / with the bonus token,
    target passes per token and certificate coverage — then a table of the same; returns 0."""
    spec = {"drafter": getattr(args, "drafter", SPEC_DEFAULTS["drafter"]),
            "accept": getattr(args, "accept", SPEC_DEFAULTS["accept"]),
            "draft_k": getattr(args, "draft_k", SPEC_DEFAULTS["draft_k"])}
    summary = run_eval(args.task, args.method, args.n, model=args.model, out_dir=args.out, seed=args.seed,
                       batch_size=args.batch_size, max_new_tokens=args.max_new_tokens, window=args.window,
                       progress=not args.no_progress, speculative=spec,
                       exact_max_len=getattr(args, "exact_max_len", None))
    print(format_summary(summary))
    print(f"wrote {args.out}/samples.jsonl, summary.json, summary.csv, plots/")
    return 0


_LINE_KEYS = ("kl_final", "tv_final", "kl_snis", "ess", "model_rows", "model_positions", "prompt_passes", "seconds",
              "share_finished", "valid_rate", "acceptance_rate", "mean_accepted",
              "mean_accepted_with_bonus", "passes_per_token", "certified_share", "drafter", "rule", "draft_k")
_TABLE = (("kl_final", "KL", ".4f"), ("tv_final", "TV", ".3f"), ("kl_snis", "KL(IS)", ".4f"), ("ess", "ESS", ".1f"),
          ("model_rows", "rows", "d"), ("share_finished", "fin", ".2f"),
          ("acceptance_rate", "acc.rate", ".3f"), ("mean_accepted", "len", ".2f"),
          ("mean_accepted_with_bonus", "len+bonus", ".2f"), ("passes_per_token", "pass/tok", ".3f"),
          ("certified_share", "cert|acc", ".3f"), ("seconds", "s", ".1f"))


def format_summary(summary: dict) -> str:
    """One JSON line per (task, method) with the scalar results, then an aligned table of the same.

    Acceptance columns are blank for non-speculative methods; ``cert|acc`` (share of accepted draft
    positions whose KL(p̃‖q) is below the rule's certificate) is blank under the lossless rule, which has
    no certificate.  ``len`` counts accepted draft tokens per verification step; ``len+bonus`` adds the
    target's own token that ends the step.
    """
    lines = []
    rows = [["task", "method", *(h for _, h, _ in _TABLE)]]
    for tname, t in summary["tasks"].items():
        for m, info in t["methods"].items():
            line = {"task": tname, "method": m}
            line.update({k: info[k] for k in _LINE_KEYS if k in info})
            lines.append(json.dumps(line))
            rows.append([tname, m, *("" if info.get(k) is None else format(info[k], f) for k, _, f in _TABLE)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    table.insert(1, "-" * len(table[0]))
    return "\n".join(lines + [""] + table)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m gad.eval.cli``)."""
    p = argparse.ArgumentParser(prog="gad eval", description=__doc__)
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
