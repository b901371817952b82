"""``gad.sample``: the one dispatcher from a model, a grammar and a prompt to samples.

It resolves the grammar (a :class:`gad.grammar.Grammar`, a file, a shipped name or an already compiled
grammar), encodes the prompt, and hands the request to the registered method
(:mod:`gad.sampling.methods`) or, when ``speculative`` is given, to grammar-faithful speculative
decoding (:mod:`gad.speculative`) verifying against the same Φ-reweighted law.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from gad.engine.compiler import compile as compile_grammar
from gad.engine.protocols import TokenConstraint
from gad.errors import InvalidArgumentError
from gad.grammar import Grammar
from gad.models.base import LanguageModel
from gad.phi.base import PhiEstimator
from gad.phi.registry import make_estimator, parse_estimator
from gad.sampling.methods import get_method
from gad.sampling.rng import check_seed
from gad.sampling.sampler import progress_bar, sample_rows
from gad.speculative.config import Speculation
from gad.speculative.decode import speculative_sample
from gad.types import Sample


def resolve_compiled(lm: LanguageModel, grammar: Grammar | TokenConstraint | str | os.PathLike[str],
                     cache_dir: str | os.PathLike[str] | None = None) -> TokenConstraint:
    """The compiled grammar (a :class:`gad.engine.protocols.TokenConstraint`) for ``grammar`` over ``lm``'s vocabulary.

    Args:
        grammar: a ``gad.Grammar``, a grammar file path or shipped grammar name, or a compiled grammar.
    Raises:
        InvalidArgumentError: the compiled grammar's vocabulary size differs from the model's.
        gad.errors.GrammarError: the grammar file cannot be loaded or compiled.
    """
    if isinstance(grammar, TokenConstraint):
        compiled = grammar
    else:
        if isinstance(grammar, (str, os.PathLike)):
            grammar = Grammar.from_name_or_file(os.fspath(grammar))
        if not isinstance(grammar, Grammar):
            raise InvalidArgumentError(f"grammar must be a gad.Grammar, a compiled grammar, a file or a "
                                       f"shipped grammar's name; got {type(grammar).__name__}")
        compiled = compile_grammar(grammar, lm.vocab, cache_dir=cache_dir)
    if int(compiled.vocab_size) != lm.vocab_size:
        raise InvalidArgumentError(f"compiled grammar has vocabulary size {compiled.vocab_size}, the model "
                                   f"{lm.vocab_size} (argument grammar)")
    return compiled


def _positive(name: str, value: object, none_ok: bool = False) -> None:
    if value is None and none_ok:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")


def sample(lm: LanguageModel, grammar: Grammar | TokenConstraint | str | os.PathLike[str],
           prompt: str | Sequence[int], n: int = 1, method: str | PhiEstimator = "gcd", seed: int = 0,
           max_new_tokens: int = 256, *, trie: Any = None, batch_size: int | None = None, chat: bool = True,
           special_tokens: bool = False,
           temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
           compiled: TokenConstraint | None = None, cache_dir: str | os.PathLike[str] | None = None,
           progress: Any = False, speculative: Speculation | Any = None, draft_k: int = 4, tree: Any = None,
           accept: str = "lossless", log: bool = False, domain: str | None = None,
           options: dict[str, Any] | None = None, first_index: int = 0, on_batch: Any = None) -> list[Sample]:
    """Draw ``n`` grammatical samples from ``lm`` under ``grammar``.

    Args:
        lm: a :class:`gad.models.base.LanguageModel` (``gad.load_model()``, ``gad.ToyLM``, …).
        grammar: a ``gad.Grammar``, a grammar file path, a shipped grammar's name, or a compiled grammar.
        prompt: the prompt text (chat template applied when ``chat`` and the model has one), or
            prompt token ids used as is.
        n: number of samples.
        method: a registered method name (:func:`gad.sampling.methods.method_names`: ``gcd``, ``asap``,
            ``onestep``, ``exact``, …) or a :class:`gad.phi.base.PhiEstimator` object used as Φ̂.
        seed: non-negative; sample ``i`` uses ``numpy.random.default_rng([seed, i])``.
        max_new_tokens: token budget per sample (EOS included); a sample that runs out has
            ``finished=False``.
        trie: ASAp trie (an object or a path, loaded and saved by the estimator); only for methods that
            use one (an error otherwise).
        batch_size: rows decoded together; default ``min(n, 8)``, and 1 for ``"asap"`` (a batch uses the
            Φ̂ estimates as they stood when it started, so a larger ASAp batch learns less often).
        chat: apply the chat template to a text prompt.
        special_tokens: encode control tokens typed in a text prompt (``<|im_end|>``, ...) as control
            tokens; by default they are plain text (no role injection through the prompt).
        temperature, top_k, top_p: only when asked — they change the law being sampled (BRIEF §1).
            Temperature scales ``log p``; top-k / top-p act on the constrained weights ``p^(1/T)·Φ̂``.
        compiled: a compiled grammar to use instead of compiling ``grammar`` (kept for callers that pass
            both; prefer passing the compiled grammar as ``grammar``).
        cache_dir: compile cache directory (``gad.compile``).
        progress: True for a tqdm bar (samples, tokens/s), or a tqdm-like object with ``update``.
        speculative: a :class:`gad.speculative.Speculation`, or a drafter (name such as ``"forced+ngram"``,
            ``"self:8"``, a model path, or a drafter object), in which case ``draft_k``, ``tree``,
            ``accept``, ``log`` and ``domain`` complete it (see :class:`~gad.speculative.Speculation`).
        options: method-specific options (:attr:`gad.sampling.methods.Method.options`):
            ``rs``: ``max_proposals`` (default ``1000·n``), ``trie_cache`` (True);
            ``smc``: ``particles`` (default ``n``), ``ess_threshold`` (0.5), ``proposal`` (Φ estimator:
            ``gcd`` default, ``asap``, ``onestep``, ``exact``), ``draws`` (False: return the weighted
            particles; True: ``n`` draws resampled from them);
            ``mcmc``: ``steps`` (10 per chain; ``n`` chains), ``move`` (``restart``, ``uniform`` default,
            ``priority``), ``trie_cache``; ``asap``: ``trie_cache``.
        first_index: number of the first sample (non-negative; ``gad sample --out`` continues an
            interrupted run with it).  ``on_batch(samples)``: called after each batch (a callable).
            Both only with a Φ-estimator object as ``method`` (without ``speculative``).
    Returns:
        ``n`` :class:`gad.types.Sample`, in order; ``logprob`` sums the **unconstrained** temperature-1
        log-probabilities of the generated tokens, EOS included when finished (nats).
    Raises:
        InvalidArgumentError: an argument is out of range or means nothing with the others (the
            message names it).
        gad.errors.GrammarError: the grammar cannot be loaded or compiled.
        TokenRejectedError: the matcher refused a token its own mask allowed (a matcher bug).
    """
    _positive("n", n)
    _positive("max_new_tokens", max_new_tokens)
    _positive("batch_size", batch_size, none_ok=True)
    seed = check_seed(seed)
    first_index = check_seed(first_index, "first_index")
    if on_batch is not None and not callable(on_batch):
        raise InvalidArgumentError(f"on_batch must be callable, got {type(on_batch).__name__}")
    if (first_index or on_batch is not None) and (not isinstance(method, PhiEstimator) or speculative is not None):
        raise InvalidArgumentError("first_index and on_batch need a Φ-estimator object as method "
                                   "(gad.phi.registry.make_estimator) and no speculative decoding")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not np.isfinite(temperature) \
            or temperature <= 0:
        raise InvalidArgumentError(f"temperature must be > 0, got {temperature!r}")
    _positive("top_k", top_k, none_ok=True)
    if top_p is not None and not 0 < top_p <= 1:
        raise InvalidArgumentError(f"top_p must be in (0, 1], got {top_p!r}")
    spec = _speculation(speculative, draft_k, tree, accept, log, domain)
    compiled = resolve_compiled(lm, compiled if compiled is not None else grammar, cache_dir)
    if isinstance(prompt, str):
        prompt_ids = lm.encode_prompt(prompt, chat=chat, **({"special_tokens": True} if special_tokens else {}))
    else:
        prompt_ids = [int(t) for t in prompt]

    if isinstance(method, PhiEstimator):
        if trie is not None:
            raise InvalidArgumentError("trie: pass the trie to the estimator object (argument method)")
        est: PhiEstimator | None = method
        name = method.name
        bs = int(batch_size or min(n, 8))
    else:
        m = get_method(method)
        name = m.name
        if trie is not None and not m.uses_trie:
            raise InvalidArgumentError(f"trie: method {name} uses no Φ̂ trie (methods with one: asap, …)")
        bs = int(batch_size or m.default_batch or min(n, 8))
        est = None
    opts = dict(options or {})
    allowed = () if est is not None else m.options
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        raise InvalidArgumentError(f"options: {', '.join(unknown)} mean nothing to method {name} "
                                   f"(its options: {', '.join(allowed) or 'none'})")
    if opts and spec is not None:
        raise InvalidArgumentError("options: method options do not apply to speculative decoding")
    settings: dict[str, Any] = {"temperature": float(temperature), "top_k": top_k, "top_p": top_p,
                                "batch_size": bs, "options": opts}

    if spec is not None:
        if temperature != 1.0 or top_k is not None or top_p is not None:
            raise InvalidArgumentError("speculative decoding samples at temperature 1 without top-k/top-p "
                                       "(arguments temperature, top_k, top_p)")
        if est is None:
            est = make_estimator(parse_estimator(name), lm, compiled, prompt_ids, trie=trie, settings=settings)
        out = speculative_sample(lm, compiled, prompt_ids, n=n, seed=seed, max_new_tokens=max_new_tokens,
                                 drafter=spec.drafter, draft_k=spec.k, tree=spec.tree, accept=spec.rule,
                                 estimator=est, log=spec.log, domain=spec.domain)
        est.flush()
        return out
    if est is not None:
        return sample_rows(lm, compiled, est, prompt_ids, n=n, seed=seed, max_new_tokens=max_new_tokens,
                           batch_size=bs, temperature=float(temperature), top_k=top_k, top_p=top_p,
                           progress=progress, first_index=first_index, on_batch=on_batch)
    bar, own_bar = progress_bar(progress, n)  # (the registered runners take a bar object, not True)
    try:
        return m.run(lm, compiled, prompt_ids, n=n, seed=seed, max_new_tokens=max_new_tokens, batch_size=bs,
                     trie=trie, settings=settings, progress=bar)
    finally:
        if own_bar:
            bar.close()


def _speculation(speculative: Any, draft_k: int, tree: Any, accept: str, log: bool,
                 domain: str | None) -> Speculation | None:
    if speculative is None:
        if log or domain is not None:
            raise InvalidArgumentError("log and domain are acceptance-log options of speculative decoding "
                                       "(argument speculative is None)")
        return None
    if isinstance(speculative, Speculation):
        return speculative
    return Speculation(drafter=speculative, k=draft_k, rule=accept, tree=tree, log=bool(log), domain=domain)
