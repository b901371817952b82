"""PNG plots of the evaluation curves (matplotlib, Agg backend), written atomically."""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping

from ..phi.trie_io import atomic_write


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
    if log_y:
        ax.set_yscale("symlog", linthresh=1e-3)
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


