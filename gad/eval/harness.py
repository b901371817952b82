"""The evaluation harness: tasks × methods × N samples → per-sample JSONL, summary JSON/CSV, plots.

``run(tasks, methods, n, model=…, out_dir=…)`` (BRIEF §5).  For each task the model samples ``n``
outputs per method through ``gad.sample`` (or a function registered with :func:`register_method`, the
hook for the speculative methods).  Exact tasks compare against the enumerated ``Q*`` (KL, TV over the
number of samples); open tasks use the GAD paper's union estimator (Park et al., NeurIPS 2024,
arXiv 2405.21047) with a sliding window.  Files written (each atomically) under ``out_dir``:

* ``samples.jsonl`` — one row per sample: task, method, index, text, token_ids, logprob (nats),
  finished, valid (checker; None without one), target_prob (``Q*`` or ideal probability of the text);
* ``summary.json`` — per task and method: n, share_finished, mean_logprob, valid_rate, kl_at
  {100, 500, 1000}, kl_final, tv_final (exact), expectation_final, the curves; per exact task ``Z``
  and the enumeration bound;
  ``seconds``, ``model_rows`` / ``model_positions`` / ``prompt_passes`` (:func:`compute_fields`);
  ``ess``, ``log_z_hat``, ``kl_snis`` / ``tv_snis`` for methods whose samples carry importance weights
  (:func:`weight_fields`: gcd, asap, onestep, exact, rs, smc, mcmc);
  speculative methods (``spec-gcd``, ``spec-asap``, ``spec-exact``) add their acceptance statistics
  (``acceptance_rate``, ``mean_accepted``, ``mean_accepted_with_bonus``, ``passes_per_token``,
  ``certified_share``, ``drafter``, ``rule``, ``draft_k``; see :func:`acceptance_fields`);
* ``summary.csv`` — one row per (task, method) with the scalar columns;
* ``plots/<task>_kl.png`` and ``plots/<task>_expectation.png``.

Speculative methods (BRIEF §4) run :func:`gad.speculative.speculative_sample` with a drafter (default
``forced+ngram``), an acceptance rule (default ``lossless``) and ``draft_k`` (default 4), all settable
through ``run(..., speculative={"drafter": …, "accept": …, "draft_k": …})``:

* ``spec-gcd`` — mask-only verification (``IndicatorPhi``): samples the GCD law μ_proj (lossless rule);
* ``spec-asap`` — verification against ``p · mask · Φ̂`` with the ASAp trie (``gad.phi.make_estimator``),
  which learns from each finished sample as non-speculative ASAp does (its trie is kept apart from
  ``asap``'s, under ``tries/<task>__spec-asap.trie``);
* ``spec-exact`` — the exact Φ (enumerated to the task's ``exact_max_len`` on exact tasks): samples
  ``Q*`` under the lossless rule.

Exact-task truncation: ``Q*`` is enumerated up to ``Task.exact_max_len`` tokens; samples longer than
that are outside its support and are excluded from KL/TV (their share is reported as
``share_outside_support``).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import inspect
import io
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gad.api import sample
from gad.engine.protocols import TokenConstraint
from gad.errors import InvalidArgumentError, ResultsFileError
from gad.eval import metrics
from gad.eval.tasks import Task, get_task
from gad.fileio import atomic_write
from gad.models.hf import load_model
from gad.phi.exact import enumerate_language
from gad.phi.registry import make_estimator
from gad.sampling.methods import get_method
from gad.sampling.methods import method_names as sampling_method_names
from gad.sampling.rng import NumpyRng
from gad.speculative.decode import speculative_sample
from gad.speculative.drafters import make_drafter
from gad.speculative.stats import summarize
from gad.testing.toys import toy_model
from gad.types import Sample

MethodFn = Callable[..., list[Sample]]
_METHODS: dict[str, MethodFn] = {}


def register_method(name: str, fn: MethodFn) -> None:
    """Register a sampling method for the harness.

    ``fn(lm, compiled, prompt_ids, *, n, seed, max_new_tokens, batch_size, trie, progress)`` must return
    ``n`` :class:`gad.results.Sample` (``logprob`` under the unconstrained model).  A function that also
    takes a ``speculative`` keyword gets the run's speculative settings (``drafter``, ``accept``,
    ``draft_k``, and ``exact_max_len`` on exact tasks).  Samples whose ``stats`` carry an acceptance
    ``log`` get acceptance statistics in the summary (:func:`acceptance_fields`).
    """
    _METHODS[name] = fn


def _gad_method(name: str) -> MethodFn:
    def fn(lm: Any, compiled: TokenConstraint, prompt_ids: Sequence[int], *, n: int, seed: int, max_new_tokens: int,
           batch_size: int | None, trie: Any, progress: Any) -> list[Sample]:
        return sample(lm, compiled, list(prompt_ids), n=n, method=name, seed=seed,
                      max_new_tokens=max_new_tokens, trie=trie if get_method(name).uses_trie else None,
                      batch_size=batch_size, progress=progress)

    return fn


for _m in sampling_method_names():  # every method of the sampling registry (gad.sampling.methods)
    register_method(_m, _gad_method(_m))

SPEC_DEFAULTS: dict[str, Any] = {"drafter": "forced+ngram", "accept": "lossless", "draft_k": 4}
_STEP_STRIDE = 1_000_000  # acceptance-log step ids: sample i uses i * _STEP_STRIDE + its step number


def _spec_method(phi: str) -> MethodFn:
    """A speculative method verifying against ``p · mask · Φ̂`` with the Φ estimator ``phi``.

    Extra keyword ``speculative``: ``{"drafter", "accept", "draft_k", "exact_max_len"}`` (defaults
    :data:`SPEC_DEFAULTS`).  Samples carry ``stats["log"]`` (acceptance records; steps renumbered so they
    are unique over the run).  ``batch_size`` is ignored (one sample at a time).
    """

    def fn(lm: Any, compiled: TokenConstraint, prompt_ids: Sequence[int], *, n: int, seed: int, max_new_tokens: int,
           batch_size: int | None, trie: Any, progress: Any, speculative: dict[str, Any] | None = None,
           ) -> list[Sample]:
        opts = {**SPEC_DEFAULTS, **(speculative or {})}
        settings: dict[str, Any] = {"batch_size": 1}
        if phi == "exact" and opts.get("exact_max_len") is not None:
            settings["exact_max_len"] = int(opts["exact_max_len"])
        est = make_estimator(phi, lm, compiled, list(prompt_ids),
                             trie=trie if phi == "asap" else None, settings=settings)
        drafter = make_drafter(opts["drafter"], lm, int(opts["draft_k"]))
        rng = NumpyRng(seed)
        out: list[Sample] = []
        for i in range(n):
            s = speculative_sample(lm, compiled, prompt_ids, n=1, seed=rng, max_new_tokens=max_new_tokens,
                                   drafter=drafter, draft_k=int(opts["draft_k"]), accept=opts["accept"],
                                   estimator=est, log=True, domain=None)[0]
            s.stats["log"] = [dataclasses.replace(r, step=i * _STEP_STRIDE + r.step) for r in s.stats["log"]]
            s.method = f"spec-{phi}"
            out.append(s)
            if progress:
                progress.update(1)
        flush = getattr(est, "flush", None)
        if callable(flush):
            flush()
        return out

    fn.speculative = True  # type: ignore[attr-defined]
    return fn


for _m in ("gcd", "asap", "exact"):
    register_method(f"spec-{_m}", _spec_method(_m))


def acceptance_fields(samples: Sequence[Sample]) -> dict[str, Any]:
    """Acceptance statistics of speculative samples (empty dict when none carries an acceptance log).

    * ``acceptance_rate`` — accepted / reached draft positions (:func:`gad.speculative.stats.summarize`);
    * ``mean_accepted`` / ``mean_accepted_with_bonus`` — accepted draft tokens per verification step,
      without / with the target's own token (correction or bonus) that ends every step;
    * ``passes_per_token`` — target forward passes (prompt pass included) / generated tokens (EOS counted);
    * ``certified_share`` — share of accepted positions whose ``KL(p̃‖q) < C_p`` (the rule's
      certificate); None under the lossless rule, which has no certificate;
    * ``drafted``, ``accepted``, ``target_passes``, ``tokens`` — totals; ``drafter``, ``rule``, ``draft_k``.
    """
    logs = [s.stats.get("log") for s in samples]
    if not samples or any(x is None for x in logs):
        return {}

    recs = [r for x in logs for r in x]  # type: ignore[union-attr]
    summ = summarize(recs, by=None).get("all")
    passes = sum(int(s.stats.get("target_passes", 0)) for s in samples)
    tokens = sum(int(s.stats.get("tokens", len(s.token_ids) + int(s.finished))) for s in samples)
    first = samples[0].stats
    return {
        "acceptance_rate": _finite(summ.acceptance_rate) if summ else None,
        "mean_accepted": _finite(summ.mean_accepted) if summ else None,
        "mean_accepted_with_bonus": _finite(summ.mean_accepted_with_bonus) if summ else None,
        "passes_per_token": passes / tokens if tokens else None,
        "certified_share": _finite(summ.certified_share_of_accepted) if summ else None,
        "drafted": sum(int(s.stats.get("drafted", 0)) for s in samples),
        "accepted": sum(int(s.stats.get("accepted", 0)) for s in samples),
        "target_passes": passes, "tokens": tokens,
        "drafter": first.get("drafter"), "rule": first.get("rule"), "draft_k": first.get("draft_k"),
    }


SPEC_COLUMNS = ("acceptance_rate", "mean_accepted", "mean_accepted_with_bonus", "passes_per_token",
                "certified_share", "drafter", "rule", "draft_k")


COMPUTE_COLUMNS = ("model_rows", "model_positions", "prompt_passes")
WEIGHT_COLUMNS = ("kl_snis", "tv_snis", "ess", "log_z_hat")


def compute_fields(samples: Sequence[Sample]) -> dict[str, Any]:
    """Model compute of a method's run: ``model_rows`` (next-token distributions the model computed,
    prompt passes excluded), ``model_positions`` (token positions processed, cache extensions included)
    and ``prompt_passes`` — the run's total (``stats["compute"]`` of its last sample) when the sampler
    reports one, else the sum of the samples' own counts; None when the sampler counts nothing."""
    if not samples:
        return {}
    total = samples[-1].stats.get("compute")
    if isinstance(total, dict):
        return {k: int(total.get(k, 0)) for k in COMPUTE_COLUMNS}
    if not any("model_rows" in s.stats for s in samples):
        return {k: None for k in COMPUTE_COLUMNS}
    return {k: int(round(sum(float(s.stats.get(k, 0) or 0) for s in samples))) for k in COMPUTE_COLUMNS}


