"""Tests of gad.sampling: seeded reproducibility, the GCD law on a toy grammar, the real model on JSON."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import gad
from gad.api import sample
from gad.engine.vocab import Vocabulary
from gad.errors import InvalidArgumentError
from gad.grammar import BUILTIN_DIR
from gad.models.base import ToyLM
from gad.sampling.dist import constrained_weights, draw
from gad.testing.finite import TextLanguage

ROOT = Path(__file__).resolve().parents[2]


# --- a brute-force stand-in for gad.compile on a finite language ------------------------------------


VOCAB = Vocabulary.from_strings(["a", "b", "ab", "c"])  # EOS = id 4
LANG = {"a", "ab", "abb", "b", "ca"}


def toy_lm() -> ToyLM:
    rng = np.random.default_rng(7)
    table: dict[tuple[int, ...], np.ndarray] = {}

    def f(ctx: tuple[int, ...]) -> np.ndarray:
        if ctx not in table:
            table[ctx] = rng.dirichlet(np.ones(VOCAB.size))
        return table[ctx]

    return ToyLM(VOCAB, f, name="toy-dirichlet")


def gcd_law(lm: ToyLM, compiled: TextLanguage) -> dict[tuple[int, ...], float]:
    """Analytic GCD law over token sequences (EOS excluded), by enumeration."""
    law: dict[tuple[int, ...], float] = {}

    def rec(prefix: list[int], prob: float) -> None:
        m = compiled.matcher()
        for t in prefix:
            assert m.accept_token(t)
        mask = m.mask()
        p = np.exp(lm.logprobs([prefix])[0]) * mask
        p /= p.sum()
        for t in np.flatnonzero(p):
            if t in VOCAB.eos_ids:
                law[tuple(prefix)] = law.get(tuple(prefix), 0.0) + prob * p[t]
            else:
                rec(prefix + [int(t)], prob * p[t])

    rec([], 1.0)
    return law


def test_seeded_reproducibility() -> None:
    lm, comp = toy_lm(), TextLanguage(VOCAB, LANG)
    a = sample(lm, comp, "", n=12, seed=3, max_new_tokens=8)
    b = sample(lm, comp, "", n=12, seed=3, max_new_tokens=8, batch_size=5)
    c = sample(lm, comp, "", n=12, seed=4, max_new_tokens=8)
    assert [s.token_ids for s in a] == [s.token_ids for s in b]
    assert [s.token_ids for s in a] != [s.token_ids for s in c]
    for s in a:
        assert s.finished and s.text in LANG
        ref = sum(lm.logprobs([s.token_ids[:i]])[0][t] for i, t in enumerate(s.token_ids + [4]))
        assert s.logprob == pytest.approx(ref, abs=1e-9)


def real_compiled():
    """The same finite language through gad.compile (the lead's matcher), when it is there."""
    return gad.compile(gad.Grammar.from_string('start: "a" "b"? "b"? | "b" | "ca"'), VOCAB, cache_dir=False)


@pytest.mark.parametrize("which", ["stand-in", "gad.compile"])
def test_empirical_gcd_law_matches_analytic(which: str) -> None:
    lm = toy_lm()
    comp = TextLanguage(VOCAB, LANG) if which == "stand-in" else real_compiled()
    law = gcd_law(lm, TextLanguage(VOCAB, LANG))
    assert sum(law.values()) == pytest.approx(1.0)
    n = 3000
    got = Counter(tuple(s.token_ids) for s in sample(lm, comp, "", n=n, seed=0, max_new_tokens=8, batch_size=100))
    tv = 0.5 * sum(abs(got.get(k, 0) / n - law.get(k, 0.0)) for k in set(got) | set(law))
    assert set(got) <= set(law)
    assert tv < 0.04, (tv, got, law)


def test_budget_gives_unfinished_samples() -> None:
    lm, comp = toy_lm(), TextLanguage(VOCAB, {"abababab"})
    for s in sample(lm, comp, "", n=3, max_new_tokens=2):
        assert not s.finished and len(s.token_ids) == 2


@pytest.mark.parametrize("kw", [{"n": 0}, {"max_new_tokens": 0}, {"temperature": 0.0}, {"top_p": 1.5},
                                {"top_k": 0}, {"method": "nope"}, {"batch_size": 0}])
def test_bad_arguments_raise(kw: dict) -> None:
    with pytest.raises(InvalidArgumentError):
        sample(toy_lm(), TextLanguage(VOCAB, LANG), "", **kw)


def test_weights_and_draw() -> None:
    logp = np.log(np.array([[0.5, 0.3, 0.2], [1e-320, 1e-300, 1.0]]))
    phi = np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    w = constrained_weights(logp, phi)
    assert w[0, 1] == 0 and w[0, 0] == 1.0 and w[0, 2] == pytest.approx(0.4)
    assert w[1].max() == 1.0 and w[1, 2] == 0  # no underflow when every allowed token is improbable
    assert list(draw(w, np.array([0.0, 0.999]))) == [0, 1]
    assert (constrained_weights(logp, phi, top_k=1) > 0).sum() == 2
    u = np.random.default_rng(0).random(20000)
    idx = draw(np.repeat(w[:1], len(u), axis=0), u)
    assert np.mean(idx == 2) == pytest.approx(0.2 / 0.7, abs=0.02) and not np.any(idx == 1)


# --- the real model -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def real_lm():
    return gad.load_model()


@pytest.mark.model
def test_real_model_json_samples_parse_and_score(real_lm) -> None:
    grammar = BUILTIN_DIR / "json.lark"
    samples = gad.sample(real_lm, grammar, "Give a JSON object describing a cat, with a name and an age.",
                         n=2, seed=0, max_new_tokens=48)
    assert len(samples) == 2
    prompt_ids = real_lm.encode_prompt("Give a JSON object describing a cat, with a name and an age.")
    for s in samples:
        if s.finished:
            json.loads(s.text)
        ids = s.token_ids + ([s.eos_id] if s.finished else [])
        lp = real_lm.logprobs([prompt_ids + ids[:i] for i in range(len(ids))])
        ref = float(sum(lp[i, t] for i, t in enumerate(ids)))
        assert s.logprob == pytest.approx(ref, abs=1e-3)
    assert any(s.finished for s in samples) or all(len(s.token_ids) == 48 for s in samples)


def test_asap_on_toy_runs_and_learns(tmp_path: Path) -> None:
    lm, comp = toy_lm(), TextLanguage(VOCAB, LANG)
    path = tmp_path / "trie.bin"
    out = sample(lm, comp, "", n=20, method="asap", seed=0, max_new_tokens=8, trie=str(path), batch_size=4)
    assert all(s.finished and s.text in LANG for s in out) and all(s.method == "asap" for s in out)
    assert path.is_file()  # flushed at the end
    again = sample(lm, comp, "", n=4, method="asap", seed=1, max_new_tokens=8, trie=str(path))
    assert all(s.text in LANG for s in again)


def test_speculative_is_delegated() -> None:
    lm, comp = toy_lm(), real_compiled()
    out = sample(lm, comp, "", n=6, seed=0, max_new_tokens=8, speculative="forced", draft_k=2)
    assert len(out) == 6 and all(s.finished and s.text in LANG for s in out)
    with pytest.raises(InvalidArgumentError):
        sample(lm, comp, "", n=1, speculative="forced", temperature=0.5)
