"""Sequential Monte Carlo on the grammar-conditioned law ``Q*`` (BRIEF §6).

Loula et al., "Syntactic and Semantic Control of Large Language Models via Sequential Monte Carlo"
(ICLR 2025, arXiv 2504.13139; genlm-control).  ``N`` particles are extended one token at a time from
``q(t | u) = p(t | u) · Φ̂(u·t) / Z(u)`` for any Φ estimator (indicator = GCD, ASAp trie, one-step …),
the estimates frozen for the run.  The intermediate targets are ``γ_i(u_i) = P(u_i) · Φ̂(u_i)``, so the
incremental weight of extending a particle at ``u_i`` is ``Z(u_i) / Φ̂(u_i)`` (``Z(u_0)`` at the root) —
known *before* its next token is drawn.  Each step therefore weights, resamples when the effective
sample size ``ESS = (Σ w)² / Σ w²`` falls below ``ess_threshold · N`` (systematic resampling), then
extends.  Finished particles keep their weight (incremental weight 1); a particle cut by the token
budget gets weight 0 (it is not in ``L``: the target is ``Q*`` within the budget).
``Ẑ = Z(u_0) · Π_{resampling steps} mean(w) · mean(w_final)`` is an unbiased estimate of ``Z_G``; with
the exact ``Φ`` every weight is 1.

Particles are rows of one batched KV session (:meth:`gad.lm.DecodeSession.keep_rows`): particles with
the same prefix share one row (after resampling, duplicates share their parent's row until their
tokens differ), so a step computes one next-token distribution per *distinct* live prefix, and
resampling reorders and duplicates rows without recomputing them.

**Proposal draws.**  ``smc(…, proposal_draws=m)`` decodes ``m`` more rows in the same session: plain
draws from ``q`` (with the indicator estimator, GCD samples), never weighted into the particles nor
resampled.  Draw ``j`` uses ``default_rng([seed, j])``, the random source of sample ``j`` of
``gad.sample(method=…, seed=seed)`` with the same estimator, and draws its tokens by the same rule, so
the draws are those samples (up to float noise between batch shapes) — and particle ``j`` shares that
source too: it coincides with draw ``j`` (and shares its session row) until it is first resampled.
Each draw's law is the proposal's; the particles are the same with or without draws.  A comparison of
the proposal with SMC thus pays for one decoding pass instead of two (a CPU decoding step of a small
model costs about the same for 3 rows as for 8: ``benchmarks/bench_threads.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gad.errors import InvalidArgumentError, TokenRejectedError
from gad.phi.registry import make_estimator
from gad.sampling.aligned import Compute
from gad.sampling.rng import sample_rng
from gad.types import Sample

__all__ = ["SMCResult", "Randomness", "smc", "smc_sample", "resampled_draws", "systematic_resample",
           "log_ess"]


def log_ess(log_w: np.ndarray) -> float:
    """``log ESS = 2 log Σ w − log Σ w²`` of ``(N,)`` log weights (``-inf`` when every weight is 0)."""
    lw = np.asarray(log_w, dtype=np.float64)
    top = float(lw.max()) if len(lw) else -math.inf
    if not math.isfinite(top):
        return -math.inf
    w = np.exp(lw - top)
    return 2 * math.log(float(w.sum())) - math.log(float((w * w).sum()))


def systematic_resample(weights: np.ndarray, u: float) -> np.ndarray:
    """Systematic resampling: ``(N,)`` ancestor indices for normalised ``(N,)`` weights and one uniform.

    Particle ``j`` takes the ancestor whose cumulative-weight bin holds ``(u + j) / N`` (Kitagawa 1996).
    """
    w = np.asarray(weights, dtype=np.float64)
    n = len(w)
    cdf = np.cumsum(w)
    cdf[-1] = max(cdf[-1], 1.0)
    pos = (u + np.arange(n)) / n
    return np.minimum(np.searchsorted(cdf, pos, side="right"), n - 1).astype(np.int64)


class Randomness:
    """The random choices of one SMC run: token draws per particle and the resampling uniform.

    Particle slot ``i`` draws from ``numpy.random.default_rng([seed, i])``; resampling uniforms from
    ``default_rng([seed, 2**32 - 1])``.  ``draws`` more slots ``n + j`` (proposal draws) draw from their
    own generator ``default_rng([seed, j])``: the random source of sample ``j`` of the batched sampler
    (:func:`gad.sampling.rng.sample_rng`).  (Tests substitute a subclass that enumerates every outcome.)
    """

    def __init__(self, seed: int, n: int, draws: int = 0) -> None:
        self.rngs = [sample_rng(seed, i) for i in range(n)] + [sample_rng(seed, j) for j in range(draws)]
        self.resampler = np.random.default_rng([int(seed), 2**32 - 1])

    def token(self, slot: int, cdf: np.ndarray) -> int:
        """Index into ``cdf`` (cumulative weights, last > 0) by inverse CDF (``gad.sampling.dist.draw``'s rule)."""
        u = float(self.rngs[slot].random())
        return min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), len(cdf) - 1)

    def resample(self, weights: np.ndarray) -> np.ndarray:
        """Ancestor indices for normalised ``weights`` (:func:`systematic_resample`)."""
        return systematic_resample(weights, float(self.resampler.random()))


