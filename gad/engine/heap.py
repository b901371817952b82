"""A pre-faulted C heap for servers: the first masks of new grammars stop paying page faults.

A mask computed for a lexer state no grammar of the process has reached builds automata and token
walks: numpy arrays, new memory while the process's caches grow.  The first touch of each new 4 KiB
page is a minor page fault, 2-10 µs each on the VMs gad is measured on (about 0.1-0.5 µs on bare
metal); a step-8 MaskBench run took ~28,000 of them inside its masks, ~47 per mask in its slowest
1% (``benchmarks/profile_schema_tail.py``, ``benchmarks/bench_schema.py --reserve-heap-mib``).

:func:`reserve_heap` is a start-up step, like ``gc.freeze()``: it tells glibc's malloc to keep what
is freed (no trimming; allocations under a fixed threshold from the heap, not from fresh ``mmap``
regions each time) and touches ``mib`` MiB of heap once, then frees it.  Later allocations reuse
those pages instead of faulting new ones.  It acts on the whole process — every library's ``malloc``
(numpy's arrays, Rust and C++ engines beside gad) — and the memory stays resident: the process's
resident size grows by ``mib`` MiB at once and no longer shrinks when memory is freed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

from gad.errors import InvalidArgumentError

# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MADV_POPULATE_WRITE = 23  # Linux 5.14+: fault a range in for writing, one call

_CHUNK_MIB = 8  # each chunk touched, under the mmap threshold so that it comes from the heap
_lock = threading.Lock()


def _glibc() -> ctypes.CDLL | None:
    """The process's C library if it is glibc (it has ``mallopt`` and ``gnu_get_libc_version``), else None."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it (musl, macOS's libSystem do not)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.restype = None
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallopt.restype = ctypes.c_int
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.madvise.restype = ctypes.c_int
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


def _touch(libc: ctypes.CDLL, p: int, n: int) -> None:
    """Fault in the ``n`` bytes at ``p`` for writing: ``madvise(MADV_POPULATE_WRITE)`` over the whole
    pages inside (~3x faster than a fault per page here), then a write over all of it where the kernel
    lacks it (a read of untouched memory would map the shared zero page, not a page of its own)."""
    start = (p + 4095) & ~4095
    length = (p + n - start) & ~4095
    if length <= 0 or libc.madvise(start, length, MADV_POPULATE_WRITE) != 0:
        ctypes.memset(p, 1, n)


def reserve_heap(mib: int, *, mmap_threshold_mib: int = 32) -> bool:
    """Pre-fault ``mib`` MiB of the C heap and keep it in the process (glibc only).

    Sets glibc's ``M_MMAP_THRESHOLD`` to ``mmap_threshold_mib`` MiB (fixed: allocations under it come
    from the heap) and ``M_TRIM_THRESHOLD`` to its maximum (freed memory is not returned to the
    system), then allocates ``mib`` MiB in chunks of 8 MiB, faults every page in for writing and frees them
    (~0.7 s for 256 MiB on the VMs gad is measured on).  The
    pages stay mapped; later allocations under the threshold reuse them without a page fault.
    Call it once at start-up, before the first grammar (as a server calls ``gc.freeze()``); calling
    it again touches ``mib`` MiB more.  ``mib=0`` sets the two thresholds only.

    Args:
        mib: MiB to touch (int, 0 to 1,048,576).
        mmap_threshold_mib: glibc's mmap threshold in MiB (int, 1 to 32; glibc caps it at 32 MiB on
            64-bit systems): larger allocations keep going to fresh ``mmap`` regions and back.

    Returns:
        True if the settings were made and the memory touched; False where the C library is not
        glibc (musl, macOS, Windows): nothing is changed there.

    Raises:
        InvalidArgumentError: ``mib`` or ``mmap_threshold_mib`` is not an int in range.
        MemoryError: malloc could not give ``mib`` MiB (what it gave is freed first).
    """
    for name, value, lo, hi in (("mib", mib, 0, 1 << 20), ("mmap_threshold_mib", mmap_threshold_mib, 1, 32)):
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise InvalidArgumentError(f"reserve_heap: {name} must be an int from {lo} to {hi:,}, got {value!r}")
    libc = _glibc()
    if libc is None:
        return False
    with _lock:
        if not libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold_mib << 20) \
                or not libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1):  # pragma: no cover - glibc accepts both
            return False
        chunk = min(_CHUNK_MIB, mmap_threshold_mib) << 20
        chunk -= 4096  # (malloc's own header: the chunk stays under the threshold)
        held: list[int] = []
        try:
            left = mib << 20
            while left > 0:
                n = min(chunk, left)
                p = libc.malloc(n)
                if not p:
                    raise MemoryError(f"reserve_heap: malloc gave {len(held) * chunk >> 20} of {mib} MiB")
                _touch(libc, p, n)
                held.append(p)
                left -= n
        finally:
            for p in reversed(held):  # (freed top-down: the chunks merge into the heap's top, kept)
                libc.free(p)
    return True


def reserve_heap_from_env(var: str) -> bool | None:
    """:func:`reserve_heap` of the MiB named by environment variable ``var``, for servers configured
    by their environment (``GAD_VLLM_RESERVE_HEAP_MIB`` in :mod:`gad.vllm.plugin`).

    Returns:
        None where ``var`` is unset or empty (nothing done), else what :func:`reserve_heap` returns.

    Raises:
        InvalidArgumentError: the value is not a whole number of MiB in range (the message names ``var``).
    """
    raw = os.environ.get(var, "").strip()
    if not raw:
        return None
    try:
        mib = int(raw)
    except ValueError:
        raise InvalidArgumentError(f"{var}={raw!r}: expected a whole number of MiB") from None
    try:
        return reserve_heap(mib)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{var}={raw!r}: {e}") from None
