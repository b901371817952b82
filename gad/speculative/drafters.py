"""Drafters: propose ``k`` tokens **under the grammar mask** on a forked matcher (BRIEF §4).

One interface::

    tokens, q = drafter.propose(matcher_fork, context, k, rng)

``tokens`` has at most ``k`` ids (drafting stops early after EOS, or when the drafter has nothing to
say, e.g. no forced token / no n-gram match); ``q`` is ``(len(tokens), vocab)`` float64, row ``i`` the
(already masked, normalised) distribution ``d_i`` was drawn from.  ``q`` knows nothing of Φ̂: the
verifier re-weights the *target*, so any drafter keeps the lossless rule exact.  One-hot ``q`` (forced
tokens, n-gram lookup) is still exact: the accept probability is ``p̃(d)`` and the residual is ``p̃``
without ``d``, renormalised (Leviathan et al. 2022, arXiv 2211.17192).

``context`` is the full id sequence (prompt + generated).  After ``propose`` the drafter keeps the
masks it computed in ``last_masks`` (``(len(tokens), vocab)`` bool) so the verifier need not recompute
them.  For tree drafting, :meth:`Drafter.dist` gives the masked draft distribution at one node.

Drafters:
    * :class:`LMDrafter` — any :class:`gad.lm.LanguageModel` (a separate HF draft model sharing the
      target's tokenizer, a ToyLM …), with its own incremental session (KV cache);
    * :func:`self_drafter` — the target's first ``L`` layers + final norm + LM head (Llama-style HF);
    * :class:`ForcedDrafter` — tokens the grammar forces (the mask leaves exactly one);
    * :class:`ForcedStringDrafter` — the text the grammar forces (jump-forward), spelled canonically;
    * :class:`NgramDrafter` — prompt/n-gram lookup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gad.engine.protocols import ForcedTextMatcher
from gad.errors import InvalidArgumentError
from gad.models.base import LanguageModel
from gad.sampling.rng import Rng


def _eos(matcher: Any, vocab_size: int) -> tuple[int, ...]:
    comp = getattr(matcher, "compiled", None)
    for src in (matcher, comp):
        e = getattr(src, "eos_ids", None)
        if e is not None:
            return tuple(int(x) for x in e)
    return ()


class Drafter:
    """Base class: chain drafting by repeated :meth:`dist` calls.

    Subclasses implement ``dist(context, mask) -> (vocab,) float64 | None`` (masked, normalised; None =
    stop drafting here), and may implement ``plan(matcher) -> list[int]``: tokens drafted first, one-hot
    (a deterministic function of the matcher's state, so the lossless rule stays exact).  ``greedy = True`` drafts ``argmax q`` instead of sampling from ``q`` (the
    verifier then treats ``q`` as one-hot on that token, which keeps the lossless rule exact).
    """

    name = "drafter"
    greedy = False

    def __init__(self, eos_ids: Sequence[int] = ()) -> None:
        self.eos_ids = tuple(int(e) for e in eos_ids)
        self.last_masks: np.ndarray | None = None
        self.calls = 0

    def reset(self) -> None:
        """Forget per-sample state (called at the start of every sample)."""

    def dist(self, context: Sequence[int], mask: np.ndarray) -> np.ndarray | None:
        """Masked draft distribution ``(vocab,)`` float64 at ``context`` (prompt + generated), or None."""
        raise NotImplementedError

    def plan(self, matcher: Any) -> list[int]:
        """Token ids to draft first, one-hot, before :meth:`dist` is asked (none by default; the
        forced-string drafter returns the grammar's forced text here).  :meth:`propose` keeps them
        while the mask allows them."""
        return []

    def propose(self, matcher: Any, context: Sequence[int], k: int,
                rng: Rng | None = None) -> tuple[list[int], np.ndarray]:
        """Draft up to ``k`` tokens on ``matcher`` (a fork: it is advanced along the draft).

        Returns:
            ``(tokens, q)`` with ``q`` ``(len(tokens), vocab)`` float64.
        Raises:
            InvalidArgumentError: ``k < 0``, or sampling needs ``rng`` and none was given.
        """
        if k < 0:
            raise InvalidArgumentError(f"k must be >= 0, got {k}")
        self.calls += 1
        eos = set(self.eos_ids) or set(_eos(matcher, 0))
        ctx = list(context)
        toks: list[int] = []
        qs: list[np.ndarray] = []
        masks: list[np.ndarray] = []
        for t in self.plan(matcher)[:k] if k else ():
            mask = np.asarray(matcher.mask(), dtype=bool)
            if not mask[t] or t in eos:
                break
            row = np.zeros(mask.size)
            row[t] = 1.0
            toks.append(int(t))
            qs.append(row)
            masks.append(mask)
            matcher.accept_token(t)
            ctx.append(int(t))
        for _ in range(k - len(toks)):
            mask = np.asarray(matcher.mask(), dtype=bool)
            q = self.dist(ctx, mask)
            if q is None:
                break
            if self.greedy:
                t = int(np.argmax(q))
                q = np.zeros_like(q)
                q[t] = 1.0
            else:
                if rng is None:
                    raise InvalidArgumentError(f"drafter {self.name} samples and needs rng")
                t = rng.categorical(q)
            toks.append(t)
            qs.append(q)
            masks.append(mask)
            if t in eos:
                break
            matcher.accept_token(t)
            ctx.append(t)
        v = masks[0].size if masks else 0
        self.last_masks = np.array(masks, dtype=bool).reshape(len(masks), v) if masks else None
        q_arr = np.array(qs, dtype=np.float64).reshape(len(qs), v) if qs else np.zeros((0, 0))
        return toks, q_arr


def _masked_softmax(logp: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    if not mask.any():
        return None
    top = float(np.max(logp[mask]))
    if not np.isfinite(top):
        return None
    w = np.where(mask, np.exp(logp - top), 0.0)
    s = float(w.sum())
    return w / s if s > 0 else None


class _PrefixCache:
    """An incremental session on ``lm`` that follows arbitrary contexts by rollback + extend."""

    def __init__(self, lm: LanguageModel, memo: int = 256) -> None:
        self.lm = lm
        self.session: Any = None
        self.prompt: list[int] = []
        self.fed: list[int] = []
        self.last: np.ndarray | None = None  # logprobs at self.fed
        self.memo: dict[tuple[int, ...], np.ndarray] = {}
        self.memo_size = memo
        self.passes = 0

    def reset(self) -> None:
        self.session = None
        self.fed = []
        self.last = None
        self.memo.clear()

    def logprobs_at(self, context: Sequence[int]) -> np.ndarray:
        ctx = [int(t) for t in context]
        key = tuple(ctx)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        if self.session is None or ctx[: len(self.prompt)] != self.prompt or len(ctx) <= len(self.prompt):
            self.prompt = ctx[:]
            self.session = self.lm.session(ctx)
            self.fed = ctx[:]
            self.last = np.asarray(self.session.logprobs())[0]
            self.passes += 1
        else:
            n = 0
            lim = min(len(self.fed), len(ctx))
            while n < lim and self.fed[n] == ctx[n]:
                n += 1
            n = max(n, len(self.prompt))
            if n < len(self.fed):
                self.session.rollback(len(self.fed) - n)
                self.fed = self.fed[:n]
                self.last = None
            if n < len(ctx):
                rows = np.asarray(self.session.extend(ctx[n:]))
                self.passes += 1
                self.fed = ctx[:]
                self.last = rows[-1]
            elif self.last is None:
                self.last = np.asarray(self.session.logprobs())[0]
                self.passes += 1
        if len(self.memo) >= self.memo_size:
            self.memo.clear()
        self.memo[key] = self.last
        return self.last


class LMDrafter(Drafter):
    """Draft from a (small) language model under the mask: ``q ∝ p_draft · mask``.

    Args:
        draft_lm: any :class:`gad.lm.LanguageModel` sharing the target's vocabulary (same ids).
        target_vocab_size: the target's vocabulary size; checked against ``draft_lm.vocab_size``.
        greedy: draft ``argmax q`` (one-hot q) instead of sampling.
        name: label in stats.
    Raises:
        InvalidArgumentError: the vocabulary sizes differ (argument ``draft_lm``).
    """

    def __init__(self, draft_lm: LanguageModel, target_vocab_size: int | None = None,
                 greedy: bool = False, name: str = "model", eos_ids: Sequence[int] = ()) -> None:
        if target_vocab_size is not None and int(draft_lm.vocab_size) != int(target_vocab_size):
            raise InvalidArgumentError(
                f"draft_lm: vocabulary size {draft_lm.vocab_size} differs from the target's "
                f"{target_vocab_size}; a draft model must share the target's tokenizer")
        super().__init__(eos_ids or tuple(draft_lm.vocab.eos_ids))
        self.lm = draft_lm
        self.greedy = greedy
        self.name = name
        self.cache = _PrefixCache(draft_lm)

    def reset(self) -> None:
        self.cache.reset()

    @property
    def passes(self) -> int:
        """Draft-model forward passes so far."""
        return self.cache.passes

    def dist(self, context: Sequence[int], mask: np.ndarray) -> np.ndarray | None:
        return _masked_softmax(self.cache.logprobs_at(context), mask)


class ForcedDrafter(Drafter):
    """Grammar-forced tokens: where the mask leaves exactly one token, draft it (one-hot ``q``).

    Free to draft (no model call); the target still verifies every token.  Drafting stops at the
    first position where the mask allows more than one token.
    """

    name = "forced"
    greedy = True

    def dist(self, context: Sequence[int], mask: np.ndarray) -> np.ndarray | None:
        idx = np.flatnonzero(mask)
        if idx.size != 1:
            return None
        q = np.zeros(mask.size)
        q[idx[0]] = 1.0
        return q


class ForcedStringDrafter(Drafter):
    """Grammar-forced text: draft the canonical tokenization of the string the grammar forces next.

    Where the grammar forces a string (a keyword, a fixed key, ``(str.++ `` in a SyGuS grammar) the
    mask usually still allows several tokens (every prefix spelling), so :class:`ForcedDrafter` sees
    nothing forced; this drafter asks the matcher for the forced text spelled as the model would
    (:meth:`gad.engine.matcher.Matcher.forced_tokens`: the tokenizer's own encoding, else greedy
    longest match over the vocabulary; each token allowed by the mask) and proposes those tokens,
    then any single allowed token.  ``q`` is one-hot; free to draft (no model call, no mask beyond
    the ones the verifier needs), verified by the target like any draft.  A matcher without
    jump-forward (:class:`gad.engine.protocols.ForcedTextMatcher`) gets single forced tokens only.

    Args:
        tokenizer: a Hugging Face tokenizer (``encode``) or None (greedy longest match).
        max_bytes: longest forced string computed per call.
    """

    name = "forced"
    greedy = True

    def __init__(self, tokenizer: Any = None, eos_ids: Sequence[int] = (), max_bytes: int = 64) -> None:
        super().__init__(eos_ids)
        self.tokenizer = tokenizer
        self.max_bytes = max_bytes

    def dist(self, context: Sequence[int], mask: np.ndarray) -> np.ndarray | None:
        return ForcedDrafter.dist(self, context, mask)  # type: ignore[arg-type]

    def plan(self, matcher: Any) -> list[int]:
        """The forced text's tokens (:meth:`gad.engine.matcher.Matcher.forced_tokens`, at most
        ``max_bytes`` bytes); ``[]`` for a matcher without jump-forward."""
        if not isinstance(matcher, ForcedTextMatcher):
            return []
        return matcher.forced_tokens(self.max_bytes, self.tokenizer)


class NgramDrafter(Drafter):
    """Prompt / n-gram lookup: continue the longest earlier match of the context's suffix.

    At each position, find the longest suffix of ``context`` (length ``max_n`` down to ``min_n``) that
    occurred earlier in ``context`` (most recent occurrence first) and propose the token that followed
    it, if the mask allows it; else (or with no match) drafting stops, except that a forced token
    (exactly one allowed) is always proposed.  ``q`` is one-hot.

    Args:
        max_n: longest suffix tried (>= 1).  min_n: shortest (>= 1).
    Raises:
        InvalidArgumentError: bad ``max_n`` / ``min_n``.
    """

    name = "ngram"
    greedy = True

    def __init__(self, max_n: int = 4, min_n: int = 1, eos_ids: Sequence[int] = ()) -> None:
        if min_n < 1 or max_n < min_n:
            raise InvalidArgumentError(f"need 1 <= min_n <= max_n, got min_n={min_n}, max_n={max_n}")
        super().__init__(eos_ids)
        self.max_n = max_n
        self.min_n = min_n

    def lookup(self, context: Sequence[int], mask: np.ndarray | None = None) -> int | None:
        """The allowed token following the longest earlier match of a suffix of ``context``, or None."""
        ctx = list(context)
        n_ctx = len(ctx)
        for n in range(min(self.max_n, n_ctx - 1), self.min_n - 1, -1):
            suf = ctx[n_ctx - n:]
            for start in range(n_ctx - n - 1, -1, -1):
                if ctx[start:start + n] == suf:
                    t = ctx[start + n]
                    if mask is None or mask[t]:
                        return int(t)
        return None

    def dist(self, context: Sequence[int], mask: np.ndarray) -> np.ndarray | None:
        idx = np.flatnonzero(mask)
        t = int(idx[0]) if idx.size == 1 else self.lookup(context, mask)
        if t is None:
            return None
        q = np.zeros(mask.size)
        q[t] = 1.0
        return q


def shallow_model(model: Any, layers: int) -> Any:
    """A view of a Llama-style HF causal LM keeping its first ``layers`` decoder layers.

    Shares every weight with ``model`` (embeddings, the first ``layers`` blocks, the final norm and the
    LM head); only the module containers and the config are copied.

    Raises:
        InvalidArgumentError: ``layers`` out of range or no ``model.model.layers``.
    """
    import copy

    import torch

    inner: Any = getattr(model, "model", None)
    blocks = getattr(inner, "layers", None)
    if inner is None or blocks is None:
        raise InvalidArgumentError("self-speculation needs a Llama-style model (model.model.layers)")
    n = len(blocks)
    if not 1 <= layers < n:
        raise InvalidArgumentError(f"layers must be in [1, {n - 1}] for a {n}-layer model, got {layers}")
    cfg = copy.deepcopy(model.config)
    cfg.num_hidden_layers = layers
    if isinstance(getattr(cfg, "layer_types", None), list):
        cfg.layer_types = cfg.layer_types[:layers]
    new_inner = copy.copy(inner)
    new_inner._modules = dict(inner._modules)
    new_inner.layers = torch.nn.ModuleList(list(blocks)[:layers])
    new_inner.config = cfg
    new = copy.copy(model)
    new._modules = dict(model._modules)
    new.model = new_inner
    new.config = cfg
    return new


def self_drafter(target: Any, layers: int, greedy: bool = False) -> LMDrafter:
    """Self-speculative drafter: the target's first ``layers`` decoder layers + final norm + LM head.

    Works for Llama-architecture Hugging Face models (``model.model.layers``), e.g. the bundled SmolLM2.
    The weights are shared with the target (no copy); the shallow model has its own KV cache.

    Args:
        target: a ``gad.hf.HFLanguageModel`` (has ``.model`` and ``.tokenizer``).
        layers: ``L``, 1 <= L < number of layers.
        greedy: draft the shallow model's argmax (one-hot q) instead of sampling.
    Raises:
        InvalidArgumentError: ``layers`` out of range, or the target is not a Llama-like HF model.
    """
    from gad.models.hf import HFLanguageModel

    model = getattr(target, "model", None)
    if model is None or not hasattr(target, "tokenizer"):
        raise InvalidArgumentError("speculative='self' needs a Hugging Face target (gad.hf.HFLanguageModel)")
    shallow = HFLanguageModel(shallow_model(model, layers), target.tokenizer, name=f"{target.name}-L{layers}")
    return LMDrafter(shallow, target.vocab_size, greedy=greedy, name=f"self:{layers}",
                     eos_ids=tuple(target.vocab.eos_ids))


class ChainedDrafter(Drafter):
    """Ask several drafters in turn at each position; the first that proposes wins (``forced+ngram``…).

    ``q`` is that drafter's row, so the lossless rule stays exact.  ``greedy`` rows are one-hot.
    """

    def __init__(self, parts: Sequence[Drafter], eos_ids: Sequence[int] = ()) -> None:
        if not parts:
            raise InvalidArgumentError("ChainedDrafter needs at least one drafter (argument parts)")
        super().__init__(eos_ids)
        self.parts = list(parts)
        self.name = "+".join(p.name for p in parts)
        self.greedy = False

    def reset(self) -> None:
        for p in self.parts:
            p.reset()

    @property
    def passes(self) -> int:
        """Draft-model forward passes so far (sum over the parts)."""
        return sum(int(getattr(p, "passes", 0) or 0) for p in self.parts)

    def plan(self, matcher: Any) -> list[int]:
        """The first part's non-empty plan (``forced+ngram``: the forced text, then n-gram lookup)."""
        for p in self.parts:
            toks = p.plan(matcher)
            if toks:
                return toks
        return []

    def dist(self, context: Sequence[int], mask: np.ndarray) -> np.ndarray | None:
        for p in self.parts:
            q = p.dist(context, mask)
            if q is not None:
                if p.greedy:
                    t = int(np.argmax(q))
                    q = np.zeros_like(q)
                    q[t] = 1.0
                return q
        return None


def make_drafter(spec: Any, target: LanguageModel, draft_k: int = 4) -> Drafter:
    """A drafter from a name: ``self`` / ``self:L`` (``self-greedy[:L]`` drafts the argmax), ``forced``
    (the canonical spelling of the grammar-forced string; ``forced-token``: only a single allowed token),
    ``ngram`` / ``ngram:N``, a path to a HF draft model, several joined by ``+`` (``forced+ngram``: at each
    position the first that proposes wins), a :class:`gad.lm.LanguageModel`, or a :class:`Drafter`.

    Raises:
        InvalidArgumentError: unknown name, or the draft model's vocabulary differs from the target's.
    """
    eos = tuple(target.vocab.eos_ids)
    if isinstance(spec, Drafter):
        return spec
    if isinstance(spec, str) and "+" in spec:
        return ChainedDrafter([make_drafter(part, target, draft_k) for part in spec.split("+")], eos)
    if isinstance(spec, str):
        name, _, arg = spec.partition(":")
        name = name.strip().lower()
        if name == "forced":
            return ForcedStringDrafter(getattr(target, "tokenizer", None), eos)
        if name == "forced-token":
            return ForcedDrafter(eos)
        if name == "ngram":
            return NgramDrafter(int(arg) if arg else 4, eos_ids=eos)
        if name == "self":
            n_layers = _num_layers(target)
            return self_drafter(target, int(arg) if arg else max(1, n_layers // 4))
        if name == "self-greedy":
            n_layers = _num_layers(target)
            return self_drafter(target, int(arg) if arg else max(1, n_layers // 4), greedy=True)
        try:
            from gad.models.hf import load_model
        except ImportError as exc:  # pragma: no cover - gad.hf is part of the package
            raise InvalidArgumentError(f"speculative={spec!r}: cannot load a draft model ({exc})") from exc
        try:
            draft = load_model(spec)
        except Exception as exc:  # noqa: BLE001 - surfaced as a typed error naming the argument
            raise InvalidArgumentError(
                f"speculative={spec!r} is neither self|forced|ngram nor a loadable draft model: {exc}") from exc
        return LMDrafter(draft, target.vocab_size, name="model", eos_ids=eos)
    if hasattr(spec, "logprobs") and hasattr(spec, "session"):
        return LMDrafter(spec, target.vocab_size, name=getattr(spec, "name", "model"), eos_ids=eos)
    raise InvalidArgumentError(f"speculative/drafter: cannot make a drafter from {spec!r}")


def _num_layers(target: Any) -> int:
    model = getattr(target, "model", None)
    cfg = getattr(model, "config", None)
    n = getattr(cfg, "num_hidden_layers", None)
    if n is None:
        raise InvalidArgumentError("speculative='self' needs a Hugging Face target model (no .model.config)")
    return int(n)


_DRAFTER_PART = re.compile(r"^(forced(-token)?|ngram(:[1-9]\d*)?|self(-greedy)?(:[1-9]\d*)?)$", re.IGNORECASE)


def check_drafter_spec(spec: str) -> str:
    """Validate a drafter name the way :func:`gad.speculative.drafters.make_drafter` parses it.

    Accepted: ``forced``, ``forced-token``, ``ngram[:N]``, ``self[:L]``, ``self-greedy[:L]`` (``N``, ``L`` positive integers),
    a path to a draft model that exists, or several of these joined by ``+`` (``forced+ngram:3``).
    Returns the stripped spec.

    Raises:
        InvalidArgumentError: an empty part, a malformed name, or a path that does not exist (one line,
            naming ``--speculative``).
    """
    text = spec.strip()
    parts = text.split("+")
    for part in parts:
        part = part.strip()
        if _DRAFTER_PART.match(part):
            continue
        if not part:
            raise InvalidArgumentError(f"--speculative: empty drafter in {spec!r} (expected e.g. forced+ngram)")
        if not Path(part).exists():
            raise InvalidArgumentError(
                f"--speculative: {part!r} is not forced, forced-token, ngram[:N], self[:L], self-greedy[:L] (joined by '+') "
                "nor an existing draft model path")
    return text
