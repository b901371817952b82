"""Compute-matched comparison of grammar-aligned samplers against ``Q*`` (issue 10, BRIEF §6).

On one exact task (default ``binary/string_start_w_1_all_0``) with the bundled SmolLM2 model, for gcd,
asap, rs, smc, mcmc (gad) and genlm-control's AWRS-SMC (the peer, run on the same converted model
directory, the same chat-templated prompt ids, the same grammar as Lark and the same token budget):

* KL(Q̂ ‖ Q*) and TV against the number of samples, the **model rows** spent (next-token distributions
  the model computed, prompt pass excluded) and wall time; weighted methods (smc, genlm) use their
  self-normalised weighted particles; gcd / asap also get their importance-weighted (SNIS) estimate;
* the i.i.d. floor: KL / TV of ``n`` exact draws from ``Q*`` (mean and 5-95 % band over ``--floor-reps``
  simulations);
* gad/peer ratios of KL at equal sample count and at equal model rows;
* a plot ``KL vs model rows`` (and ``KL vs samples`` with the floor).

Sequential methods (gcd, asap, rs) run once with ``n_max`` samples and are read at every checkpoint
(cumulative rows and seconds up to that sample).  smc, mcmc and the peer run once per checkpoint ``N``
(``N`` particles / ``N`` chains), each from scratch.  ``Q*`` is enumerated up to ``--max-len`` tokens and
the token budget is ``max-len + 1`` (EOS included) unless ``--budget`` says otherwise, so that every exact
method's target is the enumerated ``Q*`` itself (no sample outside its support).

Run (about 10 minutes on 2 CPU cores)::

    python benchmarks/bench_aligned.py --out benchmarks/results/aligned_binary.json \
        --plot docs/img/aligned_binary_kl_rows.png

The peer needs ``~/.cache/gad/venvs/genlm`` (``python -m venv ~/.cache/gad/venvs/genlm &&
~/.cache/gad/venvs/genlm/bin/pip install torch==2.13.0 genlm-control``); ``--no-peer`` skips it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

PEER_PY = Path.home() / ".cache" / "gad" / "venvs" / "genlm" / "bin" / "python"
PEER_SCRIPT = Path(__file__).resolve().parent / "peers" / "genlm_awrs.py"


class Clock:
    """A progress sink recording (wall time) at every ``update`` — one update per finished sample."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.times: list[float] = []

    def update(self, k: int = 1) -> None:
        now = time.perf_counter() - self.t0
        self.times.extend([now] * int(k))


def weighted_law(texts: Sequence[str | None], log_w: Sequence[float] | None = None) -> dict[str, float]:
    """Empirical (or self-normalised weighted) law over finished texts (None = unfinished, skipped)."""
    lw = np.zeros(len(texts)) if log_w is None else np.asarray(log_w, dtype=np.float64)
    keep = [i for i, t in enumerate(texts) if t is not None and np.isfinite(lw[i])]
    if not keep:
        return {}
    top = max(lw[i] for i in keep)
    out: dict[str, float] = {}
    for i in keep:
        out[texts[i]] = out.get(texts[i], 0.0) + math.exp(lw[i] - top)  # type: ignore[index]
    z = math.fsum(out.values())
    return {k: v / z for k, v in out.items()}


def kl_tv(law: dict[str, float], q: dict[str, float]) -> tuple[float, float]:
    from gad.eval import metrics

    if not law:
        return math.nan, math.nan
    return metrics.kl_divergence(law, q), metrics.total_variation(law, q)


def ess(log_w: Sequence[float]) -> float:
    lw = np.asarray([x for x in log_w if x is not None and np.isfinite(x)], dtype=np.float64)
    if not len(lw):
        return 0.0
    w = np.exp(lw - lw.max())
    return float(w.sum() ** 2 / (w * w).sum())


def iid_floor(q: dict[str, float], ns: Sequence[int], reps: int, seed: int = 0) -> dict[str, Any]:
    """KL / TV of ``n`` i.i.d. draws from ``q``: mean, 5 % and 95 % quantiles over ``reps`` simulations."""
    keys = list(q)
    p = np.array([q[k] for k in keys])
    p = p / p.sum()
    rng = np.random.default_rng(seed)
    out = {}
    for n in ns:
        kls, tvs = [], []
        for _ in range(reps):
            c = rng.multinomial(n, p)
            emp = {keys[i]: c[i] / n for i in np.flatnonzero(c)}
            k, t = kl_tv(emp, q)
            kls.append(k)
            tvs.append(t)
        out[str(n)] = {"kl_mean": float(np.mean(kls)), "kl_q05": float(np.quantile(kls, 0.05)),
                       "kl_q95": float(np.quantile(kls, 0.95)), "tv_mean": float(np.mean(tvs))}
    return out


