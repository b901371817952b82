"""The mask against a brute-force oracle built on Lark itself (BRIEF §1).

For small grammars and small adversarial vocabularies (tokens that span several terminals, end
inside a terminal, carry ignored whitespace, split a UTF-8 character, or are a keyword prefix of a
name), every prefix of many random token walks is checked:

* completeness: if the mask forbids token t, no completion of ``prefix·t`` of up to K characters
  parses with Lark;
* soundness: if the mask allows t, a completion is found (searching with the matcher) and Lark
  parses ``prefix·t·completion`` — so the oracle is Lark, not the matcher;
* EOS is allowed iff Lark parses the prefix;
* ``accept_token(t)`` agrees with ``mask()[t]``, and a refused token leaves the state unchanged.
"""

from __future__ import annotations

import itertools
from functools import cache

import lark
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gad.engine.compiler import CompiledGrammar
from gad.engine.vocab import Vocabulary

GRAMMARS = {
    # keywords vs names, numbers with an optional fraction, ignored spaces anywhere
    "kw": (
        r"""
        start: stmt+
        stmt: "if" NAME ";" | NAME "=" NUMBER ";"
        NAME: /[a-z]+/
        NUMBER: /[0-9]+(\.[0-9]+)?/
        %ignore " "
        """,
        ["i", "f", "a", "=", "1", ".", ";", " "],
        ["i", "f", "a", "if", "if ", "a=", "=1", "1;", ";i", "1.", ".1", "a;", " ", "  ", " a", "fi",
         ";", "=", "1", "a=1;", " if", "ifa", "1;if", ";;", "f;", "1.1", "=1.", "if a;", " ;"],
        3,
    ),
    # nested lists of strings with multi-byte characters; tokens split the UTF-8 encoding of é
    "list": (
        r"""
        ?start: value
        ?value: "[" [value ("," value)*] "]" | STRING | "tt"
        STRING: /"[^"]*"/
        %ignore /[ \n]+/
        """,
        ["[", "]", ",", '"', "x", "t", " ", "é".encode()[:1], "é".encode()[1:]],
        ["[", "]", ",", '"', "x", "t", "tt", " ", "\n", '",', '"]', "],", "[[", '["', '"x"', "é",
         "é".encode()[:1], "é".encode()[1:], b'"' + "é".encode()[:1], "x" + '"', ", ", "]]", "[t", "t]"],
        3,
    ),
    # terminal priority, case-insensitive keywords, a regexp with a flag
    "prio": (
        r"""
        start: item ("," item)*
        item: SELECT NAME | NAME | INT
        SELECT.2: "select"i
        NAME: /[a-z_]+/i
        INT: /[0-9]+/
        %ignore " "
        """,
        ["s", "e", "l", "c", "t", "S", "x", ",", "1", " "],
        ["sel", "ect", "select", "SELECT", "Sel", "x", "se", "lect", " ", ",", "1", "12", " x", "t ",
         "ct,", "s", "e", "l", "c", "t", "S"],
        2,
    ),
    # keys in a fixed order, each optional: one lexer context per position holding the keys still
    # allowed, served by the first position's automaton (CompiledGrammar._context_cover) -- except
    # where a later key is a prefix of an earlier one ("ab" / "abc": not inert, kept apart)
    "suffixes": (
        r"""
        start: "(" k1? k2? k3? k4? ")"
        k1: "ab" NUM
        k2: "ac" NUM
        k3: "abc" NUM
        k4: "b" NUM
        NUM: /[0-9]+/
        """,
        ["(", ")", "a", "b", "c", "1"],
        ["(", ")", "a", "b", "c", "1", "ab", "ac", "abc", "(ab", "1)", "1ab", "1b", "bc", "1a", "(a", "c1"],
        3,
    ),
}


def _compile(name: str):
    text, alphabet, toks, k = GRAMMARS[name]
    parser = lark.Lark(text, parser="lalr", lexer="contextual")
    vocab = Vocabulary.from_strings(toks)
    return parser, CompiledGrammar(parser, vocab).warm(), [a if isinstance(a, bytes) else a.encode() for a in alphabet], k


_COMPILED = {name: _compile(name) for name in GRAMMARS}


