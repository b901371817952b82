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
"""

from __future__ import annotations

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
    bar, own_bar = _progress(progress, n)
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


def _progress(progress: Any, n: int) -> tuple[Any, bool]:
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
    gen: list[list[int]] = [[] for _ in rows]
    logprob = np.zeros(b)
    finished = [False] * b
    done = [False] * b
    eos_of = [pad] * b
    dead = [False] * b
    n_tokens = 0
    live = list(range(b))  # batch row held by each session row, in session order
    for _step in range(max_new_tokens):
        active = [r for r in live if not done[r]]
        if not active:
            break
        logp = session.logprobs()  # (len(live), vocab) float64
        lp = logp[[live.index(r) for r in active]] if len(active) < len(live) else logp
        masks = np.stack([np.asarray(matchers[r].mask(), dtype=bool) for r in active])
        phis = np.stack([np.asarray(est.child_phi(gen[r], lp[j], masks[j]), dtype=np.float64)
                         for j, r in enumerate(active)])
        phis = np.where(masks, phis, 0.0)
        w = constrained_weights(lp, phis, temperature, top_k, top_p)
        uniforms = np.array([rngs[r].random() for r in active])
        chosen = draw(w, uniforms)
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
    if bar is not None:
        bar.update(sum(1 for r in range(b) if not done[r]))
    passes = getattr(session, "forward_passes", None)
    out = []
    for r, i in enumerate(rows):
        text = vocab.decode(gen[r]).decode("utf-8", errors="replace")
        stats: dict[str, Any] = {"batch": b, "forward_passes": passes}
        out.append(Sample(text=text, token_ids=list(gen[r]), logprob=float(logprob[r]), finished=finished[r],
                          method=est.name, eos_id=eos_of[r] if finished[r] else None, index=i,
                          dead_end=dead[r], stats=stats))
    return out
