"""``gad.load_model(path)`` on tiny random-weight models of several architectures (built offline).

Each model is made from a ``transformers`` config (hidden size 64, 2 layers, the bundled SmolLM2
tokenizer's vocabulary), saved with ``save_pretrained`` and loaded back through ``gad.load_model``.
Every KV-cache path is checked against plain full-context forward passes (``lm.logprobs``): batched
sessions (shared prompt or not), ``keep_rows``, the prompt store, batch-1 ``extend``/``rollback``
(speculative decoding, also past a sliding window), and batched sampling against one row at a time.
Sliding-window, soft-capped, attention-sink and non-``AttentionInterface`` models must fall back from
the shared-prompt attention without a warning and stay exact.

The weights are drawn with ``initializer_range=0.2`` so that next-token distributions differ clearly
between contexts (at the default 0.02 every distribution is almost uniform and a dropped prompt
would go unnoticed).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import gad
from gad.models import kvcache

ATOL = 1e-4
_DEC = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256)
_HEAD16 = dict(_DEC, head_dim=16)
_MIXED = ["sliding_attention", "full_attention"]

# id: (config class, its arguments, expected lm.shared_prefix after the first multi-row session;
# None: as _falcon_has_attention_interface says)
ARCHS: dict[str, tuple[str, dict, bool | None]] = {
    "llama-gqa": ("LlamaConfig", _DEC, True),
    "qwen3-mqa": ("Qwen3Config", dict(_HEAD16, num_key_value_heads=1), True),  # q/k norms, one kv head
    "mistral-sliding": ("MistralConfig", dict(_DEC, sliding_window=8), False),  # every layer sliding
    "gpt2": ("GPT2Config", dict(n_embd=64, n_layer=2, n_head=4, n_positions=256), True),
    "gemma2": ("Gemma2Config", dict(_HEAD16, sliding_window=8), False),  # soft-capping, eager, mixed
    "gemma3-mixed": ("Gemma3TextConfig", dict(_HEAD16, sliding_window=8, layer_types=_MIXED), False),
    "phi3": ("Phi3Config", _DEC, True),  # fused qkv projection
    "gpt-oss": ("GptOssConfig", dict(_HEAD16, max_position_embeddings=131072, sliding_window=8,
                                     layer_types=_MIXED, num_local_experts=4, num_experts_per_tok=2),
                False),  # attention sinks, mixture of experts, mixed sliding/full
    "falcon": ("FalconConfig", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                    new_decoder_architecture=True, num_kv_heads=2),
               None),  # shared only where transformers runs its attention through AttentionInterface
}


def _falcon_has_attention_interface() -> bool:
    """Whether the installed transformers' Falcon attention goes through ``ALL_ATTENTION_FUNCTIONS``
    (from 5.25; before, its own attention code, which the shared prompt cannot reach: gad falls back)."""
    import importlib

    try:
        mod = importlib.import_module("transformers.models.falcon.modeling_falcon")
    except ImportError:
        return False
    return hasattr(mod, "ALL_ATTENTION_FUNCTIONS")

GRAMMAR = 'start: "[" NUM ("," NUM)* "]"\nNUM: /[0-9]{1,3}/'
PROMPT_TEXT = "Write a JSON list of a few small numbers."


@pytest.fixture(scope="module", params=list(ARCHS))
def arch(request, tmp_path_factory, smollm2_tokenizer):
    """(id, HFLanguageModel loaded with gad.load_model from a saved tiny random model, expected shared)."""
    import transformers

    cls_name, kwargs, shared = ARCHS[request.param]
    cls = getattr(transformers, cls_name, None)
    if cls is None:
        pytest.skip(f"transformers {transformers.__version__} has no {cls_name}")
    tok = smollm2_tokenizer
    config = cls(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                 pad_token_id=tok.pad_token_id, initializer_range=0.2, **kwargs)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    path = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    del model
    lm = gad.load_model(str(path), device="cpu")
    assert lm.vocab_size == len(tok)
    if shared is None:
        shared = _falcon_has_attention_interface()
    return request.param, lm, shared


def _no_fallback_warning(caught: list[warnings.WarningMessage]) -> None:
    msgs = [str(w.message) for w in caught if "shared-prompt attention" in str(w.message)]
    assert not msgs, msgs


def test_batched_sessions_match_full_context_passes(arch) -> None:
    name, lm, shared = arch
    prompt = lm.encode_prompt(PROMPT_TEXT)
    steps = [[28, 29, 30], [31, 28, 33], [2, 7, 9], [100, 100, 5]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s3 = lm.session(prompt, batch=3)
    _no_fallback_warning(caught)  # unsupported layouts fall back silently; only a disagreement warns
    assert lm.shared_prefix is shared, name
    s1 = lm.session(prompt, batch=1)
    got3, got1 = [s3.logprobs()], [s1.logprobs()]
    for st in steps:
        s3.append(st)
        s1.append(st[:1])
        got3.append(s3.logprobs())
        got1.append(s1.logprobs())
    for i in range(len(steps) + 1):
        ref = lm.logprobs([prompt + [st[r] for st in steps[:i]] for r in range(3)])
        np.testing.assert_allclose(got3[i], ref, atol=ATOL, err_msg=f"{name} batch 3, step {i}")
        np.testing.assert_allclose(got1[i], ref[:1], atol=ATOL, err_msg=f"{name} batch 1, step {i}")
    # the check means something: contexts that differ give clearly different distributions
    assert np.abs(ref[0] - ref[2]).max() > 0.05


def test_keep_rows_and_stored_prompt_match_full_context_passes(arch) -> None:
    name, lm, _ = arch
    prompt = lm.encode_prompt(PROMPT_TEXT) + [28]
    s = lm.session(prompt, batch=4)
    s.keep_rows([1, 2, 3])  # before any generated position (a shared prefix has no suffix yet)
    s.append([40, 41, 42])
    s.append([50, 51, 52])
    s.keep_rows([2, 0])
    s.append([60, 61])
    ctx = {42: [42, 52, 60], 40: [40, 50, 61]}
    np.testing.assert_allclose(s.logprobs(), lm.logprobs([prompt + ctx[42], prompt + ctx[40]]), atol=ATOL,
                               err_msg=name)
    s.keep_rows([1])
    s.append([70])
    np.testing.assert_allclose(s.logprobs(), lm.logprobs([prompt + ctx[40] + [70]]), atol=ATOL, err_msg=name)
    again = lm.session(prompt, batch=2)  # the prompt pass comes from the store where the layout allows
    stored = lm.prompt_store is not None and lm.prompt_store.get(prompt) is not None
    assert again.forward_passes == (0 if stored else 1)
    again.append([40, 41])
    np.testing.assert_allclose(again.logprobs(), lm.logprobs([prompt + [40], prompt + [41]]), atol=ATOL,
                               err_msg=name)


def test_extend_and_rollback_match_full_context_passes(arch) -> None:
    """Speculative decoding's path; the contexts run well past the sliding windows (8 positions)."""
    name, lm, _ = arch
    prompt = lm.encode_prompt(PROMPT_TEXT)
    toks = [28 + i for i in range(12)]
    s = lm.session(prompt, batch=1)
    out = s.extend(toks)
    np.testing.assert_allclose(out, lm.logprobs([prompt + toks[: i + 1] for i in range(len(toks))]),
                               atol=ATOL, err_msg=name)
    s.rollback(9)
    np.testing.assert_allclose(s.logprobs(), lm.logprobs([prompt + toks[:3]]), atol=ATOL, err_msg=name)
    s.append([50])
    np.testing.assert_allclose(s.logprobs(), lm.logprobs([prompt + toks[:3] + [50]]), atol=ATOL, err_msg=name)
    s.rollback(2)
    s.rollback(1)  # two crops with no forward pass between them
    s.extend([60, 61])
    np.testing.assert_allclose(s.logprobs(), lm.logprobs([prompt + toks[:1] + [60, 61]]), atol=ATOL,
                               err_msg=name)
    # past the kept history of log-probabilities: the last token is fed again after a crop
    long = [100 + i for i in range(70)]
    s.extend(long)
    s.rollback(68)
    np.testing.assert_allclose(s.logprobs(), lm.logprobs([prompt + toks[:1] + [60, 61] + long[:2]]),
                               atol=ATOL, err_msg=name)


