"""Φ̂ tries under faults (issue 9): concurrent runs merge exactly, values and header types are validated,
the model identity is a fingerprint, a failed save names the trie file."""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from gad import api
from gad.errors import InvalidArgumentError, TrieFormatError, TrieMismatchError
from gad.phi.asap import AsapPhi
from gad.phi.registry import estimator_identity, make_estimator
from gad.phi.trie import PhiTrie
from gad.phi.trie_io import _COLUMNS, FORMAT_VERSION, MAGIC, load_trie
from gad.testing.regex_grammar import regex_grammar
from gad.testing.toys import hashed_lm

ROOT = Path(__file__).resolve().parents[2]
PATTERN = "[ab]{1,5}c?"


def _toy():
    from gad.engine.vocab import Vocabulary

    vocab = Vocabulary.from_strings(["a", "b", "c", "ab", "ba"], name="abc")
    return hashed_lm(vocab, seed=3, eos_boost=0.3, name="toy-abc"), regex_grammar(PATTERN, vocab, cache_dir=False)


def _replay(samples: list[tuple[list[int], bool]], order: list[int] | None = None) -> PhiTrie:
    """A fresh trie that learnt from ``samples`` (token ids, finished) in ``order``: the sampler's
    ``child_phi`` calls (one per decoding step) then ``observe``."""
    lm, cg = _toy()
    est = make_estimator("asap", lm, cg, [], trie=None)
    eos = cg.vocab.eos_ids[0]
    for i in order if order is not None else range(len(samples)):
        toks, finished = samples[i]
        m = cg.matcher()
        for k in range(len(toks) + (1 if finished else 0)):
            est.child_phi(toks[:k], lm.logprobs([toks[:k]])[0], np.asarray(m.mask(), dtype=bool))
            if k < len(toks):
                assert m.accept_token(toks[k])
        est.observe(toks + ([eos] if finished else []), finished)
    est.trie.recompute()
    return est.trie


def _draw(n: int, seed: int) -> list[tuple[list[int], bool]]:
    lm, cg = _toy()
    out = api.sample(lm, cg, [], n=n, method="asap", seed=seed, max_new_tokens=8)
    return [(s.token_ids, s.finished) for s in out]


def test_a_trie_replaced_while_it_is_read_keeps_the_other_runs_samples(tmp_path: Path, monkeypatch) -> None:
    """Another run saves the trie file between this run's read of it and its look at the file's
    stamp: the stamp must be that of the version read (else the next flush, seeing no change, writes
    over the other run's samples; the three-CLI-runs test once counted 17 of 18).  And two saves of a
    trie are told apart by the header's write id, whatever the inode and modification time."""
    import gad.phi.asap as asap_mod
    from gad.phi.trie_io import save_trie, trie_header

    lm, cg = _toy()
    path = tmp_path / "t.trie"
    first = make_estimator("asap", lm, cg, [], trie=str(path))
    api.sample(lm, cg, [], n=4, method=first, seed=1, max_new_tokens=8, batch_size=1)
    first.flush()
    base = trie_header(path)["samples"]
    assert base == 4
    real = asap_mod.load_trie
    raced = []

    def racing(p, expected=None):
        t = real(p, expected=expected)
        if not raced:  # another run's save lands right after this read
            raced.append(True)
            other = real(p, expected=expected)
            other.samples += 5
            save_trie(other, p)
        return t

    monkeypatch.setattr(asap_mod, "load_trie", racing)
    est = make_estimator("asap", lm, cg, [], trie=str(path))
    api.sample(lm, cg, [], n=2, method=est, seed=2, max_new_tokens=8, batch_size=1)
    est.flush()
    assert raced and trie_header(path)["samples"] == base + 5 + 2
    ids = {trie_header(path)["write_id"]}
    save_trie(load_trie(path), path)
    ids.add(trie_header(path)["write_id"])
    assert len(ids) == 2


def test_phi_depends_on_the_set_of_samples_not_their_order() -> None:
    samples = _draw(25, seed=1)
    a = _replay(samples)
    b = _replay(samples, order=list(reversed(range(25))))
    c = _replay(samples, order=list(np.random.default_rng(0).permutation(25)))
    assert len(a) > 10
    assert a.canonical() == b.canonical() == c.canonical()  # bit-identical, node by node


