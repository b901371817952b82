"""A data-only file format for the compile cache: numpy arrays plus a JSON header, never code.

A cache file is a ``numpy.savez`` archive (read back with ``numpy.load(..., allow_pickle=False)``):

* ``header``: UTF-8 JSON bytes (a ``uint8`` array): ``format``, ``version``, the identity the caller
  keys the file by (cache key, grammar sha256, vocabulary fingerprint, engine version, …) and
  ``tree``, the encoded object graph;
* one 1-D array per dtype (``arr_<dtype>``): every numpy array of the graph, concatenated.

The object graph is encoded by :func:`encode` into JSON made of lists, numbers, strings and
one-key tagged objects (``{"t": [...]}`` a tuple, ``{"d": [[k, v], ...]}`` a dict, ``{"a": [dtype,
offset, shape]}`` an array slice, ``{"o": class, "i": id, "f": {...}}`` an instance of a class the
caller lists by name, ``{"r": id}`` a second reference to it, ``{"x": [kind, ...]}`` an object the
caller rebuilds from data, e.g. a Lark terminal by its name).  Decoding creates only builtin
containers, numpy arrays of plain numeric dtypes and the listed classes (through ``object.__new__``
and attribute assignment: no constructor, no ``__setstate__``, nothing imported by name from the file),
so a file planted by someone else can at worst hold wrong data — which the identity check in the header
and the owner's folder check (:func:`folder_is_unsafe`) are there to catch.

Any inconsistency raises :class:`CacheFileError`; callers rebuild instead of trusting the file.
"""

from __future__ import annotations

import io
import json
import os
import stat
import time
import warnings
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from gad.errors import UnsafeCacheWarning
from gad.fileio import atomic_write

FORMAT = "gad-cache"
VERSION = 1
_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                     "float32", "float64"})
_INT64 = (-(1 << 63), (1 << 63) - 1)


class CacheFileError(Exception):
    """A cache file is foreign, corrupt or does not encode what the caller expects (rebuild it)."""


class Unencodable(Exception):
    """The object graph holds a value the data-only format cannot represent (nothing is written)."""


