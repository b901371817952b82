"""Result records shared by every sampler (GCD, ASAp, exact aligned, speculative) and the harness."""

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
        eos_id: the EOS id that ended the sample (None when unfinished).
        index: the sample's number in its run (its random stream, :func:`gad.sampling.rng.sample_rng`).
        dead_end: True when no allowed token had positive weight (only possible with top-k/top-p or a
            model that gives every allowed token probability 0).
        log_weight: ``log a(w) = Σ_{i≥1} log Z(u_i)/Φ̂(u_i)``, the exact importance weight of a
            Φ̂-reweighted sample (BRIEF §6), nats: ``exp(log_z0 + log_weight)`` has expectation ``Z_G``;
            ``-inf`` for an unfinished sample (not in L); 0 for exact draws of ``Q*`` (``rs``, ``mcmc``,
            ``smc`` draws); an SMC particle's final log weight (resampling factors included); None when
            the law sampled has no such weight (temperature ≠ 1, top-k / top-p, speculative decoding).
        log_z0: ``log Z(u_0)`` at the prompt, nats (BRIEF §6); None when not tracked or for exact draws.
        stats: method-specific figures (forward passes, acceptance counts, acceptance log, …).
    """

    text: str
    token_ids: list[int]
    logprob: float
    finished: bool
    method: str = "gcd"
    eos_id: int | None = None
    index: int | None = None
    dead_end: bool = False
    log_weight: float | None = None
    log_z0: float | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (the JSONL row written by ``gad sample --out``)."""
        return asdict(self)
