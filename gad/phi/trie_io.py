"""Saving and loading ASAp tries: a versioned, checksummed binary format, written atomically.

Layout (little-endian)::

    magic   8 bytes  b"GADPHIT\\0"
    version u32      FORMAT_VERSION
    hlen    u32      length of the JSON header
    header  hlen     UTF-8 JSON: identity (model, grammar, prompt, settings, vocab_size),
                     samples, n_nodes, columns [[name, dtype], ...]
    payload          the columns, each n_nodes values, in header order (nodes in creation order:
                     every parent before its children)
    digest  32 bytes SHA-256 of header + payload

Loading checks the magic, version, declared size and digest (``TrieFormatError`` on any failure) and
then the identity (``TrieMismatchError`` when the model, grammar, prompt or decoding settings differ).
Writing goes to a temporary file in the same folder, is fsync'ed and renamed over the target with
``os.replace``: a crash leaves either the previous file or the new one, never half of one.
Save and load are vectorised (``numpy`` buffers; no per-node pickling): 10^6 nodes take about a
second each way.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
from typing import Any

import numpy as np

from gad.errors import InvalidArgumentError, TrieFormatError, TrieMismatchError
from gad.fileio import atomic_write
from gad.phi.trie import PhiTrie

MAGIC = b"GADPHIT\0"
FORMAT_VERSION = 1
_COLUMNS = (("parent", "<i8"), ("token", "<i8"), ("p", "<f8"), ("phi", "<f8"), ("mass", "<f8"),
            ("eos", "<f8"), ("nallow", "<i8"), ("vsum", "<f8"), ("ssum", "<f8"))
_IDENTITY_KEYS = ("model", "grammar", "prompt", "settings", "vocab_size")


def check_identity(found: dict[str, Any], expected: dict[str, Any], where: str = "trie") -> None:
    """Raise ``TrieMismatchError`` naming every identity field of ``found`` that differs from ``expected``.

    Fields absent from ``expected`` are not checked.
    """
    bad = [k for k in _IDENTITY_KEYS if k in expected and found.get(k) != expected.get(k)]
    if bad:
        detail = "; ".join(f"{k}: saved {found.get(k)!r}, now {expected.get(k)!r}" for k in bad)
        raise TrieMismatchError(f"{where} was built for a different {', '.join(bad)} ({detail})")


def save_trie(trie: PhiTrie, path: str | os.PathLike[str]) -> None:
    """Save ``trie`` to ``path`` atomically (format above).

    Raises:
        OSError: the file could not be written (the previous file is left intact).
    """
    n = len(trie)
    header = {
        "format": "gad-phi-trie",
        "identity": trie.identity,
        "samples": trie.samples,
        "n_nodes": n,
        "columns": [list(c) for c in _COLUMNS],
    }
    hb = json.dumps(header, sort_keys=True).encode("utf-8")
    h = hashlib.sha256(hb)
    if sys.byteorder != "little":  # pragma: no cover - big-endian hosts
        cols = trie.columns()
        bufs = [memoryview(cols[name].astype(dt).tobytes()).cast("B") for name, dt in _COLUMNS]
    else:  # zero-copy views of the trie's columns, released before returning
        bufs = [memoryview(getattr(trie, name)).cast("B") for name, _ in _COLUMNS]
    try:
        for mv in bufs:
            h.update(mv)
        atomic_write(path, [MAGIC, struct.pack("<II", FORMAT_VERSION, len(hb)), hb, *bufs, h.digest()])
    finally:
        for mv in bufs:
            mv.release()


def _parse_header(data: bytes, path: str) -> tuple[dict[str, Any], int]:
    """The JSON header of a trie file's bytes (at least its first ``16 + header`` bytes) and its length."""
    if len(data) < 16 or data[:8] != MAGIC:
        raise TrieFormatError(f"{path}: not a gad Φ-trie file (bad magic)")
    version, hlen = struct.unpack_from("<II", data, 8)
    if version != FORMAT_VERSION:
        raise TrieFormatError(f"{path}: trie format version {version}, this gad reads {FORMAT_VERSION}")
    if 16 + hlen > len(data):
        raise TrieFormatError(f"{path}: truncated (header)")
    try:
        header = json.loads(data[16:16 + hlen].decode("utf-8"))
        n = int(header["n_nodes"])
        columns = [(str(a), str(b)) for a, b in header["columns"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise TrieFormatError(f"{path}: corrupted header ({exc})") from exc
    if columns != [tuple(c) for c in _COLUMNS] or n < 1:
        raise TrieFormatError(f"{path}: unexpected column layout")
    return header, hlen


def trie_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The header of a saved trie without reading its columns: ``n_nodes``, ``samples`` (samples learnt
    from), ``identity`` (model, grammar, prompt, settings), ``format``, ``columns``.

    Raises:
        TrieFormatError: not a trie file, unknown version, or a truncated / corrupted header.
        OSError: the file cannot be read.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(16)
        if len(head) == 16 and head[:8] == MAGIC:
            head += f.read(struct.unpack_from("<II", head, 8)[1])
    return _parse_header(head, path)[0]


def load_trie(path: str | os.PathLike[str], expected: dict[str, Any] | None = None) -> PhiTrie:
    """Load a trie saved by :func:`save_trie`.

    Args:
        expected: identity fields the trie must match (model, grammar, prompt, settings, vocab_size).
    Raises:
        TrieFormatError: not a trie file, unknown version, truncated, or checksum mismatch.
        TrieMismatchError: saved for another model / grammar / prompt / decoding setting.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    header, hlen = _parse_header(data, path)
    n = int(header["n_nodes"])
    columns = [(str(a), str(b)) for a, b in header["columns"]]
    size = sum(np.dtype(dt).itemsize for _, dt in columns) * n
    end = 16 + hlen + size
    if len(data) != end + 32:
        raise TrieFormatError(f"{path}: truncated or padded: {len(data)} bytes, expected {end + 32}")
    digest = hashlib.sha256(memoryview(data)[8 + 8:end]).digest()
    if digest != data[end:end + 32]:
        raise TrieFormatError(f"{path}: checksum mismatch (corrupted file)")
    identity = header.get("identity") or {}
    if expected:
        check_identity(identity, expected, where=path)
    cols: dict[str, np.ndarray] = {}
    off = 16 + hlen
    for name, dt in columns:
        cols[name] = np.frombuffer(data, dtype=dt, count=n, offset=off)
        off += np.dtype(dt).itemsize * n
    try:
        return PhiTrie.from_columns(cols, identity=identity, samples=int(header.get("samples", 0)))
    except InvalidArgumentError as exc:
        raise TrieFormatError(f"{path}: {exc}") from exc
