"""Python's cyclic garbage collector paused while gad builds a grammar's large, long-lived structures.

Compiling a schema allocates tens of thousands of container objects (the converter's rules, Lark's
rules and terminals, the LALR(1) table's dicts, lexer automata) that live as long as the compiled
grammar. While they are made, every 700 allocations start a young collection, every tenth of those a
collection of generation 1, and those that find the heap a quarter larger than at the last full
collection start a full one, which walks every object the process holds (its caches included), the
very structures being built among them (``benchmarks/profile_schema_ttfm.py`` times them: up to 63 ms
of a MaskBench schema's first mask). With the collector paused, the objects are counted and collected as usual once
the build is over (the next allocation after it starts a young collection).

:func:`paused_gc` is reentrant and thread-safe: nested or concurrent builds pause it once, and the
last one to finish restores it as it found it (a collector the user disabled stays disabled). Garbage
the build itself leaves in reference cycles is freed at the first collection after it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
_DEPTH = [0]  # builds in progress, every thread together
_WAS_ENABLED = [False]  # the collector's state when the first of them began


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic collector (``gc.disable()``) for the ``with`` block; on leaving the outermost
    such block of any thread, re-enable it if it was enabled when the first one began.  Reference
    counting frees objects as usual meanwhile; only cycles wait for the next collection."""
    with _LOCK:
        if _DEPTH[0] == 0:
            _WAS_ENABLED[0] = gc.isenabled()
            gc.disable()
        _DEPTH[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0 and _WAS_ENABLED[0]:
                gc.enable()
