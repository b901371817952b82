"""KV caches for sampling many continuations of one prompt (Hugging Face models).

Two costs dominate batched decoding after a long prompt (a SyGuS prompt is ~2,150 tokens) and this
module removes both:

* ``transformers``' ``DynamicLayer`` appends with ``torch.cat``, copying the whole cache at every
  step.  :class:`GrowingKVLayer` keeps keys/values as views into a buffer with spare capacity, so an
  append writes only the new positions (amortised O(new tokens)).
* A batch of ``B`` rows that share a prompt stores and reads the prompt's keys/values ``B`` times.
  :class:`SharedPrefixLayer` stores the prompt once, ``(1, kv_heads, P, head_dim)``, and the rows'
  generated suffixes apart, ``(B, kv_heads, S, head_dim)``; the attention function
  :func:`shared_prefix_attention` reads the prefix once for all rows (all rows' query heads attend
  to it in one matrix product) and joins both parts in one softmax — the "cascade" or shared-prefix
  attention of FlashInfer (Ye et al., 2024), exact up to floating-point summation order.

:func:`enable_shared_prefix` registers the attention function with ``transformers`` under the name
``"gad_shared_prefix"`` (``"gad_shared_prefix_eager"`` for an eager model); it wraps the model's own
implementation, which it calls for every layer that is not a :class:`SharedPrefixLayer`, so other
uses of the model are unchanged.
:class:`PromptKVStore` keeps the prompt pass of recent prompts so that later sessions on the same
prompt skip it.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import torch
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

ATTN_NAME = "gad_shared_prefix"  # wraps sdpa
ATTN_NAME_EAGER = "gad_shared_prefix_eager"  # wraps eager (its own name: eager needs eager's masks)
_WRAPS = {"sdpa": ATTN_NAME, "eager": ATTN_NAME_EAGER}
_ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("gad_shared_prefix_cache", default=None)


class GrowingKVLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys``/``values`` ``(batch, kv_heads, seq, head_dim)`` are views into a
    buffer with spare capacity: :meth:`update` writes the new positions in place instead of
    concatenating (capacity doubles when full).  ``crop`` keeps the buffer (the next update overwrites
    the cropped positions); ``batch_repeat_interleave`` / ``batch_select_indices`` make new tensors, and
    the next update copies them into a fresh buffer."""

    _kbuf: torch.Tensor | None = None
    _vbuf: torch.Tensor | None = None

    def _owns(self, need: int, batch: int) -> bool:
        kb, keys = self._kbuf, cast(torch.Tensor, self.keys)
        return (kb is not None and kb.shape[0] == batch and kb.shape[-2] >= need
                and keys.dim() == 4 and keys.data_ptr() == kb.data_ptr())

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        keys, values = cast(torch.Tensor, self.keys), cast(torch.Tensor, self.values)
        old = keys.shape[-2] if keys.dim() == 4 else 0
        new = old + key_states.shape[-2]
        if not self._owns(new, key_states.shape[0]):
            cap = self._kbuf.shape[-2] if self._kbuf is not None else 0
            cap = max(new + 64, 2 * cap if new > cap else cap, int(new * 1.25))
            kb = key_states.new_empty((*key_states.shape[:2], cap, key_states.shape[-1]))
            vb = value_states.new_empty((*value_states.shape[:2], cap, value_states.shape[-1]))
            if old:
                kb[..., :old, :] = keys
                vb[..., :old, :] = values
            self._kbuf, self._vbuf = kb, vb
        assert self._kbuf is not None and self._vbuf is not None
        self._kbuf[..., old:new, :] = key_states
        self._vbuf[..., old:new, :] = value_states
        self.keys = self._kbuf[..., :new, :]
        self.values = self._vbuf[..., :new, :]
        return self.keys, self.values

    def reset(self) -> None:
        self._kbuf = self._vbuf = None
        super().reset()


