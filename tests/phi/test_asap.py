"""ASAp trie: upper bounds, monotonicity, exactness after full exploration, batching, save/load."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from gad.engine.vocab import Vocabulary
from gad.errors import InvalidArgumentError, TrieFormatError, TrieMismatchError
from gad.models.base import ToyLM
from gad.phi import (
    AsapPhi,
    PhiTrie,
    enumerate_language,
    estimator_identity,
    load_trie,
    make_estimator,
    save_trie,
)
from gad.phi.trie_io import trie_header
from gad.testing.regex_grammar import regex_grammar
from gad.testing.toys import gad_binary, hashed_lm, tiny_finite


def drive(est, lm, g, path, eos) -> None:
    """Walk one sample path through the estimator exactly as a sampler would."""
    m = g.matcher()
    prefix: list[int] = []
    for t in path:
        est.child_phi(prefix, lm.logprobs([prefix])[0], m.mask())
        if t == eos:
            break
        assert m.accept_token(t)
        prefix.append(t)
    est.observe(list(path), finished=path[-1] == eos)


def all_nodes(trie: PhiTrie) -> dict[tuple[int, ...], float]:
    out = {(): trie.phi[0]}
    stack = [(0, ())]
    while stack:
        u, key = stack.pop()
        for c in trie.children(u):
            k = key + (trie.token[c],)
            out[k] = trie.phi[c]
            stack.append((c, k))
    return out


def random_setting():
    vocab = Vocabulary.from_strings(["a", "b", "ab", "ba"], name="ab")
    lm = hashed_lm(vocab, seed=7, eos_boost=0.2)
    g = regex_grammar("(ab|ba)(ab)?b?", vocab)   # finite: every viable prefix lies on a complete path
    return vocab, lm, g


@pytest.mark.parametrize("setting", ["tiny", "random"])
def test_upper_bound_monotone_then_exact(setting: str) -> None:
    if setting == "tiny":
        lm, g = tiny_finite()
    else:
        _, lm, g = random_setting()
    eos = g.eos_ids[0]
    e = enumerate_language(lm, g, max_len=8)
    paths = [w + (eos,) for w in e.sequences]
    rng = np.random.default_rng(0)
    rng.shuffle(paths)
    est = AsapPhi(eos_ids=g.eos_ids)
    before: dict[tuple[int, ...], float] = {}
    for i, path in enumerate(paths):
        drive(est, lm, g, path, eos)
        now = all_nodes(est.trie)
        for k, v in now.items():
            assert v >= e.phi[k] - 1e-12, f"Φ̂{k}={v} below Φ={e.phi[k]}"          # upper bound
            assert v <= before.get(k, 1.0) + 1e-15, "Φ̂ increased"                  # never increases
        before = now
        if i < len(paths) - 1:
            assert est.trie.root_phi > e.Z + 1e-9   # still unexplored mass somewhere
    # every positive-probability node visited: estimates equal the exact Φ
    assert set(before) == set(e.phi)
    for k, v in before.items():
        assert v == pytest.approx(e.phi[k], abs=1e-12)
    assert est.trie.root_phi == pytest.approx(e.Z, abs=1e-12)


def test_child_phi_vector_and_update_rule() -> None:
    lm, g = tiny_finite()
    est = AsapPhi(eos_ids=g.eos_ids)
    m = g.matcher()
    logp = lm.logprobs([[]])[0]
    # fresh: Φ̂ = mask (viable 1, masked 0, EOS 0 here because ε is not in the language)
    np.testing.assert_array_equal(est.child_phi([], logp, m.mask()), [1.0, 1.0, 1.0, 0.0])
    drive(est, lm, g, (1, 0, 3), 3)
    # node "1": M = p(0)+p(1) = .5 (EOS masked) ; child "10": M = p(EOS) = .25 -> Φ̂ = .25
    # Φ̂("1") = .5 - .25*(1-.25) = .3125 ; Φ̂(ε) = M(ε) - .3*(1-.3125) = .9 - .20625
    assert est.trie.phi_of([1, 0]) == pytest.approx(0.25)
    assert est.trie.phi_of([1]) == pytest.approx(0.3125)
    assert est.trie.root_phi == pytest.approx(0.9 - 0.3 * 0.6875)
    np.testing.assert_allclose(est.child_phi([], logp, m.mask()), [1.0, 0.3125, 1.0, 0.0])


def test_batch_uses_estimates_from_batch_start() -> None:
    lm, g = tiny_finite()
    est = AsapPhi(eos_ids=g.eos_ids)
    m = g.matcher()
    logp = lm.logprobs([[]])[0]
    first = est.child_phi([], logp, m.mask())
    # two rows of one batch walk their paths; nothing changes until observe
    for path in [(1, 0), (1, 1)]:
        mm = g.matcher()
        prefix: list[int] = []
        for t in path:
            est.child_phi(prefix, lm.logprobs([prefix])[0], mm.mask())
            mm.accept_token(t)
            prefix.append(t)
        est.child_phi(prefix, lm.logprobs([prefix])[0], mm.mask())
    np.testing.assert_array_equal(est.child_phi([], logp, m.mask()), first)
    est.observe([1, 0, 3], True)
    est.observe([1, 1, 3], True)
    assert est.trie.phi_of([1]) == pytest.approx(0.125)   # both children known: exact Φ("1")


def test_unfinished_sample_keeps_leaf_at_one() -> None:
    lm, g = gad_binary()
    est = AsapPhi(eos_ids=g.eos_ids)
    m = g.matcher()
    prefix: list[int] = []
    for t in (0, 0):
        est.child_phi(prefix, lm.logprobs([prefix])[0], m.mask())
        m.accept_token(t)
        prefix.append(t)
    est.observe(prefix, finished=False)   # budget ran out after "00": Φ̂("00") stays 1
    assert est.trie.phi_of([0, 0]) == 1.0
    assert est.trie.phi_of([0]) == pytest.approx(0.09)   # M("0") = p(0|0) (1 masked, EOS masked)


def test_child_phi_errors() -> None:
    lm, g = tiny_finite()
    est = AsapPhi(eos_ids=g.eos_ids)
    with pytest.raises(InvalidArgumentError):
        est.child_phi([1, 0], lm.logprobs([[1, 0]])[0], g.matcher().mask())  # parent never expanded
    with pytest.raises(InvalidArgumentError):
        est.child_phi([], np.zeros(3), np.zeros(4, dtype=bool))


# --- save / load ----------------------------------------------------------------------------------

def explored(lm, g, n_paths: int = 4) -> AsapPhi:
    est = make_estimator("asap", lm=lm, compiled=g, prompt_ids=[5, 6])
    e = enumerate_language(lm, g, max_len=8)
    for w in list(e.sequences)[:n_paths]:
        drive(est, lm, g, w + (g.eos_ids[0],), g.eos_ids[0])
    return est


def test_save_load_round_trip(tmp_path) -> None:
    _, lm, g = random_setting()
    est = explored(lm, g)
    path = tmp_path / "t.trie"
    save_trie(est.trie, path)
    back = load_trie(path, expected=est.identity)
    assert len(back) == len(est.trie) > 5
    for k, v in est.trie.columns().items():
        np.testing.assert_array_equal(back.columns()[k], v, err_msg=k)
    assert all_nodes(back) == all_nodes(est.trie)
    assert back.samples == est.trie.samples == 4
    head = trie_header(path)  # header only, without the columns
    assert head["n_nodes"] == len(est.trie) and head["samples"] == 4 and head["identity"] == est.identity
    (tmp_path / "junk.trie").write_bytes(b"not a trie at all")
    with pytest.raises(TrieFormatError, match="bad magic"):
        trie_header(tmp_path / "junk.trie")
    # through the estimator: a path trie loads, answers identical Φ̂, and keeps learning identically
    est2 = make_estimator("asap", lm=lm, compiled=g, prompt_ids=[5, 6], trie=str(path))
    m = g.matcher()
    lp = lm.logprobs([[]])[0]
    np.testing.assert_array_equal(est2.child_phi([], lp, m.mask()), est.child_phi([], lp, m.mask()))
    e = enumerate_language(lm, g, max_len=8)
    for w in list(e.sequences)[4:]:
        for x in (est, est2):
            drive(x, lm, g, w + (g.eos_ids[0],), g.eos_ids[0])
    est2.flush()
    assert all_nodes(load_trie(path)) == pytest.approx(all_nodes(est.trie))
    assert load_trie(path).root_phi == pytest.approx(e.Z)


def test_mismatch_and_corruption_errors_leave_file_intact(tmp_path) -> None:
    vocab, lm, g = random_setting()
    est = explored(lm, g)
    path = tmp_path / "t.trie"
    save_trie(est.trie, path)
    original = path.read_bytes()

    other_lm = hashed_lm(vocab, seed=7, eos_boost=0.2, name="other-model")
    other_g = regex_grammar("(ab|ba)(ab)?", vocab)
    cases = [
        dict(lm=other_lm, compiled=g, prompt_ids=[5, 6], settings=None),
        dict(lm=lm, compiled=other_g, prompt_ids=[5, 6], settings=None),
        dict(lm=lm, compiled=g, prompt_ids=[5, 7], settings=None),
        dict(lm=lm, compiled=g, prompt_ids=[5, 6], settings={"temperature": 0.7}),
    ]
    for kw in cases:
        with pytest.raises(TrieMismatchError):
            make_estimator("asap", trie=str(path), **kw)
        assert path.read_bytes() == original
    # an in-memory trie bound to one identity is refused under another
    with pytest.raises(TrieMismatchError):
        make_estimator("asap", lm=other_lm, compiled=g, prompt_ids=[5, 6], trie=est.trie)

    bad = tmp_path / "bad.trie"
    bad.write_bytes(original[: len(original) // 2])
    with pytest.raises(TrieFormatError, match="truncated"):
        load_trie(bad)
    flipped = bytearray(original)
    flipped[len(flipped) - 40] ^= 0x01       # a payload byte
    bad.write_bytes(bytes(flipped))
    with pytest.raises(TrieFormatError, match="checksum"):
        load_trie(bad)
    bad.write_bytes(b"not a trie at all")
    with pytest.raises(TrieFormatError):
        make_estimator("asap", lm=lm, compiled=g, prompt_ids=[5, 6], trie=str(bad))
    assert bad.read_bytes() == b"not a trie at all"


def test_failed_save_keeps_previous_file(tmp_path, monkeypatch) -> None:
    _, lm, g = random_setting()
    est = explored(lm, g)
    path = tmp_path / "t.trie"
    save_trie(est.trie, path)
    original = path.read_bytes()
    drive(est, lm, g, list(enumerate_language(lm, g, max_len=8).sequences)[-1] + (g.eos_ids[0],),
          g.eos_ids[0])

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        save_trie(est.trie, path)
    monkeypatch.undo()
    assert path.read_bytes() == original
    assert sorted(os.listdir(tmp_path)) == ["t.trie"]     # no temp file left behind


def test_large_trie_round_trip(tmp_path) -> None:
    # a 200k-node random trie built from columns: save/load must be vectorised
    n = 200_000
    rng = np.random.default_rng(1)
    parent = np.concatenate([[-1], rng.integers(0, np.arange(1, n))]).astype(np.int64)
    cols = {"parent": parent, "token": np.concatenate([[-1], np.arange(1, n) % 50_000]),
            "p": rng.random(n), "phi": rng.random(n), "mass": rng.random(n), "eos": rng.random(n),
            "nallow": rng.integers(0, 9, n), "vsum": rng.random(n), "ssum": rng.random(n)}
    # make (parent, token) unique
    cols["token"] = np.concatenate([[-1], np.arange(1, n)])
    sib = np.bincount(parent[1:], weights=cols["p"][1:], minlength=n)
    cols["p"][1:] *= 0.9 / sib[parent[1:]]  # siblings' probabilities sum to 0.9 <= 1
    cols["p"][0] = 1.0
    cols["eos"] = cols["mass"] * rng.random(n)  # E <= M, as a real expansion gives
    t = PhiTrie.from_columns(cols, identity={"model": "x"})
    t.recompute()  # consistent Φ̂ / V / S (load_trie refuses values its own probabilities contradict)
    cols = t.columns()
    save_trie(t, tmp_path / "big.trie")
    back = load_trie(tmp_path / "big.trie", expected={"model": "x"})
    for k in cols:
        np.testing.assert_array_equal(back.columns()[k], cols[k])
    kids = sorted(back.children(0))
    assert kids == sorted(np.flatnonzero(parent == 0).tolist())
    c = kids[-1]
    assert back.child(0, int(cols["token"][c])) == c


def test_identity_records_prompt_and_settings() -> None:
    lm, g = tiny_finite()
    a = estimator_identity(lm, g, [1, 2], {"temperature": 1.0})
    b = estimator_identity(lm, g, [1, 2], None)
    assert a == b
    assert estimator_identity(lm, g, [1, 3], None)["prompt"] != a["prompt"]
    assert a["model"] == "toy-tiny" and a["vocab_size"] == 4


def test_zero_probability_tokens_are_harmless() -> None:
    vocab = Vocabulary.from_strings(["0", "1"], name="bits")
    lm = ToyLM.from_table(vocab, {(): [1.0, 0.0, 0.0]}, default=[0.0, 0.0, 1.0])
    g = regex_grammar("0|1", vocab)
    est = AsapPhi(eos_ids=g.eos_ids)
    drive(est, lm, g, (0, 2), 2)
    assert est.trie.root_phi == pytest.approx(1.0)
    assert list(itertools.islice(est.trie.children(0), 5)) == [1]


def test_tiny_phi_does_not_cancel_to_zero() -> None:
    """A forced chain of unlikely tokens: M − Σ p(1 − Φ̂) would round to 0; the trie keeps Φ exact."""
    vocab = Vocabulary.from_strings(["a", "b"], name="ab")
    lm = ToyLM.from_table(vocab, {}, default=[1e-8, 1 - 2e-8, 1e-8])
    g = regex_grammar("a{20}", vocab)
    est = AsapPhi(eos_ids=g.eos_ids)
    drive(est, lm, g, tuple([0] * 20 + [2]), 2)
    exact = enumerate_language(lm, g, max_len=20).Z
    assert exact == pytest.approx(1e-8 ** 21, rel=1e-9)
    assert est.trie.root_phi == pytest.approx(exact, rel=1e-9)
