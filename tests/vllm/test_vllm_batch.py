"""The plug-in's engine-side state without vLLM: fake ``BatchUpdate`` records, toy vocabulary.

The same :class:`gad.vllm.batch.GadBatch` runs inside vLLM (``test_vllm_plugin.py``); here every
batch event vLLM can send — rows joining, leaving, moving, swapping, a replayed or truncated output
list — is driven by hand and the logits are checked against gad's own matcher.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from gad.engine.vocab import Vocabulary
from gad.errors import GrammarError, InvalidArgumentError
from gad.grammar import Grammar, builtin_names
from gad.phi.trie_io import load_trie
from gad.vllm.batch import GadBatch, mask_digest
from gad.vllm.requests import (
    check_sampling_params,
    error_message,
    parse_request,
    validate_sampling_params,
)

# tokens: 0 "a", 1 "b", 2 "ab", 3 "c", 4 EOS;  language (ab)+
TOKENS = ["a", "b", "ab", "c"]
EOS = 4
GRAMMAR = 'start: ("ab")+\n'


def params(method: str | None = "gcd", temperature: float = 1.0, grammar: str = GRAMMAR, **kw):
    extra = None if method is None else {"gad": {"grammar": grammar, "method": method}}
    base = dict(extra_args=extra, temperature=temperature, top_k=0, top_p=1.0, min_p=0.0, presence_penalty=0.0,
                frequency_penalty=0.0, repetition_penalty=1.0, logit_bias=None, min_tokens=0,
                structured_outputs=None, max_tokens=16)
    base.update(kw)
    return SimpleNamespace(**base)


def update(added=(), removed=(), moved=()):
    return SimpleNamespace(added=list(added), removed=list(removed), moved=list(moved), batch_size=0)


SWAP = SimpleNamespace(name="SWAP")
UNI = SimpleNamespace(name="UNIDIRECTIONAL")


@pytest.fixture()
def batch(tmp_path):
    vocab = Vocabulary.from_strings(TOKENS)
    records: list[dict] = []
    b = GadBatch(vocab, "toy", max_rows=2, cache_dir=tmp_path / "cc", trie_dir=tmp_path / "tries",
                 trace=records.append)
    b.records = records  # type: ignore[attr-defined]
    return b


def logits_for(rows: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, len(TOKENS) + 1, generator=torch.Generator().manual_seed(seed))


def allowed(row: torch.Tensor) -> list[int]:
    return torch.isfinite(row).nonzero().flatten().tolist()


def reference(tokens: list[int], batch: GadBatch) -> list[int]:
    m = next(iter(batch._compiled.values())).matcher()
    assert m.accept_tokens(tokens) == len(tokens)
    return np.flatnonzero(m.mask()).tolist()


# ------------------------------------------------------------------------------------ requests
def test_parse_request_forms_and_errors() -> None:
    assert parse_request(None) is None and parse_request({"other": 1}) is None
    r = parse_request({"gad": '{"grammar": "json"}'})         # the JSON-string form (vllm_xargs)
    assert r is not None and r.method == "gcd" and r.grammar == Grammar.builtin("json")
    assert {"json", "sql", "text"} <= set(builtin_names())
    r = parse_request({"gad": {"grammar": 'root ::= "x" | "y"', "method": "asap"}})  # GBNF guessed
    assert r is not None and r.grammar.kind == "ebnf" and r.grammar.parses("y") and r.method == "asap"
    assert parse_request({"gad": {"grammar": GRAMMAR}}).key == Grammar.from_string(GRAMMAR).sha256
    for bad, match in [({"grammar": GRAMMAR, "temp": 1}, "unknown gad argument"),
                       ({"grammar": GRAMMAR, "method": "beam"}, "'method' must be one of gcd, asap"),
                       ({}, "exactly one of 'grammar'"),
                       ({"grammar": GRAMMAR, "json_schema": {}}, "exactly one of"),
                       ({"grammar": GRAMMAR, "kind": "yacc"}, "'kind' must be"),
                       ({"grammar": "   "}, "non-empty")]:
        with pytest.raises(InvalidArgumentError, match=match):
            parse_request({"gad": bad})
    with pytest.raises(InvalidArgumentError, match="not JSON"):
        parse_request({"gad": "{grammar"})
    with pytest.raises(GrammarError) as exc:
        parse_request({"gad": {"grammar": 'start: "a" b\n'}})
    assert error_message(exc.value).startswith("gad: UndefinedSymbolError: <request grammar>:1:")


def test_json_schema_request_compiles_the_schema() -> None:
    """A JSON Schema request gets gad's schema grammar (compact JSON by default, keys in schema order)."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    r = parse_request({"gad": {"json_schema": schema}})
    assert r is not None and r.grammar.parses('{"a":1}') and not r.grammar.parses('{"a":"x"}')
    assert not r.grammar.parses('{"a": 1}')  # compact: no whitespace unless the request asks for it


