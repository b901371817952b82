"""What a speculative request asks for, as one object (``gad.sample(speculative=Speculation(...))``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Speculation:
    """Grammar-faithful speculative decoding settings (BRIEF §4).

    Attributes:
        drafter: a :class:`gad.speculative.drafters.Drafter`, a draft language model, or a drafter name
            parsed by :func:`gad.speculative.drafters.make_drafter` (``forced``, ``ngram[:N]``,
            ``self[:L]``, ``self-greedy[:L]``, a model path, several joined by ``+``).
        k: tokens drafted per verification step (>= 1).
        rule: ``"lossless"`` (the output law is exactly the non-speculative one) or a relaxed rule
            parsed by :func:`gad.speculative.rules.parse_rule` (``greedy``, ``additive:δ``, …), or a rule
            object.
        tree: ``(m, d)`` for greedy tree decoding (branching ``m``, depth ``d``), or None for a chain.
        log: keep one acceptance record per verified position in ``Sample.stats["log"]``.
        domain: a label copied into the acceptance records.
    """

    drafter: Any = "forced+ngram"
    k: int = 4
    rule: Any = "lossless"
    tree: Any = None
    log: bool = False
    domain: str | None = None