def run_sequential(lm: Any, compiled: Any, prompt_ids: list[int], method: str, n: int, budget: int,
                   ks: Sequence[int], q: dict[str, float], seed: int, **opts: Any) -> dict[str, Any]:
    """One run of ``n`` samples read at every checkpoint ``k``: KL/TV, cumulative rows, seconds."""
    import gad

    clock = Clock()
    t0 = time.perf_counter()
    samples = gad.sample(lm, compiled, prompt_ids, n=n, method=method, seed=seed, max_new_tokens=budget,
                         progress=clock, **opts)
    total = time.perf_counter() - t0
    rows = np.cumsum([int(s.stats.get("model_rows", 0)) for s in samples])
    pos = np.cumsum([int(s.stats.get("model_positions", 0)) for s in samples])
    texts = [s.text if s.finished else None for s in samples]
    times = clock.times if len(clock.times) == n else list(np.linspace(total / n, total, n))
    points = []
    for k in ks:
        if k > n:
            continue
        kl, tv = kl_tv(weighted_law(texts[:k]), q)
        pt = {"n": k, "kl": kl, "tv": tv, "model_rows": int(rows[k - 1]), "model_positions": int(pos[k - 1]),
              "seconds": float(times[k - 1])}
        lws = [s.log_weight for s in samples[:k]]
        if method in ("gcd", "asap") and all(x is not None for x in lws):
            lz = [(s.log_z0 or 0.0) + s.log_weight if s.finished else -math.inf for s in samples[:k]]
            pt["kl_snis"], pt["tv_snis"] = kl_tv(weighted_law(texts[:k], lz), q)
            pt["ess"] = ess(lz)
        points.append(pt)
    extra = {k: samples[-1].stats.get(k) for k in ("acceptance_rate", "proposals_total", "log_z_hat")
             if k in samples[-1].stats}
    return {"method": method, "points": points, "seconds_total": total, **extra}


def run_per_checkpoint(lm: Any, compiled: Any, prompt_ids: list[int], method: str, ks: Sequence[int],
                       budget: int, q: dict[str, float], seed: int, **opts: Any) -> dict[str, Any]:
    """smc / mcmc: one fresh run per checkpoint ``N``."""
    import gad

    points = []
    for k in ks:
        t0 = time.perf_counter()
        samples = gad.sample(lm, compiled, prompt_ids, n=k, method=method, seed=seed, max_new_tokens=budget,
                             **opts)
        secs = time.perf_counter() - t0
        comp = samples[-1].stats.get("compute", {})
        texts = [s.text if s.finished else None for s in samples]
        lw = [s.log_weight if s.log_weight is not None else 0.0 for s in samples]
        kl, tv = kl_tv(weighted_law(texts, lw), q)
        points.append({"n": k, "kl": kl, "tv": tv, "model_rows": int(comp.get("model_rows", 0)),
                       "model_positions": int(comp.get("model_positions", 0)), "seconds": secs,
                       "ess": ess(lw), **({"log_z_hat": samples[-1].stats["log_z_hat"]}
                                          if "log_z_hat" in samples[-1].stats else {})})
    return {"method": method, "points": points, "options": opts.get("options", {})}


def run_peer(spec: dict[str, Any], q: dict[str, float], python: Path) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        path = f.name
    try:
        r = subprocess.run([str(python), str(PEER_SCRIPT), "--spec", path], capture_output=True, text=True,
                           check=False)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        return {"method": "genlm-awrs-smc", "error": r.stderr[-2000:]}
    data = json.loads(r.stdout.strip().splitlines()[-1])
    points = []
    for run in data["runs"]:
        texts = [s["text"] if s["finished"] else None for s in run["samples"]]
        lw = [s["log_weight"] for s in run["samples"]]
        kl, tv = kl_tv(weighted_law(texts, lw), q)
        points.append({"n": run["particles"], "kl": kl, "tv": tv, "model_rows": run["model_rows"],
                       "model_positions": run["model_positions"], "seconds": run["seconds"], "ess": run["ess"],
                       "log_z_hat": run["log_ml"]})
    return {"method": "genlm-awrs-smc", "version": data.get("version"), "points": points,
            "peer_changes": "AWRS renormalises its log-weights in float64 (0.4.1: float32 assertion)"}


def kl_at_rows(points: list[dict[str, Any]], rows: int) -> tuple[float | None, int | None]:
    """The KL of the last checkpoint whose cumulative rows are ≤ ``rows`` (and its sample count)."""
    best = None
    for p in points:
        if p["model_rows"] <= rows and (best is None or p["n"] > best["n"]):
            best = p
    return (best["kl"], best["n"]) if best else (None, None)