def test_sampling_params_refused_with_a_reason() -> None:
    assert validate_sampling_params(params(None)) is None
    assert validate_sampling_params(params("gcd", temperature=0.0)) is not None   # greedy GCD is fine
    for p, match in [(params("asap", temperature=0.0), "temperature > 0"),
                     (params("asap", min_p=0.1), "min_p"),
                     (params("asap", repetition_penalty=1.2), "repetition_penalty"),
                     (params("asap", logit_bias={1: 2.0}), "logit_bias"),
                     (params("gcd", min_tokens=3), "min_tokens=0"),
                     (params("gcd", structured_outputs=object()), "structured_outputs")]:
        with pytest.raises(InvalidArgumentError, match=match):
            check_sampling_params(parse_request(p.extra_args), p)


# --------------------------------------------------------------------------------------- batch
def test_masks_follow_appended_tokens_and_plain_rows_are_untouched(batch) -> None:
    out0, out1, out2 = [], [], []
    batch.update(update(added=[(0, params(), [9], out0), (1, params(None), [9], out1), (2, params(), [7], out2)]))
    assert set(batch.rows) == {0, 2}                 # the plain request has no state at all
    for step, (t0, t2) in enumerate([(2, 0), (0, 1), (1, 2), (EOS, EOS)]):
        x = logits_for(3, step)
        before = x.clone()
        y = batch.apply(x)
        assert y is x
        assert torch.equal(y[1], before[1])          # bit-identical pass-through row
        for r, out in ((0, out0), (2, out2)):
            assert allowed(y[r]) == reference(out, batch)
            fin = torch.isfinite(y[r])
            assert torch.equal(y[r][fin], before[r][fin])   # allowed logits keep their values (GCD)
        out0.append(t0)
        out2.append(t2)
        out1.append(3)
    # EOS only once the text is complete: after "ab" (row 0 at step 1) but not after "a"
    steps0 = [r for r in batch.records if r["prefix"] in ([2], [2, 0])]
    assert steps0[0]["prefix"] == [2] and steps0[0]["n_allowed"] == 3   # a, ab, EOS
    assert steps0[1]["prefix"] == [2, 0] and steps0[1]["n_allowed"] == 1   # b only
    assert batch.stats["rows"] == 2 and batch.stats["replays"] == 0
    assert batch._buf.shape[0] >= 2                  # grew past max_rows=2? not needed for 2 rows


def test_replayed_or_truncated_output_lists_resync(batch) -> None:
    out = [2, 2, 0]
    batch.update(update(added=[(0, params(), [1], out)]))   # joins with tokens already generated (resumed)
    y = batch.apply(logits_for(1))
    assert allowed(y[0]) == reference(out, batch) == [1]
    out[:] = [2, 0, 1]                                        # the list was rewritten in place
    y = batch.apply(logits_for(1, 1))
    assert allowed(y[0]) == reference(out, batch) and batch.stats["replays"] == 1
    del out[1:]                                               # tokens discarded (KV-load failure)
    out.append(-1)                                            # an async-scheduling placeholder
    y = batch.apply(logits_for(1, 2))
    assert allowed(y[0]) == reference([2], batch)
    assert batch.rows[0].matcher.tokens == [2]


