"""Drive a real vLLM engine through the plug-in scenarios of ``tests/vllm/test_vllm_plugin.py``.

Runs inside the vLLM venv (``scripts/vllm_env.sh``), started by the tests as a subprocess::

    python tests/vllm/engine_scenarios.py JOB.json OUT.json

``JOB.json`` names the model directory, the prompts (token ids), the grammars and the mode:

* ``"plugin"`` — one ``AsyncLLM`` engine with gad's plug-in (found through its entry point), then:
  concurrent gad requests on several grammars joining a running batch, pass-through requests, a bad
  grammar and an ASAp request at temperature 0 (each must fail alone), ASAp and GCD waves on the binary
  grammar, and one request after everything (the engine must still serve);
* ``"baseline"`` — the same pass-through requests on an engine that does not see the plug-in (the
  test hides gad's entry point with a ``sitecustomize``).

Only raw results are written (texts, token ids, finish reasons, error messages); the test asserts.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any


def engine_args(job: dict[str, Any]) -> dict[str, Any]:
    args = {"model": job["model"], "dtype": "float32", "max_model_len": int(job.get("max_model_len", 512)),
            "enforce_eager": True, "max_num_seqs": int(job.get("max_num_seqs", 32)), "seed": 0}
    if job.get("num_blocks"):
        args["num_gpu_blocks_override"] = int(job["num_blocks"])
    return args


async def collect(engine: Any, prompt_ids: list[int], params: Any, request_id: str) -> dict[str, Any]:
    """Run one request to the end: its text, token ids and finish reason, or the error it raised."""
    final = None
    try:
        async for out in engine.generate({"prompt_token_ids": prompt_ids}, params, request_id):
            final = out
    except Exception as exc:  # noqa: BLE001 - the test inspects the message
        return {"id": request_id, "error": f"{type(exc).__name__}: {exc}"}
    assert final is not None
    c = final.outputs[0]
    return {"id": request_id, "text": c.text, "token_ids": list(c.token_ids), "finish_reason": c.finish_reason}


def passthrough_params(sp: Any) -> list[tuple[str, Any]]:
    return [("greedy", sp(max_tokens=24, temperature=0.0)),
            ("seeded", sp(max_tokens=24, temperature=1.0, seed=7))]


async def run_plugin(job: dict[str, Any]) -> dict[str, Any]:
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    t0 = time.perf_counter()
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_args(job)))
    res: dict[str, Any] = {"engine_start_s": time.perf_counter() - t0}
    P = job["prompts"]
    G = job["grammars"]

    def gad(grammar: str, method: str = "gcd", **kw: Any) -> Any:
        return SamplingParams(extra_args={"gad": {"grammar": grammar, "method": method}}, **kw)

    # 1 + 4 + 5: concurrent requests, some joining a running batch, pass-through and bad ones among them
    first = [("json", P["json"], gad("json", max_tokens=96, temperature=1.0, seed=s)) for s in range(3)]
    first.append(("sql", P["sql"], gad("sql", max_tokens=64, temperature=1.0, seed=10)))
    later = [("sql", P["sql"], gad("sql", max_tokens=64, temperature=1.0, seed=s)) for s in (11, 12)]
    later += [("sygus", P["sygus"], gad(G["sygus"], max_tokens=64, temperature=1.0, seed=s)) for s in (20, 21)]
    bad = [("bad-grammar", P["json"], gad(G["bad"], max_tokens=16)),
           ("bad-asap-greedy", P["json"], gad("json", method="asap", max_tokens=16, temperature=0.0))]
    t1 = time.perf_counter()
    # the pass-through requests go first: short, they end before the KV blocks run out (a recomputed
    # prefill may differ from the decode path in the last bits, which is vLLM's business, not gad's)
    tasks = [asyncio.create_task(collect(engine, P["plain"], sp, "pass-" + name))
             for name, sp in passthrough_params(SamplingParams)]
    # two long plain requests: with job["num_blocks"] KV blocks of 128 tokens they alone outgrow the
    # cache, so vLLM preempts the most recently scheduled requests (gad ones) and resumes them later,
    # when their tokens replay through the plug-in
    filler = SamplingParams(max_tokens=int(job.get("filler_tokens", 300)), temperature=0.0, ignore_eos=True)
    tasks += [asyncio.create_task(collect(engine, P["plain"], filler, f"filler-{i}")) for i in range(2)]
    tasks += [asyncio.create_task(collect(engine, p, sp, f"{name}-{i}")) for i, (name, p, sp) in enumerate(first)]
    await asyncio.sleep(float(job.get("join_after_s", 2.0)))  # the first ones are decoding by now
    tasks += [asyncio.create_task(collect(engine, p, sp, f"{name}-{i}")) for i, (name, p, sp) in enumerate(later)]
    tasks += [asyncio.create_task(collect(engine, p, sp, name)) for name, p, sp in bad]
    res["concurrent"] = await asyncio.gather(*tasks)
    res["concurrent_s"] = time.perf_counter() - t1

    # 3: ASAp in waves (the trie learns between them) and GCD, on the binary grammar
    n, wave, mt = int(job["n_binary"]), int(job["asap_wave"]), int(job["binary_max_tokens"])
    t2 = time.perf_counter()
    asap: list[dict[str, Any]] = []
    for w in range(0, n, wave):
        asap += await asyncio.gather(*[
            collect(engine, P["binary"], gad(G["binary"], method="asap", max_tokens=mt, temperature=1.0, seed=1000 + i),
                    f"asap-{i}") for i in range(w, min(n, w + wave))])
    res["asap_s"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    res["gcd"] = await asyncio.gather(*[
        collect(engine, P["binary"], gad(G["binary"], max_tokens=mt, temperature=1.0, seed=5000 + i), f"gcd-{i}")
        for i in range(n)])
    res["gcd_s"] = time.perf_counter() - t3
    res["asap"] = asap

    # 5: the engine still serves after the failures
    res["after"] = await collect(engine, P["json"], gad("json", max_tokens=32, temperature=0.0), "after")
    engine.shutdown()
    return res


def run_baseline(job: dict[str, Any]) -> dict[str, Any]:
    from vllm import LLM, SamplingParams
    from vllm.v1.sample.logits_processor import _load_logitsprocs_plugins

    assert not _load_logitsprocs_plugins(), "the baseline engine must not see gad's plug-in"
    llm = LLM(**engine_args(job))
    out = {}
    for name, sp in passthrough_params(SamplingParams):
        o = llm.generate([{"prompt_token_ids": job["prompts"]["plain"]}], sp, use_tqdm=False)[0].outputs[0]
        out["pass-" + name] = {"text": o.text, "token_ids": list(o.token_ids), "finish_reason": o.finish_reason}
    return out


def main() -> None:
    job = json.loads(open(sys.argv[1], encoding="utf-8").read())
    if job["mode"] == "baseline":
        res = run_baseline(job)
    else:
        res = asyncio.run(run_plugin(job))
    tmp = sys.argv[2] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(res, f)
    os.replace(tmp, sys.argv[2])


if __name__ == "__main__":
    main()