class SlidingWindowKVLayer(GrowingKVLayer):
    """A sliding-window layer that keeps every position, so that it can be cropped anywhere.

    ``transformers``' ``DynamicSlidingWindowLayer`` keeps only the last ``sliding_window - 1`` positions
    and refuses to crop once the window is full, which breaks rollbacks (speculative decoding).  This
    layer stores the whole context in a growing buffer but, like it, gives attention only the
    positions inside the window (:meth:`update` and :meth:`get_mask_sizes` agree on them), so the
    cost of a step stays that of the window."""

    is_sliding = True

    def __init__(self, sliding_window: int, **kwargs: Any) -> None:
        super().__init__()
        self.sliding_window = int(sliding_window)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = super().update(key_states, value_states)
        visible = self.sliding_window - 1 + key_states.shape[-2]
        return keys[..., -visible:, :], values[..., -visible:, :]

    def get_mask_sizes(self, query_length: Any, *args: Any) -> tuple[int, int]:
        q = query_length if isinstance(query_length, int) else int(query_length.shape[0])  # old: cache_position
        past = self.get_seq_length()
        return min(past, self.sliding_window - 1) + q, max(past - self.sliding_window + 1, 0)


class SharedPrefixLayer(GrowingKVLayer):
    """Keys/values of ``B`` rows that share a prefix: the prefix once, ``(1, kv_heads, P, head_dim)``, and
    each row's suffix in the inherited growing buffer, ``(B, kv_heads, S, head_dim)``.

    :meth:`update` returns the suffix only; :func:`shared_prefix_attention` adds the prefix.  The
    reported sequence length is ``P + S`` (position ids and masks see the whole context).
    """

    def __init__(self, prefix_keys: torch.Tensor, prefix_values: torch.Tensor) -> None:
        super().__init__()
        self.prefix_keys = prefix_keys
        self.prefix_values = prefix_values

    def _has_suffix(self) -> bool:
        return bool(self.is_initialized and cast(torch.Tensor, self.keys).dim() == 4)

    def _suffix_len(self) -> int:
        return int(cast(torch.Tensor, self.keys).shape[-2]) if self._has_suffix() else 0

    def get_seq_length(self) -> int:
        return int(self.prefix_keys.shape[-2]) + self._suffix_len()

    def crop(self, tokens_to_remove: int) -> None:
        if abs(tokens_to_remove) > self._suffix_len():
            raise ValueError("cannot crop a shared prefix; only generated positions can be removed")
        super().crop(tokens_to_remove)

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self._has_suffix():
            super().batch_repeat_interleave(repeats)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._has_suffix():
            super().batch_select_indices(indices)


def new_cache(config: Any, prefix: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None,
              croppable: bool = False) -> Any:
    """A ``transformers.DynamicCache`` for ``config`` whose full-attention layers are growing buffers.

    Args:
        config: the model config (its layer types decide which layers are replaced; sliding-window
            and other special layers are kept as ``transformers`` makes them, unless ``croppable``).
        prefix: per layer ``(keys, values)`` of shape ``(1, kv_heads, P, head_dim)``: the layers become
            :class:`SharedPrefixLayer` holding them (only when every layer is a plain full-attention
            layer; otherwise ``ValueError``).
        croppable: sliding-window layers become :class:`SlidingWindowKVLayer` (they keep the whole
            context), so that ``crop`` works at any length (rollbacks).
    """
    from transformers import DynamicCache

    try:
        cache = DynamicCache(config=config)
    except TypeError:  # older transformers
        cache = DynamicCache()
    layers = getattr(cache, "layers", None)
    if not layers:
        if prefix is not None:
            raise ValueError("this transformers version builds its cache lazily: no shared prefix")
        return cache
    plain = [type(layer) is DynamicLayer for layer in layers]
    if prefix is not None:
        if not all(plain) or len(prefix) != len(layers):
            raise ValueError("a shared prefix needs plain full-attention layers, one (keys, values) each")
        cache.layers = [SharedPrefixLayer(k, v) for k, v in prefix]
    else:
        cache.layers = [GrowingKVLayer() if p else layer for p, layer in zip(plain, layers, strict=True)]
        if croppable:
            cache.layers = [SlidingWindowKVLayer(layer.sliding_window)
                            if type(layer) is DynamicSlidingWindowLayer else layer for layer in cache.layers]
    return cache


def crop_to(cache: Any, new_len: int) -> None:
    """Crop ``cache`` (any ``transformers`` cache with ``crop``) to its first ``new_len`` positions; a
    no-op when it holds no more.  Works with both ``crop`` conventions (tokens to remove / max length)."""
    import inspect

    cur = int(cache.get_seq_length())
    if cur <= new_len:
        return
    if "tokens_to_remove" in inspect.signature(cache.crop).parameters:
        cache.crop(-(cur - new_len))
    else:  # older transformers: crop(max_length)
        cache.crop(new_len)


