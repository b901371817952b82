"""The compile cache holds data only: foreign, corrupt or planted files are rebuilt, never executed (issue 9)."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import gad
import gad.engine.compiler as compiler
from gad import Grammar
from gad.engine import cachefile
from gad.engine.vocab import Vocabulary
from gad.errors import UnsafeCacheWarning

GRAMMAR = 'start: "ab" "c"+\n%ignore " "'
VOCAB = ["a", "b", "ab", "", "c", " c", "bc"]


def _vocab() -> Vocabulary:
    return Vocabulary.from_strings(VOCAB)


def _fresh_compile(tmp: Path, text: str = GRAMMAR):
    compiler._MEMO.clear()
    return gad.compile(Grammar.from_string(text), _vocab(), cache_dir=tmp)


def _masks(cg) -> list[list[bool]]:
    """Masks along the path "ab", "c", " c" (plus the initial one)."""
    m = cg.matcher()
    out = [m.mask().tolist()]
    for t in (2, 4, 5):
        assert m.accept_token(t)
        out.append(m.mask().tolist())
    return out


@pytest.fixture
def want(tmp_path: Path) -> list[list[bool]]:
    compiler._MEMO.clear()
    return _masks(gad.compile(Grammar.from_string(GRAMMAR), _vocab(), cache_dir=False))


def _cache_file(tmp: Path) -> Path:
    (f,) = (tmp / "compiled").glob("*.npz")
    return f


class _Boom:
    """Pickling this object makes unpickling create a marker file (what an attacker's payload would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_cache_file_is_a_data_only_archive(tmp_path: Path, want) -> None:
    cg = _fresh_compile(tmp_path)
    f = _cache_file(tmp_path)
    with zipfile.ZipFile(f) as z:
        names = sorted(z.namelist())
    assert "header.npy" in names and len(names) >= 2  # a JSON header and the arrays, nothing else
    assert all(n == "header.npy" or n.startswith("arr_") for n in names)
    with np.load(f, allow_pickle=False) as z:  # loads without pickle: no object arrays anywhere
        header = json.loads(z["header"].tobytes())
        assert all(z[n].dtype != object for n in z.files)
    ident = header["identity"]
    assert ident["grammar_sha256"] == cg.grammar_sha256
    assert ident["vocab_fingerprint"] == _vocab().fingerprint()
    assert ident["engine"] == compiler._code_version()
    assert ident["key"] == f.stem
    assert _masks(cg) == want


def test_cache_is_read_back_without_rebuilding(tmp_path: Path, want, monkeypatch) -> None:
    _fresh_compile(tmp_path)
    compiler._MEMO.clear()

    def no_build(*a, **k):
        raise AssertionError("rebuilt although a valid cache file exists")

    monkeypatch.setattr(compiler.CompiledGrammar, "warm", no_build)
    b = gad.compile(Grammar.from_string(GRAMMAR), _vocab(), cache_dir=tmp_path)
    assert _masks(b) == want


def _plant(f: Path, content: str, tmp: Path, marker: Path) -> None:
    if content == "pickle-payload":  # a pickle that runs code when unpickled, under the cache file's name
        f.write_bytes(pickle.dumps(_Boom(marker)))
    elif content == "npz-object-array":  # an npz whose array is a pickled object array
        buf = io.BytesIO()
        np.savez(buf, header=np.array([_Boom(marker)], dtype=object))
        f.write_bytes(buf.getvalue())
    elif content == "other-grammar":  # a valid cache file of another grammar, copied under this key
        other = tmp / "other"
        _fresh_compile(other, 'start: "b"+')
        f.write_bytes(_cache_file(other).read_bytes())
    elif content == "edited-key":  # another grammar's file with only its key edited to this one's
        other = tmp / "other"
        _fresh_compile(other, 'start: "b"+')
        with np.load(_cache_file(other), allow_pickle=False) as z:
            members = {n: z[n] for n in z.files}
        h = json.loads(members["header"].tobytes())
        h["identity"]["key"] = f.stem
        members["header"] = np.frombuffer(json.dumps(h).encode(), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **members)
        f.write_bytes(buf.getvalue())
    elif content == "bad-reference":  # right identity, but the content points outside its arrays
        with np.load(f, allow_pickle=False) as z:
            members = {n: z[n] for n in z.files}
        h = json.loads(members["header"].tobytes())
        h["tree"] = {"d": [["_bytes", {"a": ["uint8", 10**9, [5]]}]]}
        members["header"] = np.frombuffer(json.dumps(h).encode(), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **members)
        f.write_bytes(buf.getvalue())
    elif content == "unknown-class":  # asks for a class the format does not list
        with np.load(f, allow_pickle=False) as z:
            members = {n: z[n] for n in z.files}
        h = json.loads(members["header"].tobytes())
        h["tree"] = {"o": "os.system", "i": 0, "f": {}}
        members["header"] = np.frombuffer(json.dumps(h).encode(), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **members)
        f.write_bytes(buf.getvalue())
    elif content == "garbage":
        f.write_bytes(b"garbage")
    elif content == "truncated":
        f.write_bytes(f.read_bytes()[:200])
    elif content == "flipped-byte":
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0xFF
        f.write_bytes(bytes(data))
    else:
        raise AssertionError(content)


@pytest.mark.parametrize("content", ["pickle-payload", "npz-object-array", "other-grammar", "edited-key",
                                     "bad-reference", "unknown-class", "garbage", "truncated", "flipped-byte"])
def test_foreign_or_corrupt_cache_is_rebuilt_never_run(tmp_path: Path, want, content: str) -> None:
    cache = tmp_path / "cache"
    _fresh_compile(cache)
    f = _cache_file(cache)
    marker = tmp_path / "pwned"
    _plant(f, content, tmp_path, marker)
    cg = _fresh_compile(cache)
    assert not marker.exists()  # nothing in the file was executed
    assert _masks(cg) == want  # this grammar's masks, not the planted file's
    with np.load(f, allow_pickle=False) as z:  # the bad entry was replaced by a valid one
        assert json.loads(z["header"].tobytes())["identity"]["grammar_sha256"] == cg.grammar_sha256
    assert _masks(_fresh_compile(cache)) == want


def test_legacy_pickle_files_are_never_read_and_are_removed(tmp_path: Path, want) -> None:
    folder = tmp_path / "compiled"
    folder.mkdir()
    marker = tmp_path / "pwned"
    key = "0" * 32
    (folder / f"{key}.pkl").write_bytes(pickle.dumps(_Boom(marker)))
    cg = _fresh_compile(tmp_path)
    assert not marker.exists()
    assert not (folder / f"{key}.pkl").exists()
    assert _masks(cg) == want


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_world_writable_cache_folder_is_not_used_and_warned_once(tmp_path: Path, want) -> None:
    folder = tmp_path / "compiled"
    folder.mkdir()
    folder.chmod(0o777)  # writable by everyone, no sticky bit
    cachefile._WARNED.clear()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        a = _fresh_compile(tmp_path)
        b = _fresh_compile(tmp_path)
    unsafe = [w for w in rec if issubclass(w.category, UnsafeCacheWarning)]
    assert len(unsafe) == 1  # once per folder and process
    assert str(folder) in str(unsafe[0].message) and "writable by every user" in str(unsafe[0].message)
    assert list(folder.iterdir()) == []  # neither written ...
    assert _masks(a) == want and _masks(b) == want
    folder.chmod(0o1777)  # ... and with the sticky bit (like /tmp) it is used
    assert cachefile.folder_is_unsafe(folder) is None
    _fresh_compile(tmp_path)
    assert len(list(folder.glob("*.npz"))) == 1


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to chown")
def test_folder_owned_by_someone_else_is_unsafe(tmp_path: Path, want) -> None:
    folder = tmp_path / "compiled"
    folder.mkdir()
    os.chown(folder, 12345, 12345)
    assert "owned by another user (uid 12345)" in (cachefile.folder_is_unsafe(folder) or "")
    cachefile._WARNED.clear()
    with pytest.warns(UnsafeCacheWarning, match="owned by another user"):
        cg = _fresh_compile(tmp_path)
    assert _masks(cg) == want and list(folder.iterdir()) == []


def test_missing_folder_is_judged_by_its_nearest_ancestor(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    try:
        assert "writable by every user" in (cachefile.folder_is_unsafe(tmp_path / "a" / "b") or "")
    finally:
        tmp_path.chmod(0o755)


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_temp_files_of_killed_runs_are_cleaned_on_the_next_run(tmp_path: Path, want) -> None:
    folder = tmp_path / "compiled"
    folder.mkdir()
    dead = folder / f".{'1' * 32}.npz.pid{_dead_pid()}.abc123.npz"  # a killed writer's temp file
    dead.write_bytes(b"x" * 1000)
    live = folder / f".{'2' * 32}.npz.pid{os.getpid()}.def456.npz"  # a writer still running (this one)
    live.write_bytes(b"y")
    old = folder / f".{'3' * 32}.npz.pid{os.getpid()}.ghi789.npz"  # a live pid, but two hours old
    old.write_bytes(b"z")
    t = time.time() - 7200
    os.utime(old, (t, t))
    user_file = folder / ".keep"  # not a temp file of gad's
    user_file.write_bytes(b"")
    cg = _fresh_compile(tmp_path)
    assert not dead.exists() and not old.exists()
    assert live.exists() and user_file.exists()
    assert _masks(cg) == want


def test_killed_writer_leaves_a_temp_that_the_next_run_removes(tmp_path: Path, want) -> None:
    """A real process killed (SIGKILL) while writing the cache; the next compile cleans up."""
    code = (
        "import os, sys, signal\n"
        "import gad.fileio as f\n"
        "def write(tmp):\n"
        "    open(tmp, 'wb').write(b'partial')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        f"f.atomic_write_with({str(tmp_path / 'compiled' / ('9' * 32 + '.npz'))!r}, write)\n")
    (tmp_path / "compiled").mkdir()
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert r.returncode == -9
    left = [p.name for p in (tmp_path / "compiled").iterdir()]
    assert len(left) == 1 and left[0].startswith("." + "9" * 32)
    cg = _fresh_compile(tmp_path)
    assert [p.suffix for p in (tmp_path / "compiled").iterdir()] == [".npz"]
    assert not any(p.name.startswith(".") for p in (tmp_path / "compiled").iterdir())
    assert _masks(cg) == want


def test_codec_refuses_what_it_cannot_store(tmp_path: Path) -> None:
    with pytest.raises(cachefile.Unencodable):
        cachefile.save(tmp_path / "x.npz", {}, {"f": open}, {})
    with pytest.raises(cachefile.Unencodable):
        cachefile.save(tmp_path / "x.npz", {}, np.array([object()], dtype=object), {})
    assert not (tmp_path / "x.npz").exists()


def test_codec_round_trips_containers(tmp_path: Path) -> None:
    from collections import OrderedDict

    obj = {"t": (1, -2, 3.5), "big": 1 << 100, "nan": float("nan"), "s": {1, 2}, "fs": frozenset({"a"}),
           "od": OrderedDict([((1, 2), [np.arange(3, dtype=np.int16)])]), "b": b"\x00\xff",
           "ints": list(range(40)), "np": np.float32(2.5), 7: None}
    cachefile.save(tmp_path / "x.npz", {"k": 1}, obj, {})
    back = cachefile.load(tmp_path / "x.npz", {"k": 1}, {})
    assert back["t"] == (1, -2, 3.5) and back["big"] == 1 << 100 and np.isnan(back["nan"])
    assert back["s"] == {1, 2} and back["fs"] == frozenset({"a"}) and back["b"] == b"\x00\xff"
    assert isinstance(back["od"], OrderedDict) and back["od"][(1, 2)][0].tolist() == [0, 1, 2]
    assert back["od"][(1, 2)][0].dtype == np.int16 and back["ints"] == list(range(40))
    assert back["np"] == np.float32(2.5) and back[7] is None
    with pytest.raises(cachefile.CacheFileError):
        cachefile.load(tmp_path / "x.npz", {"k": 2}, {})


def test_lark_parsers_of_one_text_with_other_flags_do_not_share_a_cache(tmp_path: Path) -> None:
    """Two ``lark.Lark`` parsers of one text, one with ``g_regex_flags=re.I``: the cache key is what the
    engine reads (terminals with their flags, rules, options), not the text, so neither gets the
    other's masks from the cache, and the global flag is honoured as Lark's scanner applies it (it was
    ignored: ``ABX`` refused); a flag with no pattern-flag spelling is refused with a typed error."""
    import re

    import lark

    from gad.errors import UnsupportedGrammarError

    text = 'start: "ab" NAME\nNAME: /[a-z]+/\n'
    vocab = Vocabulary.from_strings(["a", "b", "A", "B", "x", "X"])
    plain = lark.Lark(text, parser="lalr", lexer="contextual")
    folded = lark.Lark(text, parser="lalr", lexer="contextual", g_regex_flags=re.I)
    for p in (plain, folded, plain, folded):  # (the later two read the cache files the first two wrote)
        compiler._MEMO.clear()
        cg = gad.compile(p, vocab, cache_dir=tmp_path)
        for s in ["abx", "ABX", "abX", "ab", "aBxX"]:
            try:
                p.parse(s)
                want = True
            except lark.exceptions.LarkError:
                want = False
            m = cg.matcher()
            assert (m.accept_bytes(s.encode()) and m.is_accepting()) is want, (p.options.g_regex_flags, s)
    assert len(list((tmp_path / "compiled").glob("*.npz"))) == 2
    for flags in (re.I | re.U, re.M, re.U | re.S):  # (re.U is a str pattern's default; re.M moves only ^ $)
        p = lark.Lark(text, parser="lalr", lexer="contextual", g_regex_flags=flags)
        m = gad.compile(p, vocab, cache_dir=False).matcher()
        assert (m.accept_bytes(b"ABX") and m.is_accepting()) is bool(flags & re.I)
    with pytest.raises(UnsupportedGrammarError, match="g_regex_flags"):
        gad.compile(lark.Lark(text, parser="lalr", lexer="contextual", g_regex_flags=re.A), vocab, cache_dir=False)


def test_lark_parser_with_a_postlexer_or_bytes_is_refused_by_name() -> None:
    """A postlexer (an Indenter) inserts tokens that are not in the text: refused, saying so (it was
    refused as if the lexer were not contextual); so are lexer callbacks and a parser matching bytes
    (``use_bytes``)."""
    import lark
    from lark.indenter import Indenter

    from gad.errors import InvalidArgumentError

    class TreeIndenter(Indenter):
        NL_type, OPEN_PAREN_types, CLOSE_PAREN_types = "_NL", [], []
        INDENT_type, DEDENT_type, tab_len = "_INDENT", "_DEDENT", 8

    text = ('start: NAME _NL [_INDENT start+ _DEDENT]\nNAME: /[a-z]+/\n%declare _INDENT _DEDENT\n'
            '_NL: /(\\r?\\n[\\t ]*)+/\n')
    p = lark.Lark(text, parser="lalr", postlex=TreeIndenter())
    assert p.parse("a\n b\n")
    with pytest.raises(InvalidArgumentError, match="postlex"):
        gad.compile(p, _vocab(), cache_dir=False)
    # lexer_callbacks may retype tokens (a keyword out of a name): nothing over the text knows it
    p = lark.Lark('start: NAME | "kw" NAME\nNAME: /[a-z]+/\n', parser="lalr", lexer_callbacks={"NAME": lambda t: t})
    with pytest.raises(InvalidArgumentError, match="lexer_callbacks"):
        gad.compile(p, _vocab(), cache_dir=False)
    # use_bytes: Lark's '.' reads one byte, gad's one character (it accepted "aéb", which Lark refuses)
    p = lark.Lark("start: /a.b/\n", parser="lalr", use_bytes=True)
    with pytest.raises(InvalidArgumentError, match="use_bytes"):
        gad.compile(p, _vocab(), cache_dir=False)
