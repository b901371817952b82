"""The ``gad`` command line.

    gad sample --grammar grammars/json.lark --prompt "A JSON record of a cat" -n 2 --out cats.jsonl
    gad eval --task binary-... --method gcd asap -n 200
    gad accept-stats --domain json sql chat --prompts-per-domain 3 --max-new-tokens 24

Bad arguments and gad errors print one line (``gad: error: …``) on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from .errors import GadError, InvalidArgumentError

METHODS = ("gcd", "asap", "onestep", "exact")
_ACCEPT = re.compile(r"^(lossless|greedy|additive:[^,]+|multiplicative:[^,]+|topm:\d+|typical:[^,]+,[^,]+)$")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def _tree(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*", text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise argparse.ArgumentTypeError(f"expected m,d with positive integers (e.g. 2,3), got {text!r}")
    return int(m.group(1)), int(m.group(2))


def _accept(text: str) -> str:
    s = text.strip().lower()
    try:
        from .speculative.rules import parse_rule
    except ImportError:
        if not _ACCEPT.match(s):
            raise argparse.ArgumentTypeError(
                f"unknown rule {text!r}: expected lossless, greedy, additive:δ, multiplicative:α, topm:m "
                "or typical:ε,δ") from None
        return s
    try:
        parse_rule(s)
    except GadError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return s


_DRAFTER_PART = re.compile(r"^(forced(-token)?|ngram(:[1-9]\d*)?|self(-greedy)?(:[1-9]\d*)?)$", re.IGNORECASE)


def check_drafter_spec(spec: str) -> str:
    """Validate a drafter name the way :func:`gad.speculative.drafters.make_drafter` parses it.

    Accepted: ``forced``, ``forced-token``, ``ngram[:N]``, ``self[:L]``, ``self-greedy[:L]`` (``N``, ``L`` positive integers),
    a path to a draft model that exists, or several of these joined by ``+`` (``forced+ngram:3``).
    Returns the stripped spec.

    Raises:
        InvalidArgumentError: an empty part, a malformed name, or a path that does not exist (one line,
            naming ``--speculative``).
    """
    text = spec.strip()
    parts = text.split("+")
    for part in parts:
        part = part.strip()
        if _DRAFTER_PART.match(part):
            continue
        if not part:
            raise InvalidArgumentError(f"--speculative: empty drafter in {spec!r} (expected e.g. forced+ngram)")
        if not Path(part).exists():
            raise InvalidArgumentError(
                f"--speculative: {part!r} is not forced, forced-token, ngram[:N], self[:L], self-greedy[:L] (joined by '+') "
                "nor an existing draft model path")
    return text


def _drafter_type(text: str) -> str:
    """argparse type for drafter names (:func:`check_drafter_spec`)."""
    try:
        return check_drafter_spec(text)
    except InvalidArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--speculative: ")) from None


def _add_sample_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grammar", required=True, metavar="FILE", help="grammar file (.lark, .ebnf, .gbnf)")
    p.add_argument("--prompt", required=True, metavar="TEXT", help="the prompt")
    p.add_argument("-n", type=_positive_int, default=1, help="number of samples (default 1)")
    p.add_argument("--max-new-tokens", type=_positive_int, default=256,
                   help="token budget per sample (default 256)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--model", default=None, metavar="PATH",
                   help="local HF model directory or .gguf file (default: bundled SmolLM2-135M-Instruct)")
    p.add_argument("--out", default=None, metavar="F.jsonl",
                   help="write one JSON row per sample (text, token_ids, logprob, finished)")
    p.add_argument("--raw", action="store_true", help="do not apply the model's chat template")
    p.add_argument("--method", choices=METHODS, default="gcd", help="sampling law (default gcd)")
    p.add_argument("--trie", default=None, metavar="FILE", help="ASAp trie file (loaded and saved)")
    p.add_argument("--speculative", default=None, metavar="DRAFTER",
                   help="speculative decoding drafter: forced, forced-token, ngram[:N], self[:L], self-greedy[:L], a draft "
                        "model path, or several joined by '+' (e.g. forced+ngram)")
    p.add_argument("--draft-k", type=_positive_int, default=4, help="tokens drafted per step (default 4)")
    p.add_argument("--tree", type=_tree, default=None, metavar="m,d", help="greedy tree drafting")
    p.add_argument("--accept", type=_accept, default="lossless",
                   help="lossless | greedy | additive:δ | multiplicative:α | topm:m | typical:ε,δ")
    p.add_argument("--batch-size", type=_positive_int, default=None, help="rows decoded together")
    p.add_argument("--temperature", type=float, default=1.0, help="only when asked (changes the law)")
    p.add_argument("--top-k", type=_positive_int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--device", default=None, help="cuda / cpu (default: CUDA when available)")
    p.add_argument("--cache-dir", default=None, help="cache root for converted models and compiled grammars")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def build_parser() -> argparse.ArgumentParser:
    """The ``gad`` argument parser (sub-commands ``sample``, ``eval`` and ``accept-stats``)."""
    parser = _Parser(prog="gad", description="Grammar-aligned constrained decoding.")
    sub = parser.add_subparsers(dest="command", metavar="{sample,eval,accept-stats}", parser_class=_Parser)
    sub.required = True
    _add_sample_arguments(sub.add_parser("sample", help="draw grammatical samples from a model"))
    ev = sub.add_parser("eval", help="evaluate sampling methods (gad.eval)")
    try:
        from .eval.cli import add_arguments
    except ImportError as exc:
        ev.set_defaults(_eval_missing=str(exc))
        ev.add_argument("rest", nargs=argparse.REMAINDER)
    else:
        add_arguments(ev)
    from .speculative.accept_cli import add_arguments as add_accept_arguments

    add_accept_arguments(sub.add_parser(
        "accept-stats", help="per-domain acceptance statistics of speculative decoding (table + plot)"))
    return parser


def write_jsonl_atomic(path: str | os.PathLike[str], rows: Sequence[dict[str, Any]]) -> None:
    """Write ``rows`` as JSONL to ``path`` through a temp file in the same folder and ``os.replace``.

    Raises:
        InvalidArgumentError: the folder does not exist or cannot be written (names ``--out``).
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidArgumentError(f"--out: folder does not exist: {folder}")
    from .fileio import atomic_write

    data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
    try:
        atomic_write(target, [data])
    except PermissionError as exc:
        raise InvalidArgumentError(f"--out: cannot write in {folder}: {exc.strerror}") from None


