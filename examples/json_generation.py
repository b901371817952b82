"""A JSON record under a JSON Schema, sampled with GCD and with grammar-aligned sampling.

    python examples/json_generation.py [-n 50] [--out records.jsonl] [--seed 0] [--model PATH]

Run time with the defaults: 1.5 to 3.5 minutes on 2 CPU cores (bundled SmolLM2-135M-Instruct; 88 s
measured on 2026-12-01 on the project's 2-core machine while other jobs shared it, and 196 s in a rerun
on a busier machine: 56 % of one core, 109 s of CPU time, the same figures).

The schema has finite fields only (``name`` and ``age`` are enums, ``admin`` a boolean: 18 records in
all), so the model's own preference among the records it allows can be computed: ``Q*(record) =
P(record | prompt) / Z`` over the 18 records, each scored by the model in its canonical tokenization
(one forward pass per record; other tokenizations of the same text carry comparatively negligible mass and are left out).
The prompt does not list the allowed values, so the model would rather write other ones; the
grammar has to steer it.  Each record is generated ``-n`` times

* with GCD (the mask renormalised at every token: it follows the model's first-token preferences and
  is then forced through whatever completes them), and
* with gad's best aligned method: exact rejection sampling ``rs`` on the ASAp trie when gad has it
  (draws of ``Q*``), else ASAp (converges to ``Q*``).

Printed per method: the share of outputs valid under the schema (``jsonschema``), the mean model
log-likelihood of the outputs (nats), KL(empirical ‖ Q*) over the records, and how often each field
takes each value next to ``Q*``'s marginal.  The grammar comes from ``gad.Grammar.from_json_schema``
(compact whitespace) when gad has it, else from a Lark grammar written for this schema.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections import Counter
from typing import Any

import jsonschema
import numpy as np
import torch
from tqdm.auto import tqdm

import gad
from gad.eval.metrics import empirical, kl_divergence
from gad.models.hf import torch_threads
from gad.sampling.methods import method_names

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"enum": ["Alice", "Bob", "Carol"]},
        "age": {"enum": [7, 30, 42]},
        "admin": {"type": "boolean"},
    },
    "required": ["name", "age", "admin"],
    "additionalProperties": False,
}
PROMPT = ('Write a JSON object describing a user of a web site, with the keys "name" (a first name), '
          '"age" (a number) and "admin" (true or false). Reply with the JSON only.')
# The same language as from_json_schema(SCHEMA) with compact whitespace, for a gad without it.
LARK = r'''
start: "{\"name\":" NAME ",\"age\":" AGE ",\"admin\":" BOOL "}"
NAME: "\"Alice\"" | "\"Bob\"" | "\"Carol\""
AGE: "7" | "30" | "42"
BOOL: "true" | "false"
'''


def schema_grammar(schema: dict[str, Any]) -> tuple[gad.Grammar, str]:
    """The grammar for ``schema`` and where it came from (``from_json_schema`` or the Lark fallback)."""
    from_schema = getattr(gad.Grammar, "from_json_schema", None)
    if from_schema is not None:
        return from_schema(schema), "gad.Grammar.from_json_schema (compact whitespace)"
    print("note: this gad has no Grammar.from_json_schema; using a Lark grammar written for the schema")
    return gad.Grammar.from_string(LARK), "Lark grammar written for the schema"


def finite_records(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Every record of an object schema whose properties are all enums / consts / booleans."""
    keys = list(schema["properties"])
    choices = []
    for k in keys:
        p = schema["properties"][k]
        if "enum" in p:
            choices.append(list(p["enum"]))
        elif "const" in p:
            choices.append([p["const"]])
        elif p.get("type") == "boolean":
            choices.append([True, False])
        else:
            raise ValueError(f"property {k!r} is not finite")
    return [dict(zip(keys, vals)) for vals in itertools.product(*choices)]


def spelling(record: dict[str, Any], grammar: gad.Grammar) -> str:
    """The text the grammar accepts for ``record`` (compact JSON, else json.dumps' default spelling)."""
    for text in (json.dumps(record, separators=(",", ":"), ensure_ascii=False), json.dumps(record)):
        if grammar.parses(text):
            return text
    raise ValueError(f"the grammar accepts no spelling of {record}")


def score(lm: Any, prompt_ids: list[int], text: str) -> float:
    """``log P(text · EOS | prompt)`` in nats, ``text`` in its canonical tokenization (one model pass)."""
    ids = lm.tokenizer.encode(text, add_special_tokens=False)
    eos = list(lm.vocab.eos_ids)
    session = lm.session(prompt_ids)
    first = session.logprobs()[0]
    rest = session.extend(ids)  # (len(ids), vocab): row i is log p(. | prompt, ids[:i+1])
    lp = float(first[ids[0]]) + float(sum(rest[i, ids[i + 1]] for i in range(len(ids) - 1)))
    return lp + float(np.logaddexp.reduce(rest[-1, eos]))


def _valid(text: str) -> bool:
    """True iff ``text`` is JSON and validates against :data:`SCHEMA` (``jsonschema``)."""
    try:
        jsonschema.validate(json.loads(text), SCHEMA)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def marginals(records: list[dict[str, Any]], weights: list[float], field: str) -> dict[str, float]:
    """Law of ``field``'s value (as JSON text) under weights over records."""
    out: dict[str, float] = {}
    for r, w in zip(records, weights):
        k = json.dumps(r[field])
        out[k] = out.get(k, 0.0) + w
    return out


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """--help shows the module docstring as written, and every option's default."""