def test_batched_sampling_equals_one_row_at_a_time(arch) -> None:
    name, lm, _ = arch
    grammar = gad.Grammar.from_string(GRAMMAR)
    one = gad.sample(lm, grammar, PROMPT_TEXT, n=4, seed=3, max_new_tokens=8, batch_size=1)
    four = gad.sample(lm, grammar, PROMPT_TEXT, n=4, seed=3, max_new_tokens=8, batch_size=4)
    assert [s.token_ids for s in one] == [s.token_ids for s in four], name
    np.testing.assert_allclose([s.logprob for s in one], [s.logprob for s in four], atol=1e-3, err_msg=name)


def test_tree_speculation_is_greedy_decoding_without_fallback_warnings(arch) -> None:
    """Greedy-tree speculation returns greedy decoding from p·mask; full-attention models score the tree
    in one pass (tree attention), sliding-window ones per path, chosen up front (no warning)."""
    from gad.speculative import LMDrafter

    name, lm, _ = arch
    compiled = gad.compile(gad.Grammar.from_string(GRAMMAR), lm.vocab)
    prompt = lm.encode_prompt(PROMPT_TEXT)
    ref, m = [], compiled.matcher()  # greedy decoding from p·mask, one full-context pass per token
    for _ in range(6):
        t = int(np.argmax(np.where(m.mask(), lm.logprobs([prompt + ref])[0], -np.inf)))
        if t in lm.vocab.eos_ids:
            break
        assert m.accept_token(t)
        ref.append(t)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback would warn
        (s,) = gad.sample(lm, compiled, prompt, n=1, speculative=LMDrafter(lm, lm.vocab_size, eos_ids=lm.vocab.eos_ids),
                         tree=(2, 2), max_new_tokens=6)
    assert s.token_ids == ref, name
    sliding = kvcache.has_sliding_layers(lm.model.config)
    assert s.stats["scorer"] == ("per-path" if sliding else "tree-attention"), name


