"""The one registry of sampling-method names (``gad sample --method``, ``gad.sample(method=)``, ``gad eval``).

A method is a Φ estimator plugged into the batched sampler (:func:`gad.sampling.sampler.sample_rows`):

========== ======================================================================================
``gcd``    grammar-constrained decoding, ``Q̂ ∝ p · mask`` (alias ``indicator``)
``asap``   GAD with the ASAp trie (Park et al., NeurIPS 2024, arXiv 2405.21047)
``onestep`` GAD with the one-token look-ahead mass
``exact``  GAD with exact Φ by enumeration (samples ``Q*`` exactly; small languages only)
``rs``     exact samples of ``Q*`` by rejection on the ASAp trie (:mod:`gad.sampling.aligned`)
``smc``    sequential Monte Carlo with any Φ̂ proposal (:mod:`gad.sampling.smc`)
``mcmc``   Metropolis–Hastings on ``Q*`` with trie proposals (:mod:`gad.sampling.aligned`)
========== ======================================================================================

``asap`` at batch 1, temperature 1 without top-k / top-p runs through the trie proposer
(:func:`gad.sampling.aligned.asap_sample`: the trie caches model outputs; same law, same samples on toy
models); otherwise through the batched sampler.  Method options (``gad.sample(options=…)``,
``settings["options"]`` for runners) are listed per method in :attr:`Method.options`.

:func:`register_method` adds a method with its own runner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gad.engine.protocols import TokenConstraint
from gad.errors import InvalidArgumentError
from gad.models.base import LanguageModel
from gad.phi.registry import ALIASES, ESTIMATORS, make_estimator
from gad.sampling import aligned, smc
from gad.sampling.sampler import sample_rows
from gad.types import Sample

Runner = Callable[..., list[Sample]]
"""``runner(lm, compiled, prompt_ids, *, n, seed, max_new_tokens, batch_size, trie, settings, progress)``."""


@dataclass(frozen=True)
class Method:
    """A registered sampling method.

    Attributes:
        name: the method's name.
        run: its runner (:data:`Runner`), returning ``n`` :class:`gad.types.Sample`.
        uses_trie: whether ``trie=`` (a persistent Φ̂ trie) means something to it.
        default_batch: rows decoded together when the caller gives no ``batch_size`` (None: ``min(n, 8)``).
        description: one line for ``--help``.
        options: names of the method-specific options it accepts (``gad.sample(options=…)``).
    """

    name: str
    run: Runner
    uses_trie: bool = False
    default_batch: int | None = None
    description: str = ""
    options: tuple[str, ...] = ()


_REGISTRY: dict[str, Method] = {}
_ALIASES: dict[str, str] = dict(ALIASES)


def register_method(method: Method, aliases: Sequence[str] = ()) -> None:
    """Add ``method`` (and its ``aliases``) to the registry; a name registered again is replaced."""
    _REGISTRY[method.name] = method
    for a in aliases:
        _ALIASES[a] = method.name


def method_names() -> list[str]:
    """The registered method names, in registration order."""
    return list(_REGISTRY)


def get_method(name: str) -> Method:
    """The method ``name`` (an alias resolved).

    Raises:
        InvalidArgumentError: no method has that name; the message lists the choices.
    """
    if isinstance(name, str):
        m = _REGISTRY.get(_ALIASES.get(name, name))
        if m is not None:
            return m
    raise InvalidArgumentError(f"method must be one of {', '.join(_REGISTRY)}; got {name!r}")


def _phi_runner(estimator: str) -> Runner:
    def run(lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int], *, n: int, seed: int,
            max_new_tokens: int, batch_size: int, trie: Any = None, settings: dict[str, Any] | None = None,
            progress: Any = None) -> list[Sample]:
        s = dict(settings or {})
        est = make_estimator(estimator, lm, compiled, prompt_ids, trie=trie, settings=s)
        return sample_rows(lm, compiled, est, prompt_ids, n=n, seed=seed, max_new_tokens=max_new_tokens,
                           batch_size=batch_size, temperature=float(s.get("temperature", 1.0)),
                           top_k=s.get("top_k"), top_p=s.get("top_p"), progress=progress)

    return run


_DESCRIPTIONS = {"gcd": "grammar-constrained decoding (mask only)",
                 "asap": "GAD with the ASAp trie (converges to Q*)",
                 "onestep": "GAD with one-token look-ahead Φ̂",
                 "exact": "GAD with exact Φ by enumeration (exact Q*)"}
for _name in ESTIMATORS:
    # ASAp learns after each batch: its default batch is 1, the paper's sequential algorithm
    register_method(Method(_name, _phi_runner(_name), uses_trie=_name == "asap",
                           default_batch=1 if _name == "asap" else None, description=_DESCRIPTIONS[_name]))


def _opts(settings: dict[str, Any] | None) -> dict[str, Any]:
    return dict((settings or {}).get("options") or {})


def _plain(settings: dict[str, Any] | None) -> bool:
    """Temperature 1 without top-k / top-p: the law the exact aligned samplers are defined for."""
    s = settings or {}
    return float(s.get("temperature", 1.0)) == 1.0 and s.get("top_k") is None and s.get("top_p") is None


def _need_plain(name: str, settings: dict[str, Any] | None) -> None:
    if not _plain(settings):
        raise InvalidArgumentError(f"method {name} samples Q* at temperature 1 without top-k/top-p "
                                   "(arguments temperature, top_k, top_p)")


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"option {name} must be True or False, got {value!r}")
    return value


def _run_asap(lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int], *, n: int, seed: int,
              max_new_tokens: int, batch_size: int, trie: Any = None, settings: dict[str, Any] | None = None,
              progress: Any = None) -> list[Sample]:
    o = _opts(settings)
    if batch_size == 1 and _plain(settings):
        return aligned.asap_sample(lm, compiled, prompt_ids, n=n, seed=seed, max_new_tokens=max_new_tokens,
                                   trie=trie, cache=_bool("trie_cache", o.get("trie_cache", True)),
                                   progress=progress or None)
    return _phi_runner("asap")(lm, compiled, prompt_ids, n=n, seed=seed, max_new_tokens=max_new_tokens,
                               batch_size=batch_size, trie=trie, settings=settings, progress=progress)


def _run_rs(lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int], *, n: int, seed: int,
            max_new_tokens: int, batch_size: int, trie: Any = None, settings: dict[str, Any] | None = None,
            progress: Any = None) -> list[Sample]:
    _need_plain("rs", settings)
    o = _opts(settings)
    mp = o.get("max_proposals")
    if mp is not None and (isinstance(mp, bool) or not isinstance(mp, int) or mp < 1):
        raise InvalidArgumentError(f"option max_proposals must be a positive integer, got {mp!r}")
    return aligned.rejection_sample(lm, compiled, prompt_ids, n=n, seed=seed, max_new_tokens=max_new_tokens,
                                    trie=trie, cache=_bool("trie_cache", o.get("trie_cache", True)),
                                    max_proposals=mp, progress=progress or None)


def _run_mcmc(lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int], *, n: int, seed: int,
              max_new_tokens: int, batch_size: int, trie: Any = None, settings: dict[str, Any] | None = None,
              progress: Any = None) -> list[Sample]:
    _need_plain("mcmc", settings)
    o = _opts(settings)
    return aligned.mcmc_sample(lm, compiled, prompt_ids, n=n, seed=seed, max_new_tokens=max_new_tokens, trie=trie,
                               steps=o.get("steps", 10), move=o.get("move", "uniform"),
                               cache=_bool("trie_cache", o.get("trie_cache", True)), progress=progress or None)


def _run_smc(lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int], *, n: int, seed: int,
             max_new_tokens: int, batch_size: int, trie: Any = None, settings: dict[str, Any] | None = None,
             progress: Any = None) -> list[Sample]:
    _need_plain("smc", settings)
    o = _opts(settings)
    proposal = o.get("proposal", "gcd")
    if not isinstance(proposal, str):
        raise InvalidArgumentError(f"option proposal must be an estimator name, got {proposal!r}")
    from gad.phi.registry import parse_estimator

    try:
        proposal = parse_estimator(proposal)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"option proposal: {exc}") from None
    if trie is not None and proposal != "asap":
        raise InvalidArgumentError(f"trie: the smc proposal {proposal} uses no Φ̂ trie (option proposal='asap')")
    thr = o.get("ess_threshold", 0.5)
    if isinstance(thr, bool) or not isinstance(thr, (int, float)):
        raise InvalidArgumentError(f"option ess_threshold must be a number in [0, 1], got {thr!r}")
    return smc.smc_sample(lm, compiled, prompt_ids, n=n, seed=seed, max_new_tokens=max_new_tokens,
                          estimator=proposal, trie=trie, particles=o.get("particles"), ess_threshold=float(thr),
                          draws=_bool("draws", o.get("draws", False)), progress=progress or None)


register_method(Method("asap", _run_asap, uses_trie=True, default_batch=1, description=_DESCRIPTIONS["asap"],
                       options=("trie_cache",)))
register_method(Method("rs", _run_rs, uses_trie=True, default_batch=1,
                       description="exact samples of Q* by rejection on the ASAp trie",
                       options=("max_proposals", "trie_cache")))
register_method(Method("smc", _run_smc, uses_trie=True, default_batch=1,
                       description="sequential Monte Carlo (weighted particles; unbiased Z estimate)",
                       options=("particles", "ess_threshold", "proposal", "draws")))
register_method(Method("mcmc", _run_mcmc, uses_trie=True, default_batch=1,
                       description="Metropolis-Hastings on Q* (restart / uniform / priority truncation)",
                       options=("steps", "move", "trie_cache")))
