"""The ``gad`` command line (one module per sub-command; shared argument types in :mod:`gad.cli.args`).

    gad sample --grammar json --prompt "A JSON record of a cat" -n 2 --out cats.jsonl
    gad eval --task binary/string_start_w_1_all_0 --method gcd asap -n 200
    gad accept-stats --domain json sql chat --prompts-per-domain 3 --max-new-tokens 24

Bad arguments, gad errors and OS errors (a path that is a folder, unreadable, not writable) print one
line (``gad: error: …``) on stderr and exit with status 2; an interrupted command exits with 130; an
internal error prints one line and exits with 1 (``GAD_DEBUG=1`` shows its traceback).  Warnings (a
keyword dropped by ``--lenient``, an unknown schema keyword) print one line each, ``gad sample:
warning: …``.  Every sub-command takes ``--threads N``: torch's CPU threads for the run (0, the default:
torch's own choice; on a machine other jobs share, one thread can decode several times faster).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext

from gad.cli import accept_stats, sample
from gad.cli import eval as eval_cmd
from gad.cli.args import Parser, seed
from gad.errors import GadError
from gad.models.hf import torch_threads

_COMMANDS = {"sample": sample, "eval": eval_cmd, "accept-stats": accept_stats}


def build_parser() -> Parser:
    """The ``gad`` argument parser (sub-commands ``sample``, ``eval`` and ``accept-stats``)."""
    parser = Parser(prog="gad", description="Grammar-aligned constrained decoding.")
    sub = parser.add_subparsers(dest="command", metavar="{sample,eval,accept-stats}", parser_class=Parser)
    sub.required = True
    p_sample = sub.add_parser("sample", help="draw grammatical samples from a model")
    p_eval = sub.add_parser("eval", help="evaluate sampling methods against Q* (gad.eval)")
    p_stats = sub.add_parser("accept-stats",
                             help="per-domain acceptance statistics of speculative decoding (table + plot)")
    sample.add_arguments(p_sample)
    eval_cmd.add_arguments(p_eval)
    accept_stats.add_arguments(p_stats)
    for p in (p_sample, p_eval, p_stats):
        p.add_argument("--threads", type=seed, default=0, metavar="N",
                       help="torch CPU threads (default 0: torch's own choice; on a machine other jobs share, "
                            "1 can decode several times faster: benchmarks/bench_threads.py)")
    return parser


@contextmanager
def _one_line_warnings(command: str) -> Iterator[None]:
    """Within the block each warning prints as one line, ``gad COMMAND: warning: <message>`` (not Python's
    ``file:line: Category: …`` with the source line under it)."""
    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: object = None, line: str | None = None) -> None:
        print(f"gad {command}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gad`` command.  Returns the exit status (0 ok, 2 bad input, 130 interrupted)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        # (--threads 0 leaves torch alone, not even imported: a toy model's run never loads it)
        with _one_line_warnings(args.command), torch_threads(args.threads) if args.threads else nullcontext():
            return int(_COMMANDS[args.command].run(args) or 0)
    except GadError as exc:
        print(f"gad {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"gad {args.command}: error: file not found: {exc.filename}", file=sys.stderr)
        return 2
    except IsADirectoryError as exc:
        print(f"gad {args.command}: error: {exc.filename} is a directory, expected a file", file=sys.stderr)
        return 2
    except OSError as exc:  # permissions, full disk, …: the path and the reason, never a traceback
        where = f"{exc.filename}: " if exc.filename is not None else ""
        print(f"gad {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gad: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug below: one line (GAD_DEBUG=1 shows the traceback)
        if os.environ.get("GAD_DEBUG"):
            raise
        msg = str(exc).splitlines()[0] if str(exc) else ""
        print(f"gad {args.command}: internal error: {type(exc).__name__}: {msg} "
              f"(set GAD_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
