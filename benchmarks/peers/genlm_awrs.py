"""Peer runner: genlm-control's AWRS-SMC on gad's model, prompt, grammar and length bound.

Run with the genlm venv's python (it does not import gad)::

    ~/.cache/gad/venvs/genlm/bin/python benchmarks/peers/genlm_awrs.py --spec spec.json

``spec.json`` (written by ``benchmarks/bench_aligned.py``)::

    {"model_dir": ".../SmolLM2-135M-Instruct.Q4_1-<key>",   # gad's converted SmolLM2 (gad.hf)
     "prompt_ids": [...],            # gad's chat-templated prompt ids, used as is
     "lark": "...",                  # the task grammar as Lark text (gad.Grammar.lark_text)
     "eos_ids": [2, ...],            # gad's EOS ids (their byte strings become genlm's EOS set)
     "max_tokens": 16,               # gad's token budget, EOS included (genlm's max_tokens)
     "particles": [10, 100, 1000],   # one independent SMC run per entry
     "ess_threshold": 0.5, "seed": 0, "threads": 1}

Prints one JSON object: per run the particles (decoded text, log weight, finished), ``log_ml``, ESS,
``model_rows`` (distinct contexts whose next-token distribution genlm's backend computed: unique
queries of its batched forward passes; the prompt pass excluded and counted apart), ``model_positions``
(tokens those passes processed) and ``seconds`` (wall time of the SMC call).

Changes to the peer, all made here at run time (the installed package is not edited):

* ``AWRS._run_rejection`` casts the next-token log-weights to float64 before it renormalises them.
  genlm-control 0.4.1 does this in float32 and trips ``assert not last or log_q >= -error_tolerance``
  when the only allowed token is improbable (issue 10 of gad).  Nothing else in AWRS changes.
* ``AsyncTransformer._evaluate_queries`` is wrapped to count rows and positions (no behaviour change).
* The backend's output/KV caches are cleared between runs, so every run pays for its own model calls;
  the prompt's KV is cached once beforehand (``cache_kv``) and reported as the prompt pass.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import sys
import time
from typing import Any

import numpy as np
import torch

COUNT = {"rows": 0, "positions": 0, "calls": 0}


def _patch() -> None:
    from genlm.backend.llm.hf import AsyncTransformer
    from genlm.control.sampler.token import AWRS

    orig_run = AWRS._run_rejection

    def _as64(lw: Any) -> Any:
        if lw is None:
            return None
        out = copy.copy(lw)
        out.weights = torch.as_tensor(lw.weights).to(torch.float64)
        return out

    async def run_rejection(self: Any, logws: Any, accept: Any, target_logws: Any = None) -> Any:
        return await orig_run(self, _as64(logws), accept, _as64(target_logws))

    AWRS._run_rejection = run_rejection

    orig_eval = AsyncTransformer._evaluate_queries

    def evaluate(self: Any, queries: Any) -> Any:
        unique = {tuple(q.prompt) for q in queries}
        COUNT["rows"] += len(unique)
        COUNT["positions"] += sum(len(u) for u in unique)
        COUNT["calls"] += 1
        return orig_eval(self, queries)

    AsyncTransformer._evaluate_queries = evaluate


async def _run(spec: dict[str, Any]) -> dict[str, Any]:
    from genlm.backend.llm.hf import AsyncTransformer
    from genlm.control import AWRS, SMC, BoolCFG, PromptedLLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(spec["model_dir"])
    model = AutoModelForCausalLM.from_pretrained(spec["model_dir"], torch_dtype=torch.float32)
    backend = AsyncTransformer(model, tok, batch_size=int(spec.get("batch_size", 20)))
    eos_bytes = []
    for e in spec["eos_ids"]:
        b = bytes(backend.byte_vocab[int(e)].byte_string)
        if b not in eos_bytes:
            eos_bytes.append(b)
    llm = PromptedLLM(backend, prompt_ids=[int(t) for t in spec["prompt_ids"]], eos_byte_strings=eos_bytes)
    grammar = BoolCFG.from_lark(spec["lark"])
    condition = grammar.coerce(llm, f=b"".join)
    runs = []
    for i, n_part in enumerate(spec["particles"]):
        backend.clear_cache()
        COUNT.update(rows=0, positions=0, calls=0)
        backend.cache_kv([int(t) for t in spec["prompt_ids"]])
        prompt_rows = COUNT["rows"]
        COUNT.update(rows=0, positions=0, calls=0)
        seed = int(spec.get("seed", 0)) * 1000 + i
        np.random.seed(seed)
        torch.manual_seed(seed)
        sampler = SMC(AWRS(llm, condition, seed=seed))
        t0 = time.perf_counter()
        seqs = await sampler(n_particles=int(n_part), ess_threshold=float(spec.get("ess_threshold", 0.5)),
                             max_tokens=int(spec["max_tokens"]))
        secs = time.perf_counter() - t0
        parts = []
        for ctx, lw in zip(seqs.contexts, seqs.log_weights, strict=True):
            finished = bool(ctx) and type(ctx[-1]).__name__ == "EndOfSequence"
            body = ctx[:-1] if finished else ctx
            text = b"".join(bytes(t) for t in body).decode("utf-8", errors="replace")
            parts.append({"text": text, "log_weight": float(lw), "finished": finished})
        runs.append({"particles": int(n_part), "seconds": secs, "model_rows": COUNT["rows"],
                     "model_positions": COUNT["positions"], "forward_calls": COUNT["calls"],
                     "prompt_rows": prompt_rows, "log_ml": float(seqs.log_ml), "ess": float(seqs.ess),
                     "samples": parts})
        await sampler.cleanup()
    return {"peer": "genlm-control", "version": _version(), "awrs_float64_patch": True, "runs": runs}


def _version() -> str:
    from importlib.metadata import version

    return version("genlm-control")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--spec", required=True, help="JSON spec (see module doc)")
    args = p.parse_args(argv)
    with open(args.spec, encoding="utf-8") as f:
        spec = json.load(f)
    torch.set_num_threads(int(spec.get("threads", 1)))
    _patch()
    out = asyncio.run(_run(spec))
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