def test_rows_move_and_swap_with_their_state(batch) -> None:
    a, b = [2], [0]
    batch.update(update(added=[(0, params(), [], a), (1, params(), [], b)]))
    batch.update(update(moved=[(0, 1, SWAP)]))
    y = batch.apply(logits_for(2))
    assert allowed(y[1]) == reference(a, batch) and allowed(y[0]) == reference(b, batch)
    batch.update(update(removed=[0], moved=[(1, 3, UNI)]))       # a leaves, b's row moves to 3
    assert set(batch.rows) == {3}
    y = batch.apply(logits_for(4))                              # rows 0..2 plain: untouched
    assert allowed(y[3]) == reference(a, batch)
    assert all(torch.isfinite(y[i]).all() for i in range(3))


def test_a_token_outside_the_grammar_restricts_the_row_to_eos(batch) -> None:
    out = [3]                                                  # "c" is never allowed
    batch.update(update(added=[(0, params(), [], out)]))
    y = batch.apply(logits_for(1))
    assert allowed(y[0]) == [EOS] and batch.stats["broken"] == 1


def test_asap_adds_temperature_times_log_phi_and_learns_when_requests_end(batch, tmp_path) -> None:
    T = 0.5
    out = []
    batch.update(update(added=[(0, params("asap", temperature=T), [5, 6], out)]))
    x = logits_for(1)
    before = x.clone()
    batch.apply(x)                                             # fresh trie: Φ̂ = 1 on allowed tokens
    assert allowed(x[0]) == [0, 2]                             # "a", "ab"
    assert x[0, 2] == before[0, 2] and x[0, 0] == before[0, 0]
    for t in (2, EOS):                                         # the request writes "ab" then EOS
        out.append(t)
        if t != EOS:
            batch.apply(logits_for(1, 3))
    batch.update(update(removed=[0]))                          # finished: the trie learns and is saved
    phi = batch.estimators()[0]
    assert phi.trie.samples == 1
    phi_ab = phi.trie.phi_of([2])
    assert 0 < phi_ab < 1                                      # "ab" then EOS: only the EOS mass is known
    saved = list((tmp_path / "tries").glob("*.trie"))
    assert len(saved) == 1 and load_trie(saved[0]).samples == 1
    # a second request with the same identity sees T * log Φ̂("ab") on token "ab"
    out2: list[int] = []
    batch.update(update(added=[(0, params("asap", temperature=T), [5, 6], out2)]))
    x = logits_for(1, 4)
    before = x.clone()
    batch.apply(x)
    assert math.isclose(float(x[0, 2] - before[0, 2]), T * math.log(phi_ab), rel_tol=1e-5)
    # another prompt or temperature is another trie
    batch.update(update(added=[(1, params("asap", temperature=1.0), [5, 6], [])]))
    assert len(batch.estimators()) == 2


def test_unfinished_removal_teaches_nothing(batch) -> None:
    out = [2]
    batch.update(update(added=[(0, params("asap"), [1], out)]))
    batch.apply(logits_for(1))
    batch.update(update(removed=[0]))                          # preempted / unscheduled, not done
    assert batch.estimators()[0].trie.samples == 0


def test_a_one_way_move_onto_a_row_ends_that_request(batch) -> None:
    """vLLM condenses its batch by moving the last row into a finished request's hole without listing
    the hole in ``removed``: the finished request must still teach its trie."""
    done, live = [2, EOS], [2]
    batch.update(update(added=[(0, params("asap"), [1], done), (1, params("asap"), [1], live)]))
    batch.update(update(moved=[(1, 0, UNI)]))
    assert batch.estimators()[0].trie.samples == 1
    assert batch.rows[0].out is live and set(batch.rows) == {0}


def test_trace_digest_matches_mask(batch) -> None:
    out: list[int] = []
    batch.update(update(added=[(0, params(), [], out)]))
    batch.apply(logits_for(1))
    rec = batch.records[-1]
    m = next(iter(batch._compiled.values())).matcher()
    assert rec["allowed"] == mask_digest(m.mask()) and rec["prefix"] == [] and rec["method"] == "gcd"
