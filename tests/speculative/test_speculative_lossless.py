"""Speculative decoding is lossless w.r.t. p̃ (exact law by enumeration), and Φ-reweighting matters.

The exact output law of the *real* decoding code is computed by enumerating every random choice it
makes (an Rng that replays scripted choices and branches on new ones), not by Monte Carlo.
"""

from __future__ import annotations

import functools
import itertools
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from gad.engine.vocab import Vocabulary
from gad.errors import InvalidArgumentError
from gad.models.base import ToyLM
from gad.phi.base import IndicatorPhi, PhiEstimator
from gad.speculative import ForcedDrafter, LMDrafter, NgramDrafter, speculative_sample, tilted
from gad.testing.finite import TokenLanguage

VOCAB = Vocabulary.from_strings(["a", "b", "c", "d"])  # EOS = 4
EOS = 4


def make_lang(n_sym: int, max_len: int) -> set[tuple[int, ...]]:
    """Length 1..max_len over the first n_sym symbols; no 'bb'; the last symbol must be followed by 'a'
    (forced positions); with max_len reached only EOS is allowed (a forced EOS)."""
    out = set()
    last = n_sym - 1
    for n in range(1, max_len + 1):
        for w in itertools.product(range(n_sym), repeat=n):
            if any(w[i] == 1 and w[i + 1] == 1 for i in range(n - 1)):
                continue
            if any(w[i] == last and (i + 1 >= n or w[i + 1] != 0) for i in range(n)):
                continue
            out.add(w)
    return out


COMPILED = TokenLanguage(VOCAB, make_lang(4, 4))
SMALL = TokenLanguage(VOCAB, make_lang(3, 3))  # for drafters that sample (fewer branches to enumerate)


def random_lm(seed: int, name: str = "toy", support: int = 5) -> ToyLM:
    """Random next-token tables (deterministic in ``seed`` and the context); with ``support < 5`` each
    row puts mass on ``support`` random tokens only (so q misses target mass: residual draws happen)."""

    @functools.cache
    def f(ctx: tuple[int, ...]) -> np.ndarray:
        r = np.random.default_rng([seed, len(ctx), *ctx])
        p = r.dirichlet(np.ones(5)) + 1e-3
        if support < 5:
            keep = r.choice(5, size=support, replace=False)
            p = np.where(np.isin(np.arange(5), keep), p, 0.0)
        return p
    return ToyLM(VOCAB, f, name=name)


TARGET = random_lm(1, "target")
DRAFT = random_lm(2, "draft", support=2)


class ExactFinitePhi(PhiEstimator):
    """Exact Φ for a finite token language: Φ(u) = Σ_t p(t|u) Φ(u·t), Φ(u·EOS) = 1[u ∈ L]."""

    name = "exact"

    def __init__(self, lm: ToyLM, compiled: TokenLanguage) -> None:
        self.lm, self.c = lm, compiled
        self.prefixes = {w[:i] for w in compiled.lang for i in range(len(w) + 1)}
        self.memo: dict[tuple[int, ...], float] = {}

    def phi(self, u: tuple[int, ...]) -> float:
        if u not in self.prefixes:
            return 0.0
        if u not in self.memo:
            p = np.exp(self.lm.logprobs([u])[0])
            s = p[EOS] * (u in self.c.lang)
            s += sum(p[t] * self.phi(u + (t,)) for t in range(4))
            self.memo[u] = float(s)
        return self.memo[u]

    def child_phi(self, prefix: Sequence[int], logp: np.ndarray, mask: np.ndarray) -> np.ndarray:
        u = tuple(int(t) for t in prefix)
        out = np.array([self.phi(u + (t,)) for t in range(4)] + [float(u in self.c.lang)])
        return out * mask

    def observe(self, tokens: Sequence[int], finished: bool) -> None:
        return None


# --- exact enumeration of the decoding code's randomness -----------------------------------------


class ScriptRng:
    """Replays a script of choice indices; past its end takes option 0 and records the branching."""

    def __init__(self, script: list[int]) -> None:
        self.script = script
        self.taken: list[int] = []
        self.sizes: list[int] = []
        self.weight = 1.0

    def _choose(self, options: list[tuple[Any, float]]) -> Any:
        pos = len(self.taken)
        idx = self.script[pos] if pos < len(self.script) else 0
        self.taken.append(idx)
        self.sizes.append(len(options))
        self.weight *= options[idx][1]
        return options[idx][0]

    def bernoulli(self, prob: float) -> bool:
        prob = min(1.0, max(0.0, float(prob)))
        opts = [(v, w) for v, w in ((True, prob), (False, 1.0 - prob)) if w > 0]
        return self._choose(opts)

    def categorical(self, probs: np.ndarray) -> int:
        p = np.asarray(probs, dtype=np.float64)
        p = p / p.sum()
        return self._choose([(int(i), float(p[i])) for i in np.flatnonzero(p > 0)])