@dataclass
class SMCResult:
    """One SMC run.

    Attributes:
        particles: ``N`` :class:`Sample`; ``log_weight`` = the particle's final log weight with the
            resampling factors included and ``log_z0 = log Z(u_0)``, so that the mean of
            ``exp(log_z0 + log_weight)`` over the particles is ``Ẑ``; ``-inf`` for a particle not in L.
        log_z_hat: ``log Ẑ`` (nats), an unbiased estimate (in ``Ẑ``) of ``Z_G`` within the budget.
        ess: ESS of the final weights; resamples: resampling steps taken.
        compute: model compute of the run (the proposal draws' rows included).
        proposal_draws: the ``proposal_draws`` plain draws from ``q`` (:func:`smc`), with
            ``log_weight = log a(w)`` and ``log_z0 = log Z(u_0)`` as the batched sampler records them
            (``-inf`` weight when budget-cut); not part of ``log_z_hat`` or ``ess``.
        proposal_rows: of ``compute.model_rows``, the rows computed for proposal draws alone (prefixes
            no live particle shared).
    """

    particles: list[Sample]
    log_z_hat: float
    ess: float
    resamples: int
    compute: Compute = field(default_factory=Compute)
    proposal_draws: list[Sample] = field(default_factory=list)
    proposal_rows: int = 0

    def normalized_weights(self) -> np.ndarray:
        """``(N,)`` float64 weights summing to 1 (zeros when every weight is 0)."""
        lw = np.asarray([s.log_weight for s in self.particles], dtype=np.float64)
        if not np.isfinite(lw).any():
            return np.zeros(len(lw))
        w = np.exp(lw - lw.max())
        return w / w.sum()


def _logsumexp_rows(x: np.ndarray) -> np.ndarray:
    top = x.max(axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(top), safe + np.log(np.exp(x - safe[:, None]).sum(axis=1)), -np.inf)


