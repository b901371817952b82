"""Aligned samplers on the bundled SmolLM2 model and the GAD binary grammar ``string_start_w_1_all_0``.

* rs: a chi-square test of 300 exact samples against the enumerated ``Q*`` does not reject (p > 1e-3;
  the grammar is inlined: the two lines of ``binary/string_start_w_1_all_0.ebnf`` from the GAD paper's
  benchmark, ebmoon/transformers-GAD, MIT licence);
* the trie cache's next-token distributions equal fresh full-context model calls (max abs log-prob
  difference < 1e-3 nats: a multi-token cache extension and a one-token step differ only by float noise).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import gad
from gad.phi import make_estimator
from gad.phi.exact import enumerate_language
from gad.phi.trie import PhiTrie
from gad.sampling.aligned import TrieProposer, rejection_sample

GRAMMAR = 'root   ::= "00000" | "1"s\ns      ::= "0" | "1" | "0"s | "1"s\n'
PROMPT = "Write a binary string (digits 0 and 1 only). Answer with the string only."


@pytest.fixture(scope="module")
def setup(smollm2):
    g = gad.Grammar.from_string(GRAMMAR, kind="ebnf")
    cg = gad.compile(g, smollm2.vocab)
    pid = smollm2.encode_prompt(PROMPT)
    e = enumerate_language(smollm2, cg, pid, max_len=5)
    return smollm2, cg, pid, e


def test_rs_chi_square_against_enumerated_q_star(setup) -> None:
    from scipy.stats import chisquare

    lm, cg, pid, e = setup
    q = {w: p / e.Z for w, p in e.sequences.items()}
    n = 300
    s = rejection_sample(lm, cg, pid, n=n, seed=0, max_new_tokens=6)
    c = Counter(tuple(x.token_ids) for x in s)
    assert set(c) <= set(q)
    big = [w for w in sorted(q, key=lambda w: -q[w]) if q[w] * n >= 5]
    obs = [c.get(w, 0) for w in big] + [n - sum(c.get(w, 0) for w in big)]
    exp = [q[w] * n for w in big] + [n * (1 - sum(q[w] for w in big))]
    if exp[-1] < 5:  # fold a tiny rest bin into the last big one
        obs[-2] += obs.pop()
        exp[-2] += exp.pop()
    assert len(big) >= 3
    assert chisquare(obs, exp).pvalue > 1e-3
    comp = s[-1].stats["compute"]
    assert 0 < comp["model_rows"] <= e.n_nodes  # never more rows than distinct prefixes


def test_trie_cache_equals_fresh_model_calls(setup) -> None:
    lm, cg, pid, _ = setup
    est = make_estimator("asap", lm, cg, pid, trie=PhiTrie())
    prop = TrieProposer(lm, cg, pid, est, max_new_tokens=6)
    for i in range(40):
        prop.observe(prop.propose(np.random.default_rng([4, i])))
    trie = prop.trie
    paths, cached = [], []
    for node, (ids, logp) in prop._dist.items():
        paths.append(pid + trie.prefix(node))
        cached.append((ids, logp))
    assert len(paths) >= 5
    assert prop.compute.model_positions > prop.compute.model_rows  # some nodes came from extensions
    fresh = lm.logprobs(paths)
    for (ids, logp), row in zip(cached, fresh, strict=True):
        assert np.abs(row[ids] - logp).max() < 1e-3
