"""Atomic writes (gad.fileio): all-or-nothing, no temp files left, umask-respecting permissions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gad.fileio import atomic_write, atomic_write_with


def test_permissions_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "a.bin", [b"x"])
        os.umask(0o077)
        atomic_write(tmp_path / "b.bin", [b"y"])
    finally:
        os.umask(old)
    assert (tmp_path / "a.bin").stat().st_mode & 0o777 == 0o644  # what open(path, "w") gives
    assert (tmp_path / "b.bin").stat().st_mode & 0o777 == 0o600


def test_a_failing_writer_keeps_the_previous_file_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    atomic_write(target, [b"old"])

    def broken(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        atomic_write_with(target, broken)
    assert target.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["summary.json"]
    atomic_write_with(target, lambda tmp: Path(tmp).write_text("new"))
    assert target.read_text() == "new" and sorted(os.listdir(tmp_path)) == ["summary.json"]


def test_the_temp_file_keeps_the_suffix(tmp_path: Path) -> None:
    seen = []
    atomic_write_with(tmp_path / "plot.png", lambda tmp: (seen.append(tmp), Path(tmp).write_bytes(b"p")))
    assert seen[0].endswith(".png") and os.path.dirname(seen[0]) == str(tmp_path)