def smc(lm: Any, compiled: Any, prompt_ids: Sequence[int], estimator: Any, *, particles: int, seed: int = 0,
        max_new_tokens: int = 256, ess_threshold: float = 0.5, randomness: Randomness | None = None,
        method: str = "smc", proposal_draws: int = 0) -> SMCResult:
    """Run SMC with ``particles`` particles (see module doc).

    Args:
        estimator: a Φ estimator (``child_phi``; ``gad.phi.make_estimator``), frozen during the run.
        particles: ``N ≥ 1``; seed: see :class:`Randomness`; max_new_tokens: budget, EOS included.
        ess_threshold: resample when ``ESS < ess_threshold · N`` (0: never; 1: every step).
        randomness: override the random choices (tests); it must serve ``particles + proposal_draws``
            slots.
        proposal_draws: ``m ≥ 0`` plain draws from ``q`` decoded alongside the particles (module doc;
            slots ``N … N + m − 1`` of the randomness), returned in :attr:`SMCResult.proposal_draws`.
    Raises:
        InvalidArgumentError: ``particles < 1``, ``proposal_draws < 0`` or ``ess_threshold`` outside
            ``[0, 1]``.
        TokenRejectedError: the matcher refused a token its own mask allowed (a matcher bug).
    """
    if not isinstance(particles, (int, np.integer)) or particles < 1:
        raise InvalidArgumentError(f"particles must be a positive integer, got {particles!r}")
    if not 0.0 <= float(ess_threshold) <= 1.0:
        raise InvalidArgumentError(f"ess_threshold must be in [0, 1], got {ess_threshold!r}")
    if isinstance(proposal_draws, bool) or not isinstance(proposal_draws, (int, np.integer)) or proposal_draws < 0:
        raise InvalidArgumentError(f"proposal_draws must be a non-negative integer, got {proposal_draws!r}")
    n = int(particles)
    total = n + int(proposal_draws)  # slots n … total − 1: the proposal draws
    rand = randomness or Randomness(seed, n, int(proposal_draws))
    vocab = lm.vocab
    eos = np.zeros(lm.vocab_size, dtype=bool)
    eos[list(getattr(compiled, "eos_ids", None) or vocab.eos_ids)] = True
    prompt = [int(t) for t in prompt_ids]
    comp = Compute()
    session = lm.session(prompt, batch=2 if total > 1 else 1)  # batch > 1: the prompt's KV is shared by rows
    if total > 1:
        session.keep_rows([0])
    # groups = distinct live prefixes = session rows
    g_prefix: list[list[int]] = [[]]
    g_matcher: list[Any] = [compiled.matcher()]
    group = np.zeros(total, dtype=np.int64)  # -1: finished / dead
    tokens: list[list[int]] = [[] for _ in range(total)]
    logp_sum = np.zeros(total)
    lw = np.zeros(total)  # particles: SMC log weights; proposal draws: log a(w) so far
    log_phi_prev = np.zeros(total)
    finished = np.zeros(total, dtype=bool)
    eos_of = np.full(total, -1, dtype=np.int64)
    proposal_rows = 0
    log_acc = 0.0
    log_z0 = 0.0
    resamples = 0
    for step in range(max_new_tokens):
        live = np.flatnonzero(group >= 0)
        if not len(live):
            break
        lp = np.asarray(session.logprobs(), dtype=np.float64)
        if step == 0:  # the prompt pass (a toy session's first recomputation counts as one)
            comp.prompt_passes += int(getattr(session, "forward_passes", 0) or 0)
        masks = np.stack([np.asarray(m.mask(), dtype=bool) for m in g_matcher])
        phis = np.stack([np.asarray(estimator.child_phi(g_prefix[g], lp[g], masks[g]), dtype=np.float64)
                         for g in range(len(g_prefix))])
        phis = np.where(masks, phis, 0.0)
        with np.errstate(divide="ignore"):
            logw = lp + np.log(phis)
        logw[~np.isfinite(logw)] = -np.inf
        log_z = _logsumexp_rows(logw)
        if step == 0:
            log_z0 = float(log_z[0])
        else:
            lw[live] += log_z[group[live]] - log_phi_prev[live]
        dead = live[~np.isfinite(log_z[group[live]])]
        lw[dead] = -np.inf
        group[dead] = -1
        alive = bool(np.isfinite(lw[:n]).any())  # some particle still has weight
        if not alive and not (group[n:] >= 0).any():
            break
        # resample before extending: the weights at u_i do not depend on the next token
        if alive and ess_threshold > 0 and log_ess(lw[:n]) < math.log(ess_threshold * n) - 1e-12:
            top = float(lw[:n].max())
            w = np.exp(lw[:n] - top)
            log_acc += top + math.log(float(w.mean()))
            anc = np.concatenate([rand.resample(w / w.sum()), np.arange(n, total)])  # draws keep their own
            group, tokens = group[anc].copy(), [list(tokens[a]) for a in anc]
            logp_sum, log_phi_prev = logp_sum[anc].copy(), log_phi_prev[anc].copy()
            finished, eos_of = finished[anc].copy(), eos_of[anc].copy()
            lw[:n] = 0.0
            resamples += 1
            live = np.flatnonzero(group >= 0)
            if not len(live):
                break
        new_keys: dict[tuple[int, int], int] = {}
        new_group = np.full(total, -1, dtype=np.int64)
        cdfs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for i in live.tolist():
            g = int(group[i])
            if g not in cdfs:
                ids = np.flatnonzero(np.isfinite(logw[g]))
                cdfs[g] = (ids, np.cumsum(np.exp(logw[g, ids] - logw[g, ids].max())))
            ids, cdf = cdfs[g]
            j = rand.token(i, cdf)
            t = int(ids[j])
            logp_sum[i] += lp[g, t]
            if eos[t]:
                finished[i], eos_of[i] = True, t
                continue
            log_phi_prev[i] = math.log(phis[g, t])
            tokens[i].append(t)
            key = (g, t)
            if key not in new_keys:
                new_keys[key] = len(new_keys)
            new_group[i] = new_keys[key]
        group = new_group
        if step == max_new_tokens - 1:  # budget exhausted: particles still live are cut (not in L)
            cut = np.flatnonzero(group >= 0)
            lw[cut] = -np.inf
            group[cut] = -1
            break
        if not new_keys:
            break
        keys = list(new_keys)
        session.keep_rows([g for g, _ in keys])
        session.append([t for _, t in keys])
        comp.model_rows += len(keys)
        comp.model_positions += len(keys)
        if total > n:  # rows that no particle holds were computed for the proposal draws alone
            proposal_rows += len(keys) - len(set(new_group[:n][new_group[:n] >= 0].tolist()))
        matchers = []
        for g, t in keys:
            m = g_matcher[g].fork()
            if not m.accept_token(t):
                raise TokenRejectedError(f"the matcher refused token {t} that its mask allowed")
            matchers.append(m)
        g_prefix = [g_prefix[g] + [t] for g, t in keys]
        g_matcher = matchers
    lwp = lw[:n]
    top = float(lwp.max()) if np.isfinite(lwp).any() else -math.inf
    if math.isfinite(top):
        log_z_hat = log_z0 + log_acc + top + math.log(float(np.exp(lwp - top).mean()))
        ess = math.exp(log_ess(lwp))
    else:
        log_z_hat, ess = -math.inf, 0.0
    out: list[Sample] = []
    draws: list[Sample] = []
    for i in range(total):
        text = vocab.decode(tokens[i]).decode("utf-8", errors="replace")
        acc = log_acc if i < n else 0.0
        s = Sample(text=text, token_ids=list(tokens[i]), logprob=float(logp_sum[i]), finished=bool(finished[i]),
                   method=method if i < n else getattr(estimator, "name", "proposal"),
                   eos_id=int(eos_of[i]) if finished[i] else None, index=i if i < n else i - n,
                   log_weight=float(acc + lw[i]) if finished[i] else -math.inf, log_z0=log_z0, stats={})
        (out if i < n else draws).append(s)
    return SMCResult(particles=out, log_z_hat=log_z_hat, ess=ess, resamples=resamples, compute=comp,
                     proposal_draws=draws, proposal_rows=proposal_rows)


