"""The packed masks: ``Matcher.mask_bits`` and ``fill_next_token_bitmask`` against the bool mask.

The engine caches masks packed (``CompiledGrammar.mask_bits``) and unpacks them for ``mask()``; the
bitmask a serving loop reads (xgrammar's / vLLM's int32 layout: bit ``i % 32`` of word ``i // 32``)
must name exactly the tokens ``mask()`` allows, with the words past the vocabulary zero, on every
state a matcher reaches: after tokens, after raw bytes (sets of lexing hypotheses), after EOS.
"""

from __future__ import annotations

import lark
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gad.engine.compiler import CompiledGrammar
from gad.engine.vocab import Vocabulary
from gad.errors import InvalidArgumentError

GRAMMAR = r"""
start: stmt+
stmt: "if" NAME ";" | NAME "=" NUMBER ";"
NAME: /[a-z]+/
NUMBER: /[0-9]+(\.[0-9]+)?/
%ignore " "
"""
# 37 spellings + EOS: not a multiple of 32, so the last word has padding bits
TOKENS = ["i", "f", "a", "if", "if ", "a=", "=1", "1;", ";i", "1.", ".1", "a;", " ", "  ", " a", "fi",
          ";", "=", "1", "a=1;", " if", "ifa", "1;if", ";;", "f;", "1.1", "=1.", "if a;", " ;", "b", "ab",
          "=2", "2", "22;", "ia", "fa", "z"]


def _compiled(cache: int = 2048) -> CompiledGrammar:
    cg = CompiledGrammar(lark.Lark(GRAMMAR, parser="lalr", lexer="contextual"), Vocabulary.from_strings(TOKENS))
    cg.mask_cache_size = cache
    return cg


def _unpack_row(row: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    bits = np.unpackbits(row.astype("<i4").view(np.uint8), bitorder="little").astype(bool)
    return bits[:n], bits[n:]


def _check(m, vs: int) -> None:
    want = m.mask()
    assert want.shape == (vs,) and want.dtype == bool and want.flags.writeable
    words = -(-vs // 32)
    out = np.full((3, words + 2), -1, dtype=np.int32)  # wider than needed, dirty: every word is written
    m.fill_next_token_bitmask(out, 1)
    got, pad = _unpack_row(out[1], vs)
    assert np.array_equal(got, want) and not pad.any()
    assert (out[0] == -1).all() and (out[2] == -1).all()  # other rows untouched
    t = torch.zeros((1, words), dtype=torch.int32)
    m.fill_next_token_bitmask(t)
    assert np.array_equal(t.numpy()[0], out[1, :words])
    view = m.mask_view()
    assert np.array_equal(view, want) and not view.flags.writeable
    packed = m.mask_bits()
    assert packed.dtype == np.uint8 and packed.shape == (4 * words,) and not packed.flags.writeable
    assert np.array_equal(packed.view("<i4"), out[1, :words])


@pytest.mark.parametrize("cache", [2048, 0])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_bitmask_equals_mask_along_token_and_byte_walks(cache: int, data) -> None:
    cg = _compiled(cache)
    vs = cg.vocab_size
    assert vs % 32  # the padding case
    m = cg.matcher()
    _check(m, vs)
    for _ in range(data.draw(st.integers(1, 12))):
        if data.draw(st.booleans()):  # raw bytes: may leave several lexing hypotheses (a negative stack)
            chunk = data.draw(st.sampled_from([b"i", b"if", b"a", b"a=1", b"1.", b";", b" ", b"1"]))
            f = m.fork()
            if f.accept_bytes(chunk):
                m = f
        else:
            allowed = np.flatnonzero(m.mask())
            if allowed.size == 0:
                break
            m.accept_token(int(data.draw(st.sampled_from(allowed.tolist()))))
        _check(m, vs)
        if m.is_finished():
            break


def test_multi_hypothesis_and_finished_states() -> None:
    cg = _compiled()
    vs = cg.vocab_size
    m = cg.matcher()
    assert m.accept_bytes(b"if a")
    _check(m, vs)
    assert m.accept_bytes(b";")
    eos = cg.eos_ids[0]
    assert m.mask()[eos]
    _check(m, vs)
    assert m.accept_token(eos) and m.is_finished()
    out = np.full((1, -(-vs // 32)), -1, dtype=np.int32)
    m.fill_next_token_bitmask(out)
    assert not out.any() and not m.mask().any() and not m.mask_bits().any()


def test_a_multi_hypothesis_mask_is_the_union_of_its_hypotheses() -> None:
    # a set of lexing hypotheses (what accept_bytes leaves where a lexeme may both close and go on),
    # interned from two states the matcher reaches: its packed mask is the OR of theirs
    cg = _compiled()
    a, b = cg.matcher(), cg.matcher()
    assert a.accept_bytes(b"a=1") and b.accept_bytes(b"if a")
    state = cg._state_of([a.state, b.state])
    assert state[0] < 0
    want = a.mask() | b.mask()
    assert want.any() and not np.array_equal(want, a.mask()) and not np.array_equal(want, b.mask())
    assert np.array_equal(cg.mask_for(*state), want)
    assert np.array_equal(cg.mask_bits(*state), np.packbits(np.concatenate(
        [want, np.zeros(-cg.vocab_size % 32, dtype=bool)]), bitorder="little"))


@pytest.mark.parametrize("bad, match", [
    (np.zeros((1, 2), dtype=np.int64), "int32"),
    (np.zeros(2, dtype=np.int32), "int32"),
    (np.zeros((1, 1), dtype=np.int32), "needs 2"),
    ([[0, 0]], "numpy array or a CPU torch tensor"),
    (torch.zeros((1, 2), dtype=torch.float32), "int32"),
])
def test_bad_bitmasks_are_refused_with_a_typed_error(bad, match: str) -> None:
    m = _compiled().matcher()
    with pytest.raises(InvalidArgumentError, match=match):
        m.fill_next_token_bitmask(bad)


def test_bad_rows_are_refused() -> None:
    m = _compiled().matcher()
    out = np.zeros((2, 2), dtype=np.int32)
    for index, match in [(2, "outside"), (-3, "outside"), (True, "bool"), (1.0, "integer")]:
        with pytest.raises(InvalidArgumentError, match=match):
            m.fill_next_token_bitmask(out, index)
    m.fill_next_token_bitmask(out, -1)
    assert out[1].any() and not out[0].any()