def _main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the comparison; prints the tables; returns the figures.

    Returns:
        ``{"grammar", "q_star": {text: prob}, "methods": {name: {"records": [text], "valid", "mean_logprob",
        "kl", "canonical", "fields": {field: {value: share}}, "seconds", "unfinished"}}, "q_fields", "skipped"}``
        (log-probabilities and KL in nats).
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=_HelpFormatter)
    ap.add_argument("-n", type=int, default=50, help="records per method")
    ap.add_argument("--methods", default=None,
                    help="comma-separated methods (default: gcd and rs, or asap when this gad has no rs)")
    ap.add_argument("--max-new-tokens", type=int, default=48, help="token budget per record")
    ap.add_argument("--out", default=None, help="JSONL file for every sample (method, text, logprob, valid)")
    ap.add_argument("--seed", type=int, default=0, help="random seed")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads for this run (0: torch's default; restored when main returns): on the "
                         "project's shared 2-core machine two threads made a decoding step 3-7x slower than "
                         "one (benchmarks/bench_threads.py)")
    ap.add_argument("--model", default=None, help="local HF model directory (None: the bundled SmolLM2-135M-Instruct)")
    args = ap.parse_args(argv)

    registered = method_names()
    aligned = "rs" if "rs" in registered else "asap"
    if aligned != "rs":
        print("note: this gad has no exact rejection sampler 'rs'; the aligned method is ASAp")
    methods = [m.strip() for m in args.methods.split(",")] if args.methods else ["gcd", aligned]

    if args.threads < 0:
        raise gad.errors.InvalidArgumentError(f"--threads must be >= 0, got {args.threads}")
    if args.threads:
        torch.set_num_threads(args.threads)
    lm = gad.load_model(args.model)
    grammar, source = schema_grammar(SCHEMA)
    compiled = gad.compile(grammar, lm.vocab)
    prompt_ids = lm.encode_prompt(PROMPT)

    records = finite_records(SCHEMA)
    texts = [spelling(r, grammar) for r in records]
    logp = np.array([score(lm, prompt_ids, t) for t in tqdm(texts, desc="scoring Q*", unit="record")])
    q = np.exp(logp - np.logaddexp.reduce(logp))
    q_star = dict(zip(texts, q.tolist()))
    fields = list(SCHEMA["properties"])
    q_fields = {f: marginals(records, q.tolist(), f) for f in fields}
    results: dict[str, Any] = {"grammar": source, "q_star": q_star, "q_fields": q_fields,
                               "q_mean_logprob": float(np.dot(q, logp)), "methods": {}, "skipped": {}}

    rows: list[dict[str, Any]] = []
    for m in methods:
        if m not in registered:
            results["skipped"][m] = f"method {m!r} is not in this gad (registered: {', '.join(registered)})"
            print(f"note: {results['skipped'][m]}; skipped")
            continue
        t0 = time.perf_counter()
        with tqdm(total=args.n, desc=m, unit="record") as bar:
            samples = gad.sample(lm, compiled, prompt_ids, n=args.n, method=m, seed=args.seed,
                                 max_new_tokens=args.max_new_tokens, progress=bar)
        done = [s for s in samples if s.finished]
        canonical = [s.token_ids == lm.tokenizer.encode(s.text, add_special_tokens=False) for s in done]
        valid = [s.finished and _valid(s.text) for s in samples]
        values = [json.loads(s.text) for s, ok in zip(samples, valid) if ok]
        results["methods"][m] = {
            "records": [s.text for s in done], "valid": sum(valid) / max(len(samples), 1),
            "mean_logprob": float(np.mean([s.logprob for s in done])) if done else math.nan,
            "kl": kl_divergence(empirical(s.text for s in done), q_star),
            "canonical": sum(canonical) / max(len(done), 1),
            "fields": {f: {k: c / max(len(values), 1) for k, c in Counter(json.dumps(v[f]) for v in values).items()}
                       for f in fields},
            "seconds": time.perf_counter() - t0, "unfinished": len(samples) - len(done)}
        rows += [{"method": m, "text": s.text, "logprob": s.logprob, "finished": s.finished, "valid": ok}
                 for s, ok in zip(samples, valid)]

    res = results["methods"]
    print(f"\ngrammar: {source}; Q* = the model's preference among the {len(records)} records the schema allows")
    print(f"{'':12} {'valid':>6} {'mean log P':>11} {'KL(·‖Q*)':>9} {'canonical tokens':>17}")
    print(f"{'Q*':12} {'':>6} {results['q_mean_logprob']:11.2f} {0.0:9.3f} {'100%':>17}")
    for m, r in res.items():
        print(f"{m:12} {r['valid']:6.0%} {r['mean_logprob']:11.2f} {r['kl']:9.3f} {r['canonical']:17.0%}"
              f"   ({r['seconds']:.0f} s)")
    print("(mean log P: the model's log-likelihood of the outputs, nats; canonical tokens: share of outputs "
          "written in the tokenizer's own tokenization of their text)")
    for f in fields:
        vals = sorted(q_fields[f], key=lambda k: -q_fields[f][k])
        print(f"\nfield {f!r}: share of records with each value")
        print(f"{'value':10} {'Q*':>6}" + "".join(f" {m:>6}" for m in res))
        for v in vals:
            print(f"{v:10} {q_fields[f][v]:6.2f}" + "".join(f" {res[m]['fields'][f].get(v, 0.0):6.2f}" for m in res))
    best = max(q_star, key=lambda t: q_star[t])
    print(f"\nthe model's favourite allowed record: {best} (Q* {q_star[best]:.2f})")
    if args.out:
        from gad.fileio import atomic_write

        atomic_write(args.out, [(json.dumps(r, ensure_ascii=False) + "\n").encode() for r in rows])
        print(f"samples: {args.out}")
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example (:func:`_main`: what it prints and returns), leaving torch's thread count as it was."""
    with torch_threads():
        return _main(argv)


if __name__ == "__main__":
    main()
    sys.exit(0)