def enumerate_law(run: Callable[[ScriptRng], Any]) -> dict[Any, float]:
    """The exact law of ``run(rng)``'s return value over all of ``rng``'s choices."""
    law: dict[Any, float] = defaultdict(float)
    stack: list[list[int]] = [[]]
    while stack:
        script = stack.pop()
        rng = ScriptRng(script)
        key = run(rng)
        law[key] += rng.weight
        for pos in range(len(script), len(rng.taken)):
            for alt in range(1, rng.sizes[pos]):
                stack.append(rng.taken[:pos] + [alt])
    return dict(law)


def reference_law(lm: ToyLM, compiled: TokenLanguage, est: Any) -> dict[tuple[int, ...], float]:
    """Non-speculative sampling from p̃ ∝ p · mask · Φ̂, token by token, by enumeration."""
    law: dict[tuple[int, ...], float] = {}

    def rec(u: tuple[int, ...], w: float) -> None:
        m = compiled.matcher()
        m.accept_tokens(u)
        mask = m.mask()
        lp = lm.logprobs([u])[0]
        p = tilted(lp, mask, est.child_phi(u, lp, mask))
        for t in np.flatnonzero(p > 0):
            if t == EOS:
                law[u] = law.get(u, 0.0) + w * p[t]
            else:
                rec(u + (int(t),), w * p[t])

    rec((), 1.0)
    return law


def q_star(lm: ToyLM, compiled: TokenLanguage) -> dict[tuple[int, ...], float]:
    pw = {}
    for w in compiled.lang:
        lp = 0.0
        for i in range(len(w)):
            lp += lm.logprobs([w[:i]])[0][w[i]]
        lp += lm.logprobs([w])[0][EOS]
        pw[w] = np.exp(lp)
    z = sum(pw.values())
    return {w: v / z for w, v in pw.items()}


def tv(a: dict[Any, float], b: dict[Any, float]) -> float:
    return 0.5 * sum(abs(a.get(x, 0.0) - b.get(x, 0.0)) for x in set(a) | set(b))


def spec_law(drafter: Any, k: int, est: Any, compiled: TokenLanguage = COMPILED, lm: ToyLM = TARGET,
             **kw: Any) -> dict[tuple[int, ...], float]:
    """The exact output law of ``speculative_sample`` (every random choice enumerated)."""
    def run(rng: ScriptRng) -> tuple[int, ...]:
        (s,) = speculative_sample(lm, compiled, [], n=1, seed=rng, drafter=drafter, draft_k=k,
                                  estimator=est, max_new_tokens=10, **kw)
        assert s.finished
        return tuple(s.token_ids)
    return enumerate_law(run)


# name -> (drafter factory, world): drafters that sample run on the smaller language
DRAFTERS: dict[str, tuple[Callable[[], Any], TokenLanguage]] = {
    "model": (lambda: LMDrafter(DRAFT, TARGET.vocab_size), SMALL),
    "model-greedy": (lambda: LMDrafter(DRAFT, TARGET.vocab_size, greedy=True), COMPILED),
    "self": (lambda: LMDrafter(TARGET, TARGET.vocab_size), SMALL),
    "forced": (lambda: ForcedDrafter((EOS,)), COMPILED),
    "ngram": (lambda: NgramDrafter(2, eos_ids=(EOS,)), COMPILED),
}


# --- tests -------------------------------------------------------------------------------------


def test_enumerator_sums_to_one_and_matches_reference_without_speculation() -> None:
    ref = reference_law(TARGET, COMPILED, IndicatorPhi())
    assert abs(sum(ref.values()) - 1.0) < 1e-12
    assert set(ref) == COMPILED.lang
    assert tv(ref, q_star(TARGET, COMPILED)) > 0.01  # the toy has a real GCD distortion


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("name", sorted(DRAFTERS))
def test_lossless_law_equals_gcd_law(name: str, k: int) -> None:
    make, world = DRAFTERS[name]
    law = spec_law(make(), k, IndicatorPhi(), world)
    ref = reference_law(TARGET, world, IndicatorPhi())
    assert abs(sum(law.values()) - 1.0) < 1e-9
    assert set(law) <= world.lang
    assert max(abs(law.get(w, 0.0) - ref[w]) for w in ref) < 1e-12