def weight_fields(samples: Sequence[Sample], target: dict[str, float] | None) -> dict[str, Any]:
    """Self-normalised importance estimates from the samples' weights (BRIEF §6).

    Sample ``i`` weighs ``w_i = exp(log_z0_i + log_weight_i)`` (``log_z0`` read as 0 when None; 0 when
    unfinished).  ``ess = (Σ w)² / Σ w²``; ``log_z_hat = log mean(w)`` (nats; an unbiased estimate of
    ``Z_G`` in ``exp``, reported when every sample records ``log_z0``; SMC reports its own ``Ẑ`` instead);
    with an exact ``target``, ``kl_snis`` / ``tv_snis`` of the weighted law of the texts (the figure to
    read for SMC particles; equal to the plain KL for exact draws, which carry unit weight).  Empty when
    some sample has no weight (temperature ≠ 1, top-k/top-p, speculative).
    """
    if not samples or any(s.log_weight is None for s in samples):
        return {}
    lw = [(s.log_z0 or 0.0) + float(s.log_weight) if s.finished and s.log_weight is not None else -math.inf
          for s in samples]
    finite = [x for x in lw if math.isfinite(x)]
    out: dict[str, Any] = {"ess": None, "log_z_hat": None, "kl_snis": None, "tv_snis": None}
    if not finite:
        return out
    top = max(finite)
    w = [math.exp(x - top) if math.isfinite(x) else 0.0 for x in lw]
    sw = math.fsum(w)
    out["ess"] = sw * sw / math.fsum(x * x for x in w)
    smc_z = samples[-1].stats.get("log_z_hat")
    if isinstance(smc_z, float):
        out["log_z_hat"] = _finite(smc_z)
    elif all(s.log_z0 is not None for s in samples):
        out["log_z_hat"] = top + math.log(sw / len(samples))
    if target is not None:
        law: dict[str, float] = {}
        for s, wi in zip(samples, w, strict=True):
            if wi > 0 and s.text in target:
                law[s.text] = law.get(s.text, 0.0) + wi
        z = math.fsum(law.values())
        if z > 0:
            law = {k: v / z for k, v in law.items()}
            out["kl_snis"] = _finite(metrics.kl_divergence(law, target))
            out["tv_snis"] = _finite(metrics.total_variation(law, target))
    return out