def _parses(parser: lark.Lark, data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


@cache
def _lark_viable(name: str, data: bytes) -> bool:
    parser, _, alphabet, k = _COMPILED[name]
    for n in range(k + 1):
        for tail in itertools.product(alphabet, repeat=n):
            if _parses(parser, data + b"".join(tail)):
                return True
    return False


def _witness(matcher, alphabet: list[bytes], depth: int = 8) -> bytes | None:
    """Breadth-first search for a completion using the matcher; returns the completion bytes."""
    frontier = [(matcher, b"")]
    seen = {matcher.state_key()}
    for _ in range(depth + 1):
        nxt = []
        for m, tail in frontier:
            if m.is_accepting():
                return tail
            for a in alphabet:
                f = m.fork()
                if f.accept_bytes(a) and f.state_key() not in seen:
                    seen.add(f.state_key())
                    nxt.append((f, tail + a))
        frontier = nxt
    return None


def _check_prefix(name: str, ids: list[int]) -> None:
    parser, cg, alphabet, _ = _COMPILED[name]
    m = cg.matcher()
    assert m.accept_tokens(ids) == len(ids)
    prefix = cg.vocab.decode(ids)
    mask = m.mask()
    eos = cg.eos_ids[0]
    assert mask[eos] == _parses(parser, prefix), (name, prefix)
    for t, tb in enumerate(cg.vocab.tokens):
        if tb is None:
            continue
        f = m.fork()
        accepted = f.accept_token(t)
        assert accepted == bool(mask[t]), (name, prefix, tb)
        if not accepted:
            assert f.tokens == m.tokens
            assert not _lark_viable(name, prefix + tb), f"mask forbids {tb!r} after {prefix!r} but Lark accepts a completion"
        else:
            tail = _witness(f, alphabet)
            assert tail is not None, f"mask allows {tb!r} after {prefix!r} but no completion was found"
            assert _parses(parser, prefix + tb + tail), (prefix, tb, tail)


@pytest.mark.parametrize("name", list(GRAMMARS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mask_equals_lark_oracle_on_random_walks(name: str, data) -> None:
    _, cg, _, _ = _COMPILED[name]
    m = cg.matcher()
    ids: list[int] = []
    rng_seed = data.draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(rng_seed)
    for _ in range(data.draw(st.integers(0, 6))):
        allowed = np.flatnonzero(m.mask())
        allowed = allowed[~np.isin(allowed, cg.eos_ids)]
        if allowed.size == 0:
            break
        t = int(rng.choice(allowed))
        assert m.accept_token(t)
        ids.append(t)
    for cut in range(len(ids) + 1):
        _check_prefix(name, ids[:cut])


def test_keyword_prefix_of_name_and_whitespace_edges() -> None:
    parser, cg, _, _ = _COMPILED["kw"]
    toks = cg.vocab.tokens
    tid = {t.decode(): i for i, t in enumerate(toks) if t is not None}
    m = cg.matcher()
    # "if" then "a" makes the name "ifa" (greedy lexing) which must be followed by "="
    assert m.accept_token(tid["if"])
    assert m.accept_token(tid["a"])
    mask = m.mask()
    assert mask[tid["=1"]] and not mask[tid[";"]]
    # leading and trailing ignored text
    m.reset()
    assert m.accept_tokens([tid[" "], tid["a=1;"], tid["  "]]) == 3
    assert m.is_accepting() and _parses(parser, b" a=1;  ")


def test_partial_utf8_is_carried_across_tokens() -> None:
    _, cg, _, _ = _COMPILED["list"]
    toks = cg.vocab.tokens
    first, second = "é".encode()[:1], "é".encode()[1:]
    ti = {t: i for i, t in enumerate(toks) if t is not None}
    m = cg.matcher()
    assert m.accept_token(ti[b'"' + first])
    mask = m.mask()
    # only the continuation byte may follow a lone lead byte
    assert [toks[i] for i in np.flatnonzero(mask)] == [second]
    assert m.accept_token(ti[second]) and m.accept_token(ti[b'"'])
    assert m.is_accepting()
    m.reset()
    assert not m.accept_token(ti[second])  # a continuation byte cannot start text


def test_rollback_and_fork_restore_masks() -> None:
    _, cg, _, _ = _COMPILED["kw"]
    tid = {t.decode(): i for i, t in enumerate(cg.vocab.tokens) if t is not None}
    m = cg.matcher()
    masks = [m.mask()]
    for t in ["if", " a", ";", "a=", "1."]:
        assert m.accept_token(tid[t])
        masks.append(m.mask())
    f = m.fork()
    for k in range(5, 0, -1):
        m.rollback(1)
        assert np.array_equal(m.mask(), masks[k - 1])
    assert np.array_equal(f.mask(), masks[-1])
    with pytest.raises(Exception, match="cannot roll back"):
        m.rollback(1)


def test_suffix_contexts_share_an_automaton_only_where_inert() -> None:
    """The "suffixes" grammar's key contexts: covered by a larger one exactly where no added key is a
    prefix of (or has as a prefix) a key of the smaller one; the oracle test above checks the masks."""
    cg = _COMPILED["suffixes"][1]
    names = {cid: {t.pattern.value for t in spec[0]} for cid, spec in enumerate(cg._ctx_specs)}
    cover = cg._context_cover()
    assert cover, names
    for small, big in cover.items():
        extra = names[big] - names[small]
        assert names[small] < names[big] and extra
        assert not any(x.startswith(y) or y.startswith(x) for x in extra for y in names[small])
    # {ac, abc, b, ")"} must not use {ab, ac, abc, b, ")"}'s automaton: "ab" is a prefix of "abc"
    after_k1 = next(c for c, n in names.items() if n == {"ac", "abc", "b", ")"})
    assert after_k1 not in cover
    # {b, ")"} may use the first position's automaton (no key there is a prefix of "b" or ")")
    last = next(c for c, n in names.items() if n == {"b", ")"})
    assert last in cover
    assert set(cg.state_ctx.values()).isdisjoint(cover)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("ab\"", min_size=1, max_size=4), min_size=1, max_size=8, unique=True),
       st.lists(st.text("ab\"", min_size=1, max_size=4), min_size=1, max_size=8))
def test_literal_index_agrees_with_the_pairwise_prefix_test(lits, extra) -> None:
    """CompiledGrammar._context_cover's look-up (a set and a sorted list of the context's literals)
    says "inert" exactly where no literal is a prefix of an added one or has it as a prefix."""
    from gad.engine.compiler import _LiteralIndex

    index = _LiteralIndex(list(lits), [None] * len(lits))
    want = not any(x.startswith(y) or y.startswith(x) for x in extra for y in lits)
    assert index.inert(extra, None) is want  # type: ignore[arg-type]