def test_enumeration_detects_a_wrong_verifier(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sanity check of the test itself: accepting every draft token (no Φ̂/p̃ check) changes the law."""
    from gad.speculative import verify

    monkeypatch.setattr(verify, "lossless_accept_prob", lambda p, q, d: 1.0)
    make, world = DRAFTERS["model"]
    law = spec_law(make(), 2, IndicatorPhi(), world)
    assert tv(law, reference_law(TARGET, world, IndicatorPhi())) > 1e-3


@pytest.mark.parametrize("name", ["model", "forced", "model-greedy"])
def test_lossless_with_exact_phi_equals_q_star(name: str) -> None:
    make, world = DRAFTERS[name]
    est = ExactFinitePhi(TARGET, world)
    law = spec_law(make(), 3, est, world)
    assert tv(law, q_star(TARGET, world)) < 1e-12
    assert tv(law, reference_law(TARGET, world, est)) < 1e-12


@pytest.mark.parametrize("name", ["model", "model-greedy"])
def test_phi_reweighting_matters_gcd_gap(name: str) -> None:
    """Mask-only speculative decoding samples μ_proj: its TV to Q* is exactly the GCD gap; with exact Φ
    the gap closes (Future Validity, arXiv 2605.07698)."""
    make, world = DRAFTERS[name]
    qs = q_star(TARGET, world)
    gap = tv(reference_law(TARGET, world, IndicatorPhi()), qs)
    assert gap > 0.01
    spec_mask = spec_law(make(), 2, IndicatorPhi(), world)
    spec_exact = spec_law(make(), 2, ExactFinitePhi(TARGET, world), world)
    assert abs(tv(spec_mask, qs) - gap) < 1e-12
    assert tv(spec_exact, qs) < 1e-12


def _greedy_path(compiled: TokenLanguage, est: Any) -> tuple[int, ...]:
    u: tuple[int, ...] = ()
    while True:
        m = compiled.matcher()
        m.accept_tokens(u)
        lp = TARGET.logprobs([u])[0]
        mask = m.mask()
        t = int(np.argmax(tilted(lp, mask, est.child_phi(u, lp, mask))))
        if t == EOS:
            return u
        u += (t,)


@pytest.mark.parametrize("rule", ["greedy", "additive:0.05", "topm:2"])
def test_relaxed_rules_are_deterministic(rule: str) -> None:
    make, world = DRAFTERS["model-greedy"]
    law = spec_law(make(), 3, IndicatorPhi(), world, accept=rule)
    assert len(law) == 1 and abs(sum(law.values()) - 1.0) < 1e-12
    if rule == "greedy":  # strict greedy = greedy decoding from p̃
        assert law == {_greedy_path(world, IndicatorPhi()): pytest.approx(1.0)}


def test_stats_count_passes_and_tokens() -> None:
    s = speculative_sample(TARGET, COMPILED, [], n=5, seed=0, drafter=LMDrafter(TARGET, 5), draft_k=4,
                           max_new_tokens=10, log=True, domain="toy")
    for x in s:
        st = x.stats
        assert st["tokens"] == len(x.token_ids) + 1
        assert 0 <= st["accepted"] <= st["drafted"]
        # one pass for the prompt, then at most one per verification step
        assert 1 <= st["target_passes"] <= 1 + st["steps"]
        # each step emits the target's own token, except a step whose drafted EOS was accepted
        assert st["tokens"] - st["accepted"] in (st["steps"], st["steps"] - 1)
        assert x.method == "spec-gcd"
        assert sum(r.accepted and not r.bonus for r in st["log"]) == st["accepted"]
        assert all(r.domain == "toy" for r in st["log"])


def test_budget_truncates_and_reports_unfinished() -> None:
    (s,) = speculative_sample(TARGET, COMPILED, [], n=1, seed=3, drafter=LMDrafter(TARGET, 5), draft_k=4,
                              max_new_tokens=2)
    assert len(s.token_ids) + int(s.finished) <= 2


def test_bad_arguments_raise_typed_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="draft_k"):
        speculative_sample(TARGET, COMPILED, [], draft_k=0)
    with pytest.raises(InvalidArgumentError, match="n must"):
        speculative_sample(TARGET, COMPILED, [], n=0)
    other = ToyLM(Vocabulary.from_strings(["a", "b"]), lambda c: np.ones(3))
    with pytest.raises(InvalidArgumentError, match="draft_lm"):
        LMDrafter(other, TARGET.vocab_size)
    with pytest.raises(InvalidArgumentError, match="speculative"):
        speculative_sample(TARGET, COMPILED, [], drafter="nonsense-that-is-no-path")
    with pytest.raises(InvalidArgumentError, match="rule"):
        speculative_sample(TARGET, COMPILED, [], accept="sometimes")
