"""Acceptance statistics of grammar-faithful speculative decoding over the shipped domain prompt sets.

For every domain's prompts (``gad/eval/prompt_sets/<domain>.jsonl``) the target decodes one sample with
a drafter and an acceptance rule, logging one :class:`gad.speculative.stats.AcceptanceRecord` per
verified node (tree study, arXiv 2604.14682).  JSON and SQL prompts use the shipped grammar their
prompt names (``json``, ``sql``); code, math, logic and chat prompts use the shipped ``text`` grammar.
``gad accept-stats`` (:mod:`gad.cli.accept_stats`) is the command line.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gad.engine.compiler import compile as compile_grammar
from gad.errors import InvalidArgumentError
from gad.grammar import Grammar
from gad.phi.registry import make_estimator
from gad.speculative.decode import speculative_sample
from gad.speculative.drafters import make_drafter
from gad.speculative.stats import AcceptanceRecord

DOMAINS = ("code", "math", "logic", "chat", "json", "sql")
PROMPTS_DIR = Path(__file__).resolve().parent / "prompt_sets"
TEXT_GRAMMAR = "text"
_STEP_STRIDE = 1_000_000  # sample i of a run numbers its steps i * _STEP_STRIDE + step


def load_prompts(domain: str | None = None) -> list[dict]:
    """Load the shipped domain prompt sets (``gad/eval/prompt_sets/<domain>.jsonl``).

    Args:
        domain: one of :data:`DOMAINS`, or None for all of them (in :data:`DOMAINS` order).
    Returns:
        list of ``{"domain": str, "prompt": str, "grammar": None | shipped grammar name}`` dicts.
    Raises:
        InvalidArgumentError: unknown ``domain``; FileNotFoundError if the package data is missing.
    """
    if domain is not None and domain not in DOMAINS:
        raise InvalidArgumentError(f"domain: {domain!r} is not one of {', '.join(DOMAINS)}")
    out: list[dict] = []
    for d in (DOMAINS if domain is None else (domain,)):
        with open(PROMPTS_DIR / f"{d}.jsonl", encoding="utf-8") as fh:
            out.extend(json.loads(line) for line in fh if line.strip())
    return out


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
        InvalidArgumentError: unknown domain / drafter / rule.
    """
    dr = make_drafter(drafter, lm, draft_k)
    cache = compile_cache if compile_cache is not None else {}
    records: list[AcceptanceRecord] = []
    totals: dict[str, Any] = {}
    idx = 0
    for d in domains:
        prompts = load_prompts(d)[:prompts_per_domain]
        tot: dict[str, Any] = dict(samples=0, finished=0, tokens=0, target_passes=0, drafted=0, accepted=0,
                                   seconds=0.0)
        for p in prompts:
            gname = p.get("grammar") or TEXT_GRAMMAR
            if gname not in cache:
                cache[gname] = compile_grammar(Grammar.builtin(gname), lm.vocab)
            compiled = cache[gname]
            tot["grammar"] = gname
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
