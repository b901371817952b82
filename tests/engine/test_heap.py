"""gad.engine.heap.reserve_heap: the pre-faulted heap serves later allocations without page faults.

Each check runs in a child process (the settings are process-wide and the memory stays resident)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gad.engine import heap
from gad.errors import InvalidArgumentError

glibc_only = pytest.mark.skipif(heap._glibc() is None, reason="reserve_heap acts on glibc only")

# 200 arrays of 160 KB (10 MB): over glibc's default mmap threshold (128 KiB), so without the reserve
# each is a fresh mapping and every page of it faults in when written
_CHILD = """
import resource, sys
import numpy as np
from gad.engine.heap import reserve_heap
mib = int(sys.argv[1])
if mib >= 0:
    assert reserve_heap(mib) is True
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
kept = [np.ones(20_000) for _ in range(200)]
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
_PAGES = 200 * 20_000 * 8 // 4096  # 7,812 pages written


def _faults(mib: int) -> int:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(mib)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


@glibc_only
def test_reserved_pages_serve_later_arrays_without_faults() -> None:
    assert _faults(-1) > _PAGES // 2  # no reserve: each page of the arrays is a fault
    assert _faults(64) < _PAGES // 20  # 64 MiB reserved: the arrays land on pages already mapped


@glibc_only
def test_thresholds_alone_keep_freed_memory() -> None:
    # mib=0 sets the thresholds only: the arrays come from the heap, but the heap is new, so they fault
    assert _faults(0) > _PAGES // 2


def test_reserve_heap_refuses_bad_arguments() -> None:
    for bad in (-1, 1.5, True, "64", 1 << 21):
        with pytest.raises(InvalidArgumentError, match="mib"):
            heap.reserve_heap(bad)  # type: ignore[arg-type]
    for bad in (0, 33, 2.0):
        with pytest.raises(InvalidArgumentError, match="mmap_threshold_mib"):
            heap.reserve_heap(1, mmap_threshold_mib=bad)  # type: ignore[arg-type]


def test_reserve_heap_is_a_no_op_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_glibc", lambda: None)
    assert heap.reserve_heap(1) is False


def test_reserve_heap_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(heap, "reserve_heap", lambda mib: calls.append(mib) or True)
    monkeypatch.delenv("GAD_TEST_RESERVE", raising=False)
    assert heap.reserve_heap_from_env("GAD_TEST_RESERVE") is None
    monkeypatch.setenv("GAD_TEST_RESERVE", " ")
    assert heap.reserve_heap_from_env("GAD_TEST_RESERVE") is None
    monkeypatch.setenv("GAD_TEST_RESERVE", " 48 ")
    assert heap.reserve_heap_from_env("GAD_TEST_RESERVE") is True and calls == [48]
    monkeypatch.setenv("GAD_TEST_RESERVE", "1.5G")
    with pytest.raises(InvalidArgumentError, match="GAD_TEST_RESERVE='1.5G'"):
        heap.reserve_heap_from_env("GAD_TEST_RESERVE")


def test_reserve_heap_from_env_names_the_variable_for_an_out_of_range_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GAD_TEST_RESERVE", "-4")
    with pytest.raises(InvalidArgumentError, match="GAD_TEST_RESERVE='-4': reserve_heap: mib"):
        heap.reserve_heap_from_env("GAD_TEST_RESERVE")
