"""``gad.sample(..., speculative=…, log=…, domain=…)`` passes the acceptance log through (toy model)."""

from __future__ import annotations

import pytest

import gad
from gad.errors import InvalidArgumentError
from gad.speculative.stats import AcceptanceRecord, summarize
from gad.testing.toys import gad_binary


def test_sample_passes_log_and_domain_to_speculative() -> None:
    lm, grammar = gad_binary()
    out = gad.sample(lm, grammar, [], n=3, seed=1, max_new_tokens=10, speculative="forced-token+ngram", draft_k=3,
                     log=True, domain="bits")
    assert len(out) == 3
    recs = [r for s in out for r in s.stats["log"]]
    assert recs and all(isinstance(r, AcceptanceRecord) and r.domain == "bits" for r in recs)
    for s in out:
        drafted = [r for r in s.stats["log"] if not r.bonus]
        bonus = [r for r in s.stats["log"] if r.bonus]
        assert sum(r.accepted for r in drafted) == s.stats["accepted"]
        assert len(drafted) <= s.stats["drafted"]
        # every generated token (EOS included) is an accepted draft token or the target's own token
        assert s.stats["accepted"] + len(bonus) == s.stats["tokens"] == len(s.token_ids) + int(s.finished)
    summ = summarize(recs)
    assert list(summ) == ["bits"] and 0.0 <= summ["bits"].acceptance_rate <= 1.0
    # without log the samples carry no log
    plain = gad.sample(lm, grammar, [], n=1, seed=1, max_new_tokens=10, speculative="forced-token", draft_k=3)
    assert "log" not in plain[0].stats


def test_log_without_speculative_is_an_error() -> None:
    lm, grammar = gad_binary()
    with pytest.raises(InvalidArgumentError, match="speculative"):
        gad.sample(lm, grammar, [], n=1, log=True)
