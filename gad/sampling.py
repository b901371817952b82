"""Grammar-constrained sampling: GCD, and Φ-reweighted sampling (ASAp, OneStep, exact).

At every step each row draws the next token ``t`` from

    Q̂(t | u) ∝ p(t | u) · Φ̂(u·t)

where ``p`` is the model's next-token distribution (temperature 1 over the whole vocabulary unless
the caller asks otherwise) and ``Φ̂`` comes from a Φ estimator (BRIEF §2–3).  With the 0/1 viability
indicator (``method="gcd"``) this is grammar-constrained decoding; with the ASAp trie (Park et al.,
"Grammar-Aligned Decoding", NeurIPS 2024, arXiv 2405.21047) it converges to the grammar-conditioned
law ``Q*``.

Rows are decoded in batches through the model's :class:`gad.lm.DecodeSession` (a KV cache for real
models).  Each sample ``i`` draws its uniforms from its own generator ``numpy.random.default_rng([seed,
i])``, so a sample does not depend on which batch it lands in (up to floating-point noise of batched
forward passes).  ASAp: a batch of ``B`` samples uses the estimates as they stood when the batch
started; the trie learns from the batch's samples after it ends (``batch_size=1`` is the paper's
sequential algorithm).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, TokenRejectedError
from .lm import LanguageModel
from .phi.base import IndicatorPhi, PhiEstimator
from .results import Sample

METHODS = ("gcd", "indicator", "asap", "onestep", "exact")


def _is_compiled(obj: Any) -> bool:
    return hasattr(obj, "matcher") and hasattr(obj, "vocab") and not isinstance(obj, (str, os.PathLike))


def resolve_compiled(lm: LanguageModel, grammar: Any, compiled: Any = None,
                     cache_dir: str | os.PathLike[str] | None = None) -> Any:
    """The :class:`gad.compiler.CompiledGrammar` for ``grammar`` over ``lm``'s vocabulary.

    Args:
        grammar: a ``gad.Grammar``, a grammar file path, or an already compiled grammar.
        compiled: a compiled grammar to use as is (wins over ``grammar``).
    Raises:
        InvalidArgumentError: the compiled grammar's vocabulary size differs from the model's.
        gad.errors.GrammarError: the grammar file cannot be loaded or compiled.
    """
    if compiled is None and _is_compiled(grammar):
        compiled = grammar
    if compiled is None:
        import gad

        if isinstance(grammar, (str, os.PathLike)):
            grammar = gad.Grammar.from_file(grammar)
        compiled = gad.compile(grammar, lm.vocab, cache_dir=cache_dir)
    size = getattr(compiled, "vocab_size", None)
    if size is not None and int(size) != lm.vocab_size:
        raise InvalidArgumentError(
            f"compiled grammar has vocabulary size {size}, the model {lm.vocab_size} (argument compiled)")
    return compiled


def _check_args(n: int, max_new_tokens: int, batch_size: int | None, temperature: float,
                top_k: int | None, top_p: float | None, method: str) -> None:
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidArgumentError(f"n must be a positive integer, got {n!r}")
    if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 1:
        raise InvalidArgumentError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if batch_size is not None and (not isinstance(batch_size, (int, np.integer)) or batch_size < 1):
        raise InvalidArgumentError(f"batch_size must be a positive integer, got {batch_size!r}")
    if not np.isfinite(temperature) or temperature <= 0:
        raise InvalidArgumentError(f"temperature must be > 0, got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, (int, np.integer)) or top_k < 1):
        raise InvalidArgumentError(f"top_k must be a positive integer, got {top_k!r}")
    if top_p is not None and not 0 < top_p <= 1:
        raise InvalidArgumentError(f"top_p must be in (0, 1], got {top_p!r}")
    if not isinstance(method, str) or method not in METHODS:
        raise InvalidArgumentError(f"method must be one of {', '.join(METHODS)}; got {method!r}")


def make_estimator(method: str, lm: LanguageModel, compiled: Any, prompt_ids: Sequence[int],
                   trie: Any = None, settings: dict[str, Any] | None = None) -> PhiEstimator:
    """The Φ estimator for ``method``: :class:`IndicatorPhi` for ``"gcd"``, else ``gad.phi.make_estimator``."""
    if method in ("gcd", "indicator"):
        return IndicatorPhi()
    from . import phi

    factory = getattr(phi, "make_estimator", None)
    if factory is None:
        raise InvalidArgumentError(f"method {method!r} is not available in this build (gad.phi.make_estimator)")
    return factory(method, lm=lm, compiled=compiled, prompt_ids=list(prompt_ids), trie=trie,
                   settings=settings or {})


def constrained_weights(logp: np.ndarray, phi: np.ndarray, temperature: float = 1.0,
                        top_k: int | None = None, top_p: float | None = None) -> np.ndarray:
    """Unnormalised sampling weights ``p(t)^(1/T) · Φ̂(t)``, rescaled so each row's maximum is 1.

    Computed in log space (no underflow when every allowed token is improbable).  ``top_k`` / ``top_p``
    then keep the ``k`` largest weights / the smallest set holding ``top_p`` of the constrained mass, so
    they never remove every allowed token.
    Args:
        logp: ``(batch, vocab)`` float64 log-probabilities (nats).
        phi: ``(batch, vocab)`` float64 in ``[0, 1]``.
    Returns:
        ``(batch, vocab)`` float64 ≥ 0; a row with no allowed token is all zeros.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        logw = logp / temperature + np.log(phi)
    logw = np.where(np.isnan(logw), -np.inf, logw)
    top = logw.max(axis=1, keepdims=True)
    safe_top = np.where(np.isfinite(top), top, 0.0)
    w = np.exp(logw - safe_top)
    w[~np.isfinite(top[:, 0])] = 0.0
    if top_k is not None and top_k < w.shape[1]:
        kth = -np.partition(-w, top_k - 1, axis=1)[:, top_k - 1: top_k]
        w = np.where(w >= kth, w, 0.0)
    if top_p is not None and top_p < 1:
        order = np.argsort(-w, axis=1)
        sw = np.take_along_axis(w, order, axis=1)
        csum = np.cumsum(sw, axis=1)
        total = csum[:, -1:]
        keep_sorted = (csum - sw) < top_p * total  # keep until the mass before a token reaches top_p
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=1)
        w = np.where(keep, w, 0.0)
    return w