def resampled_draws(result: SMCResult, n: int, seed: int = 0) -> list[Sample]:
    """``n`` unweighted draws from an SMC run's particles, multinomially by their final weights.

    The choice uses ``numpy.random.default_rng([seed, 2**32 - 2])``.  Draws carry ``log_weight = 0``,
    ``log_z0 = None`` and ``stats["particle"]`` (the particle's index).  When every weight is 0 (no
    particle finished within the budget) the draws are particles chosen uniformly, all with
    ``finished=False`` and ``log_weight = -inf`` (budget-cut samples, as any method returns them).
    """
    w = result.normalized_weights()
    n_part = len(result.particles)
    cut = not w.sum() > 0
    idx = np.random.default_rng([int(seed), 2**32 - 2]).choice(n_part, size=n, p=None if cut else w)
    out = []
    for k, i in enumerate(idx.tolist()):
        p = result.particles[i]
        out.append(Sample(text=p.text, token_ids=list(p.token_ids), logprob=p.logprob, finished=p.finished,
                          method=p.method, eos_id=p.eos_id, index=k, log_weight=-math.inf if cut else 0.0,
                          log_z0=None, dead_end=p.dead_end, stats={"particle": i}))
    return out


def smc_sample(lm: Any, compiled: Any, prompt_ids: Sequence[int], *, n: int, seed: int = 0,
               max_new_tokens: int = 256, estimator: Any = "gcd", trie: Any = None, particles: int | None = None,
               ess_threshold: float = 0.5, draws: bool = False, progress: Any = None) -> list[Sample]:
    """``method="smc"``: weighted particles, or ``n`` unweighted draws from them.

    Args:
        n: with ``draws=False`` the number of particles (``particles`` must be None or ``n``); with
            ``draws=True`` the number of draws, resampled multinomially (``default_rng([seed, 2**32 - 2])``)
            from the final weights of one run of ``particles`` (default ``n``) particles.
        estimator: a Φ estimator name (``gcd``, ``asap``, ``onestep``, ``exact``) or object; an ASAp trie
            (``trie``) learns from the run's particles after it ends and is saved when it is a path.
    Returns:
        samples whose ``stats`` hold ``log_z_hat`` (nats), ``ess``, ``resamples``, ``particles`` and the
        run's ``model_rows`` / ``model_positions`` / ``prompt_passes`` shared out per sample; the last one
        holds ``compute``.  Draws carry ``log_weight = 0`` and ``log_z0 = None``; when no particle
        finished within the budget (every weight 0) the draws are particles chosen uniformly, all with
        ``finished=False`` and ``log_weight = -inf`` (budget-cut samples, as any method returns them).
    Raises:
        InvalidArgumentError: ``particles`` given with ``draws=False`` and ≠ ``n``; see :func:`smc`.
    """
    if not draws and particles is not None and particles != n:
        raise InvalidArgumentError(f"smc: particles={particles} differs from n={n}; pass draws=True to "
                                   "resample n draws from the particles")
    n_part = int(particles or n)
    est = estimator
    if isinstance(estimator, str):
        est = make_estimator(estimator, lm, compiled, list(prompt_ids), trie=trie if estimator == "asap" else None,
                             settings={"batch_size": n_part})
    res = smc(lm, compiled, prompt_ids, est, particles=n_part, seed=seed, max_new_tokens=max_new_tokens,
              ess_threshold=ess_threshold, method="smc")
    eos_default = int(lm.vocab.eos_ids[0])
    for s in res.particles:  # the estimator (an ASAp trie) learns from every particle
        est.observe(s.token_ids + ([s.eos_id if s.eos_id is not None else eos_default] if s.finished else []),
                    s.finished)
    flush = getattr(est, "flush", None)
    if callable(flush):
        flush()
    if draws:
        out = resampled_draws(res, n, seed)
    else:
        out = res.particles
    total = res.compute.as_dict()
    for s in out:
        s.stats.update({"log_z_hat": res.log_z_hat, "ess": res.ess, "resamples": res.resamples,
                        "particles": n_part, **{k: v / len(out) for k, v in total.items()}})
        if progress:
            progress.update(1)
    out[-1].stats["compute"] = total
    return out
