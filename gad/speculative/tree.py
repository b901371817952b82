"""Greedy tree speculative decoding under a grammar (BRIEF §4; SpecInfer tree attention).

A draft tree of branching ``m`` and depth ``d`` is built under the mask: at every node the drafter's
``m`` most likely allowed tokens (``Drafter.dist``, masked; ties to the lowest id) become its children
(EOS children are leaves).  The target scores the root and **every** node in one forward pass:

* on a Hugging Face model (``lm.model``, Llama-style): one call with a 4D additive attention mask (node
  ``i`` sees the committed prefix, the pending tokens and its own ancestors) and per-node position ids
  (prefix length + depth − 1), on a KV cache that this module keeps for the committed prefix; the tree
  nodes are cropped from the cache after the pass.  If the model rejects the 4D mask the scorer falls
  back, once and with a warning, to batched per-path scoring (``lm.logprobs`` over all node contexts:
  still one batched call, no cache reuse);
* on a model with sliding-window layers, and on any other :class:`gad.lm.LanguageModel` (e.g. ToyLM):
  batched per-path scoring.

Acceptance (greedy tree rule, acceptance theory arXiv 2606.30265): starting at the root, while the
target's greedy token ``argmax p̃`` at the current node is one of its children, move to that child; the
accepted path is the longest such path, and the target's greedy token at its end is emitted (the bonus
token).  The output is therefore exactly greedy decoding from ``p̃ ∝ p · mask · Φ̂``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gad.engine.protocols import TokenConstraint
from gad.errors import InvalidArgumentError, TokenRejectedError
from gad.models.base import LanguageModel
from gad.phi.base import PhiEstimator
from gad.speculative.certificates import TreeCoverage
from gad.speculative.drafters import Drafter
from gad.speculative.stats import AcceptanceRecord
from gad.speculative.verify import tilted
from gad.types import Sample


def parse_tree(tree: Any) -> tuple[int, int]:
    """``(m, d)`` from a pair or the text ``"m,d"``.

    Raises:
        InvalidArgumentError: not two integers ``m >= 1``, ``d >= 1`` (argument ``tree``).
    """
    try:
        if isinstance(tree, str):
            parts = [int(x) for x in tree.replace(" ", "").split(",")]
        else:
            parts = [int(x) for x in tree]
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"tree must be (m, d) or 'm,d' with integers, got {tree!r}") from exc
    if len(parts) != 2 or parts[0] < 1 or parts[1] < 1:
        raise InvalidArgumentError(f"tree must be (m, d) with m >= 1 and d >= 1, got {tree!r}")
    return parts[0], parts[1]


@dataclass
class DraftTree:
    """A draft tree in creation (pre-)order.

    Attributes:
        tokens: node ``i``'s token id; ``parents[i]``: its parent node (-1 = the root);
        depths: 1-based depth; ``children[j]``: child node ids of node ``j`` (key -1 = the root);
        masks: grammar mask **after** node ``i``'s token (``(vocab,)`` bool; None for EOS nodes);
        root_mask: the mask at the root; q: the drafter distribution at each expanded node (key -1 = root).
    """

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    children: dict[int, list[int]] = field(default_factory=dict)
    masks: list[np.ndarray | None] = field(default_factory=list)
    root_mask: np.ndarray | None = None
    q: dict[int, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tokens)

    def path(self, i: int) -> list[int]:
        """Tokens from the root to node ``i`` (inclusive)."""
        out: list[int] = []
        while i >= 0:
            out.append(self.tokens[i])
            i = self.parents[i]
        return out[::-1]

    def child_with(self, node: int, token: int) -> int | None:
        """The child of ``node`` carrying ``token``, or None."""
        for c in self.children.get(node, []):
            if self.tokens[c] == token:
                return c
        return None


def top_m(q: np.ndarray, m: int) -> list[int]:
    """The ``m`` largest entries of ``q`` with positive mass (ties: lowest id first)."""
    order = np.lexsort((np.arange(q.size), -q))
    return [int(t) for t in order[:m] if q[t] > 0]


def build_tree(drafter: Drafter, matcher: Any, context: Sequence[int], m: int, d: int,
               eos_ids: Sequence[int]) -> DraftTree:
    """Build the draft tree on ``matcher`` (a fork; restored to its starting state on return).

    Args:
        drafter: gives ``dist(context, mask)`` at each node (None = no children there).
        context: prompt + generated ids; m: branching; d: depth.
    Returns:
        :class:`DraftTree` (possibly empty).
    """
    tree = DraftTree()
    tree.root_mask = np.asarray(matcher.mask(), dtype=bool)
    eos = set(int(e) for e in eos_ids)

    def expand(node: int, ctx: list[int], mask: np.ndarray, depth: int) -> None:
        q = drafter.dist(ctx, mask)
        if q is None:
            return
        tree.q[node] = q
        kids: list[int] = []
        for t in top_m(q, m):
            i = len(tree.tokens)
            tree.tokens.append(t)
            tree.parents.append(node)
            tree.depths.append(depth)
            kids.append(i)
            if t in eos:
                tree.masks.append(None)
                continue
            if not matcher.accept_token(t):
                raise TokenRejectedError(f"drafter {drafter.name} proposed masked token {t}")
            child_mask = np.asarray(matcher.mask(), dtype=bool)
            tree.masks.append(child_mask)
            if depth < d:
                expand(i, ctx + [t], child_mask, depth + 1)
            matcher.rollback(1)
        tree.children[node] = kids

    expand(-1, list(context), tree.root_mask, 1)
    return tree


# --- scoring -----------------------------------------------------------------------------------------


class PathScorer:
    """Batched per-path scoring: ``lm.logprobs`` over the root context and every node's context.

    One batched call per step (counted as one target pass); no KV-cache reuse.
    """

    kind = "per-path"

    def __init__(self, lm: LanguageModel, prompt: list[int]) -> None:
        self.lm, self.prompt = lm, prompt
        self.passes = 0

    def score(self, committed: list[int], tree: DraftTree) -> tuple[np.ndarray, np.ndarray]:
        """``(root (vocab,), nodes (len(tree), vocab))`` log-probabilities (nats) after ``committed``."""
        base = self.prompt + committed
        ctxs = [base] + [base + tree.path(i) for i in range(len(tree))]
        lp = np.asarray(self.lm.logprobs(ctxs))
        self.passes += 1
        return lp[0], lp[1:]


class HFTreeScorer:
    """One-pass tree scoring on a Hugging Face model with a 4D additive attention mask (SpecInfer).

    Keeps its own ``DynamicCache`` of the committed prefix minus the last ``pending`` tokens, which are
    fed with the tree; after each pass the tree nodes are cropped from the cache.
    """

    kind = "tree-attention"

    def __init__(self, lm: Any, prompt: list[int]) -> None:
        from gad.models.kvcache import new_cache

        self.lm = lm
        self.model = lm.model
        self.cache = new_cache(self.model.config)  # growing buffers: no copy of the cache per pass
        self.cached: list[int] = []  # token ids in the cache (prompt + committed, minus pending)
        ids = lm._check_context(prompt) if hasattr(lm, "_check_context") else list(prompt)
        self.prompt = ids
        self.passes = 0
        self._pending_from = 0  # committed tokens fed into the cache so far (prompt excluded)
        if len(ids) > 1:
            self._forward_chain(ids[:-1])
        self.cached = ids[:-1]

    def _forward_chain(self, ids: list[int]) -> Any:
        import torch

        t = torch.tensor([ids], dtype=torch.long, device=self.lm.device)
        with torch.inference_mode():
            logits, self.cache = self.lm.forward(t, cache=self.cache)
        self.passes += 1
        return logits

    def score(self, committed: list[int], tree: DraftTree) -> tuple[np.ndarray, np.ndarray]:
        """``(root (vocab,), nodes (len(tree), vocab))`` log-probabilities (nats) after ``committed``.

        ``committed`` must extend the previous call's ``committed`` (tokens are only ever appended).
        """
        import torch

        full = self.prompt + committed
        n_c = len(self.cached)
        if full[:n_c] != self.cached or len(full) <= n_c:
            raise InvalidArgumentError("HFTreeScorer: committed tokens must only grow")
        pending = full[n_c:]
        n_p, n_t = len(pending), len(tree)
        ql = n_p + n_t
        kv = n_c + ql
        ids = pending + tree.tokens
        dtype = next(self.model.parameters()).dtype
        neg = torch.finfo(dtype).min
        allow = torch.zeros((ql, kv), dtype=torch.bool)
        allow[:, :n_c] = True
        for j in range(n_p):
            allow[j, n_c: n_c + j + 1] = True
        pos = list(range(n_c, n_c + n_p))
        for i in range(n_t):
            r = n_p + i
            allow[r, n_c: n_c + n_p] = True
            a = i
            while a >= 0:
                allow[r, n_c + n_p + a] = True
                a = tree.parents[a]
            pos.append(n_c + n_p + tree.depths[i] - 1)
        mask = torch.zeros((1, 1, ql, kv), dtype=dtype)
        mask[0, 0][~allow] = neg
        dev = self.lm.device
        t_ids = torch.tensor([ids], dtype=torch.long, device=dev)
        t_pos = torch.tensor([pos], dtype=torch.long, device=dev)
        with torch.inference_mode():
            logits, self.cache = self.lm.forward(t_ids, cache=self.cache, attention_mask=mask.to(dev),
                                                 position_ids=t_pos)
        self.passes += 1
        lp = torch.log_softmax(logits[0].double(), dim=-1).cpu().numpy()
        # keep the pending tokens in the cache, drop the tree nodes
        if n_t:
            self._crop(n_c + n_p)
        self.cached = full[:]
        return lp[n_p - 1], lp[n_p:]


    def _crop(self, new_len: int) -> None:
        from gad.models.kvcache import crop_to

        crop_to(self.cache, new_len)


def make_scorer(lm: Any, prompt: list[int]) -> Any:
    """:class:`HFTreeScorer` for Hugging Face models (``lm.model`` and ``lm.forward``) whose layers are all
    full attention, else :class:`PathScorer` (a sliding-window layer keeps only its window, which the
    tree's full-length 4D mask does not fit)."""
    if hasattr(lm, "model") and hasattr(lm, "forward"):
        from gad.models.kvcache import has_sliding_layers

        if not has_sliding_layers(lm.model.config):
            return HFTreeScorer(lm, prompt)
    return PathScorer(lm, prompt)


def tree_logprobs_check(lm: Any, prompt: list[int], tree: DraftTree) -> float:
    """Max abs difference between tree-attention and per-path log-probabilities (a self-test; nats)."""
    a_root, a_nodes = make_scorer(lm, prompt).score([], tree)
    b_root, b_nodes = PathScorer(lm, prompt).score([], tree)
    diffs = [np.max(np.abs(a_root - b_root))]
    if len(tree):
        diffs.append(float(np.max(np.abs(a_nodes - b_nodes))))
    return float(max(diffs))


# --- the loop ------------------------------------------------------------------------------------------


def greedy_accept(tree: DraftTree, target_at: Any, eos_ids: Sequence[int]) -> tuple[list[int], int | None,
                                                                                      list[tuple[int, bool]]]:
    """Walk the tree along the target's greedy tokens.

    Args:
        target_at: ``node -> p̃`` ``(vocab,)`` (node -1 = root) or None.
    Returns:
        ``(accepted node ids, the emitted target token or None, [(node, accepted)] for every child of a
        node on the accepted path)``.
    """
    eos = set(int(e) for e in eos_ids)
    node = -1
    path: list[int] = []
    reached: list[tuple[int, bool]] = []
    while True:
        p = target_at(node)
        if p is None:
            return path, None, reached
        g = int(np.argmax(p))
        c = tree.child_with(node, g)
        reached.extend((k, k == c) for k in tree.children.get(node, []))
        if c is None:
            return path, g, reached
        path.append(c)
        node = c
        if g in eos:
            return path, None, reached


def tree_sample_one(lm: LanguageModel, compiled: TokenConstraint, prompt: list[int], drafter: Drafter, m: int, d: int,
                    est: PhiEstimator, max_new_tokens: int, eos: tuple[int, ...], log: bool = False,
                    domain: str | None = None, step_base: int = 0, scorer: Any = None) -> Sample:
    """One greedy-tree speculative sample (module docstring); deterministic given the models.

    ``stats`` as in :func:`gad.speculative.speculative_sample` plus ``scorer`` (``tree-attention`` or
    ``per-path``) and ``tree_nodes`` (drafted nodes in all).
    """
    mt = compiled.matcher()
    drafter.reset()
    if scorer is None:
        scorer = make_scorer(lm, prompt)
    gen: list[int] = []
    logprob = 0.0
    finished = False
    eos_id: int | None = None
    steps = drafted = accepted = 0
    records: list[Any] = []
    while len(gen) < max_new_tokens:
        room = max_new_tokens - len(gen)
        depth = min(d, room - 1)
        tree = build_tree(drafter, mt.fork(), prompt + gen, m, depth, eos) if depth > 0 else DraftTree(
            root_mask=np.asarray(mt.mask(), dtype=bool))
        try:
            root_lp, node_lp = scorer.score(gen, tree)
        except Exception as exc:  # noqa: BLE001 - a model that refuses 4D masks
            if isinstance(scorer, PathScorer):
                raise
            warnings.warn(f"tree attention failed ({exc}); falling back to batched per-path scoring",
                          RuntimeWarning, stacklevel=2)
            scorer = PathScorer(lm, prompt)
            root_lp, node_lp = scorer.score(gen, tree)

        def lp_of(node: int, root_lp: np.ndarray = root_lp, node_lp: np.ndarray = node_lp) -> np.ndarray:
            return root_lp if node < 0 else node_lp[node]

        seen: dict[int, np.ndarray | None] = {}  # p̃ at each node the walk visited (for the log)

        def target_at(node: int, tree: DraftTree = tree, lp_of: Any = lp_of,
                      seen: dict[int, np.ndarray | None] = seen) -> np.ndarray | None:
            mask = tree.root_mask if node < 0 else tree.masks[node]
            if mask is None:
                return None
            lp = lp_of(node)
            prefix = gen + (tree.path(node) if node >= 0 else [])
            seen[node] = tilted(lp, mask, est.child_phi(prefix, lp, mask))
            return seen[node]

        path, g, reached = greedy_accept(tree, target_at, eos)
        steps += 1
        drafted += len(tree)
        accepted += len(path)
        if log:

            for node, ok in reached:  # siblings share their parent's p̃, q and coverage certificate
                parent = tree.parents[node]
                records.append(AcceptanceRecord.from_distributions(
                    domain or "", step_base + steps, tree.depths[node], tree.tokens[node], ok,
                    p=seen[parent], q=tree.q.get(parent), rule=TreeCoverage(m)))
            if g is not None:
                records.append(AcceptanceRecord(domain=domain or "", step=step_base + steps,
                                                depth=len(path) + 1, token=g, accepted=True, bonus=True))
        toks = [tree.tokens[i] for i in path]
        prev = -1
        for i in path:
            logprob += float(lp_of(prev)[tree.tokens[i]])
            prev = i
        if toks and toks[-1] in eos:
            gen.extend(toks[:-1])
            mt.accept_tokens(toks[:-1])
            finished, eos_id = True, toks[-1]
            break
        if mt.accept_tokens(toks) != len(toks):
            raise TokenRejectedError(f"accepted tree path {toks} is rejected by the matcher")
        gen.extend(toks)
        if g is None:
            break
        logprob += float(lp_of(prev)[g])
        if g in eos:
            finished, eos_id = True, g
            break
        if not mt.accept_token(g):
            raise TokenRejectedError(f"target greedy token {g} is rejected by the matcher")
        gen.append(g)
    text = compiled.vocab.decode(gen).decode("utf-8", errors="replace")
    n_tok = len(gen) + int(finished)
    passes = scorer.passes  # prompt pass included (a fresh scorer per sample)
    stats: dict[str, Any] = dict(target_passes=passes, drafted=drafted, accepted=accepted, steps=steps,
                                 bonus=steps, tokens=n_tok,
                                 passes_per_token=passes / max(1, n_tok),
                                 draft_passes=getattr(drafter, "passes", None),
                                 scorer=scorer.kind, tree_nodes=drafted)
    if log:
        stats["log"] = records
    return Sample(text=text, token_ids=gen, logprob=logprob, finished=finished,
                  eos_id=eos_id if finished else None, stats=stats)