def draw(weights: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw of one index per row: ``(batch, vocab)`` weights, ``(batch,)`` uniforms in [0, 1).

    Returns ``(batch,)`` int64 indices; a zero-weight index is never returned for a row with mass.
    """
    cdf = np.cumsum(weights, axis=1)
    target = uniforms[:, None] * cdf[:, -1:]
    idx = (cdf <= target).sum(axis=1)
    return np.minimum(idx, weights.shape[1] - 1).astype(np.int64)


def sample(lm: LanguageModel, grammar: Any, prompt: str | Sequence[int], n: int = 1, method: str = "gcd",
           seed: int = 0, max_new_tokens: int = 256, *, trie: Any = None, batch_size: int | None = None,
           chat: bool = True, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
           compiled: Any = None, cache_dir: str | os.PathLike[str] | None = None, progress: Any = False,
           speculative: Any = None, draft_k: int = 4, tree: Any = None, accept: str = "lossless",
           log: bool = False, domain: str | None = None) -> list[Sample]:
    """Draw ``n`` grammatical samples from ``lm`` under ``grammar``.

    Args:
        lm: a :class:`gad.lm.LanguageModel` (``gad.load_model()``, ``gad.ToyLM``, …).
        grammar: a ``gad.Grammar``, a grammar file path, or a compiled grammar.
        prompt: the prompt text (chat template applied when ``chat`` and the model has one), or
            prompt token ids used as is.
        n: number of samples.
        method: ``"gcd"`` (Φ̂ = mask; alias ``"indicator"``), ``"asap"``, ``"onestep"`` or ``"exact"`` (see ``gad.phi``).
        seed: sample ``i`` uses ``numpy.random.default_rng([seed, i])``.
        max_new_tokens: token budget per sample (EOS included); a sample that runs out has
            ``finished=False``.
        trie: ASAp trie (an object or a path, loaded and saved by the estimator).
        batch_size: rows decoded together; default ``min(n, 8)``, and 1 for ``"asap"`` (a batch uses the
            Φ̂ estimates as they stood when it started, so a larger ASAp batch learns less often).
        chat: apply the chat template to a text prompt.
        temperature, top_k, top_p: only when asked — they change the law being sampled (BRIEF §1).
            Temperature scales ``log p``; top-k / top-p act on the constrained weights ``p^(1/T)·Φ̂``.
        compiled: a compiled grammar to use instead of compiling ``grammar``.
        cache_dir: compile cache directory (``gad.compile``).
        progress: True for a tqdm bar (samples, tokens/s), or a tqdm-like object with ``update``.
        speculative, draft_k, tree, accept: speculative decoding (``gad.speculative``); ``speculative``
            names the drafter (``"self[:L]"``, ``"self-greedy[:L]"``, ``"forced"``, ``"ngram[:N]"``, a model
            path, several joined by ``+`` such as ``"forced+ngram"``, or a drafter object).
        log, domain: speculative decoding only — ``log=True`` keeps one
            :class:`gad.speculative.stats.AcceptanceRecord` per verified position in ``stats["log"]``
            (for :func:`gad.speculative.stats.summarize`); ``domain`` labels those records.  Passing
            either without ``speculative`` is an error.
    Returns:
        ``n`` :class:`gad.results.Sample`, in order; ``logprob`` sums the **unconstrained** temperature-1
        log-probabilities of the generated tokens, EOS included when finished (nats).
    Raises:
        InvalidArgumentError: an argument is out of range (the message names it).
        gad.errors.GrammarError: the grammar cannot be loaded or compiled.
        TokenRejectedError: the matcher refused a token its own mask allowed (a matcher bug).
    """
    _check_args(n, max_new_tokens, batch_size, temperature, top_k, top_p, method)
    compiled = resolve_compiled(lm, grammar, compiled, cache_dir)
    if isinstance(prompt, str):
        prompt_ids = lm.encode_prompt(prompt, chat=chat)
    else:
        prompt_ids = [int(t) for t in prompt]
    # ASAp learns after each batch: its default batch is 1, the paper's sequential algorithm, so that
    # every sample uses the estimates refined by all earlier ones; other methods batch up to 8 rows
    bs = int(batch_size or (1 if method == "asap" else min(n, 8)))
    settings = {"temperature": float(temperature), "top_k": top_k, "top_p": top_p, "batch_size": bs}
    if speculative is None and (log or domain is not None):
        raise InvalidArgumentError("log and domain are acceptance-log options of speculative decoding "
                                   "(argument speculative is None)")
    est = make_estimator(method, lm, compiled, prompt_ids, trie=trie, settings=settings)

    if speculative is not None:
        if temperature != 1.0 or top_k is not None or top_p is not None:
            raise InvalidArgumentError("speculative decoding samples at temperature 1 without top-k/top-p "
                                       "(arguments temperature, top_k, top_p)")
        from .speculative import speculative_sample

        out = speculative_sample(lm, compiled, prompt_ids, n=n, seed=seed, max_new_tokens=max_new_tokens,
                                 drafter=speculative, draft_k=draft_k, tree=tree, accept=accept,
                                 estimator=est, log=bool(log), domain=domain)
        _flush(est)
        return out

    bar, own_bar = _progress(progress, n)
    samples: list[Sample] = []
    try:
        for start in range(0, n, bs):
            rows = list(range(start, min(n, start + bs)))
            batch = _sample_batch(lm, compiled, est, prompt_ids, rows, seed, max_new_tokens,
                                  temperature, top_k, top_p, method, bar)
            for s in batch:  # the estimates change only after the whole batch (documented above)
                est.observe(s.token_ids + ([s.stats["eos_id"]] if s.finished else []), s.finished)
            samples.extend(batch)
    finally:
        if own_bar:
            bar.close()
    _flush(est)
    return samples


def _flush(est: Any) -> None:
    flush = getattr(est, "flush", None)
    if callable(flush):
        flush()


def _progress(progress: Any, n: int) -> tuple[Any, bool]:
    if progress is True:
        from tqdm.auto import tqdm

        return tqdm(total=n, desc="sampling", unit="sample"), True
    if progress:
        return progress, False
    return None, False


def _sample_batch(lm: LanguageModel, compiled: Any, est: PhiEstimator, prompt_ids: list[int],
                  rows: list[int], seed: int, max_new_tokens: int, temperature: float,
                  top_k: int | None, top_p: float | None, method: str, bar: Any) -> list[Sample]:
    """Decode one batch of rows to the end (EOS or budget)."""
    b = len(rows)
    vocab = lm.vocab
    eos = np.zeros(lm.vocab_size, dtype=bool)
    eos[list(vocab.eos_ids)] = True
    pad = int(vocab.eos_ids[0])
    rngs = [np.random.default_rng([int(seed), int(i)]) for i in rows]
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
    can_drop = callable(getattr(session, "keep_rows", None))
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
        if can_drop and any(done[r] for r in live):  # finished rows leave the batch: cheaper steps
            session.keep_rows([i for i, r in enumerate(live) if not done[r]])
            live = [r for r in live if not done[r]]
        session.append([feed[r] for r in live])
    if bar is not None:
        bar.update(sum(1 for r in range(b) if not done[r]))
    passes = getattr(session, "forward_passes", None)
    out = []
    for r, i in enumerate(rows):
        text = vocab.decode(gen[r]).decode("utf-8", errors="replace")
        stats: dict[str, Any] = {"eos_id": eos_of[r], "index": i, "batch": b, "forward_passes": passes}
        if dead[r]:
            stats["dead_end"] = True
        out.append(Sample(text=text, token_ids=list(gen[r]), logprob=float(logprob[r]),
                          finished=finished[r], method=getattr(est, "name", method) or method, stats=stats))
    return out
