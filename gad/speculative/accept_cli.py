"""``gad accept-stats``: per-domain acceptance statistics of speculative decoding (BRIEF §4).

For every domain's shipped prompts (``gad/speculative/prompts/<domain>.jsonl``) the target decodes one
speculative sample per prompt with ``log=True``; the acceptance records (one per verified draft position
plus one per target-emitted token) are summarised per domain (:func:`gad.speculative.stats.summarize`)::

    gad accept-stats --domain json sql chat --prompts-per-domain 3 --max-new-tokens 24 \\
        --drafter forced+ngram --accept lossless --out accept-stats

Grammars: JSON and SQL prompts use the grammar their prompt file names (``grammars/json.lark``,
``grammars/sql.lark``); code, math, logic and chat prompts use ``grammars/text.lark`` (any non-empty
text), so the mask only removes special tokens there and the statistics measure the drafter against the
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
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError
from ..fileio import atomic_write_with
from .stats import DOMAINS, AcceptanceRecord, format_table, load_prompts, summarize, write_plot, write_records

TEXT_GRAMMAR = "grammars/text.lark"
_STEP_STRIDE = 1_000_000  # sample i of a run numbers its steps i * _STEP_STRIDE + step
_REPO = Path(__file__).resolve().parents[2]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``gad accept-stats`` options to ``p``."""
    from ..cli import _accept, _drafter_type, _positive_int, _tree

    p.add_argument("--domain", nargs="+", choices=DOMAINS, default=list(DOMAINS), metavar="DOMAIN",
                   help=f"prompt domains (default all: {' '.join(DOMAINS)})")
    p.add_argument("--prompts-per-domain", type=_positive_int, default=3, metavar="N",
                   help="first N prompts of each domain (default 3)")
    p.add_argument("--drafter", type=_drafter_type, default="forced+ngram", metavar="D",
                   help="forced, ngram[:N], self[:L], self-greedy[:L], a draft model path, or a+b "
                        "(default forced+ngram)")
    p.add_argument("--accept", type=_accept, default="lossless", metavar="RULE",
                   help="lossless | greedy | additive:δ | multiplicative:α | topm:m | typical:ε,δ")
    p.add_argument("--draft-k", type=_positive_int, default=4, metavar="K", help="tokens drafted per step")
    p.add_argument("--tree", type=_tree, default=None, metavar="m,d", help="greedy tree drafting (rule greedy)")
    p.add_argument("--max-new-tokens", type=_positive_int, default=32, metavar="T", help="budget per sample")
    p.add_argument("--method", choices=("gcd", "asap", "onestep"), default="gcd",
                   help="Φ estimator of the verifier (default gcd: mask only)")
    p.add_argument("--model", default=None, metavar="PATH",
                   help="target model (default: bundled SmolLM2-135M-Instruct; 'toy': char-level toy)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="gad-accept-stats", metavar="DIR", help="output folder (created)")


def _grammar_path(name: str | None) -> Path:
    rel = Path(name or TEXT_GRAMMAR)
    for base in (_REPO, Path.cwd()):
        if (base / rel).is_file():
            return base / rel
    raise InvalidArgumentError(f"grammar file not found: {rel} (looked in {_REPO} and the current folder)")


def _clean(x: Any) -> Any:
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    return x


def collect(lm: Any, domains: Sequence[str], prompts_per_domain: int, *, drafter: Any = "forced+ngram",
            accept: str = "lossless", draft_k: int = 4, tree: tuple[int, int] | None = None,
            max_new_tokens: int = 32, method: str = "gcd", seed: int = 0,
            compile_cache: dict[str, Any] | None = None) -> tuple[list[AcceptanceRecord], dict[str, Any]]:
    """Decode one speculative sample per prompt of each domain; return the records and per-domain totals.

    Returns:
        ``(records, totals)`` with ``totals[domain]`` = ``samples``, ``finished``, ``tokens`` (EOS counted),
        ``target_passes``, ``drafted``, ``accepted``, ``seconds``, ``passes_per_token``, ``tokens_per_s``,
        ``grammar``.  Step ids are renumbered to be unique over the run.
    Raises:
        InvalidArgumentError: unknown domain / drafter / rule, a missing grammar file.
    """
    import gad

    from ..sampling import make_estimator
    from .decode import speculative_sample
    from .drafters import make_drafter

    dr = make_drafter(drafter, lm, draft_k)
    cache = compile_cache if compile_cache is not None else {}
    records: list[AcceptanceRecord] = []
    totals: dict[str, Any] = {}
    idx = 0
    for d in domains:
        prompts = load_prompts(d)[:prompts_per_domain]
        tot = dict(samples=0, finished=0, tokens=0, target_passes=0, drafted=0, accepted=0, seconds=0.0)
        for p in prompts:
            gpath = str(_grammar_path(p.get("grammar")))
            if gpath not in cache:
                cache[gpath] = gad.compile(gad.Grammar.from_file(gpath), lm.vocab)
            compiled = cache[gpath]
            tot["grammar"] = os.path.relpath(gpath, _REPO) if gpath.startswith(str(_REPO)) else gpath
            prompt_ids = lm.encode_prompt(p["prompt"])
            est = make_estimator(method, lm, compiled, prompt_ids, settings={"batch_size": 1})
            t0 = time.perf_counter()
            s = speculative_sample(lm, compiled, prompt_ids, n=1, seed=seed + idx, max_new_tokens=max_new_tokens,
                                   drafter=dr, draft_k=draft_k, tree=tree, accept=accept, estimator=est,
                                   log=True, domain=d)[0]
            tot["seconds"] += time.perf_counter() - t0
            records.extend(dataclasses.replace(r, step=idx * _STEP_STRIDE + r.step) for r in s.stats["log"])
            tot["samples"] += 1
            tot["finished"] += int(s.finished)
            for k in ("tokens", "target_passes", "drafted", "accepted"):
                tot[k] += int(s.stats[k])
            idx += 1
        tot["passes_per_token"] = tot["target_passes"] / tot["tokens"] if tot["tokens"] else None
        tot["tokens_per_s"] = tot["tokens"] / tot["seconds"] if tot["seconds"] > 0 else None
        totals[d] = tot
    return records, totals


def format_throughput(totals: dict[str, Any]) -> str:
    """Per-domain samples, finished share, tokens, target passes per token, draft acceptance and tokens/s."""
    head = ["domain", "samples", "finished", "tokens", "pass/tok", "accepted/drafted", "tok/s"]
    rows = [head]
    for d, t in totals.items():
        rows.append([d, str(t["samples"]), str(t["finished"]), str(t["tokens"]),
                     "—" if t["passes_per_token"] is None else f"{t['passes_per_token']:.3f}",
                     f"{t['accepted']}/{t['drafted']}",
                     "—" if t["tokens_per_s"] is None else f"{t['tokens_per_s']:.1f}"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines) + "\npass/tok: target forward passes (prompt pass included) per generated token (EOS counted)"


def _load_model(model: str | None) -> Any:
    if model == "toy":
        from ..eval.harness import toy_model

        return toy_model()
    import gad

    return gad.load_model(model)


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