def ratios(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    peer = next((r for r in results if r["method"] == "genlm-awrs-smc" and "points" in r), None)
    if peer is None:
        return []
    out = []
    for pp in peer["points"]:
        for r in results:
            if r is peer or "points" not in r:
                continue
            same_n = next((p for p in r["points"] if p["n"] == pp["n"]), None)
            kl_rows, n_rows = kl_at_rows(r["points"], pp["model_rows"])
            out.append({"peer_n": pp["n"], "peer_rows": pp["model_rows"], "peer_kl": pp["kl"], "method": r["method"],
                        "kl_ratio_same_n": (same_n["kl"] / pp["kl"]) if same_n and pp["kl"] else None,
                        "rows_ratio_same_n": (same_n["model_rows"] / pp["model_rows"])
                        if same_n and pp["model_rows"] else None,
                        "seconds_ratio_same_n": (same_n["seconds"] / pp["seconds"]) if same_n else None,
                        "kl_at_peer_rows": kl_rows, "n_at_peer_rows": n_rows,
                        "kl_ratio_equal_rows": (kl_rows / pp["kl"]) if kl_rows is not None and pp["kl"] else None})
    return out


def plot(results: list[dict[str, Any]], floor: dict[str, Any], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in results:
        if "points" not in r:
            continue
        pts = [p for p in r["points"] if p["kl"] == p["kl"]]
        label = r.get("label", r["method"])
        a.plot([max(p["model_rows"], 1) for p in pts], [max(p["kl"], 1e-4) for p in pts], marker="o", ms=3,
               label=label)
        b.plot([p["n"] for p in pts], [max(p["kl"], 1e-4) for p in pts], marker="o", ms=3, label=label)
    ns = sorted(int(k) for k in floor)
    b.fill_between(ns, [floor[str(k)]["kl_q05"] for k in ns], [floor[str(k)]["kl_q95"] for k in ns],
                   color="grey", alpha=0.25, label="i.i.d. floor 5-95%")
    for ax, xl in ((a, "model rows (next-token distributions computed)"), (b, "samples / particles")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xl)
        ax.set_ylabel("KL(Q̂ ‖ Q*) (nats)")
        ax.grid(True, which="both", alpha=0.3)
    b.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def bookkeeping_overhead(vocab: int, batch: int = 8, reps: int = 200, seed: int = 0) -> dict[str, float]:
    """Time of the weight bookkeeping the batched sampler adds per step (the row sums of the weights and
    O(batch) scalar logs) against the sampling work it already does per step (``constrained_weights``
    + ``draw``), on ``(batch, vocab)`` arrays; microseconds per step."""
    from gad.sampling.dist import constrained_weights, draw

    rng = np.random.default_rng(seed)
    lp = np.log(rng.dirichlet(np.full(vocab, 0.3), size=batch))
    phis = (rng.random((batch, vocab)) < 0.05).astype(np.float64)
    t0 = time.perf_counter()
    for _ in range(reps):
        w = constrained_weights(lp, phis)
        chosen = draw(w, rng.random(batch))
    base = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    acc = 0.0
    for _ in range(reps):
        wsum = w.sum(axis=1)
        for j in range(batch):
            t = int(chosen[j])
            if w[j, t] > 0:
                acc += float(lp[j, t] + math.log(phis[j, t]) - math.log(w[j, t]) + math.log(wsum[j]))
                acc -= math.log(phis[j, t])
    extra = (time.perf_counter() - t0) / reps
    return {"vocab": vocab, "batch": batch, "sampling_us_per_step": base * 1e6, "weights_us_per_step": extra * 1e6,
            "weights_over_sampling": extra / base}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="KL/TV to Q* against model rows and wall time (issue 10)")
    p.add_argument("--task", default="binary/string_start_w_1_all_0")
    p.add_argument("--model", default="bundled")
    p.add_argument("--methods", default="gcd,asap,rs,smc,mcmc", help="comma-separated gad methods")
    p.add_argument("--n", type=int, default=1000, help="samples of the sequential methods (default 1000)")
    p.add_argument("--checkpoints", default="10,30,100,300,1000")
    p.add_argument("--run-checkpoints", default="10,100,1000", help="N of the smc / mcmc / peer runs")
    p.add_argument("--max-len", type=int, default=6, help="Q* enumeration bound in tokens (default 6)")
    p.add_argument("--budget", type=int, default=None, help="token budget, EOS included (default max-len + 1)")
    p.add_argument("--mcmc-steps", type=int, default=5)
    p.add_argument("--mcmc-move", default="uniform")
    p.add_argument("--smc-estimator", default="gcd")
    p.add_argument("--floor-reps", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads for gad and the peer (default 1)")
    p.add_argument("--peer-python", default=str(PEER_PY))
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--out", default=None, help="write the JSON result here")
    p.add_argument("--plot", default=None, help="write the KL-vs-rows plot here (PNG)")
    p.add_argument("--only-bookkeeping", action="store_true",
                   help="only time the weight bookkeeping against the per-step sampling work (no model)")
    args = p.parse_args(argv)
    if args.only_bookkeeping:
        print(json.dumps(bookkeeping_overhead(49152)))
        return 0

    import torch

    import gad
    from gad.eval.tasks import get_task
    from gad.phi.exact import enumerate_language

    torch.set_num_threads(args.threads)
    lm = gad.load_model(None if args.model == "bundled" else args.model)
    task = get_task(args.task)
    compiled = task.compile(lm.vocab)
    prompt_ids = lm.encode_prompt(task.prompt)
    budget = args.budget or args.max_len + 1
    e = enumerate_language(lm, compiled, prompt_ids, max_len=args.max_len)
    q: dict[str, float] = {}
    for s, v in e.q_strings().items():
        key = s.decode("utf-8", errors="replace")
        q[key] = q.get(key, 0.0) + v
    ks = [int(x) for x in args.checkpoints.split(",") if int(x) <= args.n]
    run_ks = [int(x) for x in args.run_checkpoints.split(",")]
    results: list[dict[str, Any]] = []
    for m in [x for x in args.methods.split(",") if x]:
        print(f"# {m}", file=sys.stderr, flush=True)
        if m in ("gcd", "asap", "rs"):
            r = run_sequential(lm, compiled, prompt_ids, m, args.n, budget, ks, q, args.seed)
        elif m == "smc":
            r = run_per_checkpoint(lm, compiled, prompt_ids, m, run_ks, budget, q, args.seed,
                                   options={"proposal": args.smc_estimator})
            r["label"] = f"smc ({args.smc_estimator})"
        elif m == "mcmc":
            r = run_per_checkpoint(lm, compiled, prompt_ids, m, run_ks, budget, q, args.seed,
                                   options={"steps": args.mcmc_steps, "move": args.mcmc_move})
            r["label"] = f"mcmc ({args.mcmc_move}, {args.mcmc_steps} steps)"
        else:
            raise SystemExit(f"unknown method {m}")
        results.append(r)
        print(json.dumps({k: v for k, v in r.items()}), flush=True)
    if not args.no_peer:
        if Path(args.peer_python).is_file():
            from gad.models.hf import _resolve_model_dir

            g = gad.Grammar.from_file(task.grammar_path) if task.grammar_path else None
            lark = ((f"start: {g.start}\n" if g.start != "start" else "") + g.lark_text) if g else None
            model_dir, _ = _resolve_model_dir(None if args.model == "bundled" else args.model, None)
            spec = {"model_dir": str(model_dir), "prompt_ids": prompt_ids, "lark": lark,
                    "eos_ids": [int(t) for t in lm.vocab.eos_ids], "max_tokens": budget, "particles": run_ks,
                    "ess_threshold": 0.5, "seed": args.seed, "threads": args.threads}
            print("# genlm-control AWRS-SMC", file=sys.stderr, flush=True)
            r = run_peer(spec, q, Path(args.peer_python))
            results.append(r)
            print(json.dumps(r), flush=True)
        else:
            print(f"# peer skipped: {args.peer_python} not found", file=sys.stderr)
    floor = iid_floor(q, sorted(set(ks) | set(run_ks)), args.floor_reps, args.seed)
    over = bookkeeping_overhead(lm.vocab_size)
    gcd = next((r for r in results if r["method"] == "gcd"), None)
    if gcd is not None and gcd["points"]:
        last = gcd["points"][-1]
        per_token = last["seconds"] / max(last["model_rows"], 1)  # one row per generated token (batched)
        over["weights_over_gcd_token"] = over["weights_us_per_step"] / over["batch"] * 1e-6 / per_token
    out = {"task": args.task, "model": str(getattr(lm, "name", "?")), "Z": e.Z, "support": len(q),
           "max_len": args.max_len, "budget": budget, "threads": args.threads, "results": results,
           "floor": floor, "ratios": ratios(results), "bookkeeping": over}
    print(json.dumps({"floor": floor, "ratios": out["ratios"], "bookkeeping": over}), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1), encoding="utf-8")
    if args.plot:
        plot(results, floor, args.plot, f"{args.task}, {out['model']}, budget {budget} tokens, Q* over "
                                        f"{len(q)} strings (Z = {e.Z:.3g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
