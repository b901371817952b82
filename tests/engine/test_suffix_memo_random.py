"""The suffix memo of fork walks (:meth:`CompiledGrammar._suffix_fill`) never changes a mask, on random
grammars built to stress deep reductions: nested brackets, chains of unary operators, precedence
levels with left and right recursion, statement lists with keywords, with and without ignored spaces,
over vocabularies whose tokens cross many lexemes (runs of one symbol, pieces of sentences of the
grammar).  Every mask of random walks is computed with the memo off, then again on a fresh compiled
grammar with it on (walked forwards and backwards, the memo growing across walks); some grammars also
use the dense fill paths (a small ``_dense_min``).  Seeds are fixed: the test is deterministic."""

from __future__ import annotations

import random

import lark
import numpy as np
import pytest

import gad.engine.compiler as compiler
from gad.engine.compiler import CompiledGrammar
from gad.engine.vocab import Vocabulary


def _grammar(r: random.Random) -> str:
    atoms = ["NAME", "NUM", '"(" expr ")"']
    if r.random() < 0.5:
        atoms.append('"[" [expr ("," expr)*] "]"')
    if r.random() < 0.4:
        atoms.append('NAME "(" [args] ")"')
        atoms.append('"<" expr "|" expr ">"')
    rules = ["atom: " + " | ".join(atoms)]
    if "args" in rules[0]:
        rules.append(r.choice(['args: args "," expr | expr', 'args: expr "," args | expr']))
    below = "atom"
    if r.random() < 0.8:
        u = r.choice("-!~")
        alts = [f'"{u}" unary', f'"{u}{u}" unary', "atom"] if r.random() < 0.4 else [f'"{u}" unary', "atom"]
        rules.append("unary: " + " | ".join(alts))
        below = "unary"
    ops = r.sample(["+", "*", "/", "%", "&", "="], 4)
    for i in range(r.randint(0, 4)):
        op, name = ops[i], f"level{i}"
        form = r.choice([f'{name}: {name} "{op}" {below} | {below}', f'{name}: {below} "{op}" {name} | {below}',
                         f'{name}: {below} ("{op}" {below})*'])
        rules.append(form)
        below = name
    rules.append(f"expr: {below}")
    top = r.choice(["start: expr", 'start: stmt+\nstmt: expr ";" | "if" expr stmt | NAME "=" expr ";"',
                    'start: items\nitems: items item | item\nitem: expr ";" | "{" items "}" | "do" item "od"'])
    rules.insert(0, top)
    rules.append("NAME: " + r.choice(["/[a-c]+/", "/[ab][ab0-9]*/", "/[a-d]/"]))
    rules.append("NUM: " + r.choice(["/[0-9]+/", "/0|[1-9][0-9]*/"]))
    if r.random() < 0.5:
        rules.append('%ignore " "')
    return "\n".join(rules) + "\n"


def _alphabet(text: str) -> list[str]:
    chars = set("abcd0123")
    for part in text.split('"')[1::2]:
        chars.update(part)
    if '%ignore " "' in text:
        chars.add(" ")
    return sorted(chars)


def _walk(cg: CompiledGrammar, r: random.Random, steps: int, pick: list[int] | None = None) -> list[int]:
    """A random walk of allowed tokens (of ``pick`` when given), its tokens."""
    m, out = cg.matcher(), []
    for _ in range(steps):
        allowed = np.flatnonzero(m.mask()[:-1])
        if pick is not None:
            allowed = np.intersect1d(allowed, pick)
        if allowed.size == 0:
            break
        t = int(r.choice(allowed.tolist()))
        assert m.accept_token(t)
        out.append(t)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_suffix_memo_never_changes_a_mask(seed: int, monkeypatch) -> None:
    r = random.Random(seed)
    text = _grammar(r)
    parser = lark.Lark(text, parser="lalr", lexer="contextual")
    alpha = _alphabet(text)
    # sentences of the grammar, read one character a token, give the vocabulary its longer pieces
    single = CompiledGrammar(parser, Vocabulary([c.encode() for c in alpha] + [None], eos_ids=[len(alpha)]))
    sentences = ["".join(alpha[i] for i in _walk(single, r, 40)) for _ in range(10)]
    toks = {c for c in alpha}
    toks |= {c * k for c in alpha if not c.isalnum() for k in (2, 3, 4, 8)}
    for s in sentences:
        for _ in range(6):
            if len(s) >= 2:
                a = r.randrange(len(s) - 1)
                toks.add(s[a:a + r.randint(2, 7)])
    ordered = sorted(toks)
    vocab = Vocabulary([t.encode() for t in ordered] + [None], eos_ids=[len(ordered)])
    dense_min = r.choice([None, 4])

    def fresh() -> CompiledGrammar:
        cg = CompiledGrammar(parser, vocab)
        cg.mask_cache_size = 0
        if dense_min is not None:
            cg._dense_min = dense_min
        return cg

    longest = [i for i, t in enumerate(ordered) if len(t) > 1]
    monkeypatch.setattr(compiler, "SUFFIX_MEMO_TOKENS", -1)
    off = fresh()
    walks = [_walk(off, r, 20, longest if r.random() < 0.5 else None) for _ in range(10)]

    def masks(cg: CompiledGrammar, order: list[int]) -> dict[tuple[int, int], list[bool]]:
        out = {}
        for k in order:
            m = cg.matcher()
            for j, t in enumerate(walks[k]):
                out[(k, j)] = m.mask().tolist()
                assert m.accept_token(t)
            out[(k, len(walks[k]))] = m.mask().tolist()
        return out

    want = masks(off, list(range(len(walks))))
    monkeypatch.setattr(compiler, "SUFFIX_MEMO_TOKENS", 4096)
    for order in (list(range(len(walks))), list(range(len(walks)))[::-1]):
        assert masks(fresh(), order) == want, text