def has_sliding_layers(config: Any) -> bool:
    """True when a cache for ``config`` has a sliding-window layer (it keeps only its window)."""
    layers = getattr(new_cache(config), "layers", None) or []  # (an old, lazily built cache: none known)
    return any(getattr(layer, "is_sliding", False) for layer in layers)


def can_share_prefix(config: Any) -> bool:
    """True when a cache for ``config`` can hold a shared prefix: every layer is a plain full-attention
    layer (no sliding window, no recurrent state) in a ``transformers`` that builds its layers eagerly."""
    return supports_shared_prefix(new_cache(config))


def supports_shared_prefix(cache: Any) -> bool:
    """True when every layer of ``cache`` is a plain full-attention layer (no sliding window, no
    recurrent state), so that it can be rebuilt with :class:`SharedPrefixLayer`."""
    layers = getattr(cache, "layers", None) or []
    return bool(layers) and all(isinstance(layer, GrowingKVLayer) and not isinstance(layer, SharedPrefixLayer)
                                and not getattr(layer, "is_sliding", False) for layer in layers)


def prefix_of(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer ``(keys, values)`` of a batch-1 cache, as contiguous tensors that no later update of
    ``cache`` can modify."""
    return [(layer.keys.contiguous().clone(), layer.values.contiguous().clone()) for layer in cache.layers]


@contextlib.contextmanager
def active(cache: Any) -> Iterator[None]:
    """Make ``cache``'s :class:`SharedPrefixLayer` prefixes visible to :func:`shared_prefix_attention`
    during one model call."""
    token = _ACTIVE.set(cache)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _original(module: Any) -> Callable[..., Any]:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if getattr(getattr(module, "config", None), "_attn_implementation", None) == ATTN_NAME_EAGER:
        return sys.modules[type(module).__module__].eager_attention_forward
    return ALL_ATTENTION_FUNCTIONS["sdpa"]


def shared_prefix_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: torch.Tensor | None, scaling: float | None = None,
                            dropout: float = 0.0, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Attention of ``query`` ``(B, heads, q, head_dim)`` over a shared prefix plus per-row suffixes.

    Used for a layer whose cache is a :class:`SharedPrefixLayer` of the active cache (``key`` and
    ``value`` are then its suffix ``(B, kv_heads, S, head_dim)``); every other call goes to the model's
    own attention implementation.  Scores of the prefix are one product of all rows' query heads with
    the prefix keys (grouped-query heads share their key/value head), joined with the suffix scores
    in one softmax (float32).  ``attention_mask`` ``(B, 1, q, P + S)`` (bool or additive) is split
    between the two parts.

    Returns:
        ``(B, q, heads, head_dim)`` in ``query``'s dtype, and ``None`` (no attention weights).
    """
    cache = _ACTIVE.get()
    layer = None
    if cache is not None:
        layers = getattr(cache, "layers", ())
        idx = getattr(module, "layer_idx", None)
        if idx is not None and idx < len(layers) and layers[idx].keys is key:
            layer = layers[idx]
        else:  # no usable layer_idx: find the layer whose suffix this is
            layer = next((la for la in layers if getattr(la, "keys", None) is key), None)
        if not isinstance(layer, SharedPrefixLayer):
            if layer is None and any(isinstance(la, SharedPrefixLayer) for la in layers):
                raise RuntimeError("shared-prefix attention got keys of no layer of the active cache; "
                                   "this model's attention does not follow the transformers interface")
            layer = None
    if layer is None or (dropout and module.training) or kwargs.get("softcap") is not None \
            or kwargs.get("sliding_window") is not None or kwargs.get("s_aux") is not None:
        if layer is not None:  # materialise the full context for the model's own implementation
            b = key.shape[0]
            key = torch.cat([layer.prefix_keys.expand(b, -1, -1, -1), key], dim=-2)
            value = torch.cat([layer.prefix_values.expand(b, -1, -1, -1), value], dim=-2)
        return _original(module)(module, query, key, value, attention_mask, scaling=scaling,
                                 dropout=dropout, **kwargs)
    kp, vp = layer.prefix_keys, layer.prefix_values
    b, heads, q, dim = query.shape
    kv_heads, plen = kp.shape[1], kp.shape[-2]
    g = heads // kv_heads
    scale = scaling if scaling is not None else dim ** -0.5
    qg = query.reshape(b, kv_heads, g * q, dim)  # query heads grouped under their key/value head
    packed = qg.transpose(0, 1).reshape(1, kv_heads, b * g * q, dim)
    sp = torch.matmul(packed, kp.transpose(-1, -2)).float()  # (1, kv_heads, b*g*q, P)
    sp = sp.reshape(kv_heads, b, g * q, plen).transpose(0, 1)  # (b, kv_heads, g*q, P)
    ss = torch.matmul(qg, key.transpose(-1, -2)).float()  # (b, kv_heads, g*q, S)
    scores = torch.cat([sp, ss], dim=-1) * scale
    if attention_mask is not None:
        m = attention_mask[..., -q:, -scores.shape[-1]:]
        m = m.expand(b, heads, q, scores.shape[-1]).reshape(b, kv_heads, g * q, scores.shape[-1])
        scores = scores.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else scores + m.float()
    w = torch.softmax(scores, dim=-1).to(query.dtype)
    wp = w[..., :plen].transpose(0, 1).reshape(1, kv_heads, b * g * q, plen)
    out = torch.matmul(wp, vp).reshape(kv_heads, b, g * q, dim).transpose(0, 1)
    out = out + torch.matmul(w[..., plen:], value)
    return out.reshape(b, heads, q, dim).transpose(1, 2).contiguous(), None


def enable_shared_prefix(model: Any) -> bool:
    """Route ``model``'s attention through :func:`shared_prefix_attention`, registered as
    ``"gad_shared_prefix"`` for an sdpa model and ``"gad_shared_prefix_eager"`` for an eager one (each
    with its original's attention masks), keeping the original implementation for every other call.

    Returns:
        True when enabled; False when the model's implementation is not ``sdpa`` or ``eager``, or the
        model cannot switch implementations (nothing is changed then).
    """
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    current = getattr(model.config, "_attn_implementation", None)
    if current in _WRAPS.values():
        return True
    if current not in _WRAPS or not hasattr(model, "set_attn_implementation"):
        return False
    name = _WRAPS[current]
    ALL_ATTENTION_FUNCTIONS.register(name, shared_prefix_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, ALL_MASK_ATTENTION_FUNCTIONS[current])
    try:
        model.set_attn_implementation(name)
    except Exception:  # noqa: BLE001 - an old or custom model: keep its own attention
        return False
    return getattr(model.config, "_attn_implementation", None) == name


class PromptKVStore:
    """Least-recently-used store of prompt passes: the batch-1 per-layer ``(keys, values)`` and the last
    position's log-probabilities ``(1, vocab)`` for recent prompts, bounded by ``max_bytes``."""

    def __init__(self, max_bytes: int = 1 << 30) -> None:
        self.max_bytes = int(max_bytes)
        self._items: OrderedDict[tuple[int, ...], tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]] \
            = OrderedDict()

    @staticmethod
    def _size(item: tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]) -> int:
        kv, lp = item
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv) \
            + lp.numel() * lp.element_size()

    def get(self, prompt: Sequence[int]) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor] | None:
        """The stored ``(per-layer (keys, values) (1, kv_heads, P, head_dim), log-probabilities (1, vocab)
        float64, nats)`` of ``prompt`` (token ids), marked most recent; None when not stored."""
        key = tuple(prompt)
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
        return item

    def put(self, prompt: Sequence[int], kv: list[tuple[torch.Tensor, torch.Tensor]], lp: torch.Tensor) -> None:
        """Store a prompt pass (shapes as :meth:`get`), evicting the least recently used ones beyond
        ``max_bytes``; a pass larger than ``max_bytes`` on its own is not stored."""
        item = (kv, lp)
        if self._size(item) > self.max_bytes:
            return
        self._items[tuple(prompt)] = item
        self._items.move_to_end(tuple(prompt))
        while sum(self._size(i) for i in self._items.values()) > self.max_bytes:
            self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every stored prompt pass."""
        self._items.clear()
