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

Loading checks the magic, version, declared size and digest, the header's field types and then the
values (``TrieFormatError`` on any failure: the digest is a plain SHA-256 anyone can recompute, so it
only catches accidents): Φ̂, ``p``, ``M``, ``E`` in ``[0, 1]`` and not NaN (``M`` NaN = never expanded),
``E ≤ M``, tokens in ``[0, vocab_size)``, no prefix stored twice, and every Φ̂ equal (to 1e-9 relative)
to what the trie's own probabilities give (:meth:`PhiTrie.recompute`).  Then the identity
(``TrieMismatchError`` when the model fingerprint, grammar, prompt, vocabulary or decoding settings
differ).
Writing goes to a temporary file in the same folder, is fsync'ed and renamed over the target with
``os.replace``: a crash leaves either the previous file or the new one, never half of one.
Save and load are vectorised (``numpy`` buffers; no per-node pickling): 10^6 nodes take about a
second each way.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
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
_IDENTITY_KEYS = ("model", "model_fingerprint", "grammar", "prompt", "settings", "vocab_size", "vocab")


def check_identity(found: dict[str, Any], expected: dict[str, Any], where: str = "trie") -> None:
    """Raise ``TrieMismatchError`` naming every identity field of ``found`` that differs from ``expected``.

    Fields absent from ``expected`` are not checked.
    """
    bad = [k for k in _IDENTITY_KEYS if k in expected and found.get(k) != expected.get(k)]
    if bad:
        detail = "; ".join(f"{k}: saved {found.get(k)!r}, now {expected.get(k)!r}" for k in bad)
        raise TrieMismatchError(f"{where} was built for a different {', '.join(bad)} ({detail})")


_IDENTITY_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,), "model_fingerprint": (str,), "grammar": (str,), "prompt": (str,), "settings": (dict,),
    "vocab_size": (int,), "vocab": (str,)}


def _check_header_types(header: dict[str, Any], path: str) -> None:
    """Header fields of the right JSON types (a file with a valid digest can still hold wrong ones)."""
    def bad(what: str) -> TrieFormatError:
        return TrieFormatError(f"{path}: corrupted header: {what}")

    if header.get("format") != "gad-phi-trie":
        raise bad(f"format is {header.get('format')!r}, expected 'gad-phi-trie'")
    for k in ("n_nodes", "samples"):
        v = header.get(k, 0)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise bad(f"{k} must be a non-negative integer, got {v!r}")
    identity = header.get("identity", {})
    if not isinstance(identity, dict):
        raise bad(f"identity must be an object, got {type(identity).__name__}")
    for k, v in identity.items():
        want = _IDENTITY_TYPES.get(k)
        if want is not None and (isinstance(v, bool) or not isinstance(v, want)):
            raise bad(f"identity.{k} must be {want[0].__name__}, got {v!r}")


def _check_values(trie: PhiTrie, path: str) -> None:
    """The value checks of :func:`load_trie` (vectorised); replaces the stored Φ̂ / V / S by the canonical
    ones (:meth:`PhiTrie.recompute`) once they are found consistent."""
    def bad(what: str) -> TrieFormatError:
        return TrieFormatError(f"{path}: invalid trie values: {what}")

    c = trie.columns()
    n = len(c["parent"])
    vs = trie.identity.get("vocab_size")
    tok = c["token"][1:]
    if tok.size and (tok.min() < 0 or (isinstance(vs, int) and tok.max() >= vs) or tok.max() >= 1 << 32):
        raise bad(f"token id out of range [0, {vs}) ({int(tok.min())}..{int(tok.max())})")
    for name in ("p", "phi", "eos", "vsum", "ssum"):
        a = c[name]
        if not np.all(np.isfinite(a)):
            raise bad(f"{name} holds NaN or infinity")
        if a.size and (a.min() < 0 or a.max() > 1 + 1e-9):
            raise bad(f"{name} outside [0, 1] ({float(a.min())}..{float(a.max())})")
    m = c["mass"]
    known = ~np.isnan(m)
    if np.any(np.isinf(m)) or np.any(m[known] < 0) or np.any(m[known] > 1 + 1e-9):
        raise bad("M (allowed mass) outside [0, 1]")
    if np.any(c["eos"][known] > m[known] + 1e-9) or np.any(c["eos"][~known] != 0):
        raise bad("EOS mass larger than the allowed mass")
    if np.any(c["nallow"] < 0):
        raise bad("negative allowed-token count")
    if c["p"][0] != 1.0 or c["token"][0] != -1:
        raise bad("root must have p = 1 and token -1")
    if n > 1 and len(trie._child) != n - 1:
        raise bad("a prefix is stored twice")
    stored = c["phi"]
    trie.recompute()
    canon = np.frombuffer(trie.phi, dtype=np.float64)
    off = np.abs(stored - canon) > 1e-9 * np.maximum(stored, canon) + 1e-15
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise bad(f"Φ̂ of node {i} is {float(stored[i])!r} but the trie's own probabilities give {float(canon[i])!r}")


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
        # a fresh id per write: readers tell two versions of the file apart even when the file system
        # reuses the inode and the writes share a size and a (coarse) modification time
        "write_id": secrets.token_hex(8),
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
        if not isinstance(header, dict):
            raise TypeError("the header is not a JSON object")
        _check_header_types(header, path)
        n = int(header["n_nodes"])
        columns = [(str(a), str(b)) for a, b in header["columns"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise TrieFormatError(f"{path}: corrupted header ({exc})") from exc
    if columns != [tuple(c) for c in _COLUMNS] or n < 1:
        raise TrieFormatError(f"{path}: unexpected column layout")
    return header, hlen


def trie_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The header of a saved trie without reading its columns: ``n_nodes``, ``samples`` (samples learnt
    from), ``identity`` (model, grammar, prompt, settings), ``format``, ``columns``, ``write_id`` (a
    random id per write; absent in files written before it was added).

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
        TrieFormatError: not a trie file, unknown version, truncated, checksum mismatch, header fields of
            the wrong types, or invalid values (see the module docstring).
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
        trie = PhiTrie.from_columns(cols, identity=identity, samples=int(header.get("samples", 0)))
    except InvalidArgumentError as exc:
        raise TrieFormatError(f"{path}: {exc}") from exc
    _check_values(trie, path)
    return trie