# --------------------------------------------------------------------------------------- encoding
class _Encoder:
    def __init__(self, classes: dict[str, type], external: Callable[[Any], list | None] | None) -> None:
        self.classes = {cls: name for name, cls in classes.items()}
        self.external = external
        self.parts: dict[str, list[np.ndarray]] = {}
        self.offsets: dict[str, int] = {}
        self.ids: dict[int, int] = {}
        self.keep: list[Any] = []  # keeps encoded objects alive so that id() stays unique

    def array(self, a: np.ndarray) -> dict:
        dt = a.dtype.name
        if dt not in _DTYPES:
            raise Unencodable(f"array dtype {a.dtype}")
        off = self.offsets.get(dt, 0)
        self.parts.setdefault(dt, []).append(np.ascontiguousarray(a).ravel())
        self.offsets[dt] = off + a.size
        return {"a": [dt, off, list(a.shape)]}

    def enc(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return v if np.isfinite(v) else {"f": repr(v)}
        if isinstance(v, np.ndarray):
            return self.array(v)
        if isinstance(v, np.generic):
            return {"n": [v.dtype.name, self.enc(v.item())]} if v.dtype.name in _DTYPES else self._bad(v)
        if isinstance(v, list):
            if len(v) > 16 and all(type(x) is int for x in v) and _INT64[0] <= min(v) and max(v) <= _INT64[1]:
                return {"il": self.array(np.asarray(v, dtype=np.int64))}
            return [self.enc(x) for x in v]
        if isinstance(v, tuple):
            return {"t": [self.enc(x) for x in v]}
        if isinstance(v, OrderedDict):
            return {"od": [[self.enc(k), self.enc(x)] for k, x in v.items()]}
        if isinstance(v, dict):
            return {"d": [[self.enc(k), self.enc(x)] for k, x in v.items()]}
        if isinstance(v, frozenset):
            return {"fs": [self.enc(x) for x in v]}
        if isinstance(v, set):
            return {"s": [self.enc(x) for x in v]}
        if isinstance(v, bytes):
            return {"b": self.array(np.frombuffer(v, dtype=np.uint8))}
        if self.external is not None:
            ext = self.external(v)
            if ext is not None:
                return {"x": [self.enc(x) for x in ext]}
        name = self.classes.get(type(v))
        if name is None:
            return self._bad(v)
        seen = self.ids.get(id(v))
        if seen is not None:
            return {"r": seen}
        i = len(self.ids)
        self.ids[id(v)] = i
        self.keep.append(v)
        state = getattr(v, "__getstate__", None)
        own = "__getstate__" in type(v).__dict__  # a class's own __getstate__ (not object's default)
        fields = state() if callable(state) and own else v.__dict__
        if not isinstance(fields, dict):
            return self._bad(v)
        return {"o": name, "i": i, "f": {str(k): self.enc(x) for k, x in fields.items()}}

    @staticmethod
    def _bad(v: Any) -> Any:
        raise Unencodable(f"cannot store a {type(v).__module__}.{type(v).__qualname__} in a data-only file")


# --------------------------------------------------------------------------------------- decoding
class _Decoder:
    def __init__(self, arrays: dict[str, np.ndarray], classes: dict[str, type],
                 external: Callable[[list], Any] | None) -> None:
        self.arrays = arrays
        self.classes = classes
        self.external = external
        self.objs: dict[int, Any] = {}

    def array(self, spec: Any) -> np.ndarray:
        if not (isinstance(spec, list) and len(spec) == 3 and spec[0] in _DTYPES and isinstance(spec[1], int)
                and isinstance(spec[2], list) and all(isinstance(s, int) and s >= 0 for s in spec[2])):
            raise CacheFileError("bad array reference")
        dt, off, shape = spec
        buf = self.arrays.get(dt)
        size = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if buf is None or off < 0 or off + size > buf.size:
            raise CacheFileError("array reference out of range")
        return buf[off:off + size].reshape(shape)

    def dec(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.dec(x) for x in v]
        if not isinstance(v, dict) or len(v) not in (1, 3):
            raise CacheFileError("malformed value")
        if "o" in v:
            return self.obj(v)
        ((tag, x),) = v.items()
        if tag == "a":
            return self.array(x)
        if tag == "il":
            return self.dec(x).tolist()
        if tag == "t":
            return tuple(self.dec(y) for y in self._list(x))
        if tag in ("d", "od"):
            items = [(self._key(self.dec(k)), self.dec(y)) for k, y in (self._pair(p) for p in self._list(x))]
            return OrderedDict(items) if tag == "od" else dict(items)
        if tag == "fs":
            return frozenset(self._key(self.dec(y)) for y in self._list(x))
        if tag == "s":
            return {self._key(self.dec(y)) for y in self._list(x)}
        if tag == "b":
            return self.dec(x).tobytes()
        if tag == "f":
            if x not in ("nan", "inf", "-inf"):
                raise CacheFileError("bad float")
            return float(x)
        if tag == "n":
            dt, val = self._pair(x)
            if dt not in _DTYPES:
                raise CacheFileError("bad scalar dtype")
            return np.dtype(dt).type(self.dec(val))
        if tag == "r":
            if x not in self.objs:
                raise CacheFileError("dangling object reference")
            return self.objs[x]
        if tag == "x":
            if self.external is None:
                raise CacheFileError("external reference without a resolver")
            return self.external([self.dec(y) for y in self._list(x)])
        raise CacheFileError(f"unknown tag {tag!r}")

    def obj(self, v: dict) -> Any:
        cls = self.classes.get(v.get("o"))  # type: ignore[arg-type]
        i, fields = v.get("i"), v.get("f")
        if cls is None or not isinstance(i, int) or not isinstance(fields, dict) or i in self.objs:
            raise CacheFileError("unknown or malformed object")
        o: Any = object.__new__(cls)
        self.objs[i] = o
        for k, x in fields.items():
            o.__dict__[k] = self.dec(x)
        return o

    @staticmethod
    def _list(x: Any) -> list:
        if not isinstance(x, list):
            raise CacheFileError("expected a list")
        return x

    @staticmethod
    def _pair(x: Any) -> tuple[Any, Any]:
        if not isinstance(x, list) or len(x) != 2:
            raise CacheFileError("expected a pair")
        return x[0], x[1]

    @staticmethod
    def _key(k: Any) -> Any:
        try:
            hash(k)
        except TypeError:
            raise CacheFileError("unhashable key") from None
        return k


# ------------------------------------------------------------------------------------------ files
def save(path: str | os.PathLike[str], identity: dict[str, Any], obj: Any, classes: dict[str, type],
         external: Callable[[Any], list | None] | None = None) -> None:
    """Write ``obj`` (an object graph of builtin containers, numpy arrays and instances of ``classes``)
    with ``identity`` in its header to ``path`` atomically.

    Args:
        identity: JSON-able dict checked by :func:`load` (e.g. cache key, grammar sha256, vocab
            fingerprint, engine version).
        classes: name -> class of every non-builtin class the graph may hold (their ``__dict__`` — or
            ``__getstate__()`` when they define one — is stored).
        external: maps an object to a list of data from which the reader's resolver rebuilds it (or
            None when it is not external).
    Raises:
        Unencodable: the graph holds something else (nothing is written).
        OSError: the file cannot be written.
    """
    e = _Encoder(classes, external)
    tree = e.enc(obj)
    header = {"format": FORMAT, "version": VERSION, "identity": identity, "tree": tree}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    members = {"header": np.frombuffer(hb, dtype=np.uint8)}
    for dt, parts in e.parts.items():
        members[f"arr_{dt}"] = np.concatenate(parts) if parts else np.zeros(0, dtype=dt)
    buf = io.BytesIO()
    np.savez(buf, **members)  # type: ignore[arg-type]
    atomic_write(path, [buf.getbuffer()])


def load(path: str | os.PathLike[str], identity: dict[str, Any], classes: dict[str, type],
         external: Callable[[list], Any] | None = None) -> Any:
    """Read a file written by :func:`save`, after checking that its header's identity equals ``identity``.

    Raises:
        CacheFileError: not such a file, corrupt (bad zip, CRC, JSON, references), another format version,
            or another identity.  Never executes anything from the file (``allow_pickle=False``).
        OSError: the file cannot be read.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            names = set(z.files)
            if "header" not in names or not names <= {"header"} | {f"arr_{d}" for d in _DTYPES}:
                raise CacheFileError("unexpected members")
            hb = z["header"]
            if hb.dtype != np.uint8 or hb.ndim != 1:
                raise CacheFileError("bad header array")
            header = json.loads(hb.tobytes().decode("utf-8"))
            if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") != VERSION:
                raise CacheFileError("not a gad cache file of this version")
            if header.get("identity") != identity:
                raise CacheFileError("built for another grammar, vocabulary or engine version")
            arrays = {n[4:]: z[n] for n in names if n != "header"}
    except (ValueError, KeyError, zipfile.BadZipFile, EOFError, UnicodeDecodeError) as exc:
        raise CacheFileError(f"corrupt cache file ({type(exc).__name__}: {exc})") from exc
    for dt, a in arrays.items():
        if a.dtype.name != dt or a.ndim != 1:
            raise CacheFileError("array member of the wrong dtype")
    try:
        return _Decoder(arrays, classes, external).dec(header.get("tree"))
    except CacheFileError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, OverflowError, RecursionError) as exc:
        raise CacheFileError(f"malformed cache content ({type(exc).__name__})") from exc


# ------------------------------------------------------------------------------- folder hygiene
_WARNED: set[str] = set()


def folder_is_unsafe(folder: str | os.PathLike[str]) -> str | None:
    """Why ``folder`` (or its nearest existing ancestor) is not safe to hold a cache, or None.

    Unsafe: writable by everyone without the sticky bit, writable by its group, or owned by another user
    (not root).  Others who can write there can plant or swap cache files.
    """
    p = Path(folder)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = p.stat()
    except OSError:
        return None
    if hasattr(os, "getuid") and st.st_uid not in (os.getuid(), 0):
        return f"{p} is owned by another user (uid {st.st_uid})"
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return f"{p} is writable by every user"
    return None


def warn_if_unsafe(folder: str | os.PathLike[str], what: str) -> bool:
    """Warn (:class:`gad.errors.UnsafeCacheWarning`, once per folder and process) when ``folder`` is unsafe;
    returns True when it is (callers then neither read nor write it)."""
    why = folder_is_unsafe(folder)
    if why is None:
        return False
    key = os.path.abspath(folder)
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(f"gad: not using the {what} in {folder}: {why}; anyone who can write there could plant "
                      f"files in it (fix the permissions or set GAD_CACHE_DIR to a folder of your own)",
                      UnsafeCacheWarning, stacklevel=3)
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def clean_stale_temps(folder: str | os.PathLike[str], max_age_s: float = 3600.0,
                      entries: Iterable[os.DirEntry[str]] | None = None, prefix: str = "") -> list[str]:
    """Remove temporary files and folders left in ``folder`` by killed writers; returns their names.

    A temp entry is named ``.<target>.<pid>.<random>…`` (:func:`gad.fileio.atomic_write_with`) or
    ``.tmp-<target>-<pid>-…`` (model conversion); it is stale when that process is gone, or when it is older
    than ``max_age_s`` (a pid reused by another process).  Entries of live writers are left alone.
    ``prefix``: only names starting with it (e.g. the temp files of one target file).
    """
    import shutil

    removed: list[str] = []
    try:
        it = list(entries) if entries is not None else list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for ent in it:
        name = ent.name
        if not name.startswith(prefix):
            continue
        pid = _temp_pid(name)
        if pid is None:
            continue
        try:
            age = now - ent.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if _pid_alive(pid) and age < max_age_s:
            continue
        try:
            if ent.is_dir(follow_symlinks=False):
                shutil.rmtree(ent.path, ignore_errors=True)
            else:
                os.unlink(ent.path)
            removed.append(name)
        except OSError:
            pass
    return removed


def _temp_pid(name: str) -> int | None:
    """The writer's pid in a temp entry's name (see :func:`clean_stale_temps`), or None if not a temp."""
    if name.startswith(".tmp-"):
        parts = name.split("-")
    elif name.startswith(".") and name.count(".") >= 3:
        parts = name.split(".")
    else:
        return None
    for p in parts:
        if p.startswith("pid") and p[3:].isdigit():
            return int(p[3:])
    return None
