"""Exact grammar-aligned sampling on the ASAp trie: importance weights, rejection, MCMC (BRIEF §6).

Every sample drawn from ``q(t | u) = p(t | u) · Φ̂(u·t) / Z(u)`` with ``Z(u) = Σ_t p(t | u) · Φ̂(u·t)``
(the estimates frozen for that sample) carries the exact importance weight

    Q*(w) / q(w) = (Z(u_0) / Z_G) · a(w),      a(w) = Π_{i=1..n} Z(u_i) / Φ̂(u_i)

(``u_0`` the prompt, ``u_i`` the prefix after ``i`` tokens, ``Φ̂(u_i)`` the value the parent used when it
chose ``u_i``; ``Φ̂(w·EOS) = 1``).  On the ASAp trie (Park et al., NeurIPS 2024, arXiv 2405.21047)
every factor is ≤ 1, so:

* ``method="rs"`` accepts a proposal with probability ``a(w)``: accepted samples follow ``Q*`` exactly at
  any trie state (CARS-style adaptive rejection, Parys et al., arXiv 2510.01902, with exact masks);
  the trie learns from every proposal, so the acceptance rate rises toward 1;
* ``E_q[Z(u_0) · a(w)] = Z_G`` (the mean of ``exp(log_z0 + log_weight)`` estimates the grammatical mass);
* ``method="mcmc"``: independent Metropolis–Hastings ("restart", accept ``min(1, a(w')/a(w))``) and
  prefix-truncation moves ("uniform", "priority" by surprisal; arXiv 2506.05754) with the exact
  acceptance ratio (derived in :func:`mh_log_ratio`).

A sample cut by the token budget is not in ``L``: its weight is 0 (``log_weight = -inf``), rejection and
MCMC never return it, and the law they sample is ``Q*`` restricted to outputs within the budget.

**The trie caches model outputs.**  :class:`TrieProposer` stores, for every trie node it expanded, the
allowed next tokens and their log-probabilities (sparse: only tokens the mask allows with ``p > 0``).
A proposal descends the trie without the model along cached nodes and runs the model only from the
first node without a cached distribution, extending its batch-1 KV session over the skipped tokens in
one pass (``advance``).  Compute is counted in :class:`Compute`: ``model_rows`` (next-token
distributions the model computed; the prompt pass excluded), ``model_positions`` (token positions it
processed, cache extensions included) and ``prompt_passes``.

Sampling draws the token from the sparse weights with the same inverse-CDF rule as
:func:`gad.sampling.dist.draw` over the full vocabulary, so with the same uniforms the cached and uncached
proposers return the same samples (exactly on toy models; up to float noise between a one-token and a
multi-token forward pass on real ones).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from gad.errors import InvalidArgumentError, ProposalBudgetError, TokenRejectedError
from gad.phi.registry import make_estimator
from gad.phi.trie import PhiTrie
from gad.sampling.rng import sample_rng
from gad.types import Sample

__all__ = ["Compute", "NodeLaw", "Proposal", "TrieProposer", "step_law", "rejection_sample", "asap_sample",
           "mcmc_sample", "truncation_log_probs", "mh_log_ratio", "MCMC_MOVES"]

MCMC_MOVES = ("restart", "uniform", "priority")


@dataclass
class Compute:
    """Model compute spent by a sampler.

    Attributes:
        model_rows: next-token distributions the model computed (a batch of ``B`` rows at one step counts
            ``B``; a cache extension over ``k`` tokens that keeps one distribution counts 1); prompt passes
            excluded.
        model_positions: token positions the model processed (cache extensions included), prompt excluded.
        prompt_passes: forward passes over the prompt (0 when the prompt's KV came from the store).
    """

    model_rows: int = 0
    model_positions: int = 0
    prompt_passes: int = 0

    def add(self, other: Compute) -> None:
        """Add ``other``'s counts to this one."""
        self.model_rows += other.model_rows
        self.model_positions += other.model_positions
        self.prompt_passes += other.prompt_passes

    def as_dict(self) -> dict[str, int]:
        """``{"model_rows", "model_positions", "prompt_passes"}``."""
        return asdict(self)


@dataclass
class NodeLaw:
    """The proposal at one prefix ``u``: ``q(t | u) = p(t | u) · Φ̂(u·t) / Z(u)`` over allowed tokens.

    Attributes:
        ids: ``(k,)`` int64 allowed token ids with ``p > 0`` (EOS included when allowed), ascending.
        logp: ``(k,)`` float64 ``log p(t | u)`` (nats, unconstrained model).
        phi: ``(k,)`` float64 ``Φ̂(u·t)`` in ``[0, 1]`` (1 for EOS and unexplored children).
        log_z: ``log Z(u)`` (nats); ``-inf`` when no allowed token has weight.
    """

    ids: np.ndarray
    logp: np.ndarray
    phi: np.ndarray
    log_z: float

    def q(self) -> np.ndarray:
        """``(k,)`` float64 proposal probabilities (zeros when ``log_z = -inf``)."""
        if not math.isfinite(self.log_z):
            return np.zeros(len(self.ids))
        with np.errstate(divide="ignore"):
            return np.exp(self.logp + np.log(self.phi) - self.log_z)


def step_law(ids: np.ndarray, logp: np.ndarray, trie: PhiTrie | None, node: int) -> NodeLaw:
    """The proposal law at trie ``node`` given its sparse next-token distribution.

    ``Φ̂(u·t)`` is the visited child's current estimate, 1 for an unexplored allowed child and for EOS
    (EOS is never a trie node).  ``node = -1`` (a prefix the trie never visited) or ``trie = None`` gives
    ``Φ̂ = 1`` for every allowed token (GCD's law).
    Args:
        ids: ``(k,)`` int64 ascending allowed ids; logp: ``(k,)`` float64 their log-probabilities.
    Returns:
        a :class:`NodeLaw`.
    """
    phi = np.ones(len(ids), dtype=np.float64)
    if trie is not None and node >= 0 and len(ids):
        tok, tphi = trie.token, trie.phi
        for c in trie.children(node):
            t = tok[c]
            j = int(np.searchsorted(ids, t))
            if j < len(ids) and ids[j] == t:
                phi[j] = tphi[c]
    with np.errstate(divide="ignore"):
        logw = logp + np.log(phi)
    top = float(logw.max()) if len(logw) else -math.inf
    if not math.isfinite(top):
        return NodeLaw(ids, logp, phi, -math.inf)
    return NodeLaw(ids, logp, phi, top + math.log(float(np.exp(logw - top).sum())))


def _draw_sparse(law: NodeLaw, u: float) -> int:
    """Index into ``law.ids`` by inverse CDF with uniform ``u`` (same rule as ``gad.sampling.draw``)."""
    with np.errstate(divide="ignore"):
        logw = law.logp + np.log(law.phi)
    w = np.exp(logw - logw.max())
    cdf = np.cumsum(w)
    j = int(np.count_nonzero(cdf <= u * cdf[-1]))
    j = min(j, len(w) - 1)
    while j > 0 and w[j] <= 0:
        j -= 1
    return j


@dataclass
class Proposal:
    """One draw from ``q`` (possibly the regenerated suffix of a longer prefix).

    Attributes:
        tokens: all generated ids after the prompt (the kept prefix included), EOS excluded.
        token_logp: ``log p`` of each token of ``tokens`` and, when finished, of EOS last (nats).
        finished: ended with EOS inside the budget; eos_id: that EOS id (or -1).
        start: length of the kept prefix (0 for a fresh proposal).
        log_z0: ``log Z(u_start)`` (nats): ``log Z(u_0)`` for a fresh proposal.
        log_a: ``Σ_{i=start+1..n} [log Z(u_i) − log Φ̂(u_i)]`` (nats); ``-inf`` when not finished.
        log_q: ``log q(tokens[start:], EOS | u_start)`` (nats).
        nodes: trie nodes of the path, root first (``len(tokens) + 1`` entries).
        dead_end: stopped at a prefix where no allowed token had weight.
    """

    tokens: list[int]
    token_logp: list[float]
    finished: bool
    eos_id: int
    start: int
    log_z0: float
    log_a: float
    log_q: float
    nodes: list[int]
    dead_end: bool = False

    @property
    def logprob(self) -> float:
        """``log P`` of the whole output under the unconstrained model (EOS included when finished)."""
        return float(math.fsum(self.token_logp))


class TrieProposer:
    """Draws from ``q`` on an ASAp trie, caching the model's next-token distributions per node.

    Args:
        lm: the language model; compiled: the compiled grammar; prompt_ids: the prompt's ids.
        estimator: a :class:`gad.phi.asap.AsapPhi` (its ``trie`` is read and, with ``learn``, updated).
        learn: update ``Φ̂`` after every proposal (:meth:`observe`); False keeps the trie's estimates
            frozen (a fresh frozen trie gives GCD's law, with cached model outputs).
        cache: keep each expanded node's sparse next-token distribution and descend cached nodes
            without the model; False runs the model at every step of every proposal (a fresh batch-1
            session per proposal, like :func:`gad.sampling.sampler.sample_rows`).
        max_new_tokens: token budget per sample, EOS included.
    Attributes:
        compute: the :class:`Compute` spent so far.

    Memory: 16 bytes per allowed token per cached node (int64 ids, float64 log-probabilities), on top of
    the trie's own ~200 bytes per node; the cache lives as long as the proposer (one sampling call).
    """

    def __init__(self, lm: Any, compiled: Any, prompt_ids: Sequence[int], estimator: Any, *,
                 learn: bool = True, cache: bool = True, max_new_tokens: int = 256) -> None:
        self.lm = lm
        self.compiled = compiled
        self.prompt = [int(t) for t in prompt_ids]
        self.est = estimator
        self.trie: PhiTrie = estimator.trie
        self.learn = bool(learn)
        self.cache = bool(cache)
        self.max_new_tokens = int(max_new_tokens)
        eos = getattr(compiled, "eos_ids", None) or compiled.vocab.eos_ids
        self.eos = frozenset(int(e) for e in eos)
        self._eos_arr = np.asarray(sorted(self.eos), dtype=np.int64)
        self.compute = Compute()
        self._dist: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._session: Any = None
        self._matcher: Any = None
        self._matcher_len = 0
        self.proposals = 0

    # --- model access -------------------------------------------------------------------------

    def _new_session(self) -> tuple[Any, np.ndarray]:
        """A batch-1 session on the prompt and the root distribution (the prompt pass's output; a toy
        session's recomputation of it counts as the prompt pass)."""
        s = self.lm.session(self.prompt, batch=1)
        lp = np.asarray(s.logprobs(), dtype=np.float64)[0]
        self.compute.prompt_passes += int(getattr(s, "forward_passes", 0) or 0)
        return s, lp

    def _logp_at(self, path: list[int]) -> np.ndarray:
        """``log p(· | prompt · path)``: ``(vocab,)`` float64, from the session (counted in ``compute``).

        The session is rolled back to the longest common prefix with ``path`` and advanced over the rest
        in one forward pass that computes only the last distribution.
        """
        if self._session is None or not path:
            self._session, lp = self._new_session()
            if not path:
                return lp
        s = self._session
        g = s.generated[0]
        common = 0
        for a, b in zip(g, path):
            if a != b:
                break
            common += 1
        common = min(common, len(path) - 1)  # at least the last token is fed (its distribution is wanted)
        if common < len(g):
            s.rollback(len(g) - common)
        rest = path[common:]
        adv = getattr(s, "advance", None)
        if callable(adv):
            lp = np.asarray(adv(rest), dtype=np.float64)
            self.compute.model_rows += 1
        else:  # a session without advance: extend computes every position's distribution
            lp = np.asarray(s.extend(rest), dtype=np.float64)[-1]
            self.compute.model_rows += len(rest)
        self.compute.model_positions += len(rest)
        return lp

    def _mask_at(self, path: list[int]) -> np.ndarray:
        m = self._matcher
        if m is None or self._matcher_len > len(path):
            m = self.compiled.matcher()
            self._matcher_len = 0
        for t in path[self._matcher_len:]:
            if not m.accept_token(int(t)):
                raise TokenRejectedError(f"the matcher refused token {t} that its mask allowed (prefix {path[-8:]})")
        self._matcher, self._matcher_len = m, len(path)
        return np.asarray(m.mask(), dtype=bool)

    def node_dist(self, node: int, path: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The sparse next-token distribution at ``node`` (prefix ``path``): ``(ids, logp)``.

        From the cache when present, else from the model (and then cached, with the node expanded).
        """
        d = self._dist.get(node) if self.cache else None
        if d is not None:
            return d
        lp = self._logp_at(path)
        mask = self._mask_at(path)
        ok = mask & np.isfinite(lp)
        ids = np.flatnonzero(ok).astype(np.int64)
        logp = lp[ids].astype(np.float64)
        trie = self.trie
        if math.isnan(trie.mass[node]):
            pv = np.exp(logp)
            is_eos = np.isin(ids, self._eos_arr)
            trie.expand(node, float(pv.sum()), float(pv[is_eos].sum()),
                        int(np.count_nonzero(pv[~is_eos] > 0)))
        d = (ids, logp)
        if self.cache:
            self._dist[node] = d
        return d

    def law(self, node: int, path: list[int]) -> NodeLaw:
        """The current proposal law at ``node`` (see :func:`step_law`)."""
        ids, logp = self.node_dist(node, path)
        return step_law(ids, logp, self.trie, node)

    # --- proposals ----------------------------------------------------------------------------

    def propose(self, rng: np.random.Generator, prefix: Sequence[int] = (),
                prefix_logp: Sequence[float] = ()) -> Proposal:
        """Draw ``w ~ q(· | prefix)`` with the estimates as they stand (no learning here).

        Args:
            rng: the sample's random source (one ``rng.random()`` per step).
            prefix: kept prefix (ids after the prompt; must be a path already in the trie, or empty).
            prefix_logp: ``log p`` of the prefix tokens (carried into ``token_logp``).
        Raises:
            InvalidArgumentError: ``prefix`` is not a visited trie path.
            TokenRejectedError: the matcher refused a token its own mask allowed (a matcher bug).
        """
        trie = self.trie
        path = [int(t) for t in prefix]
        nodes = [0]
        for t in path:
            c = trie.child(nodes[-1], t)
            if c < 0:
                raise InvalidArgumentError(f"prefix {path[:8]}... is not a visited trie path")
            nodes.append(c)
        self._matcher, self._matcher_len = None, 0
        tlp = [float(x) for x in prefix_logp][: len(path)]
        start = len(path)
        log_z0 = math.nan
        log_a = 0.0
        log_q = 0.0
        finished = dead = False
        eos_id = -1
        node = nodes[-1]
        for step in range(start, self.max_new_tokens):
            law = self.law(node, path)
            if step == start:
                log_z0 = law.log_z
            if not math.isfinite(law.log_z):
                dead = True
                break
            if step > start:
                log_a += law.log_z
            j = _draw_sparse(law, float(rng.random()))
            t = int(law.ids[j])
            lpt = float(law.logp[j])
            phi_t = float(law.phi[j])
            log_q += lpt + math.log(phi_t) - law.log_z
            tlp.append(lpt)
            if t in self.eos:
                finished, eos_id = True, t
                break
            log_a -= math.log(phi_t)
            c = trie.child(node, t)
            if c < 0:
                c = trie.add_child(node, t, math.exp(lpt))
            path.append(t)
            nodes.append(c)
            node = c
        self.proposals += 1
        return Proposal(tokens=path, token_logp=tlp, finished=finished, eos_id=eos_id, start=start,
                        log_z0=log_z0, log_a=log_a if finished else -math.inf, log_q=log_q, nodes=nodes,
                        dead_end=dead)

    def observe(self, prop: Proposal) -> None:
        """Learn from a proposal (accepted or not): ASAp's leaf → root update along its path."""
        if self.learn:
            self.trie.update_path(prop.nodes)
            self.trie.samples += 1

    def log_a_from(self, tokens: Sequence[int], k: int) -> float:
        """``log a_k(w) = Σ_{i=k+1..n} [log Z(u_i) − log Φ̂(u_i)]`` under the current estimates (nats).

        ``tokens`` is a finished output (EOS excluded) whose path is in the trie.
        Raises:
            InvalidArgumentError: a prefix of ``tokens`` is not a visited trie path.
        """
        trie = self.trie
        node = 0
        total = 0.0
        path: list[int] = []
        self._matcher, self._matcher_len = None, 0
        for i, t in enumerate(tokens):
            c = trie.child(node, int(t))
            if c < 0:
                raise InvalidArgumentError("log_a_from: the output's path is not in the trie")
            path.append(int(t))
            node = c
            if i + 1 > k:
                law = self.law(node, path)
                total += law.log_z - math.log(trie.phi[node]) if trie.phi[node] > 0 else math.inf
        return total

    def close(self) -> None:
        """Drop the session (its KV cache) and persist the trie when it came from a file."""
        self._session = None
        flush = getattr(self.est, "flush", None)
        if callable(flush):
            flush()


def _to_sample(prop: Proposal, vocab: Any, method: str, index: int, log_weight: float | None,
               log_z0: float | None, stats: dict[str, Any]) -> Sample:
    text = vocab.decode(prop.tokens).decode("utf-8", errors="replace")
    return Sample(text=text, token_ids=list(prop.tokens), logprob=prop.logprob, finished=prop.finished,
                  method=method, eos_id=prop.eos_id if prop.finished else None, index=index,
                  dead_end=prop.dead_end, log_weight=log_weight, log_z0=log_z0, stats=stats)


def _make_proposer(lm: Any, compiled: Any, prompt_ids: Sequence[int], trie: Any, max_new_tokens: int,
                   cache: bool, learn: bool = True) -> TrieProposer:
    est = make_estimator("asap", lm, compiled, list(prompt_ids), trie=trie, settings={"batch_size": 1})
    return TrieProposer(lm, compiled, prompt_ids, est, learn=learn, cache=cache, max_new_tokens=max_new_tokens)


def asap_sample(lm: Any, compiled: Any, prompt_ids: Sequence[int], *, n: int, seed: int = 0,
                max_new_tokens: int = 256, trie: Any = None, cache: bool = True, progress: Any = None,
                ) -> list[Sample]:
    """ASAp (sequential, the paper's algorithm) through :class:`TrieProposer`, with importance weights.

    Sample ``i`` uses ``numpy.random.default_rng([seed, i])``; each carries ``log_weight = log a(w)`` and
    ``log_z0 = log Z(u_0)`` (nats; ``-inf`` weight when budget-cut).  ``stats["compute"]`` on the last
    sample holds the run's :class:`Compute`; every sample's ``stats`` holds its own ``model_rows`` /
    ``model_positions`` share (the increase it caused).
    """
    prop = _make_proposer(lm, compiled, prompt_ids, trie, max_new_tokens, cache)
    out: list[Sample] = []
    try:
        for i in range(n):
            before = Compute(**prop.compute.as_dict())
            p = prop.propose(sample_rng(seed, i))
            prop.observe(p)
            out.append(_to_sample(p, lm.vocab, "asap", i, p.log_a, p.log_z0, _delta(before, prop.compute)))
            if progress:
                progress.update(1)
    finally:
        prop.close()
    if out:
        out[-1].stats["compute"] = prop.compute.as_dict()
    return out


def _delta(before: Compute, after: Compute) -> dict[str, int]:
    return {"model_rows": after.model_rows - before.model_rows,
            "model_positions": after.model_positions - before.model_positions,
            "prompt_passes": after.prompt_passes - before.prompt_passes}


def rejection_sample(lm: Any, compiled: Any, prompt_ids: Sequence[int], *, n: int, seed: int = 0,
                     max_new_tokens: int = 256, trie: Any = None, cache: bool = True,
                     max_proposals: int | None = None, progress: Any = None) -> list[Sample]:
    """``n`` exact samples of ``Q*`` (within the token budget) by rejection on the ASAp trie (BRIEF §6).

    Proposal ``j`` is drawn from ``q`` with ``numpy.random.default_rng([seed, j])`` and accepted with
    probability ``min(1, a(w))`` (one more uniform from the same generator); a budget-cut proposal is
    rejected.  The trie learns from every proposal.  Accepted samples carry unit weight
    (``log_weight = 0``, ``log_z0 = None``: they are draws of ``Q*``); ``stats`` holds the proposal's
    ``proposal_log_weight`` / ``proposal_log_z0``, ``proposals`` (proposals spent on this sample) and its
    compute share; the last sample's ``stats`` also holds ``compute`` (the run's :class:`Compute`),
    ``proposals_total``, ``acceptance_rate`` and ``log_z_hat`` (log of the mean of ``Z(u_0) · a(w)`` over
    all proposals: an unbiased estimate of ``Z_G`` within the budget, in nats).

    Args:
        trie: ASAp trie (object, path — loaded, identity-checked and saved like ``method="asap"`` — or None).
        cache: descend cached trie nodes without the model (see :class:`TrieProposer`).
        max_proposals: stop after this many proposals (default ``1000 · n``).
    Raises:
        gad.errors.ProposalBudgetError: ``max_proposals`` was reached before ``n`` samples were
            accepted (an ``InvalidArgumentError``; the message gives the acceptance rate, ``.samples``
            the samples accepted so far and ``.compute`` the model calls spent); the trie keeps what it
            learned.
    """
    limit = int(max_proposals if max_proposals is not None else 1000 * n)
    prop = _make_proposer(lm, compiled, prompt_ids, trie, max_new_tokens, cache)
    out: list[Sample] = []
    weights: list[float] = []
    j = 0
    since = 0
    before = Compute()
    try:
        while len(out) < n:
            if j >= limit:
                raise ProposalBudgetError(
                    f"rs: {len(out)} of {n} samples accepted after max_proposals={limit} proposals "
                    f"(acceptance rate {len(out) / max(j, 1):.2e}); raise max_proposals or the token budget",
                    samples=out, compute=prop.compute.as_dict(), proposals=j)
            rng = sample_rng(seed, j)
            p = prop.propose(rng)
            j += 1
            since += 1
            weights.append(p.log_z0 + p.log_a if p.finished else -math.inf)
            accept = p.finished and float(rng.random()) < math.exp(min(0.0, p.log_a))
            prop.observe(p)
            if progress is not None and hasattr(progress, "set_postfix_str"):  # (a tqdm bar: rejections show too)
                progress.set_postfix_str(f"{j} proposals, {len(out) + accept} accepted")
            if accept:
                out.append(_to_sample(p, lm.vocab, "rs", len(out), 0.0, None, {
                    "proposals": since, "proposal_log_weight": p.log_a,
                    "proposal_log_z0": p.log_z0, **_delta(before, prop.compute)}))
                before = Compute(**prop.compute.as_dict())
                since = 0
                if progress:
                    progress.update(1)
    finally:
        prop.close()
    lw = np.asarray(weights)
    top = float(lw.max()) if np.isfinite(lw).any() else 0.0
    log_z_hat = top + math.log(float(np.mean(np.exp(lw - top)))) if np.isfinite(lw).any() else -math.inf
    out[-1].stats.update({"compute": prop.compute.as_dict(), "proposals_total": j,
                          "acceptance_rate": n / j, "log_z_hat": log_z_hat})
    return out


# --- MCMC --------------------------------------------------------------------------------------


def truncation_log_probs(token_logp: Sequence[float], move: str, eps: float = 1e-3) -> np.ndarray:
    """``log r_w(k)`` for ``k = 0..n`` (regenerate from ``u_k``) of a finished output of ``n`` tokens.

    ``token_logp`` holds ``n + 1`` values: ``log p`` of each token and of EOS.  ``"restart"``: ``k = 0``
    only; ``"uniform"``: ``1 / (n + 1)``; ``"priority"``: ``∝ s_k + eps`` with ``s_k = −log p(w_{k+1} | u_k)``
    the surprisal of the token the move regenerates (EOS for ``k = n``).
    Returns:
        ``(n + 1,)`` float64 log-probabilities (nats; ``-inf`` where impossible).
    Raises:
        InvalidArgumentError: unknown ``move``.
    """
    m = len(token_logp)
    if move == "restart":
        out = np.full(m, -math.inf)
        out[0] = 0.0
        return out
    if move == "uniform":
        return np.full(m, -math.log(m))
    if move == "priority":
        s = np.maximum(-np.asarray(token_logp, dtype=np.float64), 0.0) + eps
        return np.log(s) - math.log(float(s.sum()))
    raise InvalidArgumentError(f"mcmc move must be one of {', '.join(MCMC_MOVES)}; got {move!r}")


def mh_log_ratio(log_a_new: float, log_r_new: float, log_a_old: float, log_r_old: float) -> float:
    """Log Metropolis–Hastings ratio of a truncate-at-``k``-and-regenerate move from ``w`` to ``w'``.

    Target ``π(w) ∝ P(w) · 1[w ∈ L]``; the move keeps ``u_k`` (``k`` drawn with ``r_w(k)``) and draws the
    suffix from ``q(· | u_k)``.  Since ``q(w_{>k} | u_k) = P(w_{>k} | u_k) / (Z(u_k) · a_k(w))`` with
    ``a_k(w) = Π_{i>k} Z(u_i)/Φ̂(u_i)``, the ratio of ``π(w') r_{w'}(k) q(w_{>k}|u_k)`` to
    ``π(w) r_w(k) q(w'_{>k}|u_k)`` is ``a_k(w') r_{w'}(k) / (a_k(w) r_w(k))`` — both ``a_k`` under the same
    (frozen) estimates.  For ``restart`` (``k = 0``, ``r = 1``) this is ``a(w') / a(w)``.  Each ``k`` is
    balanced on its own, so the mixture over ``k`` leaves ``π`` invariant.
    """
    if log_a_old == -math.inf:
        return math.inf if log_a_new > -math.inf else 0.0
    return (log_a_new + log_r_new) - (log_a_old + log_r_old)


@dataclass
class _Chain:
    prop: Proposal
    log_a: float = -math.inf
    accepted: int = 0
    steps: int = 0


def mcmc_sample(lm: Any, compiled: Any, prompt_ids: Sequence[int], *, n: int, seed: int = 0,
                max_new_tokens: int = 256, trie: Any = None, steps: int = 10, move: str = "uniform",
                cache: bool = True, learn: bool = True, progress: Any = None) -> list[Sample]:
    """``n`` chains of ``steps`` Metropolis–Hastings steps each on ``Q*`` (within the budget; BRIEF §6).

    Chain ``c`` starts from a proposal of ``q`` and then, ``steps`` times, draws a truncation point ``k``
    from ``r_w`` (:func:`truncation_log_probs`; ``move`` = ``restart`` | ``uniform`` | ``priority``),
    regenerates the suffix from ``q(· | u_k)`` and accepts with :func:`mh_log_ratio` (``a_k`` of the current
    state recomputed under the estimates the proposal used).  The trie learns from every proposal after
    its accept/reject decision (each step's kernel leaves ``Q*`` invariant; the estimates change between
    steps — adaptive MCMC).  Chains advance together (step ``s`` of every chain before step ``s + 1``);
    their proposals share one trie and its cached model outputs.  Chain ``c``'s uniforms come from
    ``numpy.random.default_rng([seed, c])``.

    Returns:
        the final state of each chain (``log_weight = 0``, ``log_z0 = None``; ``stats``: ``accept_rate``,
        ``steps``, compute shares; the last sample's ``stats["compute"]`` holds the run's total).
    Raises:
        InvalidArgumentError: unknown ``move`` or ``steps < 0``.
    """
    if move not in MCMC_MOVES:
        raise InvalidArgumentError(f"mcmc move must be one of {', '.join(MCMC_MOVES)}; got {move!r}")
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise InvalidArgumentError(f"mcmc steps must be a non-negative integer, got {steps!r}")
    prop = _make_proposer(lm, compiled, prompt_ids, trie, max_new_tokens, cache, learn=learn)
    rngs = [sample_rng(seed, c) for c in range(n)]
    chains: list[_Chain] = []
    try:
        for c in range(n):
            p = prop.propose(rngs[c])
            prop.observe(p)
            chains.append(_Chain(prop=p, log_a=p.log_a))
        for _ in range(int(steps)):
            for c, ch in enumerate(chains):
                rng = rngs[c]
                cur = ch.prop
                if not cur.finished:  # a budget-cut start: restart until a finished state appears
                    k, lr_old, lr_new = 0, 0.0, 0.0
                    new = prop.propose(rng)
                    la_old, la_new = -math.inf, new.log_a
                else:
                    lr = truncation_log_probs(cur.token_logp, move)
                    k = int(_draw_sparse(NodeLaw(np.arange(len(lr)), lr, np.ones(len(lr)), 0.0),
                                         float(rng.random())))
                    new = prop.propose(rng, cur.tokens[:k], cur.token_logp[:k])
                    la_new = new.log_a
                    la_old = prop.log_a_from(cur.tokens, k)
                    lr_old = float(lr[k])
                    lr_new = float(truncation_log_probs(new.token_logp, move)[k]) if new.finished else -math.inf
                log_ratio = mh_log_ratio(la_new, lr_new, la_old, lr_old) if new.finished else -math.inf
                u = float(rng.random())
                if log_ratio >= 0 or u < math.exp(log_ratio):
                    ch.prop, ch.log_a = new, la_new
                    ch.accepted += 1
                ch.steps += 1
                prop.observe(new)
        out = []
        for c, ch in enumerate(chains):
            out.append(_to_sample(ch.prop, lm.vocab, "mcmc", c, 0.0, None, {
                "move": move, "steps": ch.steps, "accept_rate": ch.accepted / ch.steps if ch.steps else None}))
            if progress:
                progress.update(1)
    finally:
        prop.close()
    total = prop.compute.as_dict()
    share = {k: v / max(n, 1) for k, v in total.items()}
    for s in out:
        s.stats.update(share)
    out[-1].stats["compute"] = total
    return out