def test_sliding_window_layer_agrees_with_transformers_and_crops_anywhere() -> None:
    """gad.kvcache.SlidingWindowKVLayer gives attention what DynamicSlidingWindowLayer gives it (states
    and mask sizes) but keeps every position, so a crop past a full window stays exact."""
    from transformers.cache_utils import DynamicSlidingWindowLayer

    from gad.models import kvcache

    g = torch.Generator().manual_seed(0)
    window, sizes = 4, [5, 1, 1, 3, 1, 2]
    chunks = [(torch.randn(2, 1, n, 3, generator=g), torch.randn(2, 1, n, 3, generator=g)) for n in sizes]

    def feed(layer, upto):
        out = []
        for k, v in chunks[:upto]:
            sizes_before = layer.get_mask_sizes(k.shape[-2])
            out.append((sizes_before, *layer.update(k, v)))
        return out

    ours, ref = kvcache.SlidingWindowKVLayer(window), DynamicSlidingWindowLayer(sliding_window=window)
    for (ms, k, v), (rms, rk, rv) in zip(feed(ours, len(chunks)), feed(ref, len(chunks)), strict=True):
        assert ms == rms and torch.equal(k, rk) and torch.equal(v, rv)
    assert ours.is_sliding and ours.get_seq_length() == ref.get_seq_length() == sum(sizes)
    ours.crop(-(sizes[-1] + sizes[-2] + 1))  # into the fourth chunk, far past the window
    ours.crop(-1)
    fresh = DynamicSlidingWindowLayer(sliding_window=window)
    feed(fresh, 3)
    k, v = chunks[3]
    fresh.update(k[..., :1, :], v[..., :1, :])
    assert ours.get_seq_length() == fresh.get_seq_length() == sum(sizes[:3]) + 1
    k, v = torch.randn(2, 1, 2, 3, generator=g), torch.randn(2, 1, 2, 3, generator=g)
    assert ours.get_mask_sizes(2) == fresh.get_mask_sizes(2)
    for a, b in zip(ours.update(k, v), fresh.update(k, v), strict=True):
        assert torch.equal(a, b)


def test_eager_and_sdpa_models_side_by_side(smollm2_tokenizer) -> None:
    """An eager-attention model gets its own wrapper name (eager needs eager's additive masks) and stays
    exact next to an sdpa model in the same process, batched and through a multi-token prompt pass."""
    import transformers

    from gad.models.hf import HFLanguageModel

    tok = smollm2_tokenizer
    lms = {}
    for impl in ("eager", "sdpa"):  # eager first: the sdpa model's registration must not change its masks
        config = transformers.LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id,
                                          eos_token_id=tok.eos_token_id, initializer_range=0.2, **_DEC)
        torch.manual_seed(1)
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=impl).eval()
        lms[impl] = HFLanguageModel(model, tok, name=f"tiny-{impl}")
    assert lms["sdpa"].model.config._attn_implementation == kvcache.ATTN_NAME
    assert lms["eager"].model.config._attn_implementation == kvcache.ATTN_NAME_EAGER
    prompt = lms["sdpa"].encode_prompt(PROMPT_TEXT)
    for impl, lm in lms.items():
        s = lm.session(prompt, batch=3)
        s.append([28, 29, 30])
        ref = lm.logprobs([prompt + [t] for t in (28, 29, 30)])
        np.testing.assert_allclose(s.logprobs(), ref, atol=ATOL, err_msg=impl)
        assert lm.shared_prefix, impl
    np.testing.assert_allclose(lms["sdpa"].logprobs([prompt]), lms["eager"].logprobs([prompt]), atol=ATOL)