def test_recompute_equals_the_incremental_updates() -> None:
    lm, cg = _toy()
    est = make_estimator("asap", lm, cg, [], trie=None)
    api.sample(lm, cg, [], n=40, method=est, seed=2, max_new_tokens=8, batch_size=1)
    inc = np.array(est.trie.phi)
    est.trie.recompute()
    np.testing.assert_allclose(np.array(est.trie.phi), inc, rtol=1e-12, atol=1e-15)
    assert inc[0] < 1.0  # it learnt something


def test_merge_of_two_tries_equals_one_trie_of_all_samples() -> None:
    s1, s2 = _draw(12, seed=5), _draw(12, seed=6)
    a, b = _replay(s1), _replay(s2)
    added = a.merge(b)
    ref = _replay(s1 + s2)
    assert added == len(ref) - len(_replay(s1)) and added > 0
    assert a.canonical() == ref.canonical()
    before = a.canonical()
    assert a.merge(b) == 0 and a.canonical() == before  # merging again changes nothing


WORKER = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, sys.argv[4])
    from tests.phi.test_trie_reliability import _toy
    from gad.phi.registry import make_estimator
    from gad import api
    trie, proc, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    lm, cg = _toy()
    est = make_estimator("asap", lm, cg, [], trie=trie)
    import os, time
    open(trie + f".ready{proc}", "w").close()
    while not os.path.exists(trie + ".go"):  # all three start from the same (absent) trie
        time.sleep(0.01)
    rows = []
    for i in range(n):  # one flush (lock, merge, save) per sample: the three processes interleave
        s = api.sample(lm, cg, [], n=1, method=est, seed=1000 * proc + i, max_new_tokens=8)[0]
        rows.append([s.token_ids, s.finished])
    print(json.dumps({"rows": rows, "merged": est.merged_samples}))