def _trie_nodes(path: str | None) -> int | None:
    """Node count of the trie file at ``path`` (None when there is none)."""
    if path is None or not Path(path).is_file():
        return None
    from .phi.trie_io import trie_header

    return int(trie_header(path)["n_nodes"])


def run_sample(args: argparse.Namespace) -> int:
    """``gad sample``: load the model and grammar, sample, print (and write ``--out``). Returns 0."""
    import gad

    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise InvalidArgumentError(f"--top-p must be in (0, 1], got {args.top_p}")
    if not args.temperature > 0:
        raise InvalidArgumentError(f"--temperature must be > 0, got {args.temperature}")
    if not Path(args.grammar).is_file():
        raise InvalidArgumentError(f"--grammar: file not found: {args.grammar}")
    if not args.prompt.strip() and not args.raw:
        raise InvalidArgumentError("--prompt is empty (with --raw an empty prompt samples unconditioned text)")
    if args.out is not None:
        folder = Path(args.out).parent
        if not folder.is_dir():
            raise InvalidArgumentError(f"--out: folder does not exist: {folder}")
    speculative: Any = args.speculative
    if speculative is not None:
        speculative = check_drafter_spec(speculative)
    if args.tree is not None and speculative is None:
        raise InvalidArgumentError("--tree needs --speculative")
    grammar = gad.Grammar.from_file(args.grammar)
    lm = gad.load_model(args.model, device=args.device, cache_dir=args.cache_dir)
    compiled = gad.compile(grammar, lm.vocab, cache_dir=args.cache_dir)
    before = _trie_nodes(args.trie) if args.method == "asap" else None
    samples = gad.sample(lm, grammar, args.prompt, n=args.n, method=args.method, seed=args.seed,
                         max_new_tokens=args.max_new_tokens, trie=args.trie, batch_size=args.batch_size,
                         chat=not args.raw, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                         compiled=compiled, progress=not args.no_progress, speculative=speculative,
                         draft_k=args.draft_k, tree=args.tree, accept=args.accept)
    if args.trie is not None and args.method == "asap":
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


def run_eval(args: argparse.Namespace) -> int:
    """``gad eval``: delegate to :mod:`gad.eval.cli`."""
    missing = getattr(args, "_eval_missing", None)
    if missing is not None:
        raise InvalidArgumentError(f"gad eval is not available in this installation ({missing})")
    from .eval.cli import run

    return int(run(args) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gad`` command.  Returns the exit status (0 ok, 2 bad input, 130 interrupted)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "sample":
            return run_sample(args)
        if args.command == "accept-stats":
            from .speculative.accept_cli import run as run_accept_stats

            return int(run_accept_stats(args) or 0)
        return run_eval(args)
    except GadError as exc:
        print(f"gad {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"gad {args.command}: error: file not found: {exc.filename}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gad: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
