"""``gad accept-stats``: per-domain acceptance statistics of speculative decoding (BRIEF §4).

For every domain's shipped prompts (``gad/eval/prompt_sets/<domain>.jsonl``, :mod:`gad.eval.acceptance`) the target decodes one
speculative sample per prompt with ``log=True``; the acceptance records (one per verified draft position
plus one per target-emitted token) are summarised per domain (:func:`gad.speculative.stats.summarize`)::

    gad accept-stats --domain json sql chat --prompts-per-domain 3 --max-new-tokens 24 \\
        --drafter forced+ngram --accept lossless --out accept-stats

Grammars: JSON and SQL prompts use the shipped grammar their prompt names (``json``, ``sql``); code,
math, logic and chat prompts use the shipped ``text`` grammar (any non-empty text), so the mask only removes special tokens there and the statistics measure the drafter against the
model itself.  Written atomically under ``--out``: ``records.jsonl`` (the acceptance log, read back by
:func:`gad.speculative.stats.read_records`), ``summary.json`` (settings; per domain the
:class:`~gad.speculative.stats.AcceptanceSummary` fields plus target passes per token, tokens/s and the
share of samples finished) and ``acceptance.png`` (:func:`gad.speculative.stats.write_plot`).  The table
printed is :func:`gad.speculative.stats.format_table` followed by a throughput table.

``--model toy`` uses the harness's character-level toy model (fast; for tests).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gad.cli import args as types
from gad.errors import InvalidArgumentError
from gad.eval.acceptance import DOMAINS, collect, format_throughput
from gad.fileio import atomic_write_with
from gad.models.hf import load_model
from gad.speculative.stats import format_table, summarize, write_plot, write_records
from gad.testing.toys import toy_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``gad accept-stats`` options to ``p``."""

    p.add_argument("--domain", nargs="+", choices=DOMAINS, default=list(DOMAINS), metavar="DOMAIN",
                   help=f"prompt domains (default all: {' '.join(DOMAINS)})")
    p.add_argument("--prompts-per-domain", type=types.positive_int, default=3, metavar="N",
                   help="first N prompts of each domain (default 3)")
    p.add_argument("--drafter", type=types.drafter, default="forced+ngram", metavar="D",
                   help="forced, ngram[:N], self[:L], self-greedy[:L], a draft model path, or a+b "
                        "(default forced+ngram)")
    p.add_argument("--accept", type=types.accept_rule, default="lossless", metavar="RULE",
                   help="lossless | greedy | additive:δ | multiplicative:α | topm:m | typical:ε,δ")
    p.add_argument("--draft-k", type=types.positive_int, default=4, metavar="K", help="tokens drafted per step")
    p.add_argument("--tree", type=types.tree, default=None, metavar="m,d", help="greedy tree drafting (rule greedy)")
    p.add_argument("--max-new-tokens", type=types.positive_int, default=32, metavar="T", help="budget per sample")
    p.add_argument("--method", choices=("gcd", "asap", "onestep"), default="gcd",
                   help="Φ estimator of the verifier (default gcd: mask only)")
    p.add_argument("--model", default=None, metavar="PATH",
                   help="target model (default: bundled SmolLM2-135M-Instruct; 'toy': char-level toy)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="gad-accept-stats", metavar="DIR", help="output folder (created)")


def _clean(x: Any) -> Any:
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    return x


def _load_model(model: str | None) -> Any:
    if model == "toy":
        return toy_model()
    return load_model(model)


def run(args: argparse.Namespace) -> int:
    """Run ``gad accept-stats`` with parsed ``args``: print the tables, write the files; returns 0.

    Raises:
        InvalidArgumentError: ``--out`` cannot be created, ``--tree`` with a non-greedy rule, bad settings.
    """
    if args.tree is not None and args.accept not in ("greedy", "lossless"):
        raise InvalidArgumentError(f"--tree decodes greedily; --accept {args.accept} is not supported with it")
    accept = "greedy" if args.tree is not None else args.accept
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidArgumentError(f"--out: cannot create {out}: {exc.strerror}") from None
    lm = _load_model(args.model)
    records, totals = collect(lm, args.domain, args.prompts_per_domain, drafter=args.drafter, accept=accept,
                              draft_k=args.draft_k, tree=args.tree, max_new_tokens=args.max_new_tokens,
                              method=args.method, seed=args.seed)
    summ = summarize(records)
    settings = {"model": str(getattr(lm, "name", args.model)), "drafter": args.drafter, "accept": accept,
                "draft_k": None if args.tree else args.draft_k, "tree": list(args.tree) if args.tree else None,
                "max_new_tokens": args.max_new_tokens, "prompts_per_domain": args.prompts_per_domain,
                "method": args.method, "seed": args.seed}
    doc = {"settings": settings,
           "domains": {d: {**(_clean(dataclasses.asdict(summ[d])) if d in summ else {}), **_clean(totals[d])}
                       for d in args.domain}}
    atomic_write_with(out / "records.jsonl", lambda tmp: write_records(records, tmp))
    atomic_write_with(out / "summary.json", lambda tmp: Path(tmp).write_text(json.dumps(doc, indent=1), encoding="utf-8"))
    atomic_write_with(out / "acceptance.png", lambda tmp: write_plot(records, tmp))
    print(f"drafter {args.drafter}, rule {accept}, "
          + (f"tree {args.tree[0]},{args.tree[1]}" if args.tree else f"k={args.draft_k}")
          + f", Φ {args.method}, {args.prompts_per_domain} prompts/domain, {args.max_new_tokens} tokens, "
          f"model {settings['model']}")
    print(format_table(summ, max_depth=max(args.draft_k, args.tree[1] if args.tree else 0)))
    print()
    print(format_throughput(totals))
    print(f"wrote {out}/records.jsonl, summary.json, acceptance.png")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (``python -m gad.speculative.accept_cli``)."""
    p = argparse.ArgumentParser(prog="gad accept-stats", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
