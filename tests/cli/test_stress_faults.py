"""benchmarks/stress_faults.py in small: every fault class once or more, nothing silently wrong, no
traceback, no hang, no data lost."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_stress_faults_small_run_is_clean() -> None:
    spec = importlib.util.spec_from_file_location("stress_faults", ROOT / "benchmarks" / "stress_faults.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tally = mod.run(argparse.Namespace(kills=2, concurrent=1, corrupt=9, budget=600, timeout=120, seed=3))
    assert set(tally.rows) == {"kill", "concurrent", "corrupt trie", "corrupt cache", "corrupt --out"}
    assert sum(r["tried"] for r in tally.rows.values()) == 12
    for cls, r in tally.rows.items():
        assert r["silent wrong"] == r["traceback"] == r["hang"] == r["data loss"] == 0, (cls, tally.notes)
        assert r["clear error"] + r["handled"] == r["tried"]
