"""``gad sample``: draw grammatical samples from a model and print them (``--out``: JSONL rows)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gad import api
from gad.cli import args as types
from gad.engine.compiler import compile as compile_grammar
from gad.errors import InvalidArgumentError
from gad.fileio import atomic_write
from gad.grammar import Grammar
from gad.models.hf import load_model
from gad.phi.trie_io import trie_header
from gad.sampling.methods import get_method, method_names
from gad.speculative.drafters import check_drafter_spec


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``gad sample`` options to ``p``."""
    p.add_argument("--grammar", required=True, metavar="FILE|NAME",
                   help="grammar file (.lark, .ebnf, .gbnf) or a shipped grammar's name (json, sql, text)")
    p.add_argument("--prompt", required=True, metavar="TEXT", help="the prompt")
    p.add_argument("-n", type=types.positive_int, default=1, help="number of samples (default 1)")
    p.add_argument("--max-new-tokens", type=types.positive_int, default=256,
                   help="token budget per sample (default 256)")
    p.add_argument("--seed", type=types.seed, default=0, help="random seed, a non-negative integer (default 0)")
    p.add_argument("--model", default=None, metavar="PATH",
                   help="local HF model directory or .gguf file (default: bundled SmolLM2-135M-Instruct)")
    p.add_argument("--out", default=None, metavar="F.jsonl",
                   help="write one JSON row per sample (text, token_ids, logprob, finished)")
    p.add_argument("--raw", action="store_true", help="do not apply the model's chat template")
    p.add_argument("--special-tokens", action="store_true",
                   help="encode control tokens typed in --prompt (e.g. <|im_end|>) as control tokens "
                        "(default: they are plain text)")
    p.add_argument("--method", type=types.method, default="gcd", metavar="METHOD",
                   help=f"sampling law: {', '.join(method_names())} (default gcd)")
    p.add_argument("--trie", default=None, metavar="FILE", help="ASAp trie file (loaded and saved)")
    p.add_argument("--speculative", default=None, metavar="DRAFTER",
                   help="speculative decoding drafter: forced, forced-token, ngram[:N], self[:L], self-greedy[:L], a draft "
                        "model path, or several joined by '+' (e.g. forced+ngram)")
    p.add_argument("--draft-k", type=types.positive_int, default=4, help="tokens drafted per step (default 4)")
    p.add_argument("--tree", type=types.tree, default=None, metavar="m,d", help="greedy tree drafting")
    p.add_argument("--accept", type=types.accept_rule, default="lossless",
                   help="lossless | greedy | additive:δ | multiplicative:α | topm:m | typical:ε,δ")
    p.add_argument("--batch-size", type=types.positive_int, default=None, help="rows decoded together")
    p.add_argument("--temperature", type=float, default=1.0, help="only when asked (changes the law)")
    p.add_argument("--top-k", type=types.positive_int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--device", default=None, help="cuda / cpu (default: CUDA when available)")
    p.add_argument("--cache-dir", default=None, help="cache root for converted models and compiled grammars")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def write_jsonl_atomic(path: str | os.PathLike[str], rows: Sequence[dict[str, Any]]) -> None:
    """Write ``rows`` as JSONL to ``path`` through a temp file in the same folder and ``os.replace``.

    Raises:
        InvalidArgumentError: the folder does not exist or cannot be written (names ``--out``).
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidArgumentError(f"--out: folder does not exist: {folder}")
    data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
    try:
        atomic_write(target, [data])
    except PermissionError as exc:
        raise InvalidArgumentError(f"--out: cannot write in {folder}: {exc.strerror}") from None


def _trie_nodes(path: str | None) -> int | None:
    """Node count of the trie file at ``path`` (None when there is none)."""
    if path is None or not Path(path).is_file():
        return None
    return int(trie_header(path)["n_nodes"])


def run(args: argparse.Namespace) -> int:
    """``gad sample``: load the model and grammar, sample, print (and write ``--out``). Returns 0."""
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise InvalidArgumentError(f"--top-p must be in (0, 1], got {args.top_p}")
    if not args.temperature > 0:
        raise InvalidArgumentError(f"--temperature must be > 0, got {args.temperature}")
    if not args.prompt.strip() and not args.raw:
        raise InvalidArgumentError("--prompt is empty (with --raw an empty prompt samples unconditioned text)")
    if args.out is not None:
        folder = Path(args.out).parent
        if not folder.is_dir():
            raise InvalidArgumentError(f"--out: folder does not exist: {folder}")
    speculative: Any = args.speculative
    if speculative is not None:
        speculative = check_drafter_spec(speculative)
    method = get_method(args.method)
    if args.trie is not None and not method.uses_trie:
        raise InvalidArgumentError(f"--trie needs a method that learns a Φ̂ trie (--method asap); "
                                   f"--method {method.name} would ignore it")
    if args.tree is not None and speculative is None:
        raise InvalidArgumentError("--tree needs --speculative")
    grammar = Grammar.from_name_or_file(args.grammar)
    lm = load_model(args.model, device=args.device, cache_dir=args.cache_dir)
    compiled = compile_grammar(grammar, lm.vocab, cache_dir=args.cache_dir)
    before = _trie_nodes(args.trie) if method.uses_trie else None
    samples = api.sample(lm, compiled, args.prompt, n=args.n, method=args.method, seed=args.seed,
                         max_new_tokens=args.max_new_tokens, trie=args.trie, batch_size=args.batch_size,
                         chat=not args.raw, special_tokens=args.special_tokens,
                         temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                         progress=not args.no_progress, speculative=speculative,
                         draft_k=args.draft_k, tree=args.tree, accept=args.accept)
    if args.trie is not None and method.uses_trie:
        after = _trie_nodes(args.trie)
        print(f"ASAp trie {args.trie}: {after} nodes ({'new' if before is None else f'was {before}'}), saved",
              file=sys.stderr)
    for i, s in enumerate(samples):
        print(f"--- sample {i}: finished={s.finished} logprob={s.logprob:.4f} nats tokens={len(s.token_ids)}")
        print(s.text)
    if args.out is not None:
        rows = [{"text": s.text, "token_ids": s.token_ids, "logprob": s.logprob, "finished": s.finished,
                 "method": s.method} for s in samples]
        write_jsonl_atomic(args.out, rows)
        print(f"wrote {len(rows)} samples to {args.out}", file=sys.stderr)
    return 0


