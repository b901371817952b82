"""The batched sampler of GCD and Φ-reweighted sampling (GAD: ASAp, OneStep, exact).

At every step each row draws the next token ``t`` from

    Q̂(t | u) ∝ p(t | u) · Φ̂(u·t)

where ``p`` is the model's next-token distribution (temperature 1 over the whole vocabulary unless
the caller asks otherwise) and ``Φ̂`` comes from a Φ estimator (BRIEF §2–3).  With the 0/1 viability
indicator this is grammar-constrained decoding; with the ASAp trie (Park et al., "Grammar-Aligned
Decoding", NeurIPS 2024, arXiv 2405.21047) it converges to the grammar-conditioned law ``Q*``.

Rows are decoded in batches through the model's :class:`gad.models.base.DecodeSession` (a KV cache for
real models).  Each sample ``i`` draws its uniforms from its own generator ``numpy.random.default_rng([seed,
i])`` (:func:`gad.sampling.rng.sample_rng`), so a sample does not depend on which batch it lands in (up
to floating-point noise of batched forward passes).  ASAp: a batch of ``B`` samples uses the estimates as
they stood when the batch started; the trie learns from the batch's samples after it ends
(``batch_size=1`` is the paper's sequential algorithm).

**Importance weights** (BRIEF §6).  At temperature 1 without top-k / top-p every sample records
``log_z0 = log Z(u_0)`` and ``log_weight = log a(w) = Σ_{i≥1} [log Z(u_i) − log Φ̂(u_i)]`` (nats), with
``Z(u) = Σ_t p(t|u) Φ̂(u·t)`` the row's normaliser, already at hand as the sum of its weights, and
``Φ̂(u_i)`` the value of the chosen token; ``-inf`` when the sample is unfinished.  Otherwise both are
None (the law sampled is not ``p · Φ̂``).  **Compute**: ``stats["model_rows"]`` counts the next-token
distributions the model computed for the sample (one per step after the first, which comes from the
prompt pass, plus the estimator's own calls: OneStep's look-ahead rows), ``stats["model_positions"]`` the positions it fed, ``stats["prompt_passes"]`` the prompt
passes (charged to the first sample of a batch).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gad.engine.protocols import TokenConstraint
from gad.errors import TokenRejectedError
from gad.models.base import LanguageModel
from gad.phi.base import PhiEstimator
from gad.sampling.dist import constrained_weights, draw
from gad.sampling.rng import sample_rng
from gad.types import Sample


def sample_rows(lm: LanguageModel, compiled: TokenConstraint, estimator: PhiEstimator,
                prompt_ids: Sequence[int], *, n: int, seed: int, max_new_tokens: int, batch_size: int,
                temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                progress: Any = None, first_index: int = 0,
                on_batch: Callable[[list[Sample]], None] | None = None) -> list[Sample]:
    """Draw ``n`` samples from ``Q̂ ∝ p^(1/T) · Φ̂`` in batches of ``batch_size`` rows.

    The estimator learns (``observe``) from each batch's samples after the batch ends and is flushed
    at the end.  Arguments are checked by :func:`gad.api.sample`, the public entry point.
    ``first_index``: the samples are numbers ``first_index … first_index + n − 1`` of the run (sample
    ``i`` draws from ``sample_rng(seed, i)``), so a run can be continued where it stopped.
    ``on_batch(samples)`` is called after each batch has been learnt from (to write or checkpoint them).
    Returns:
        ``n`` :class:`gad.types.Sample`, in order.
    Raises:
        TokenRejectedError: the matcher refused a token its own mask allowed (a matcher bug).
    """
    bar, own_bar = progress_bar(progress, n)
    samples: list[Sample] = []
    try:
        end = first_index + n
        for start in range(first_index, end, batch_size):
            rows = list(range(start, min(end, start + batch_size)))
            batch = _sample_batch(lm, compiled, estimator, list(prompt_ids), rows, seed, max_new_tokens,
                                  temperature, top_k, top_p, bar)
            for smp in batch:  # the estimates change only after the whole batch (documented above)
                estimator.observe(smp.token_ids + ([smp.eos_id] if smp.finished and smp.eos_id is not None
                                                   else []), smp.finished)
            samples.extend(batch)
            if on_batch is not None:
                on_batch(batch)
    finally:
        if own_bar:
            bar.close()
    estimator.flush()
    return samples


def progress_bar(progress: Any, n: int) -> tuple[Any, bool]:
    """``(bar, owned)`` for a ``progress`` argument: a new tqdm bar over ``n`` samples for True (owned:
    the caller closes it), the object itself for a tqdm-like one, None for a false value."""
    if progress is True:
        from tqdm.auto import tqdm

        return tqdm(total=n, desc="sampling", unit="sample"), True
    if progress:
        return progress, False
    return None, False


def _sample_batch(lm: LanguageModel, compiled: TokenConstraint, est: PhiEstimator, prompt_ids: list[int],
                  rows: list[int], seed: int, max_new_tokens: int, temperature: float,
                  top_k: int | None, top_p: float | None, bar: Any) -> list[Sample]:
    """Decode one batch of rows to the end (EOS or budget)."""
    b = len(rows)
    vocab = lm.vocab
    eos = np.zeros(lm.vocab_size, dtype=bool)
    eos[list(vocab.eos_ids)] = True
    pad = int(vocab.eos_ids[0])
    rngs = [sample_rng(seed, i) for i in rows]
    matchers = [compiled.matcher() for _ in rows]
    t0 = time.perf_counter()  # the progress bar's tokens/s counts the prompt pass too
    session = lm.session(prompt_ids, batch=b)
    prompt_passes = 0
    gen: list[list[int]] = [[] for _ in rows]
    logprob = np.zeros(b)
    finished = [False] * b
    done = [False] * b
    eos_of = [pad] * b
    dead = [False] * b
    n_tokens = 0
    live = list(range(b))  # batch row held by each session row, in session order
    weighted = temperature == 1.0 and top_k is None and top_p is None
    log_z0 = np.zeros(b)
    log_a = np.zeros(b)
    rows_of = np.zeros(b, dtype=np.int64)
    est_rows = np.zeros(b, dtype=np.int64)
    est_pos = np.zeros(b, dtype=np.int64)
    for _step in range(max_new_tokens):
        active = [r for r in live if not done[r]]
        if not active:
            break
        logp = session.logprobs()  # (len(live), vocab) float64
        if _step == 0:  # the prompt pass (a toy session's first recomputation counts as one)
            prompt_passes = int(getattr(session, "forward_passes", 0) or 0)
        lp = logp[[live.index(r) for r in active]] if len(active) < len(live) else logp
        masks = np.stack([np.asarray(matchers[r].mask(), dtype=bool) for r in active])
        phi_rows = []
        for j, r in enumerate(active):
            before = (getattr(est, "model_rows", 0), getattr(est, "model_positions", 0))
            phi_rows.append(np.asarray(est.child_phi(gen[r], lp[j], masks[j]), dtype=np.float64))
            est_rows[r] += getattr(est, "model_rows", 0) - before[0]  # an estimator's own model calls
            est_pos[r] += getattr(est, "model_positions", 0) - before[1]
        phis = np.stack(phi_rows)
        phis = np.where(masks, phis, 0.0)
        w = constrained_weights(lp, phis, temperature, top_k, top_p)
        uniforms = np.array([rngs[r].random() for r in active])
        chosen = draw(w, uniforms)
        if weighted:  # log Z(u) = log Σ p·Φ̂; w = p·Φ̂ / c per row, and c is read off the chosen token
            wsum = w.sum(axis=1)
            for j, r in enumerate(active):
                t = int(chosen[j])
                if w[j, t] > 0:
                    lz = float(lp[j, t] + math.log(phis[j, t]) - math.log(w[j, t]) + math.log(wsum[j]))
                else:
                    lz = -math.inf
                if _step == 0:
                    log_z0[r] = lz
                else:
                    log_a[r] += lz
        feed = {r: pad for r in live}
        for j, r in enumerate(active):
            t = int(chosen[j])
            if w[j, t] <= 0:  # no allowed token with positive weight: a dead end
                dead[r] = done[r] = True
                continue
            logprob[r] += lp[j, t]
            n_tokens += 1
            if eos[t]:
                finished[r] = done[r] = True
                eos_of[r] = t
                continue
            if not matchers[r].accept_token(t):
                raise TokenRejectedError(f"the matcher refused token {t} that its mask allowed "
                                         f"(prefix {gen[r][-8:]}...)")
            if weighted:
                log_a[r] -= math.log(phis[j, t])
            gen[r].append(t)
            feed[r] = t
        if bar is not None:
            if hasattr(bar, "set_postfix_str"):
                rate = n_tokens / max(time.perf_counter() - t0, 1e-9)
                bar.set_postfix_str(f"{rate:.1f} tok/s", refresh=False)
            bar.update(sum(1 for r in active if done[r]))
        if all(done) or _step == max_new_tokens - 1:
            break
        if any(done[r] for r in live):  # finished rows leave the batch: cheaper steps
            session.keep_rows([i for i, r in enumerate(live) if not done[r]])
            live = [r for r in live if not done[r]]
        session.append([feed[r] for r in live])
        rows_of[live] += 1
    if bar is not None:
        bar.update(sum(1 for r in range(b) if not done[r]))
    passes = getattr(session, "forward_passes", None)
    out = []
    for r, i in enumerate(rows):
        text = vocab.decode(gen[r]).decode("utf-8", errors="replace")
        stats: dict[str, Any] = {"batch": b, "forward_passes": passes, "model_rows": int(rows_of[r] + est_rows[r]),
                                 "model_positions": int(rows_of[r] + est_pos[r]), "prompt_passes": prompt_passes if r == 0 else 0}
        out.append(Sample(text=text, token_ids=list(gen[r]), logprob=float(logprob[r]), finished=finished[r],
                          method=est.name, eos_id=eos_of[r] if finished[r] else None, index=i,
                          dead_end=dead[r], stats=stats,
                          log_weight=(float(log_a[r]) if finished[r] else -math.inf) if weighted else None,
                          log_z0=float(log_z0[r]) if weighted else None))
    return out
