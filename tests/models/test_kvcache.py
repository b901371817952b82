"""KV caches for many continuations of one prompt (gad.kvcache, gad.hf.HFSession).

Every fast path is checked against a slow reference: growing buffers against ``torch.cat``,
shared-prefix attention against attention over the materialised context, sessions against
full-context forward passes of the real model.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from gad.engine.vocab import Vocabulary
from gad.errors import InvalidArgumentError
from gad.models import kvcache
from gad.models.base import RecomputeSession, ToyLM


def test_growing_layer_matches_concatenation_through_crops_and_selects() -> None:
    g = torch.Generator().manual_seed(0)
    grow, ref = kvcache.GrowingKVLayer(), DynamicLayer()
    steps = [("up", 5), ("up", 1), ("crop", 2), ("up", 3), ("up", 70), ("crop", 40), ("up", 1)]
    for op, n in steps:
        if op == "up":
            k = torch.randn(2, 3, n, 4, generator=g)
            v = torch.randn(2, 3, n, 4, generator=g)
            gk, gv = grow.update(k, v)
            rk, rv = ref.update(k, v)
            assert torch.equal(gk, rk) and torch.equal(gv, rv)
        else:
            grow.crop(-n)
            ref.crop(-n)
        assert grow.get_seq_length() == ref.get_seq_length()
    grow.batch_select_indices(torch.tensor([1]))
    ref.batch_select_indices(torch.tensor([1]))
    k, v = torch.randn(1, 3, 2, 4, generator=g), torch.randn(1, 3, 2, 4, generator=g)
    gk, _ = grow.update(k, v)
    rk, _ = ref.update(k, v)
    assert torch.equal(gk, rk)


@pytest.mark.parametrize("with_mask", [False, True])
def test_shared_prefix_attention_equals_attention_over_the_full_context(with_mask: bool) -> None:
    g = torch.Generator().manual_seed(1)
    b, heads, kv_heads, plen, slen, dim = 3, 6, 2, 11, 4, 8
    kp, vp = torch.randn(1, kv_heads, plen, dim, generator=g), torch.randn(1, kv_heads, plen, dim, generator=g)
    layer = kvcache.SharedPrefixLayer(kp, vp)
    ks, vs = layer.update(torch.randn(b, kv_heads, slen, dim, generator=g),
                          torch.randn(b, kv_heads, slen, dim, generator=g))
    assert layer.get_seq_length() == plen + slen
    cache = types.SimpleNamespace(layers=[layer])
    module = types.SimpleNamespace(layer_idx=0, num_key_value_groups=heads // kv_heads, is_causal=True,
                                   training=False, config=object())
    q = torch.randn(b, heads, 1, dim, generator=g)
    mask = None
    if with_mask:
        mask = torch.rand(b, 1, 1, plen + slen, generator=g) > 0.3
        mask[..., 0] = True
    with kvcache.active(cache):
        out, _ = kvcache.shared_prefix_attention(module, q, ks, vs, mask, scaling=dim ** -0.5)
    full_k = torch.cat([kp.expand(b, -1, -1, -1), ks], dim=-2)
    full_v = torch.cat([vp.expand(b, -1, -1, -1), vs], dim=-2)
    ref, _ = sdpa_attention_forward(module, q, full_k, full_v, mask, scaling=dim ** -0.5)
    assert out.shape == ref.shape == (b, 1, heads, dim)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_shared_prefix_layer_refuses_to_crop_into_the_prefix() -> None:
    layer = kvcache.SharedPrefixLayer(torch.zeros(1, 1, 5, 2), torch.zeros(1, 1, 5, 2))
    layer.update(torch.zeros(2, 1, 2, 2), torch.zeros(2, 1, 2, 2))
    with pytest.raises(ValueError, match="shared prefix"):
        layer.crop(-3)
    layer.crop(-2)
    assert layer.get_seq_length() == 5


def test_prompt_store_is_bounded_and_least_recently_used() -> None:
    kv = [(torch.zeros(1, 1, 10, 4), torch.zeros(1, 1, 10, 4))]  # 320 bytes + lp
    lp = torch.zeros(1, 8, dtype=torch.float64)  # 64 bytes
    store = kvcache.PromptKVStore(max_bytes=2 * (320 + 64))
    store.put([1], kv, lp)
    store.put([2], kv, lp)
    assert store.get([1]) is not None  # [1] is now the most recent
    store.put([3], kv, lp)
    assert store.get([2]) is None and store.get([1]) is not None and store.get([3]) is not None
    kvcache.PromptKVStore(max_bytes=10).put([4], kv, lp)  # larger than the store: not kept, no error


def _prompt(lm) -> list[int]:
    return lm.encode_prompt("List three prime numbers as a JSON array, then explain.")


def test_sessions_match_full_context_passes_with_and_without_a_shared_prefix(smollm2) -> None:
    lm = smollm2
    prompt = _prompt(lm)
    steps = [[28, 29, 30], [31, 28, 33], [2, 7, 9]]
    outs = {}
    saved = lm.shared_prefix
    try:
        for shared in (True, False):
            lm.shared_prefix = shared and saved
            s = lm.session(prompt, batch=3)
            got = [s.logprobs()]
            for st in steps:
                s.append(st)
                got.append(s.logprobs())
            outs[shared] = np.stack(got)
    finally:
        lm.shared_prefix = saved
    for i in range(len(steps) + 1):
        ref = lm.logprobs([prompt + [st[r] for st in steps[:i]] for r in range(3)])
        np.testing.assert_allclose(outs[True][i], ref, atol=2e-4)
        np.testing.assert_allclose(outs[False][i], ref, atol=2e-4)
    assert saved, "the bundled Llama model should run with the shared-prefix attention"


def test_keep_rows_and_the_prompt_store(smollm2) -> None:
    lm = smollm2
    prompt = _prompt(lm) + [28]  # a prompt no other test used: the first session runs it
    lm.prompt_store.clear()
    first = lm.session(prompt, batch=4)
    assert first.forward_passes == 1
    second = lm.session(prompt, batch=4)
    assert second.forward_passes == 0  # the stored prompt pass is reused
    np.testing.assert_array_equal(first.logprobs(), second.logprobs())
    second.append([100, 101, 102, 103])
    second.keep_rows([3, 1])
    assert second.batch == 2 and second.generated == [[103], [101]]
    second.append([7, 8])
    ref = lm.logprobs([prompt + [103, 7], prompt + [101, 8]])
    np.testing.assert_allclose(second.logprobs(), ref, atol=2e-4)
    assert len(second._lp) == 1  # several rows cannot roll back: no history of (batch, vocab) copies
    second.keep_rows([1])  # down to one row: a rollback re-feeds the token it needs
    second.rollback(1)
    np.testing.assert_allclose(second.logprobs(), lm.logprobs([prompt + [101]]), atol=2e-4)
    with pytest.raises(InvalidArgumentError, match="keep_rows"):
        second.keep_rows([2])
    with pytest.raises(InvalidArgumentError, match="keep_rows"):
        second.keep_rows([])


def test_recompute_session_keep_rows() -> None:
    vocab = Vocabulary.from_strings(["a", "b", None], eos_ids=[2])
    lm = ToyLM.uniform(vocab)
    s = RecomputeSession(lm, [0], batch=3)
    s.append([0, 1, 0])
    s.keep_rows([1])
    assert s.batch == 1 and s.generated == [[1]]
    assert s.logprobs().shape == (1, 3)


def test_batched_sampling_with_dropped_rows_equals_one_row_at_a_time(smollm2) -> None:
    """Rows finish at different steps and leave the batch (keep_rows); each sample must still be the
    one it is alone (its own seed), with the same log-probability."""
    import gad

    grammar = gad.Grammar.from_string('start: "[" NUM ("," NUM)* "]"\nNUM: /[0-9]{1,3}/')
    prompt = "Write a JSON list of a few small numbers."
    one = gad.sample(smollm2, grammar, prompt, n=6, seed=5, max_new_tokens=16, batch_size=1)
    six = gad.sample(smollm2, grammar, prompt, n=6, seed=5, max_new_tokens=16, batch_size=6)
    assert [s.token_ids for s in one] == [s.token_ids for s in six]
    assert len({len(s.token_ids) for s in six}) > 1  # rows did finish at different steps
    np.testing.assert_allclose([s.logprob for s in one], [s.logprob for s in six], atol=1e-3)


def test_shared_prefix_attention_refuses_keys_it_cannot_place() -> None:
    layer = kvcache.SharedPrefixLayer(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
    layer.update(torch.zeros(2, 1, 1, 2), torch.zeros(2, 1, 1, 2))
    module = types.SimpleNamespace(num_key_value_groups=1, is_causal=True, training=False, config=object())
    stray = torch.zeros(2, 1, 1, 2)  # not the suffix of any layer: computing with it would drop the prefix
    with kvcache.active(types.SimpleNamespace(layers=[layer])), pytest.raises(RuntimeError, match="no layer"):
        kvcache.shared_prefix_attention(module, torch.zeros(2, 1, 1, 2), stray, stray, None)
    with kvcache.active(types.SimpleNamespace(layers=[layer])):  # found by identity without layer_idx
        out, _ = kvcache.shared_prefix_attention(module, torch.zeros(2, 1, 1, 2), layer.keys, layer.values, None)
    assert out.shape == (2, 1, 1, 2)


def test_a_model_whose_attention_ignores_the_prefix_is_caught_at_the_first_batch(smollm2, monkeypatch) -> None:
    """The load-time check compares shared-prefix attention with a plain pass; an attention that drops
    the prefix (as a model outside the transformers attention interface would) turns the feature off."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from gad.models.hf import HFLanguageModel

    def suffix_only(module, query, key, value, attention_mask, **kw):
        return sdpa_attention_forward(module, query, key, value, None, **kw)

    assert smollm2.shared_prefix and smollm2._shared_checked  # the real model passed its check
    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._global_mapping, kvcache.ATTN_NAME, suffix_only)
    lm = HFLanguageModel(smollm2.model, smollm2.tokenizer, name="broken-attention")
    assert lm.shared_prefix
    prompt = _prompt(smollm2)
    with pytest.warns(UserWarning, match="shared-prompt attention turned off"):
        s = lm.session(prompt, batch=2)
    assert not lm.shared_prefix
    s.append([28, 29])
    np.testing.assert_allclose(s.logprobs(), smollm2.logprobs([prompt + [28], prompt + [29]]), atol=2e-4)