def method_names() -> list[str]:
    """Every registered method name."""
    return sorted(_METHODS)


def _resolve_model(model: Any) -> Any:
    if model is None or model == "toy":
        return toy_model()
    if isinstance(model, (str, os.PathLike)):
        return load_model(None if model == "bundled" else model)
    return model


def _write_text(path: Path, text: str) -> None:
    try:
        atomic_write(path, [text.encode("utf-8")])
    except OSError as exc:
        raise ResultsFileError(f"cannot write {path}: {exc}") from exc


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def run(tasks: Sequence[str | Task], methods: Sequence[str], n: int, *, model: Any = "toy",
        out_dir: str | os.PathLike[str] = "gad-eval", seed: int = 0, batch_size: int | None = None,
        max_new_tokens: int | None = None, window: int = 500, progress: bool = True,
        persist_tries: bool = True, exact_node_budget: int = 200_000, exact_max_len: int | None = None,
        speculative: dict[str, Any] | None = None) -> dict[str, Any]:
    """Evaluate ``methods`` on ``tasks`` with ``n`` samples each; write the files listed above.

    Args:
        tasks: task names (see :func:`gad.eval.tasks.task_names`) or :class:`Task` objects.
        methods: registered method names (``gcd``, ``asap``, ``onestep``, ``exact`` …).
        n: samples per (task, method), ≥ 1.
        model: ``"toy"`` (char-level toy), ``"bundled"``, a model path, or a LanguageModel.
        out_dir: output folder (created).
        seed: sampling seed (same for every method).
        batch_size: rows per batch (``gad.sample``'s default when None).
        max_new_tokens: overrides every task's budget.
        window: sliding window (samples) of the open-task KL.
        progress: tqdm bar per (task, method) showing samples/s.
        persist_tries: keep ASAp tries under ``out_dir/tries`` (reused by a rerun).
        exact_node_budget: node budget of the exact enumeration.
        exact_max_len: overrides every exact task's enumeration bound (tokens; ``Task.exact_max_len``).
        speculative: settings of the ``spec-*`` methods: ``drafter`` (a ``make_drafter`` name, default
            ``forced+ngram``), ``accept`` (``lossless`` or a relaxed rule), ``draft_k`` (default 4).
    Returns:
        the summary dict (also written to ``summary.json``).
    Raises:
        InvalidArgumentError: unknown task or method, ``n < 1``, ``exact_max_len < 1``.
        EnumerationBudgetError: an exact task's enumeration is too large.
        ResultsFileError: an output file could not be written.
    """
    if n < 1:
        raise InvalidArgumentError(f"n must be >= 1, got {n}")
    for m in methods:
        if m not in _METHODS:
            raise InvalidArgumentError(f"unknown method {m!r}; known: {', '.join(method_names())}")
    spec_opts = {**SPEC_DEFAULTS, **(speculative or {})}
    unknown = set(spec_opts) - set(SPEC_DEFAULTS)
    if unknown:
        raise InvalidArgumentError(f"speculative: unknown settings {sorted(unknown)}; known: {sorted(SPEC_DEFAULTS)}")
    if not isinstance(spec_opts["draft_k"], int) or spec_opts["draft_k"] < 1:
        raise InvalidArgumentError(f"speculative: draft_k must be a positive integer, got {spec_opts['draft_k']!r}")
    if exact_max_len is not None and (not isinstance(exact_max_len, int) or exact_max_len < 1):
        raise InvalidArgumentError(f"exact_max_len must be a positive integer, got {exact_max_len!r}")
    task_objs = [get_task(t) for t in tasks]
    if exact_max_len is not None:
        task_objs = [dataclasses.replace(t, exact_max_len=exact_max_len) if t.kind == "exact" else t
                     for t in task_objs]
    lm = _resolve_model(model)
    out = Path(out_dir)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"model": str(getattr(lm, "name", "?")), "n": n, "seed": seed,
                               "window": window, "methods": list(methods), "tasks": {}}
    ks = metrics.checkpoints(n)
    for task in task_objs:
        compiled = task.compile(lm.vocab)
        prompt_ids = lm.encode_prompt(task.prompt)
        budget = max_new_tokens or task.max_new_tokens
        tinfo: dict[str, Any] = {"kind": task.kind, "checker": task.checker, "methods": {}}
        q_star: dict[str, float] | None = None
        if task.kind == "exact":
            enum = enumerate_language(lm, compiled, prompt_ids, max_len=task.exact_max_len,
                                      node_budget=exact_node_budget)
            q_star = {}
            for raw, q in enum.q_strings().items():
                key = raw.decode("utf-8", errors="replace")
                q_star[key] = q_star.get(key, 0.0) + q
            tinfo.update({"Z": enum.Z, "exact_max_len": task.exact_max_len, "support": len(q_star)})
        per_method: dict[str, list[Sample]] = {}
        for m in methods:
            trie = None
            if m in ("asap", "spec-asap", "rs", "mcmc") and persist_tries:  # one trie per method
                (out / "tries").mkdir(exist_ok=True)
                suffix = "" if m == "asap" else f"__{m}"
                trie = str(out / "tries" / (task.name.replace("/", "__") + suffix + ".trie"))
            extra: dict[str, Any] = {}
            if "speculative" in inspect.signature(_METHODS[m]).parameters:
                extra["speculative"] = {**spec_opts, "exact_max_len": task.exact_max_len
                                        if task.kind == "exact" else None}
            bar = None
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(total=n, desc=f"{task.name} {m}", unit="sample", leave=False)
            t0 = time.perf_counter()
            try:
                samples = _METHODS[m](lm, compiled, prompt_ids, n=n, seed=seed, max_new_tokens=budget,
                                      batch_size=batch_size, trie=trie, progress=bar if bar is not None else False,
                                      **extra)
            finally:
                if bar is not None:
                    bar.close()
            per_method[m] = samples
            tinfo["methods"][m] = {"seconds": time.perf_counter() - t0}
        ideal = None
        if task.kind == "open":
            ideal = metrics.ideal_law((s.text, tuple(s.token_ids), s.logprob)
                                      for ss in per_method.values() for s in ss if s.finished)
            tinfo["ideal_support"] = len(ideal)
        target = q_star if q_star is not None else (ideal or {})
        check = functools.cache(task.check)  # one checker call per distinct text (cvc5, SQLite, …)
        for m, samples in per_method.items():
            outs = [s.text if s.finished else None for s in samples]
            valid = [check(s.text) if s.finished else (False if task.checker else None) for s in samples]
            for i, (s, v) in enumerate(zip(samples, valid, strict=True)):
                rows.append({"task": task.name, "method": m, "index": i, "text": s.text,
                             "token_ids": s.token_ids, "logprob": s.logprob, "finished": s.finished,
                             "valid": v, "target_prob": target.get(s.text) if s.finished else None})
            if q_star is not None:
                inside = [o if (o is not None and o in q_star) else None for o in outs]
                curve = metrics.exact_curves(inside, q_star, ks)
                outside = sum(1 for o in outs if o is not None and o not in q_star)
            else:
                curve = metrics.open_curves(outs, ideal or {}, ks, window=window)
                outside = 0
            fin = [s for s in samples if s.finished]
            checked = [v for v in valid if v is not None]
            info = tinfo["methods"][m]
            info.update({
                "n": len(samples),
                "share_finished": len(fin) / len(samples),
                "mean_logprob": _finite(sum(s.logprob for s in fin) / len(fin)) if fin else None,
                "valid_rate": (sum(checked) / len(checked)) if checked else None,
                "share_outside_support": outside / len(samples),
                "kl_at": {str(k): _finite(metrics.value_at(curve, k)) for k in (100, 500, 1000) if k <= n},
                "kl_final": _finite(curve["kl"][-1]) if curve["kl"] else None,
                "tv_final": _finite(curve["tv"][-1]) if "tv" in curve and curve["tv"] else None,
                "expectation_final": _finite(curve["expectation"][-1]) if curve["expectation"] else None,
                "curve": {k: [_finite(x) if isinstance(x, float) else x for x in v] for k, v in curve.items()},
            })
            info.update(acceptance_fields(samples))
            info.update(compute_fields(samples))
            info.update(weight_fields(samples, q_star))
        from gad.eval.plots import plot_task  # matplotlib only when plotting

        plot_task(out / "plots", task.name, tinfo, window)
        summary["tasks"][task.name] = tinfo
    _write_text(out / "samples.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    _write_text(out / "summary.json", json.dumps(summary, indent=1, ensure_ascii=False))
    buf = io.StringIO()
    cols = ["task", "method", "n", "share_finished", "mean_logprob", "valid_rate", "share_outside_support",
            "kl_100", "kl_500", "kl_1000", "kl_final", "tv_final", "expectation_final", "seconds",
            *COMPUTE_COLUMNS, *WEIGHT_COLUMNS, *SPEC_COLUMNS]
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    for tname, tinfo in summary["tasks"].items():
        for m, info in tinfo["methods"].items():
            w.writerow({"task": tname, "method": m, **{c: info.get(c) for c in cols[2:] if not c.startswith("kl_")
                                                       or c == "kl_final"},
                        **{f"kl_{k}": v for k, v in info["kl_at"].items()}})
    _write_text(out / "summary.csv", buf.getvalue())
    return summary