''')


def test_three_concurrent_processes_on_one_trie_merge_exactly(tmp_path: Path) -> None:
    trie = tmp_path / "shared.trie"
    n = 8
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(trie), str(k), str(n), str(ROOT)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}) for k in range(3)]
    t0 = time.monotonic()
    while not all((tmp_path / f"shared.trie.ready{k}").exists() for k in range(3)):
        assert time.monotonic() - t0 < 300 and all(p.poll() is None for p in procs)
        time.sleep(0.02)
    (tmp_path / "shared.trie.go").touch()
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    results = [json.loads(o) for o, _ in outs]
    samples = [(r[0], r[1]) for res in results for r in res["rows"]]
    lm, cg = _toy()
    ident = estimator_identity(lm, cg, [], {"temperature": 1.0, "batch_size": 1})
    merged = load_trie(trie, expected=ident)
    assert merged.samples == 3 * n  # no lost update: 24, not 8
    assert sum(r["merged"] for r in results) > 0  # every writer but the first merged others' work
    assert merged.canonical() == _replay(samples).canonical()  # node by node, bit for bit


# --- validation on load ------------------------------------------------------------------------------

def _saved(tmp_path: Path) -> tuple[Path, PhiTrie, dict]:
    lm, cg = _toy()
    ident = estimator_identity(lm, cg, [], None)
    est = make_estimator("asap", lm, cg, [], trie=tmp_path / "t.trie")
    api.sample(lm, cg, [], n=10, method=est, seed=0, max_new_tokens=8)
    return tmp_path / "t.trie", load_trie(tmp_path / "t.trie", expected=ident), ident


def _write_raw(path: Path, header: dict, cols: dict[str, np.ndarray]) -> None:
    """A trie file with a *valid* SHA-256 (anyone can recompute it) around arbitrary content."""
    hb = json.dumps(header, sort_keys=True).encode()
    payload = b"".join(np.ascontiguousarray(cols[k], dtype=dt).tobytes() for k, dt in _COLUMNS)
    digest = hashlib.sha256(hb + payload).digest()
    path.write_bytes(MAGIC + struct.pack("<II", FORMAT_VERSION, len(hb)) + hb + payload + digest)


def _header(trie: PhiTrie) -> dict:
    return {"format": "gad-phi-trie", "identity": trie.identity, "samples": trie.samples,
            "n_nodes": len(trie), "columns": [list(c) for c in _COLUMNS]}


@pytest.mark.parametrize("column,index,value,message", [
    ("phi", 1, float("nan"), "phi holds NaN"),
    ("phi", 1, -0.25, "phi outside [0, 1]"),
    ("phi", 1, 1.5, "phi outside [0, 1]"),
    ("p", 1, -0.1, "p outside [0, 1]"),
    ("p", 1, float("inf"), "p holds NaN or infinity"),
    ("token", 1, 99, "token id out of range"),
    ("token", 1, -5, "token id out of range"),
    ("mass", 0, 1.7, "M (allowed mass) outside"),
    ("eos", 0, 0.999999, "EOS mass larger"),
    ("nallow", 0, -1, "negative allowed-token count"),
    ("phi", 0, 0.001, "Φ̂ of node 0 is 0.001 but"),  # a plausible value its own probabilities contradict
])
def test_invalid_values_with_a_valid_checksum_are_refused(tmp_path: Path, column, index, value, message) -> None:
    path, trie, ident = _saved(tmp_path)
    cols = trie.columns()
    cols[column] = cols[column].copy()
    cols[column][index] = value
    _write_raw(path, _header(trie), cols)
    with pytest.raises(TrieFormatError, match=re.escape(message)) as e:
        load_trie(path, expected=ident)
    assert str(path) in str(e.value)
    with pytest.raises(TrieFormatError):  # and the estimator refuses it too (nothing is saved again)
        AsapPhi(path, identity=ident)


def test_duplicate_prefix_is_refused(tmp_path: Path) -> None:
    path, trie, ident = _saved(tmp_path)
    cols = {k: np.concatenate([v, v[-1:]]) for k, v in trie.columns().items()}  # last node twice
    h = _header(trie)
    h["n_nodes"] += 1
    _write_raw(path, h, cols)
    with pytest.raises(TrieFormatError, match="stored twice"):
        load_trie(path, expected=ident)


@pytest.mark.parametrize("field,value,message", [
    ("samples", "many", "samples must be a non-negative integer"),
    ("samples", True, "samples must be a non-negative integer"),
    ("samples", -3, "samples must be a non-negative integer"),
    ("n_nodes", 2.5, "n_nodes must be a non-negative integer"),
    ("identity", ["a"], "identity must be an object"),
    ("identity.vocab_size", "6", "identity.vocab_size must be int"),
    ("identity.settings", 3, "identity.settings must be dict"),
    ("identity.model", None, "identity.model must be str"),
    ("format", "other", "format is 'other'"),
])
def test_header_fields_of_the_wrong_type_are_refused(tmp_path: Path, field, value, message) -> None:
    path, trie, ident = _saved(tmp_path)
    h = _header(trie)
    if field.startswith("identity."):
        h["identity"] = dict(h["identity"], **{field.split(".")[1]: value})
    else:
        h[field] = value
    _write_raw(path, h, trie.columns())
    with pytest.raises(TrieFormatError, match=message):
        load_trie(path)
    from gad.phi.trie_io import trie_header

    with pytest.raises(TrieFormatError, match=message):
        trie_header(path)


def test_a_valid_file_written_by_hand_loads(tmp_path: Path) -> None:
    path, trie, ident = _saved(tmp_path)
    _write_raw(path, _header(trie), trie.columns())  # the control: the writer above is faithful
    assert load_trie(path, expected=ident).canonical() == trie.canonical()


# --- model identity -------------------------------------------------------------------------------

def test_another_model_with_the_same_name_is_refused(tmp_path: Path) -> None:
    from gad.engine.vocab import Vocabulary

    vocab = Vocabulary.from_strings(["a", "b", "c", "ab", "ba"], name="abc")
    cg = regex_grammar(PATTERN, vocab, cache_dir=False)
    lm1 = hashed_lm(vocab, seed=3, name="same-name")
    lm2 = hashed_lm(vocab, seed=4, name="same-name")  # other "weights", same name
    assert lm1.fingerprint != lm2.fingerprint
    assert lm1.fingerprint == hashed_lm(vocab, seed=3, name="same-name").fingerprint
    api.sample(lm1, cg, [], n=3, method="asap", trie=tmp_path / "t.trie", max_new_tokens=8)
    with pytest.raises(TrieMismatchError, match="model_fingerprint"):
        api.sample(lm2, cg, [], n=3, method="asap", trie=tmp_path / "t.trie", max_new_tokens=8)


# --- saving ---------------------------------------------------------------------------------------

def test_trie_path_that_is_a_directory_is_an_argument_error(tmp_path: Path) -> None:
    lm, cg = _toy()
    with pytest.raises(InvalidArgumentError, match="is a directory"):
        api.sample(lm, cg, [], n=1, method="asap", trie=tmp_path, max_new_tokens=8)


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="root writes into read-only folders")
def test_read_only_folder_error_names_the_trie_not_the_temp_file(tmp_path: Path) -> None:
    lm, cg = _toy()
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(OSError) as e:
            api.sample(lm, cg, [], n=1, method="asap", trie=folder / "t.trie", max_new_tokens=8)
        assert e.value.filename == str(folder / "t.trie")
    finally:
        folder.chmod(0o700)


def test_missing_folder_error_names_the_folder(tmp_path: Path) -> None:
    lm, cg = _toy()
    with pytest.raises(FileNotFoundError) as e:
        api.sample(lm, cg, [], n=1, method="asap", trie=tmp_path / "nope" / "t.trie", max_new_tokens=8)
    assert e.value.filename == str(tmp_path / "nope")


def test_a_failing_write_names_the_trie_not_the_temp_file(tmp_path: Path, monkeypatch) -> None:
    """(Runs as root too: the read-only-folder test above cannot.)  The OS error of the temp file's rename
    is reported against the trie's own path."""
    import gad.fileio

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", src)

    monkeypatch.setattr(gad.fileio.os, "replace", refuse)
    lm, cg = _toy()
    with pytest.raises(PermissionError) as e:
        api.sample(lm, cg, [], n=1, method="asap", trie=tmp_path / "t.trie", max_new_tokens=8)
    assert e.value.filename == str(tmp_path / "t.trie")
    assert [p.name for p in tmp_path.iterdir() if p.name != "t.trie.lock"] == []  # no temp file left


def _built(k: int) -> PhiTrie:
    """A small trie: a few paths, every node expanded, Φ̂ learnt from two of them."""
    t = PhiTrie()
    for path in ([1, 2, 3], [1, 4], [5], [1, 2, 6])[:k]:
        u = 0
        for tok in path:
            t.expand(u, 0.9, 0.05, 3)
            u = t.add_child(u, tok, 0.3)
        t.expand(u, 0.5, 0.5, 1)
    t.update_path([0, 1, 2, 3])
    t.update_path([0, 5])
    t.recompute()
    return t


def _nan_free(t: PhiTrie) -> dict:
    """:meth:`PhiTrie.canonical` with NaN (a node never expanded) as None: comparable with ``==``."""
    return {k: tuple(None if x != x else x for x in v) for k, v in t.canonical().items()}


def test_a_node_creation_cut_short_by_an_interrupt_is_undone_by_repair(tmp_path: Path) -> None:
    """A signal (KeyboardInterrupt) may land on any line of ``add_child`` while a sampler explores the
    trie; ``repair`` (which ``AsapPhi.flush`` calls) leaves the trie as it was before that call or as it
    would be after it, consistent, savable and loadable, never a ValueError from mismatched columns
    (the CLI's SIGINT test met one: 'all keys need to be the same shape'); a caller that goes on
    adding nodes instead gets the trie as if the cut call had not been made."""
    from gad.phi.trie_io import save_trie

    before = _built(4)
    after = _built(4)
    after.add_child(2, 9, 0.25)
    before.recompute()
    after.recompute()
    n_lines = 0
    while True:
        t = _built(4)
        seen = [0]

        def tracer(frame, event, arg, seen=seen, cut=n_lines + 1):
            if frame.f_code.co_filename.endswith("trie.py") and frame.f_code.co_name in ("add_child", "_append"):
                if event == "line":
                    seen[0] += 1
                    if seen[0] == cut:
                        raise KeyboardInterrupt
                return tracer
            return None

        sys.settrace(tracer)
        try:
            t.add_child(2, 9, 0.25)
            interrupted = False
        except KeyboardInterrupt:
            interrupted = True
        finally:
            sys.settrace(None)
        if not interrupted:
            break  # every line has been cut once
        n_lines += 1
        if n_lines % 2:  # a caller that goes on (a notebook cell run again): add_child repairs first
            t.add_child(2, 9, 0.25)
            after_more = _built(4)
            after_more.add_child(2, 9, 0.25)
            after_more.recompute()
            t.recompute()
            assert t._complete() and _nan_free(t) == _nan_free(after_more), n_lines
            continue
        t.repair()
        assert t._complete()
        t.recompute()
        assert _nan_free(t) in (_nan_free(before), _nan_free(after)), n_lines
        save_trie(t, str(tmp_path / "t.trie"))
        assert _nan_free(load_trie(str(tmp_path / "t.trie"))) == _nan_free(t)
    assert n_lines >= 10  # (the lines of add_child and _append were each cut)
    assert not _built(3).repair()  # a complete trie: nothing to do
