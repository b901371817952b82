"""Result records shared by every sampler (GCD, ASAp, speculative) and the evaluation harness."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Sample:
    """One generated output.

    Attributes:
        text: the decoded output (UTF-8, invalid bytes replaced), without EOS.
        token_ids: generated ids after the prompt, EOS excluded.
        logprob: ``sum_i log p(w_i | prompt, w_<i)`` under the **unconstrained** model, EOS included
            when the sample finished (nats).
        finished: True iff the sample ended with EOS inside the token budget (so ``text`` is in L(G));
            False when ``max_new_tokens`` ran out first.
        method: the sampling law (``gcd``, ``asap``, ``onestep``, ``exact``, ``spec-…``).
        stats: method-specific figures (forward passes, acceptance counts, …).
    """

    text: str
    token_ids: list[int]
    logprob: float
    finished: bool
    method: str = "gcd"
    stats: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (the JSONL row written by ``gad sample --out``)."""
        return asdict(self)
