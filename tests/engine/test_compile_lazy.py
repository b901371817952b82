"""Per-request compile: grammars made from a schema or a regex build their lexer automata at compile
and their token walks on demand (``warm=False``: automata on demand too), and share both across
grammars; their masks equal an eager, private compile of the same grammar."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gad
from gad.engine import compiler
from gad.errors import InvalidArgumentError
from gad.grammar import Grammar

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                                           "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
          "required": ["name", "age"]}
PET = {"type": "object", "properties": {"name": {"type": "string"}, "kind": {"enum": ["cat", "dog"]},
                                        "owner": {"type": "string"}}, "required": ["name"]}
RECORDS = [(PERSON, {"name": "Ada \u00e9\U0001d11e", "age": 36, "tags": ["x", "y\\\"z"]}),
           (PET, {"name": "Rex", "kind": "dog", "owner": "B\u00f8b"})]


def _masks_along(cg: compiler.CompiledGrammar, ids: list[int]) -> list[np.ndarray]:
    m = cg.matcher()
    out = []
    for t in ids:
        mask = m.mask()
        out.append(mask)
        assert mask[t], t
        assert m.accept_token(t)
    out.append(m.mask())
    return out


def test_schema_grammars_compile_lazily_and_share_walks(smollm2_tokenizer) -> None:
    tok = smollm2_tokenizer
    lazy = []
    for schema, value in RECORDS:
        g = Grammar.from_json_schema(schema)
        assert g.per_request
        cg = gad.compile(g, tok, cache_dir=False)
        used = set(cg.state_ctx.values())
        assert cg._share and all(cg._dfas[c] is not None for c in used) and not cg._roots  # automata only
        lazy_one = gad.compile(g, tok, cache_dir=False, warm=False)
        assert lazy_one._share and all(d is None for d in lazy_one._dfas)  # nothing built before a mask
        ids = tok.encode(json.dumps(value, separators=(",", ":"), ensure_ascii=False), add_special_tokens=False)
        eager = gad.compile(g, tok, cache_dir=False, warm=True)
        assert not eager._share
        got, want = _masks_along(cg, ids), _masks_along(eager, ids)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        assert got[-1][list(cg.eos_ids)].all()                        # the record is complete
        lazy.append(cg)
    # the two schemas' string-value contexts are one automaton, with one set of walks
    shared = {id(d) for d in lazy[0]._dfas if d is not None} & {id(d) for d in lazy[1]._dfas if d is not None}
    assert shared
    assert all(d.serial > 0 for d in lazy[1]._dfas if d is not None and id(d) in shared)
    # ... and some token walk built for the first schema serves the second (the same object)
    assert {id(n) for n in lazy[0]._roots.values()} & {id(n) for n in lazy[1]._roots.values()}


@pytest.mark.parametrize("limit, budget", [(3, 1 << 40), (4096, 96 << 10)])
def test_the_shared_store_keeps_to_its_count_and_byte_budget(smollm2_tokenizer, monkeypatch, limit, budget) -> None:
    """The process-wide store of shared automata evicts the least recently used ones past
    SHARED_DFA_LIMIT automata or SHARED_DFA_BYTES bytes (tables + root walks); masks stay exact, and
    an evicted automaton is rebuilt for the next grammar that needs it."""
    tok = smollm2_tokenizer
    monkeypatch.setattr(compiler, "_SHARED_DFAS", compiler.OrderedDict())
    monkeypatch.setattr(compiler, "_SHARED_BYTES", [0])
    monkeypatch.setattr(compiler, "SHARED_DFA_LIMIT", limit)
    monkeypatch.setattr(compiler, "SHARED_DFA_BYTES", budget)
    built = []
    for _round in range(2):
        for schema, value in RECORDS:
            g = Grammar.from_json_schema(schema)
            ids = tok.encode(json.dumps(value, separators=(",", ":"), ensure_ascii=False), add_special_tokens=False)
            cg = gad.compile(g, tok, cache_dir=False)
            got = _masks_along(cg, ids)
            want = _masks_along(gad.compile(g, tok, cache_dir=False, warm=True), ids)
            assert all(np.array_equal(a, b) for a, b in zip(got, want))
            built.extend(d for d in cg._dfas if d is not None and d.serial > 0)
            store = list(compiler._SHARED_DFAS.values())
            assert len(store) <= limit
            assert compiler._SHARED_BYTES[0] == sum(d.shared_bytes for d in store)
            assert compiler._SHARED_BYTES[0] <= budget or len(store) == 1
            assert all(d.shared_key is not None and d.shared_bytes > 0 for d in store)
    evicted = [d for d in built if d.shared_key is None]
    assert evicted and all(d.shared_bytes == 0 for d in evicted)
    # an evicted automaton's context was built again for a later grammar (same key, another object)
    assert len({d.serial for d in built}) > len({tuple((t.name, t.regexp) for t in d.terms) for d in built})


def test_a_name_with_another_pattern_gets_a_private_automaton(smollm2_tokenizer) -> None:
    """Guards name terminals of other contexts: a grammar whose terminal of that name has another
    pattern must not reuse an automaton built for the first one."""
    a = Grammar.from_string('start: X Y\nX: /a+/\nY: /b+/\n')
    b = Grammar.from_string('start: X Y\nX: /a+/\nY: /c+/\n')
    for g in (a, b):
        g.__dict__["per_request"] = True
    ca = gad.compile(a, smollm2_tokenizer, cache_dir=False)
    cb = gad.compile(b, smollm2_tokenizer, cache_dir=False)
    ma, mb = ca.matcher(), cb.matcher()
    assert ma.accept_bytes(b"aab") and ma.is_accepting() and not mb.accept_bytes(b"aab")
    mb = cb.matcher()
    assert mb.accept_bytes(b"aac") and mb.is_accepting()
    assert {id(x) for x in ca._dfas if x is not None}.isdisjoint({id(x) for x in cb._dfas if x is not None})


def test_automata_built_up_front_give_the_same_masks(smollm2_tokenizer) -> None:
    """``warm="automata"`` (the default for schemas): every context's lexer automaton is built by
    compile (no token walk), and the masks along a record equal the lazy compile's (``warm=False``);
    other values of ``warm`` are refused."""
    tok = smollm2_tokenizer
    schema, value = RECORDS[0]
    g = Grammar.from_json_schema(schema)
    cg = gad.compile(g, tok, cache_dir=False, warm="automata")
    used = set(cg.state_ctx.values())
    assert all(cg._dfas[c] is not None for c in used) and not cg._roots   # automata only
    ids = tok.encode(json.dumps(value, separators=(",", ":"), ensure_ascii=False), add_special_tokens=False)
    lazy = gad.compile(g, tok, cache_dir=False, warm=False)
    assert all(d is None for d in lazy._dfas)
    assert all(np.array_equal(a, b) for a, b in zip(_masks_along(cg, ids), _masks_along(lazy, ids)))
    with pytest.raises(InvalidArgumentError, match="warm"):
        gad.compile(g, tok, cache_dir=False, warm="eager")
