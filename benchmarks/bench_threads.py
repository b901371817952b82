"""Decode-step time against the number of torch CPU threads, bundled model, the SQL example's prompt.

    python benchmarks/bench_threads.py [--threads 1 2] [--batch 1 3 8] [--steps 8] [--runs 3]

Why the examples default to ``--threads 1``: on a 2-core machine that other jobs share, torch's default
(one thread per core) made each batched decoding step many times slower than one thread does.  For
each thread count and batch size ``B``, a :class:`gad.models.hf.HFSession` of ``B`` rows on the prompt
of the SQL example's first question (``concert_singer``: its schema as ``CREATE TABLE`` statements, then
the question) is fed ``--steps`` tokens; the figure is the median over ``--runs`` of the mean seconds per
step (``append`` + ``logprobs``; the prompt pass excluded).  Prints one JSON object per (threads, batch)
and, per batch size, the ratio of each thread count's time to the first one's.  The load average at the
start and end is printed too: on a busy machine the ratios depend on it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

import gad

ROOT = Path(__file__).resolve().parents[1]


def _sql_prompt() -> str:
    spec = importlib.util.spec_from_file_location("gad_example_sql", ROOT / "examples" / "sql_generation.py")
    assert spec is not None and spec.loader is not None
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    qs, schemas, _ = ex.load_spider(None)
    q = qs[0]
    return str(ex.make_prompt(q["question"], ex.create_statements(schemas[q["db_id"]])))


def step_seconds(lm: Any, prompt: list[int], batch: int, steps: int) -> float:
    """Mean seconds per decoding step of a ``batch``-row session (token 28 fed to every row)."""
    s = lm.session(prompt, batch=batch)
    s.logprobs()
    t0 = time.perf_counter()
    for _ in range(steps):
        s.append([28] * batch)
        s.logprobs()
    return (time.perf_counter() - t0) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 3, 8])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(json.dumps({"load_average_start": os.getloadavg(), "cpus": os.cpu_count()}))
    lm = gad.load_model()
    prompt = lm.encode_prompt(_sql_prompt())
    lm.session(prompt, batch=2).logprobs()  # the one-off shared-prefix check and the prompt store
    med: dict[tuple[int, int], float] = {}
    for th in args.threads:
        torch.set_num_threads(th)
        for b in args.batch:
            med[th, b] = statistics.median(step_seconds(lm, prompt, b, args.steps) for _ in range(args.runs))
            print(json.dumps({"threads": th, "batch": b, "prompt_tokens": len(prompt),
                              "seconds_per_step": round(med[th, b], 4)}), flush=True)
    base = args.threads[0]
    for b in args.batch:
        print(json.dumps({"batch": b, **{f"threads_{th}_over_{base}": round(med[th, b] / med[base, b], 2)
                                         for th in args.threads[1:]}}))
    print(json.dumps({"load_average_end": os.getloadavg()}))


if __name__ == "__main__":
    main()
