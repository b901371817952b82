"""``gad sample``: draw grammatical samples from a model and print them (``--out``: JSONL rows).

Faults: ``--out`` rows are appended as samples finish (valid JSONL at every moment); the ``--trie`` is
checkpointed every ``--checkpoint-every`` samples and on SIGINT / SIGTERM; the same command run again
continues an interrupted run (sample ``i`` of a seed is always drawn from ``default_rng([seed, i])``);
concurrent runs on one trie lock and merge it (:meth:`gad.phi.asap.AsapPhi.flush`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
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
from gad.phi.registry import ESTIMATORS, make_estimator
from gad.phi.trie_io import trie_header
from gad.sampling.methods import get_method, method_names
from gad.speculative.drafters import check_drafter_spec


def _whitespace(value: str) -> str | int:
    """``--whitespace``: ``compact``, ``flexible`` or a non-negative integer."""
    if value in ("compact", "flexible"):
        return value
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected compact, flexible or an integer >= 0, got {value!r}")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``gad sample`` options to ``p``."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--grammar", metavar="FILE|NAME",
                     help="grammar file (.lark, .ebnf, .gbnf) or a shipped grammar's name (json, json_compact, "
                          "sql, text)")
    src.add_argument("--schema", metavar="FILE.json",
                     help="a JSON Schema file: samples are JSON valid under it (see docs/schema.md)")
    src.add_argument("--regex", metavar="PATTERN", help="samples are strings s with re.fullmatch(PATTERN, s)")
    p.add_argument("--whitespace", type=_whitespace, default="compact", metavar="compact|flexible|N",
                   help="--schema only: white space between JSON tokens: none (default), RFC 8259, or runs "
                        "of at most N characters")
    p.add_argument("--strict", action="store_true",
                   help="--schema only: an absent additionalProperties means false")
    p.add_argument("--lenient", action="store_true",
                   help="--schema only: drop keywords gad cannot express exactly (with a warning) instead of "
                        "refusing the schema")
    p.add_argument("--prompt", required=True, metavar="TEXT", help="the prompt")
    p.add_argument("-n", type=types.positive_int, default=1, help="number of samples (default 1)")
    p.add_argument("--max-new-tokens", type=types.positive_int, default=256,
                   help="token budget per sample (default 256)")
    p.add_argument("--seed", type=types.seed, default=0, help="random seed, a non-negative integer (default 0)")
    p.add_argument("--model", default=None, metavar="PATH",
                   help="local HF model directory or .gguf file (default: bundled SmolLM2-135M-Instruct); "
                        "toy:ascii[:SEED] / toy:bits: gad.testing's toy models (tests, demos)")
    p.add_argument("--out", default=None, metavar="F.jsonl",
                   help="append one JSON row per sample as it finishes (index, seed, text, token_ids, logprob, "
                        "finished); a file holding part of the same run is continued")
    p.add_argument("--raw", action="store_true", help="do not apply the model's chat template")
    p.add_argument("--special-tokens", action="store_true",
                   help="encode control tokens typed in --prompt (e.g. <|im_end|>) as control tokens "
                        "(default: they are plain text)")
    p.add_argument("--method", type=types.method, default="gcd", metavar="METHOD",
                   help=f"sampling law: {', '.join(method_names())} (default gcd)")
    p.add_argument("--trie", default=None, metavar="FILE",
                   help="ASAp trie file (loaded, checkpointed, saved; runs sharing it merge what they learn)")
    p.add_argument("--checkpoint-every", type=types.positive_int, default=None, metavar="K",
                   help="save the --trie every K samples (default 1) and on SIGINT/SIGTERM")
    p.add_argument("--speculative", default=None, metavar="DRAFTER",
                   help="speculative decoding drafter: forced, forced-token, ngram[:N], self[:L], self-greedy[:L], a draft "
                        "model path, or several joined by '+' (e.g. forced+ngram)")
    p.add_argument("--draft-k", type=types.positive_int, default=4, help="tokens drafted per step (default 4)")
    p.add_argument("--tree", type=types.tree, default=None, metavar="m,d", help="greedy tree drafting")
    p.add_argument("--accept", type=types.accept_rule, default="lossless",
                   help="lossless | greedy | additive:δ | multiplicative:α | topm:m | typical:ε,δ")
    p.add_argument("--batch-size", type=types.positive_int, default=None, help="rows decoded together")
    al = p.add_argument_group("exact aligned methods (rs, smc, mcmc; BRIEF §6)")
    al.add_argument("--max-proposals", type=types.positive_int, default=None, metavar="N",
                    help="rs: stop with an error after N proposals (default 1000 x n)")
    al.add_argument("--particles", type=types.positive_int, default=None, metavar="N",
                    help="smc: particles (default n; with --draws, n draws are resampled from them)")
    al.add_argument("--ess-threshold", type=float, default=0.5, metavar="F",
                    help="smc: resample when ESS < F x particles (default 0.5)")
    al.add_argument("--proposal", default="gcd", metavar="EST",
                    help="smc: the Φ estimator of the proposal: gcd, asap (with --trie), onestep, exact (default gcd)")
    al.add_argument("--draws", action="store_true", help="smc: return n unweighted draws instead of the particles")
    al.add_argument("--steps", type=types.positive_int, default=10, metavar="K",
                    help="mcmc: Metropolis-Hastings steps per chain, n chains (default 10)")
    al.add_argument("--move", choices=("restart", "uniform", "priority"), default="uniform",
                    help="mcmc: restart (independent MH) or prefix truncation, uniform or by surprisal (default uniform)")
    al.add_argument("--no-trie-cache", action="store_true",
                    help="asap / rs / mcmc: run the model at every step instead of reading expanded trie nodes")
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


def check_file_option(option: str, path: str | None, must_exist: bool = False) -> None:
    """Refuse a ``--out`` / ``--trie`` value that names a folder, an unreadable file or a missing folder.

    Raises:
        InvalidArgumentError: naming the option and the path.
    """
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise InvalidArgumentError(f"{option}: {path} is a directory, expected a file")
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidArgumentError(f"{option}: folder does not exist: {folder}")
    if p.exists():
        if not p.is_file():
            raise InvalidArgumentError(f"{option}: {path} is not a regular file")
        try:
            with open(p, "rb") as f:
                f.read(1)
        except OSError as exc:
            raise InvalidArgumentError(f"{option}: cannot read {path}: {exc.strerror}") from None
    elif must_exist:
        raise InvalidArgumentError(f"{option}: file not found: {path}")


def _toy_model(spec: str) -> Any:
    """``toy:ascii[:SEED]`` / ``toy:bits``: the deterministic toy models of :mod:`gad.testing.toys`."""
    from gad.testing import toys

    parts = spec.split(":")
    if parts[1:2] == ["ascii"] and len(parts) <= 3:
        seed = parts[2] if len(parts) == 3 else "0"
        if seed.isdigit():
            return toys.toy_model(int(seed))
    if parts[1:] == ["bits"]:
        return toys.gad_binary()[0]
    raise InvalidArgumentError(f"--model: unknown toy model {spec!r} (toy:ascii, toy:ascii:SEED, toy:bits)")


class _Rows:
    """``--out``: JSONL rows appended one whole line at a time (one ``write``, flushed and fsync'ed), so
    the file is valid JSONL at every moment and a killed run keeps every finished sample.

    A file already holding rows of the same run (same ``run`` key: model, grammar, prompt, method, seed,
    settings) is continued; rows of another run are refused (never overwritten); a last line cut short
    by a killed writer is dropped.
    """

    def __init__(self, path: str, run_key: str, seed: int) -> None:
        self.path = path
        self.run_key = run_key
        self.seed = seed
        self.rows: list[dict[str, Any]] = []
        self.repaired = False
        if Path(path).is_file():
            self._read()

    def _read(self) -> None:
        data = Path(self.path).read_bytes()
        keep = data[:data.rfind(b"\n") + 1] if not data.endswith(b"\n") else data
        rows = []
        for ln, line in enumerate(keep.decode("utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise InvalidArgumentError(f"--out: {self.path}:{ln}: not a JSON row; choose another file "
                                           f"or delete it") from None
            rows.append(row)
        others = [r for r in rows if not isinstance(r, dict) or r.get("run") != self.run_key
                  or r.get("seed") != self.seed]
        if others:
            r = others[0]
            what = (f"seed {r.get('seed')!r} instead of {self.seed}" if isinstance(r, dict) and "seed" in r
                    and r.get("seed") != self.seed else "another model, grammar, prompt, method or settings"
                    if isinstance(r, dict) and "run" in r else "rows not written by gad sample")
            raise InvalidArgumentError(f"--out: {self.path} already holds {len(rows)} rows of another run "
                                       f"({what}); choose another file or delete it")
        idx = [r.get("index") for r in rows]
        if idx != list(range(len(rows))):
            raise InvalidArgumentError(f"--out: {self.path}: sample indices are not 0..{len(rows) - 1}")
        if keep != data:
            with open(self.path, "r+b") as f:  # drop the line a killed writer cut short
                f.truncate(len(keep))
                os.fsync(f.fileno())
            self.repaired = True
        self.rows = rows

    def append(self, row: dict[str, Any]) -> None:
        line = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.rows.append(row)


def _run_key(lm: Any, compiled: Any, args: argparse.Namespace, prompt_ids: list[int]) -> str:
    ident = {"model": str(getattr(lm, "fingerprint", None) or getattr(lm, "name", "")),
             "grammar": compiled.grammar_sha256, "prompt": prompt_ids, "method": args.method,
             "seed": args.seed, "max_new_tokens": args.max_new_tokens, "temperature": args.temperature,
             "top_k": args.top_k, "top_p": args.top_p, "speculative": args.speculative,
             "draft_k": args.draft_k, "tree": args.tree, "accept": args.accept}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]


class _RunState:
    """Counters of one ``gad sample`` run: samples drawn, samples since the last checkpoint, save error."""

    def __init__(self) -> None:
        self.drawn = 0
        self.since = 0
        self.save_error: OSError | None = None


class _Signals:
    """SIGINT / SIGTERM raise ``KeyboardInterrupt`` — except between the trie learning from a batch and
    that batch's rows being written (and checkpointed), where the interrupt waits for the end of that
    section, so the trie and ``--out`` always hold the same samples."""

    def __init__(self) -> None:
        self.critical = False
        self.pending = False

    def handler(self, signum: int, frame: Any) -> None:
        if self.critical:
            self.pending = True
        else:
            raise KeyboardInterrupt

    def leave(self) -> None:
        self.critical = False
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


# the method-specific flags: option name -> (flag, its default)
_METHOD_FLAGS: dict[str, tuple[str, Any]] = {
    "max_proposals": ("--max-proposals", None), "particles": ("--particles", None),
    "ess_threshold": ("--ess-threshold", 0.5), "proposal": ("--proposal", "gcd"), "draws": ("--draws", False),
    "steps": ("--steps", 10), "move": ("--move", "uniform"), "trie_cache": ("--no-trie-cache", True)}


def method_options(args: argparse.Namespace, method: Any) -> dict[str, Any]:
    """The ``options`` of ``gad.sample`` for ``method`` from the parsed flags (only those it accepts).

    Raises:
        InvalidArgumentError: a flag of another method set (away from its default): it would do nothing.
    """
    flags = {k: getattr(args, flag[2:].replace("-", "_"), default) for k, (flag, default) in _METHOD_FLAGS.items()}
    flags["trie_cache"] = not getattr(args, "no_trie_cache", False)  # (the one flag that turns its option off)
    ignored = [flag for k, (flag, default) in _METHOD_FLAGS.items() if flags[k] != default and k not in method.options]
    if ignored:
        raise InvalidArgumentError(f"{' / '.join(ignored)}: options of other methods; --method {method.name} would "
                                   "ignore them")
    return {k: v for k, v in flags.items() if k in method.options and v is not None}


def run(args: argparse.Namespace) -> int:
    """``gad sample``: load the model and grammar, sample, print and write ``--out`` rows as samples finish.

    Returns 0, 130 when interrupted (SIGINT / SIGTERM: finished rows and the trie are saved first), or 2
    when the trie could not be saved (the samples are printed and written all the same).
    """
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise InvalidArgumentError(f"--top-p must be in (0, 1], got {args.top_p}")
    if not args.temperature > 0 or args.temperature == float("inf"):
        raise InvalidArgumentError(f"--temperature must be > 0 and finite, got {args.temperature}")
    if not args.prompt.strip() and not args.raw:
        raise InvalidArgumentError("--prompt is empty (with --raw an empty prompt samples unconditioned text)")
    check_file_option("--out", args.out)
    check_file_option("--trie", args.trie)
    if args.out is not None and args.trie is not None and Path(args.out).resolve() == Path(args.trie).resolve():
        raise InvalidArgumentError("--out and --trie name the same file")
    speculative: Any = args.speculative
    if speculative is not None:
        speculative = check_drafter_spec(speculative)
    method = get_method(args.method)
    method_options(args, method)  # (another method's flags are refused before anything loads)
    if args.trie is not None and not method.uses_trie:
        raise InvalidArgumentError(f"--trie needs a method that learns a Φ̂ trie (--method asap); "
                                   f"--method {method.name} would ignore it")
    if method.uses_trie and args.trie is None and args.checkpoint_every is not None:
        raise InvalidArgumentError("--checkpoint-every needs --trie (there is no trie file to checkpoint)")
    if args.checkpoint_every is not None and not method.uses_trie:
        raise InvalidArgumentError(f"--checkpoint-every: --method {method.name} keeps no trie")
    if args.tree is not None and speculative is None:
        raise InvalidArgumentError("--tree needs --speculative")
    if speculative is None and (args.draft_k != 4 or args.accept != "lossless"):
        raise InvalidArgumentError("--draft-k and --accept are options of speculative decoding; "
                                   "they need --speculative")
    if args.schema is None and (args.strict or args.lenient or args.whitespace != "compact"):
        raise InvalidArgumentError("--whitespace, --strict and --lenient apply to --schema only")
    if args.schema is not None:
        grammar = Grammar.from_json_schema(Path(args.schema), whitespace=args.whitespace, strict=args.strict,
                                           lenient=args.lenient)
    elif args.regex is not None:
        grammar = Grammar.from_regex(args.regex)
    else:
        grammar = Grammar.from_name_or_file(args.grammar)
    if args.model is not None and args.model.startswith("toy:"):
        lm = _toy_model(args.model)
    else:
        lm = load_model(args.model, device=args.device, cache_dir=args.cache_dir)
    compiled = compile_grammar(grammar, lm.vocab, cache_dir=args.cache_dir)
    prompt_ids = lm.encode_prompt(args.prompt, chat=not args.raw, special_tokens=args.special_tokens)
    before = _trie_nodes(args.trie) if method.uses_trie else None
    out = _Rows(args.out, _run_key(lm, compiled, args, prompt_ids), args.seed) if args.out else None
    done = len(out.rows) if out is not None else 0
    if out is not None and out.repaired:
        print(f"--out {args.out}: dropped a last line cut short by an interrupted run", file=sys.stderr)
    if done >= args.n:
        print(f"--out {args.out} already holds all {args.n} samples of this run (seed {args.seed}); "
              f"nothing to draw", file=sys.stderr)
        return 0
    if done:
        print(f"continuing the run in {args.out}: it holds samples 0..{done - 1} of seed {args.seed}; drawing "
              f"{done}..{args.n - 1}", file=sys.stderr)
    note = ""
    if not done and args.trie is not None and before is not None and out is None:
        note = (f"note: seed {args.seed} starts again at sample 0 (no --out file to continue from); the trie "
                f"{args.trie} already learnt from {trie_header(args.trie)['samples']} samples")

    def show(s: Any) -> None:
        w = "" if s.log_weight is None else f" log_weight={s.log_weight:.4f}"
        print(f"--- sample {s.index}: finished={s.finished} logprob={s.logprob:.4f} nats "
              f"tokens={len(s.token_ids)}{w}")
        print(s.text, flush=True)

    def write(s: Any) -> None:
        if out is not None:
            out.append({"index": s.index, "seed": args.seed, "run": out.run_key, "text": s.text,
                        "token_ids": s.token_ids, "logprob": s.logprob, "finished": s.finished,
                        "method": s.method, "log_weight": s.log_weight, "log_z0": s.log_z0})

    every = args.checkpoint_every or 1
    state = _RunState()
    est: Any = None

    guard = _Signals()

    def on_batch(batch: list[Any]) -> None:
        guard.critical = True  # (already set by the estimator's observe)
        try:
            _write_batch(batch)
        finally:
            guard.leave()

    def _write_batch(batch: list[Any]) -> None:
        for s in batch:
            show(s)
            write(s)
        state.drawn += len(batch)
        state.since += len(batch)
        if getattr(est, "path", None) is not None and state.since >= every and state.save_error is None:
            state.since = 0
            try:
                est.flush()
            except OSError as exc:
                state.save_error = exc
                print(f"gad sample: warning: cannot checkpoint the trie: {_os_error(exc, args.trie)} "
                      "(sampling goes on)", file=sys.stderr)

    common: dict[str, Any] = dict(n=args.n - done, seed=args.seed, max_new_tokens=args.max_new_tokens,
                  batch_size=args.batch_size, chat=not args.raw, temperature=args.temperature,
                  top_k=args.top_k, top_p=args.top_p, progress=not args.no_progress)
    old_handlers = {sig: signal.signal(sig, guard.handler) for sig in (signal.SIGTERM, signal.SIGINT)} \
        if _main_thread() else {}
    interrupted = False
    try:
        try:
            if speculative is None and method.name in ESTIMATORS:
                settings = {"temperature": float(args.temperature), "top_k": args.top_k, "top_p": args.top_p,
                            "batch_size": int(args.batch_size or method.default_batch or min(args.n, 8))}
                est = make_estimator(method.name, lm, compiled, prompt_ids, trie=args.trie, settings=settings)
                observe = est.observe

                def guarded_observe(tokens: Any, finished: bool) -> None:
                    guard.critical = True  # learning from a batch: its rows must be written too
                    observe(tokens, finished)

                est.observe = guarded_observe
                if note:  # printed once the trie has loaded (a bad trie gives its one-line error alone)
                    print(note, file=sys.stderr)
                common["batch_size"] = settings["batch_size"]
                api.sample(lm, compiled, prompt_ids, method=est, first_index=done, on_batch=on_batch,
                           **common)
            else:  # registered runners and speculative decoding: rows are written when the run ends
                if done:
                    raise InvalidArgumentError(f"--out {args.out}: continuing a run needs a Φ-estimator "
                                               f"method without --speculative; choose another file")
                if note:
                    print(note, file=sys.stderr)
                samples = api.sample(lm, compiled, prompt_ids, method=args.method, trie=args.trie,
                                     speculative=speculative, draft_k=args.draft_k, tree=args.tree,
                                     accept=args.accept, options=method_options(args, method), **common)
                for i, s in enumerate(samples):
                    s.index = i if s.index is None else s.index
                on_batch(samples)
                _print_compute(method.name, samples)
        except KeyboardInterrupt:
            interrupted = True
        except OSError as exc:  # the final flush of the trie (the samples are printed and written)
            if args.trie is None or state.drawn < args.n - done:
                raise
            state.save_error = exc
    finally:
        for sig, h in old_handlers.items():
            signal.signal(sig, h)
    if interrupted:
        saved = ""
        if est is not None and getattr(est, "path", None) is not None:
            try:
                est.flush()
                saved = f"; trie {args.trie} saved ({len(est.trie)} nodes)"
            except OSError as exc:
                saved = f"; trie not saved: {_os_error(exc, args.trie)}"
        where = f"; {done + state.drawn} rows in {args.out}, rerun the same command to continue" \
            if out is not None else ""
        print(f"gad sample: interrupted after {state.drawn} of {args.n - done} samples{where}{saved}",
              file=sys.stderr)
        return 130
    if state.save_error is not None:
        print(f"gad sample: error: the trie was not saved: {_os_error(state.save_error, args.trie)} "
              f"(the samples are printed{' and written' if out is not None else ''})", file=sys.stderr)
        return 2
    if args.trie is not None and method.uses_trie:
        after = _trie_nodes(args.trie)
        merged = getattr(est, "merged_samples", 0)
        extra = f"; merged {merged} samples other runs added meanwhile" if merged else ""
        print(f"ASAp trie {args.trie}: {after} nodes ({'new' if before is None else f'was {before}'}), "
              f"saved{extra}", file=sys.stderr)
    if out is not None:
        print(f"wrote {state.drawn} samples to {args.out}"
              + (f" (now {len(out.rows)})" if done else ""), file=sys.stderr)
    return 0


def _print_compute(name: str, samples: list[Any]) -> None:
    """One stderr line with the model compute of an aligned run (rows, positions, prompt passes)."""
    comp = samples[-1].stats.get("compute") if samples else None
    if comp:
        extra = {k: samples[-1].stats[k] for k in ("acceptance_rate", "log_z_hat", "ess") if k in samples[-1].stats}
        print(f"{name}: model rows {comp['model_rows']}, positions {comp['model_positions']}, "
              f"prompt passes {comp['prompt_passes']}" + "".join(f", {k} {v:.4g}" for k, v in extra.items()),
              file=sys.stderr)


def _os_error(exc: OSError, path: str | None) -> str:
    """One line for an OS error: the path it concerns (never a temp file's name) and the reason."""
    name = exc.filename if exc.filename is not None else path
    return f"{name}: {exc.strerror or exc}"


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
