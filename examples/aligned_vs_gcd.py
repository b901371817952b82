"""Grammar-aligned sampling vs masking (GCD) on a language small enough to know Q* exactly.

    python examples/aligned_vs_gcd.py [-n 100] [--plot aligned_vs_gcd.png] [--seed 0] [--model PATH]

Run time with the defaults: about 1.5 minutes on 2 CPU cores (bundled SmolLM2-135M-Instruct; 80 s
measured on 2026-12-01 on the project's 2-core machine while other jobs shared it, and 75 s in a rerun:
62 % of one core, 45 s of CPU time, the same figures).

The grammar is the GAD paper's example (Park et al., NeurIPS 2024, arXiv 2405.21047): ``00000`` or a
``1`` followed by four binary digits, 17 strings in all.  Because the language is finite, the
grammar-conditioned law ``Q*(w) = P(w | prompt) / Z`` (the model's own preference, restricted to the
grammar) is computed exactly by enumerating every tokenization (``gad.phi.exact``).  The script then

* computes GCD's law exactly on the same tree (GCD renormalises ``p · mask`` at every step, which is
  not ``Q*``: it over-weights strings whose first tokens the model likes even when it dislikes the rest);
* draws ``-n`` samples with GCD, with ASAp (which learns Φ and converges to ``Q*``) and with exact
  rejection sampling ``rs`` on the ASAp trie (exact ``Q*`` draws; when gad has it);
* prints the laws side by side, ``KL(empirical ‖ Q*)`` per method (nats) next to the floor an exact
  sampler would reach with ``-n`` samples, and saves a bar plot (``--plot``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

import gad
from gad.eval.metrics import empirical, kl_divergence, total_variation
from gad.models.hf import torch_threads
from gad.phi.exact import enumerate_language
from gad.sampling.methods import method_names

GRAMMAR = 'start: "00000" | /1[01]{4}/\n'
PROMPT = "Write a binary string of five digits (0 and 1 only). Answer with the string only."
MAX_LEN = 5  # every string has 5 characters, so at most 5 tokens: the enumeration is not truncated


def gcd_law(lm: Any, compiled: Any, prompt_ids: Sequence[int], max_len: int) -> dict[str, float]:
    """GCD's exact law over decoded strings: ``Π_i p(t_i|u_i) mask(u_i)[t_i] / Σ_t p(t|u_i) mask(u_i)[t]``.

    Walks the token tree of the grammar level by level (one batched ``lm.logprobs`` call per level;
    EOS counted as the last step).  Returns text → probability (sums to 1 when no sequence longer than
    ``max_len`` tokens has mass).
    """
    eos = np.asarray(compiled.vocab.eos_ids, dtype=np.int64)
    prompt = [int(t) for t in prompt_ids]
    law: dict[str, float] = {}
    frontier: list[tuple[list[int], Any, float]] = [([], compiled.matcher(), 1.0)]
    for depth in range(max_len + 1):
        if not frontier:
            break
        lp = np.asarray(lm.logprobs([prompt + pre for pre, _, _ in frontier]), dtype=np.float64)
        nxt: list[tuple[list[int], Any, float]] = []
        for row, (pre, m, prob) in enumerate(frontier):
            mask = np.asarray(m.mask(), dtype=bool)
            w = np.where(mask, np.exp(lp[row]), 0.0)
            z = float(w.sum())
            if z <= 0:
                continue
            e = float(w[eos].sum())
            if e > 0:
                text = compiled.vocab.decode(pre).decode("utf-8", errors="replace")
                law[text] = law.get(text, 0.0) + prob * e / z
            if depth == max_len:
                continue
            for t in np.flatnonzero(w > 0).tolist():
                if t in eos:
                    continue
                c = m.fork()
                c.accept_token(t)
                nxt.append((pre + [t], c, prob * float(w[t]) / z))
        frontier = nxt
    return law


def kl_floor(q: dict[str, float], n: int, seed: int, reps: int = 2000) -> float:
    """Mean ``KL(empirical ‖ Q*)`` of ``n`` exact draws from ``q`` (the sampling-noise floor, nats)."""
    keys = list(q)
    probs = np.array([q[k] for k in keys])
    probs = probs / probs.sum()
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, probs, size=reps)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = counts / n
        terms = np.where(counts > 0, f * np.log(f / probs), 0.0)
    return float(terms.sum(axis=1).mean())


def plot(path: str, q_star: dict[str, float], laws: dict[str, dict[str, float]], kls: dict[str, float],
         gcd_exact: dict[str, float]) -> None:
    """Grouped bars: ``Q*`` and each method's empirical law over the 17 strings (KL in the legend), and
    GCD's exact law as black markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gad.fileio import atomic_write_with

    keys = sorted(q_star, key=lambda s: -q_star[s])
    series = [("Q* (exact)", q_star)] + [(f"{m} (KL {kls[m]:.3f})", law) for m, law in laws.items()]
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(11, 4.2))
    x = np.arange(len(keys))
    for i, (label, law) in enumerate(series):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, [law.get(k, 0.0) for k in keys], width, label=label)
    ax.plot(x, [gcd_exact.get(k, 0.0) for k in keys], "k_", markersize=14, mew=2, label="GCD's exact law")
    ax.set_xticks(x)
    ax.set_xticklabels(keys, rotation=60, fontsize=8, family="monospace")
    ax.set_ylabel("probability")
    ax.set_title("Grammar 00000 | 1[01]{4}: the model's law restricted to the grammar (Q*) vs samplers")
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write_with(path, lambda tmp: fig.savefig(tmp, dpi=110))
    plt.close(fig)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """--help shows the module docstring as written, and every option's default."""


