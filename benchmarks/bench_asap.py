"""ASAp cost benchmarks (BRIEF §3.3; issue 3 "Performance").

1. ASAp's cost per generated token against GCD's on the same prompts (ratio; goal <= 1.1), measured
   as the estimator's own ``child_phi`` + ``observe`` time added to the same per-token model cost.
   With ``--model bundled`` the whole ``gad.sample`` loop is timed for both methods instead.
2. Trie update time against sample length (must be linear: time per token roughly constant).
3. Bytes per trie node (tracemalloc).
4. Save / load time of a 10^6-node trie.

Run: ``python benchmarks/bench_asap.py [--nodes 1000000] [--vocab 49152] [--model bundled]``.
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


def model_ratio(n: int, max_new_tokens: int) -> dict:
    """Whole sampling loop with the bundled model: seconds per token, ASAp / GCD."""
    import gad
    from gad.eval.tasks import get_task

    lm = gad.load_model()
    task = get_task("slia/bikes_small")
    compiled = task.compile(lm.vocab)
    res = {}
    for m in ("gcd", "asap"):
        t0 = time.perf_counter()
        ss = gad.sample(lm, compiled, task.prompt, n=n, method=m, seed=0, max_new_tokens=max_new_tokens,
                        batch_size=4)
        toks = sum(len(s.token_ids) + s.finished for s in ss)
        res[m] = (time.perf_counter() - t0) / max(toks, 1)
    return {"bench": "model_cost_per_token", "gcd_s": res["gcd"], "asap_s": res["asap"],
            "ratio": res["asap"] / res["gcd"]}


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
    a = ap.parse_args()
    for allowed in (0.001, 0.5):
        print(json.dumps(estimator_cost(a.vocab, 64, 20, allowed)))
    for row in update_linearity([16, 64, 256, 1024]):
        print(json.dumps(row))
    print(json.dumps(bytes_per_node(200_000)))
    print(json.dumps(save_load(a.nodes)))
    if a.model == "bundled":
        print(json.dumps(model_ratio(8, 64)))


if __name__ == "__main__":
    main()
