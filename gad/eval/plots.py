"""PNG plots of the evaluation curves (matplotlib, Agg backend), written atomically.

``python -m gad.eval.plots OUT_DIR`` redraws the plots of a ``gad eval`` output folder from its
``summary.json`` (no sampling).
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gad.fileio import atomic_write


def plot_curves(path: str | os.PathLike[str], task: str, curves: Mapping[str, Mapping[str, list[float]]],
                key: str, ylabel: str, log_y: bool = False) -> None:
    """One line per method: ``curves[method][key]`` against ``curves[method]["n"]`` (samples).

    Raises:
        OSError: the file could not be written (a previous plot is kept).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for method, c in curves.items():
        xs = c.get("n", [])
        ys = [y if y is not None and math.isfinite(y) else math.nan for y in c.get(key, [])]
        ax.plot(xs, ys, label=method, marker=".")
    ax.set_xscale("log")
    if log_y:  # symlog keeps exact zeros on the plot; the quantities plotted are >= 0
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_ylim(bottom=0)
    ax.set_xlabel("number of samples")
    ax.set_ylabel(ylabel)
    ax.set_title(task)
    ax.grid(True, alpha=0.3)
    ax.legend()
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write(path, [buf.getvalue()])




def plot_task(plot_dir: str | os.PathLike[str], task: str, tinfo: Mapping[str, Any], window: int) -> list[Path]:
    """The two plots of one task of a ``gad eval`` summary: KL against samples (``<task>_kl.png``,
    symlog y) and the running mean of the target probability (``<task>_expectation.png``).

    Args:
        tinfo: ``summary["tasks"][task]`` (``kind`` and per-method ``curve``).
        window: the sliding window of the open-task KL (for the axis label).
    Returns:
        The paths written.
    """
    curves = {m: info["curve"] for m, info in tinfo["methods"].items()}
    stem = task.replace("/", "__")
    kl_label = ("KL(empirical || Q*) [nats]" if tinfo.get("kind") == "exact"
                else f"KL(window {window} || ideal) [nats]")
    paths = [Path(plot_dir) / f"{stem}_kl.png", Path(plot_dir) / f"{stem}_expectation.png"]
    plot_curves(paths[0], task, curves, "kl", kl_label, log_y=True)
    plot_curves(paths[1], task, curves, "expectation", "running mean of target probability")
    return paths


def replot(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Redraw every plot of a ``gad eval`` output folder from its ``summary.json``.

    Raises:
        FileNotFoundError: ``out_dir/summary.json`` does not exist.
    """
    summary = json.loads((Path(out_dir) / "summary.json").read_text(encoding="utf-8"))
    written: list[Path] = []
    for task, tinfo in summary["tasks"].items():
        written += plot_task(Path(out_dir) / "plots", task, tinfo, int(summary.get("window", 500)))
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m gad.eval.plots OUT_DIR``: redraw the plots of a ``gad eval`` output folder.

    Returns 0, or 2 (with a one-line message) when the folder has no readable ``summary.json``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m gad.eval.plots",
                                 description="Redraw the PNG plots of a gad eval output folder from its summary.json.")
    ap.add_argument("out", nargs="?", default="gad-eval", help="the gad eval --out folder (default gad-eval)")
    args = ap.parse_args(argv)
    try:
        paths = replot(args.out)
    except FileNotFoundError:
        print(f"{ap.prog}: error: {args.out}: no summary.json (not a gad eval output folder)", file=sys.stderr)
        return 2
    except (ValueError, KeyError, TypeError) as exc:
        print(f"{ap.prog}: error: {args.out}/summary.json is not a gad eval summary ({exc})", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