def _main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the comparison; prints the table, writes the plot, returns the figures.

    Returns:
        ``{"q_star", "gcd_exact", "kl_gcd_exact", "kl_floor", "n", "methods": {name: {"texts", "law",
        "kl", "tv", "seconds", "unfinished"}}, "skipped": {name: reason}, "plot"}``; laws map text →
        probability, KL and TV against ``Q*`` in nats / probability.
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=_HelpFormatter)
    ap.add_argument("-n", type=int, default=100, help="samples per method")
    ap.add_argument("--methods", default="gcd,asap,rs",
                    help="comma-separated sampling methods (a method gad does not have is skipped with a note)")
    ap.add_argument("--plot", default="aligned_vs_gcd.png", help="PNG to write ('' for none)")
    ap.add_argument("--seed", type=int, default=0, help="random seed")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads for this run (0: torch's default; restored when main returns): on the "
                         "project's shared 2-core machine two threads made a decoding step 3-7x slower than "
                         "one (benchmarks/bench_threads.py)")
    ap.add_argument("--model", default=None, help="local HF model directory (None: the bundled SmolLM2-135M-Instruct)")
    args = ap.parse_args(argv)

    if args.threads < 0:
        raise gad.errors.InvalidArgumentError(f"--threads must be >= 0, got {args.threads}")
    if args.threads:
        torch.set_num_threads(args.threads)
    lm = gad.load_model(args.model)
    compiled = gad.compile(gad.Grammar.from_string(GRAMMAR), lm.vocab)
    prompt_ids = lm.encode_prompt(PROMPT)
    enum = enumerate_language(lm, compiled, prompt_ids, max_len=MAX_LEN)
    q_star = {s.decode("utf-8", errors="replace"): q for s, q in enum.q_strings().items()}
    gcd_exact = gcd_law(lm, compiled, prompt_ids, MAX_LEN)
    kl_gcd_exact = kl_divergence(gcd_exact, q_star)

    registered = set(method_names())
    results: dict[str, Any] = {"q_star": q_star, "gcd_exact": gcd_exact, "kl_gcd_exact": kl_gcd_exact,
                               "Z": enum.Z, "n": args.n, "methods": {}, "skipped": {}, "plot": None}
    for m in [s.strip() for s in args.methods.split(",") if s.strip()]:
        if m not in registered:
            note = f"method {m!r} is not in this gad (registered: {', '.join(sorted(registered))}); skipped"
            print(f"note: {note}")
            results["skipped"][m] = note
            continue
        t0 = time.perf_counter()
        with tqdm(total=args.n, desc=m, unit="sample") as bar:
            samples = gad.sample(lm, compiled, prompt_ids, n=args.n, method=m, seed=args.seed,
                                 max_new_tokens=MAX_LEN + 1, progress=bar)
        texts = [s.text for s in samples if s.finished]
        law = empirical(texts)
        results["methods"][m] = {"texts": texts, "law": law, "kl": kl_divergence(law, q_star),
                                 "tv": total_variation(law, q_star), "seconds": time.perf_counter() - t0,
                                 "unfinished": sum(not s.finished for s in samples)}
    results["kl_floor"] = kl_floor(q_star, args.n, args.seed)

    methods = results["methods"]
    keys = sorted(q_star, key=lambda s: -q_star[s])
    print(f"\nQ* = the model's law restricted to the grammar (exact, Z = {enum.Z:.3g} of the model's mass)")
    print(f"{'string':8} {'Q*':>7} {'GCD law':>8}" + "".join(f" {m:>7}" for m in methods))
    for k in keys:
        print(f"{k:8} {q_star[k]:7.3f} {gcd_exact.get(k, 0.0):8.3f}"
              + "".join(f" {methods[m]['law'].get(k, 0.0):7.3f}" for m in methods))
    print(f"\nKL(· ‖ Q*) in nats; an exact sampler's {args.n} samples land near {results['kl_floor']:.3f}")
    print(f"  GCD's exact law: {kl_gcd_exact:.3f}")
    for m, r in methods.items():
        print(f"  {m:6} {args.n} samples: KL {r['kl']:.3f}, TV {r['tv']:.3f}  ({r['seconds']:.0f} s)")
    if args.plot and methods:
        plot(args.plot, q_star, {m: r["law"] for m, r in methods.items()}, {m: r["kl"] for m, r in methods.items()},
             gcd_exact)
        results["plot"] = args.plot
        print(f"plot: {args.plot}")
    if math.isfinite(kl_gcd_exact) and "gcd" in methods:
        print("GCD samples the mask-renormalised law, not Q*; ASAp approaches Q* as its trie learns, and rs "
              "draws Q* exactly.")
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example (:func:`_main`: what it prints and returns), leaving torch's thread count as it was."""
    with torch_threads():
        return _main(argv)


if __name__ == "__main__":
    main()
    sys.exit(0)
