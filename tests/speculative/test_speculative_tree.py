"""Greedy tree decoding: hand-built tree with a known accepted path; output = greedy decoding from p̃."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest
from test_speculative_lossless import COMPILED, EOS, TARGET, VOCAB, ExactFinitePhi, _greedy_path, random_lm

from gad.errors import InvalidArgumentError
from gad.models.base import ToyLM
from gad.phi.base import IndicatorPhi
from gad.speculative import Drafter, LMDrafter, speculative_sample
from gad.speculative.tree import build_tree, greedy_accept, parse_tree, top_m


class TableDrafter(Drafter):
    """Draft distributions looked up by generated context (prompt is empty in these toys)."""

    name = "table"

    def __init__(self, table: dict[tuple[int, ...], Sequence[float]]) -> None:
        super().__init__((EOS,))
        self.table = table

    def dist(self, context: Sequence[int], mask: np.ndarray) -> np.ndarray | None:
        row = self.table.get(tuple(context))
        if row is None:
            return None
        q = np.asarray(row, dtype=float) * mask
        return q / q.sum() if q.sum() > 0 else None


TGT = ToyLM.from_table(VOCAB, {
    (): [0.5, 0.2, 0.2, 0.05, 0.05],       # greedy: a
    (0,): [0.1, 0.6, 0.1, 0.1, 0.1],       # greedy: b
    (0, 1): [0.1, 0.05, 0.1, 0.05, 0.7],   # greedy: EOS
}, default=[0.3, 0.1, 0.2, 0.1, 0.3])
DRF = TableDrafter({
    (): [0.4, 0.0, 0.35, 0.25, 0.0],       # children of the root: a, c
    (0,): [0.5, 0.0, 0.3, 0.2, 0.0],       # children of 'a': a, c  (misses the target's 'b')
    (0, 0): [0.1, 0.9, 0.0, 0.0, 0.0],
    (0, 1): [0.0, 0.0, 0.0, 0.0, 1.0],     # child of 'ab': EOS
})


def test_hand_built_tree_accepts_the_known_path() -> None:
    tree = build_tree(DRF, COMPILED.matcher(), [], 2, 2, (EOS,))
    assert [tree.tokens[i] for i in tree.children[-1]] == [0, 2]
    a = tree.children[-1][0]
    assert [tree.tokens[i] for i in tree.children[a]] == [0, 2]
    assert len(tree) == 4  # root -> a, c; a -> a, c; the drafter has no row for 'c' (a leaf)

    def target_at(node: int) -> np.ndarray:
        ctx = tuple(tree.path(node)) if node >= 0 else ()
        mask = COMPILED.matcher()
        mask.accept_tokens(ctx)
        p = np.exp(TGT.logprobs([ctx])[0]) * mask.mask()
        return p / p.sum()

    path, g, reached = greedy_accept(tree, target_at, (EOS,))
    assert [tree.tokens[i] for i in path] == [0] and g == 1
    assert [(tree.tokens[n], ok) for n, ok in reached] == [(0, True), (2, False), (0, False), (2, False)]


def test_hand_built_tree_full_run() -> None:
    (s,) = speculative_sample(TGT, COMPILED, [], n=1, drafter=DRF, tree=(2, 2), max_new_tokens=10, log=True,
                              domain="toy")
    assert s.token_ids == [0, 1] and s.finished
    st = s.stats
    assert st["steps"] == 2 and st["accepted"] == 2 and st["tokens"] == 3  # a | b(bonus) | EOS
    assert st["target_passes"] == 2 and st["scorer"] == "per-path"
    expected_lp = np.log([0.5, 0.6, 0.7]).sum()
    assert s.logprob == pytest.approx(expected_lp)
    bonus = [r for r in st["log"] if r.bonus]
    assert [(r.step, r.depth, r.token) for r in bonus] == [(1, 2, 1)]


@pytest.mark.parametrize("m,d", [(1, 1), (1, 3), (2, 2), (3, 3)])
@pytest.mark.parametrize("exact", [False, True])
def test_tree_output_is_greedy_decoding_from_ptilde(m: int, d: int, exact: bool) -> None:
    est = ExactFinitePhi(TARGET, COMPILED) if exact else IndicatorPhi()
    for seed in (2, 5, 9):
        drafter = LMDrafter(random_lm(seed, "d"), 5)
        (s,) = speculative_sample(TARGET, COMPILED, [], n=1, drafter=drafter, tree=(m, d), estimator=est,
                                  max_new_tokens=10)
        assert tuple(s.token_ids) == _greedy_path(COMPILED, est)
        assert s.stats["target_passes"] <= s.stats["tokens"]


def test_self_draft_tree_accepts_everything() -> None:
    """Drafting with the target itself (m=1): every greedy token is in the tree; one pass per d+1 tokens."""
    (s,) = speculative_sample(TARGET, COMPILED, [], n=1, drafter=LMDrafter(TARGET, 5), tree=(1, 4),
                              max_new_tokens=10)
    st = s.stats
    assert st["tokens"] >= 3
    # every step accepts its whole path: steps = ceil(tokens / (d + 1)) (EOS may be a drafted node)
    assert st["steps"] == -(-st["tokens"] // 5)
    assert st["accepted"] == st["tokens"] - st["steps"] + (1 if st["tokens"] % 5 == 0 else 0) or \
        st["accepted"] == st["tokens"] - st["steps"]


def test_top_m_and_parse() -> None:
    assert top_m(np.array([0.2, 0.5, 0.0, 0.3, 0.0]), 4) == [1, 3, 0]
    assert top_m(np.array([0.5, 0.5]), 1) == [0]
    assert parse_tree("2, 3") == (2, 3)
    for bad in ("2", (0, 1), "a,b", (1, 2, 3)):
        with pytest.raises(InvalidArgumentError, match="tree"):
            parse_tree(bad)
    with pytest.raises(InvalidArgumentError, match="tree"):
        speculative_sample(TARGET, COMPILED, [], drafter=DRF, tree=(2, 2), accept="topm:2")


def test_tree_log_carries_the_parents_coverage_certificate() -> None:
    """Each child record holds its parent's p̃ entropy, KL(p̃‖q) and the greedy-tree certificate."""
    from gad.speculative.certificates import kl, tree_certificate

    (s,) = speculative_sample(TGT, COMPILED, [], n=1, drafter=DRF, tree=(2, 2), max_new_tokens=10, log=True,
                              domain="toy")
    first = [r for r in s.stats["log"] if r.step == 1 and r.depth == 1 and not r.bonus]
    assert [r.token for r in first] == [0, 2]
    m0 = COMPILED.matcher().mask()
    p = np.exp(TGT.logprobs([()])[0]) * m0
    p /= p.sum()
    q = np.asarray(DRF.table[()]) * m0
    q /= q.sum()
    for r in first:  # siblings share the root's numbers
        assert r.kl == pytest.approx(kl(p, q)) and r.certificate == pytest.approx(tree_certificate(p, 2))
        assert r.entropy == pytest.approx(-(p[p > 0] * np.log(p[p > 0])).sum())


@pytest.mark.parametrize("m", [1, 2, 3])
def test_a_certified_tree_level_is_always_accepted(m: int) -> None:
    """KL(p̃‖q) < C_tree(p̃, m) guarantees the greedy token is among the drafter's top-m children, so
    every certified level of the log must be an accepted one (over many random drafters)."""
    from gad.speculative.stats import summarize

    records = []
    for seed in range(12):
        drafter = LMDrafter(random_lm(seed, "d"), 5)
        (s,) = speculative_sample(TARGET, COMPILED, [], n=1, drafter=drafter, tree=(m, 3), max_new_tokens=10,
                                  log=True, domain="toy")
        records += [dataclasses.replace(r, step=1000 * seed + r.step) for r in s.stats["log"] if not r.bonus]
    assert records and all(np.isfinite(r.certificate) or r.certificate == np.inf for r in records)
    levels: dict[tuple[int, int], list] = {}
    for r in records:
        levels.setdefault((r.step, r.depth), []).append(r)
    certified = [lv for lv in levels.values() if lv[0].certified]
    assert certified, "no level was certified: the test would not test anything"
    assert all(any(r.accepted for r in lv) for lv in certified)
    assert summarize(records)["toy"].accepted_share_of_certified == 1.0
