"""The one registry of sampling-method names (``gad sample --method``, ``gad.sample(method=)``, ``gad eval``).

A method is a Φ estimator plugged into the batched sampler (:func:`gad.sampling.sampler.sample_rows`):

========== ======================================================================================
``gcd``    grammar-constrained decoding, ``Q̂ ∝ p · mask`` (alias ``indicator``)
``asap``   GAD with the ASAp trie (Park et al., NeurIPS 2024, arXiv 2405.21047)
``onestep`` GAD with the one-token look-ahead mass
``exact``  GAD with exact Φ by enumeration (samples ``Q*`` exactly; small languages only)
========== ======================================================================================

:func:`register_method` adds a method with its own runner (the exact aligned samplers register here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gad.engine.protocols import TokenConstraint
from gad.errors import InvalidArgumentError
from gad.models.base import LanguageModel
from gad.phi.registry import ALIASES, ESTIMATORS, make_estimator
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
    """

    name: str
    run: Runner
    uses_trie: bool = False
    default_batch: int | None = None
    description: str = ""


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
