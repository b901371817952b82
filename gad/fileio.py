"""Atomic file writes: a crash or an error never leaves a half-written file, nor loses the previous one.

Every file gad writes for the user (samples, summaries, plots, tries, acceptance logs) and its compile
cache go through :func:`atomic_write` / :func:`atomic_write_with`: the content goes to a temporary file
in the same folder, is flushed to disk, gets the permissions a plain ``open(path, "w")`` would give
(``0o666`` minus the umask; ``tempfile.mkstemp`` alone would leave it owner-only), and replaces
``path`` with ``os.replace``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_folder(folder: str) -> None:
    try:
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on folders
        pass


def atomic_write_with(path: str | os.PathLike[str], write: Callable[[str], Any]) -> None:
    """Call ``write(tmp)`` to fill a temporary file next to ``path`` (same suffix, so writers that look
    at it — matplotlib — pick the right format), then atomically replace ``path`` with it.

    Raises:
        OSError: the folder is not writable or the disk is full (the previous file is kept); anything
            ``write`` raises (the temporary file is removed).
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    # the writer's pid in the name lets the next run remove what a killed run left (see
    # gad.engine.cachefile.clean_stale_temps)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.pid{os.getpid()}.", suffix=os.path.splitext(base)[1] or ".tmp", dir=folder)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_folder(folder)


def atomic_write(path: str | os.PathLike[str], chunks: Iterable[bytes | memoryview]) -> None:
    """Write ``chunks`` (bytes) to ``path`` atomically (see the module docstring).

    Raises:
        OSError: the folder is not writable or the disk is full (the previous file is kept).
    """
    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            for c in chunks:
                f.write(c)

    atomic_write_with(path, write)


def default_cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The root of gad's on-disk caches: ``cache_dir``, else ``$GAD_CACHE_DIR``, else ``~/.cache/gad``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("GAD_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "gad"
