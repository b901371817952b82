"""ASAp cost benchmarks (BRIEF §3.3; issue 3 "Performance").

1. ASAp's cost per generated token against GCD's on the same prompts (ratio; goal <= 1.1), measured
   as the estimator's own ``child_phi`` + ``observe`` time added to the same per-token model cost.
   With ``--model bundled`` the whole ``gad.sample`` loop is timed for both methods as well (see
   :func:`model_ratio`).
2. Trie update time against sample length (must be linear: time per token roughly constant).
3. Bytes per trie node (tracemalloc).
4. Save / load time of a 10^6-node trie.

Run: ``python benchmarks/bench_asap.py [--nodes 1000000] [--vocab 49152] [--model bundled [--only-model]
[--task slia/firstname_small] [--model-batch 1 16] [--model-n 16] [--model-reps 4]]``.
Prints one JSON object per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gad.phi import AsapPhi, PhiTrie, load_trie, save_trie
from gad.phi.base import IndicatorPhi


def estimator_cost(vocab: int, length: int, samples: int, allowed: float) -> dict:
    """Per-token estimator time (child_phi + observe) for ASAp and the GCD indicator."""
    rng = np.random.default_rng(0)
    logp = np.log(rng.dirichlet(np.ones(vocab)))
    mask = rng.random(vocab) < allowed
    mask[-1] = True
    out = {}
    for name, est in (("gcd", IndicatorPhi()), ("asap", AsapPhi(eos_ids=[vocab - 1]))):
        t0 = time.perf_counter()
        for _ in range(samples):
            prefix: list[int] = []
            for _ in range(length):
                est.child_phi(prefix, logp, mask)
                prefix.append(int(rng.choice(np.flatnonzero(mask[:-1]))))
            est.observe(prefix, False)
        out[name] = (time.perf_counter() - t0) / (samples * length)
    return {"bench": "estimator_cost_per_token", "vocab": vocab, "allowed_share": allowed,
            "gcd_s": out["gcd"], "asap_s": out["asap"], "extra_s_per_token": out["asap"] - out["gcd"]}


def model_ratio(n: int, max_new_tokens: int, batch_size: int, reps: int, task_name: str) -> dict:
    """Whole sampling loop with the bundled model: seconds per generated token, ASAp / GCD.

    Same task prompt for both methods; the prompt pass and the grammar compile are warmed up first
    (stored), then ``reps`` rounds alternate GCD and ASAp (order swapped every round, seeds differ per
    round) so that machine drift hits both.  ASAp keeps one trie across rounds.  Besides the raw ratio
    (which also moves with the methods' different output lengths and batch make-up), the estimator's
    own time (``child_phi`` + ``observe``) is measured inside the loop: ``ratio_estimator`` is GCD's
    per-token cost plus ASAp's extra estimator time per token, over GCD's per-token cost.
    """
    import gad
    from gad.eval.tasks import get_task
    from gad.phi import asap as asap_mod

    est_time = {"s": 0.0}

    def timed(fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                est_time["s"] += time.perf_counter() - t0
        return wrapper

    lm = gad.load_model()
    task = get_task(task_name)
    compiled = task.compile(lm.vocab)
    prompt = lm.encode_prompt(task.prompt)
    gad.sample(lm, compiled, prompt, n=1, method="gcd", seed=0, max_new_tokens=4)  # warm-up
    trie = PhiTrie()
    tot = {m: {"s": 0.0, "tokens": 0, "est_s": 0.0} for m in ("gcd", "asap")}
    orig = (asap_mod.AsapPhi.child_phi, asap_mod.AsapPhi.observe, IndicatorPhi.child_phi, IndicatorPhi.observe)
    asap_mod.AsapPhi.child_phi, asap_mod.AsapPhi.observe = timed(orig[0]), timed(orig[1])
    IndicatorPhi.child_phi, IndicatorPhi.observe = timed(orig[2]), timed(orig[3])
    try:
        for r in range(reps):
            for m in (("gcd", "asap") if r % 2 == 0 else ("asap", "gcd")):
                est_time["s"] = 0.0
                t0 = time.perf_counter()
                ss = gad.sample(lm, compiled, prompt, n=n, method=m, seed=1000 + r, batch_size=batch_size,
                                max_new_tokens=max_new_tokens, trie=trie if m == "asap" else None)
                tot[m]["s"] += time.perf_counter() - t0
                tot[m]["est_s"] += est_time["s"]
                tot[m]["tokens"] += sum(len(s.token_ids) + s.finished for s in ss)
    finally:
        asap_mod.AsapPhi.child_phi, asap_mod.AsapPhi.observe, IndicatorPhi.child_phi, IndicatorPhi.observe = orig
    per = {m: v["s"] / max(v["tokens"], 1) for m, v in tot.items()}
    est = {m: v["est_s"] / max(v["tokens"], 1) for m, v in tot.items()}
    return {"bench": "model_cost_per_token", "task": task_name, "prompt_tokens": len(prompt),
            "batch_size": batch_size, "samples_per_method": n * reps,
            "tokens": {m: v["tokens"] for m, v in tot.items()},
            "gcd_s_per_token": per["gcd"], "asap_s_per_token": per["asap"], "ratio": per["asap"] / per["gcd"],
            "gcd_estimator_s_per_token": est["gcd"], "asap_estimator_s_per_token": est["asap"],
            "ratio_estimator": (per["gcd"] + est["asap"] - est["gcd"]) / per["gcd"],
            "trie_nodes": len(trie)}


def update_linearity(lengths: list[int], reps: int = 50) -> list[dict]:
    """Time of ``observe`` on a fresh path of each length (per token should be flat)."""
    rows = []
    vocab = 1000
    logp = np.full(vocab, -np.log(vocab))
    mask = np.ones(vocab, dtype=bool)
    for L in lengths:
        est = AsapPhi(eos_ids=[vocab - 1])
        tot = 0.0
        for r in range(reps):
            prefix: list[int] = []
            for i in range(L):
                est.child_phi(prefix, logp, mask)
                prefix.append((r * 7 + i) % (vocab - 1))
            t0 = time.perf_counter()
            est.observe(prefix, False)
            tot += time.perf_counter() - t0
        rows.append({"bench": "update_time", "length": L, "seconds": tot / reps,
                     "seconds_per_token": tot / reps / L})
    return rows


def random_trie(n: int) -> PhiTrie:
    rng = np.random.default_rng(1)
    parent = np.concatenate([[-1], (rng.random(n - 1) * np.arange(1, n)).astype(np.int64)])
    cols = {"parent": parent, "token": np.concatenate([[-1], np.arange(1, n)]), "p": rng.random(n),
            "phi": rng.random(n), "mass": rng.random(n), "eos": rng.random(n),
            "nallow": rng.integers(0, 50, n), "vsum": rng.random(n), "ssum": rng.random(n)}
    return PhiTrie.from_columns(cols, identity={"model": "bench"})


def bytes_per_node(n: int) -> dict:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    t = random_trie(n)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {"bench": "bytes_per_node", "nodes": len(t), "bytes_per_node": (after - before) / len(t)}


def save_load(n: int) -> dict:
    t = random_trie(n)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.trie")
        t0 = time.perf_counter()
        save_trie(t, path)
        t1 = time.perf_counter()
        back = load_trie(path, expected={"model": "bench"})
        t2 = time.perf_counter()
        size = os.path.getsize(path)
    assert len(back) == n
    return {"bench": "save_load", "nodes": n, "save_s": t1 - t0, "load_s": t2 - t1, "file_bytes": size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--vocab", type=int, default=49_152)
    ap.add_argument("--model", choices=["none", "bundled"], default="none")
    ap.add_argument("--task", default="slia/firstname_small", help="task whose prompt and grammar --model uses")
    ap.add_argument("--model-n", type=int, default=16, help="samples per method per round (--model)")
    ap.add_argument("--model-reps", type=int, default=4, help="rounds alternating GCD and ASAp (--model)")
    ap.add_argument("--model-batch", type=int, nargs="+", default=[1, 16], help="batch sizes (--model)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--only-model", action="store_true", help="skip the model-free measurements")
    a = ap.parse_args()
    if a.model == "bundled" and a.only_model:
        for b in a.model_batch:
            print(json.dumps(model_ratio(a.model_n, a.max_new_tokens, b, a.model_reps, a.task)), flush=True)
        return
    for allowed in (0.001, 0.5):
        print(json.dumps(estimator_cost(a.vocab, 64, 20, allowed)))
    for row in update_linearity([16, 64, 256, 1024]):
        print(json.dumps(row))
    print(json.dumps(bytes_per_node(200_000)))
    print(json.dumps(save_load(a.nodes)))
    if a.model == "bundled":
        for b in a.model_batch:
            print(json.dumps(model_ratio(a.model_n, a.max_new_tokens, b, a.model_reps, a.task)), flush=True)


if __name__ == "__main__":
    main()
