"""The mask on real grammars, real data and the real SmolLM2 tokenizer (49,152 byte-level BPE tokens).

* JSONTestSuite (RFC 8259 conformance): every ``y_`` file is accepted token by token and EOS is
  allowed at its end; every ``n_`` file is refused (a token, or EOS at the end); ``i_`` printed.
* Agreement with Lark: a text fed token by token — the tokenizer's own tokenization and random
  other tokenizations of the same bytes — is accepted iff Lark parses it.
* At every step the mask agrees with ``accept_token`` on the token taken and on random others.
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pytest

import gad
from gad.engine.vocab import Vocabulary


@pytest.fixture(scope="module")
def vocab(smollm2_tokenizer) -> Vocabulary:
    return Vocabulary.from_tokenizer(smollm2_tokenizer)


@pytest.fixture(scope="module")
def json_cg(vocab, tmp_path_factory):
    return gad.compile(gad.Grammar.builtin("json"), vocab,
                       cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def sql_cg(vocab, tmp_path_factory):
    return gad.compile(gad.Grammar.builtin("sql"), vocab,
                       cache_dir=tmp_path_factory.mktemp("cache"))


def _byte_index(vocab: Vocabulary) -> dict[bytes, int]:
    out: dict[bytes, int] = {}
    for i, t in enumerate(vocab.tokens):
        if t and i not in vocab.eos_ids and t not in out:
            out[t] = i
    return out


@lru_cache(maxsize=4)
def _index_for(vocab: Vocabulary) -> tuple[dict[bytes, int], int]:
    idx = _byte_index(vocab)
    return idx, max(len(t) for t in idx)


def tokenize(vocab: Vocabulary, data: bytes, rng: np.random.Generator | None = None) -> list[int] | None:
    """Greedy longest-match tokenization, or (with ``rng``) a random tokenization of ``data``.

    None when no token sequence spells ``data`` (SmolLM2 has no tokens for bytes that never occur
    in UTF-8, such as 0xFF: such a text can never be generated)."""
    idx, longest = _index_for(vocab)
    out, i = [], 0
    while i < len(data):
        cands = [k for k in range(1, min(longest, len(data) - i) + 1) if data[i:i + k] in idx]
        if not cands:
            return None
        k = cands[-1] if rng is None else int(rng.choice(cands))
        out.append(idx[data[i:i + k]])
        i += k
    return out


def run(cg, ids: list[int], check_every: int = 0, rng=None) -> bool:
    """Feed ids; True iff all accepted and EOS is allowed at the end.

    The mask is compared with ``accept_token`` for the token taken at every step of short inputs
    (every 64th step of long ones, e.g. 100,000 nested brackets) and, every ``check_every`` steps,
    for 8 random other tokens."""
    m = cg.matcher()
    stride = 1 if len(ids) <= 600 else 64
    for step, t in enumerate(ids):
        if step % stride == 0:
            mask = m.mask()
            if check_every and step % check_every == 0 and rng is not None:
                for o in rng.choice(cg.vocab_size, 8, replace=False):
                    assert m.fork().accept_token(int(o)) == bool(mask[o])
            ok = m.accept_token(t)
            assert ok == bool(mask[t])
        else:
            ok = m.accept_token(t)
        if not ok:
            return False
    mask = m.mask()
    assert all(mask[e] == m.is_accepting() for e in cg.eos_ids)
    return m.is_accepting()


def _suite(data_dir, prefix: str):
    return sorted((data_dir / "jsontestsuite").glob(f"{prefix}_*.json"))


def test_jsontestsuite_accepts_y_and_rejects_n(json_cg, smollm2_tokenizer, data_dir) -> None:
    ys, ns = _suite(data_dir, "y"), _suite(data_dir, "n")
    assert len(ys) >= 50 and len(ns) >= 100
    rng = np.random.default_rng(0)
    for f in ys:
        data = f.read_bytes()
        ids = smollm2_tokenizer.encode(data.decode("utf-8"), add_special_tokens=False)
        assert json_cg.vocab.decode(ids) == data
        assert run(json_cg, ids, check_every=3, rng=rng), f.name
    for f in ns:
        data = f.read_bytes()
        try:
            ids = smollm2_tokenizer.encode(data.decode("utf-8"), add_special_tokens=False)
        except UnicodeDecodeError:
            ids = tokenize(json_cg.vocab, data)
            if ids is None:
                print(f"{f.name}: not spelled by any token sequence")
                continue
        assert not run(json_cg, ids), f.name
    for f in _suite(data_dir, "i"):
        ids = tokenize(json_cg.vocab, f.read_bytes())
        verdict = "untokenizable" if ids is None else "accepted" if run(json_cg, ids) else "rejected"
        print(f"{f.name}: {verdict}")


def _lark_parses(grammar: gad.Grammar, data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return grammar.parses(text)


def test_random_tokenizations_agree_with_lark_on_json(json_cg, data_dir) -> None:
    rng = np.random.default_rng(1)
    files = _suite(data_dir, "y")[::3] + _suite(data_dir, "n")[::4]
    for f in files:
        data = f.read_bytes()
        expect = _lark_parses(json_cg.grammar, data)
        for _ in range(2):
            ids = tokenize(json_cg.vocab, data, rng)
            if ids is not None:
                assert run(json_cg, ids) == expect, f.name


def _spider(data_dir, n: int) -> list[str]:
    lines = (data_dir / "spider" / "dev_queries.jsonl").read_text().splitlines()
    return [json.loads(line)["query"] for line in lines[:n]]


def test_sql_tokenizations_agree_with_lark(sql_cg, smollm2_tokenizer, data_dir) -> None:
    rng = np.random.default_rng(2)
    queries = _spider(data_dir, 120)
    # perturbations that Lark rejects or accepts: truncation, a dropped character, doubled keyword
    texts = []
    for q in queries:
        texts.append(q)
        texts.append(q[: len(q) // 2])
        j = int(rng.integers(len(q)))
        texts.append(q[:j] + q[j + 1:])
    for text in texts:
        data = text.encode()
        expect = _lark_parses(sql_cg.grammar, data)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert run(sql_cg, ids, check_every=5, rng=rng) == expect, text
        assert run(sql_cg, tokenize(sql_cg.vocab, data, rng)) == expect, text


def test_special_tokens_never_allowed_and_eos_only_when_complete(json_cg, smollm2_tokenizer) -> None:
    specials = [i for i in smollm2_tokenizer.all_special_ids if i not in json_cg.eos_ids]
    m = json_cg.matcher()
    for piece in ['{"a"', ": [1", ", 2", "]}"]:
        mask = m.mask()
        assert not mask[specials].any()
        assert not mask[list(json_cg.eos_ids)].any()
        assert m.accept_tokens(smollm2_tokenizer.encode(piece, add_special_tokens=False)) > 0
    assert m.is_accepting() and m.mask()[list(json_cg.eos_ids)].all()
    assert m.accept_token(json_cg.eos_ids[0]) and m.is_finished() and not m.mask().any()


def test_compile_cache_round_trip(vocab, tmp_path) -> None:
    g = gad.Grammar.builtin("json")
    from gad.engine import compiler

    compiler._MEMO.clear()
    a = gad.compile(g, vocab, cache_dir=tmp_path)
    assert list((tmp_path / "compiled").glob("*.npz"))
    assert gad.compile(g, vocab, cache_dir=tmp_path) is a  # same process: the same object
    compiler._MEMO.clear()
    b = gad.compile(g, vocab, cache_dir=tmp_path)  # from the disk cache
    assert b is not a
    ids = [i for i in range(0, vocab.size, 997)]
    ma, mb = a.matcher(), b.matcher()
    assert np.array_equal(ma.mask(), mb.mask())
    for t in [vocab.tokens.index(b"{"), vocab.tokens.index(b'"')]:
        assert ma.accept_token(t) and mb.accept_token(t)
        assert np.array_equal(ma.mask(), mb.mask())
    assert ids
