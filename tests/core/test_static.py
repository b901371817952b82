"""The package's shape, checked as part of the suite (so CI enforces it): imports point down the stack
(import-linter's layers contract in pyproject.toml), no import circles anywhere in ``gad``, the type
checker passes, and ruff is clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_layers_contract_is_kept() -> None:
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports (import-linter) is not installed: it is in the test extras")
    out = _run(exe)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 kept, 0 broken" in out.stdout


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), i.e. import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v) & modules):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(modules):
        if m not in index:
            visit(m)
    return out


def test_no_import_circles() -> None:
    graph = grimp.build_graph("gad", cache_dir=None)
    assert _cycles(graph, set(graph.modules)) == []


def test_cycle_finder_finds_a_circle() -> None:
    """The check above can fail: a planted two-module circle is reported."""
    graph = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(m)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph, set(graph.modules)) == [["p.a", "p.b"]]


def test_type_checker_passes() -> None:
    out = _run(sys.executable, "-m", "mypy", "gad")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_is_clean() -> None:
    exe = shutil.which("ruff")
    if exe is None:
        pytest.fail("ruff is not installed: it is in the test extras")
    out = _run(exe, "check", ".")
    assert out.returncode == 0, out.stdout[-4000:]
