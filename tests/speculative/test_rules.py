"""Acceptance rules: thresholds, tie handling, parser, lossless acceptance and residual."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gad.errors import InvalidArgumentError
from gad.speculative.rules import (
    Additive,
    LosslessRule,
    Multiplicative,
    StrictGreedy,
    TopM,
    Typical,
    entropy,
    lossless_accept_prob,
    parse_rule,
    residual,
)

P = np.array([0.1, 0.4, 0.3, 0.15, 0.05])


def test_thresholds() -> None:
    assert parse_rule("greedy").threshold(P) == 0.4
    assert parse_rule("additive:0.1").threshold(P) == pytest.approx(0.3)
    assert parse_rule("multiplicative:0.5").threshold(P) == pytest.approx(0.2)
    assert parse_rule("topm:3").threshold(P) == 0.15
    h = -sum(x * math.log(x) for x in P)
    assert parse_rule("typical:0.3,0.09").threshold(P) == pytest.approx(min(0.3, 0.09 * math.exp(-h)))
    assert parse_rule("typical:0.01,0.9").threshold(P) == 0.01
    assert entropy(P) == pytest.approx(h)
    assert entropy([1.0, 0.0]) == 0.0


def test_accepts_exactly_upper_level_set() -> None:
    cases = {
        "greedy": [1],
        "additive:0.1": [1, 2],
        "additive:0.25": [1, 2, 3],
        "multiplicative:0.5": [1, 2],
        "multiplicative:0.25": [0, 1, 2, 3],
        "topm:1": [1],
        "topm:3": [1, 2, 3],
        "topm:9": [0, 1, 2, 3, 4],
        "typical:0.12,1.0": [1, 2, 3],
    }
    for spec, acc in cases.items():
        rule = parse_rule(spec)
        got = [d for d in range(P.shape[0]) if rule.accepts(P, d)]
        assert got == acc, spec
        assert list(np.flatnonzero(~rule.rejected(P))) == acc


def test_ties() -> None:
    p = np.array([0.3, 0.3, 0.2, 0.2])
    g = StrictGreedy()
    assert g.accepts(p, 0) and g.accepts(p, 1) and not g.accepts(p, 2)
    t = TopM(3)  # p_(3) = 0.2, so both 0.2 tokens are accepted
    assert all(t.accepts(p, d) for d in range(4))
    assert not TopM(2).accepts(p, 2)
    # greedy == additive:0 == multiplicative:1 == topm:1
    rng = np.random.default_rng(0)
    for _ in range(50):
        q = rng.dirichlet(np.ones(5))
        for d in range(5):
            a = g.accepts(q, d)
            assert a == Additive(0.0).accepts(q, d) == Multiplicative(1.0).accepts(q, d) == TopM(1).accepts(q, d)


def test_parse_rule_roundtrip_and_errors() -> None:
    for spec in ["greedy", "additive:0.1", "multiplicative:0.5", "topm:3", "typical:0.3,0.09"]:
        assert parse_rule(spec).spec == spec
        assert parse_rule(parse_rule(spec).spec) == parse_rule(spec)
    assert isinstance(parse_rule(" Lossless "), LosslessRule)
    assert [parse_rule(s).name for s in ["greedy", "additive:0.1", "multiplicative:0.5", "topm:3",
                                         "typical:0.3,0.09", "lossless"]] == \
        ["greedy", "additive", "multiplicative", "topm", "typical", "lossless"]
    assert parse_rule("lossless").kind == "lossless" and parse_rule("topm:2").kind == "deterministic"
    assert parse_rule("typical: 0.3 , 0.09".replace(": ", ":")) == Typical(0.3, 0.09)
    assert parse_rule("additive:1e-1") == Additive(0.1)
    for bad in ["", "greedy:1", "additive", "additive:x", "multiplicative:1.5", "topm:0", "topm:2.5",
                "typical:0.3", "typical:0,0.1", "additive:-0.1", "beam:3"]:
        with pytest.raises(InvalidArgumentError, match=repr(bad).replace("[", r"\[")):
            parse_rule(bad)
    with pytest.raises(InvalidArgumentError, match="rule"):
        parse_rule(3)  # type: ignore[arg-type]


def test_bad_inputs() -> None:
    g = StrictGreedy()
    with pytest.raises(InvalidArgumentError, match="p"):
        g.threshold([0.5, 0.6])
    with pytest.raises(InvalidArgumentError, match="p"):
        g.threshold([[0.5, 0.5]])
    with pytest.raises(InvalidArgumentError, match="p"):
        g.threshold([1.5, -0.5])
    with pytest.raises(InvalidArgumentError, match="p"):
        g.threshold([math.nan, 1.0])
    with pytest.raises(InvalidArgumentError, match="d"):
        g.accepts(P, 5)
    with pytest.raises(InvalidArgumentError, match="d"):
        g.accepts(P, 1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="alpha"):
        Multiplicative(2.0)
    with pytest.raises(InvalidArgumentError, match="m"):
        TopM(0)


def test_lossless_accept_prob_and_residual() -> None:
    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.25, 0.25, 0.25, 0.25])
    assert lossless_accept_prob(p, q, 0) == 1.0
    assert lossless_accept_prob(p, q, 2) == pytest.approx(0.8)
    assert lossless_accept_prob(p, q, 3) == 0.0
    r = residual(p, q)
    np.testing.assert_allclose(r, [0.25 / 0.3, 0.05 / 0.3, 0.0, 0.0])
    np.testing.assert_allclose(residual(p, p), p)
    with pytest.raises(InvalidArgumentError, match="d"):
        lossless_accept_prob(q, p, 3)  # drafter could not have proposed token 3
    with pytest.raises(InvalidArgumentError, match="q"):
        residual(p, q[:3] / q[:3].sum())
    assert LosslessRule().accept_prob(p, q, 1) == 1.0


def test_lossless_batched_matches_rows() -> None:
    rng = np.random.default_rng(3)
    k, v = 4, 6
    p = rng.dirichlet(np.ones(v), size=k)
    q = rng.dirichlet(np.ones(v), size=k)
    d = np.array([int(rng.choice(v, p=q[i])) for i in range(k)])
    batched = lossless_accept_prob(p, q, d)
    assert batched.shape == (k,)
    for i in range(k):
        assert batched[i] == pytest.approx(lossless_accept_prob(p[i], q[i], int(d[i])))
    rb = residual(p, q)
    for i in range(k):
        np.testing.assert_allclose(rb[i], residual(p[i], q[i]))
    with pytest.raises(InvalidArgumentError, match="d"):
        lossless_accept_prob(p, q, d[:2])


def test_lossless_output_law_is_target() -> None:
    """One-token speculative step: P(out = t) = q(t)·min(1, p/q) + P(reject)·residual(t) = p(t) exactly."""
    rng = np.random.default_rng(9)
    for _ in range(50):
        v = int(rng.integers(2, 8))
        p = rng.dirichlet(np.full(v, 0.5))
        q = rng.dirichlet(np.full(v, 0.5))
        acc = np.array([lossless_accept_prob(p, q, t) if q[t] > 0 else 0.0 for t in range(v)])
        reject = 1.0 - float(np.sum(q * acc))
        law = q * acc + reject * residual(p, q)
        np.testing.assert_allclose(law, p, atol=1e-12)
