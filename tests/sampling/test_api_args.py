"""gad.sample refuses arguments that would be silently changed or ignored (issue 9)."""

from __future__ import annotations

import pytest

from gad import api
from gad.errors import InvalidArgumentError
from gad.phi.registry import make_estimator
from gad.testing.toys import gad_binary


@pytest.mark.parametrize("seed", [1.5, True, False, -1, "3", None, 2.0])
def test_seed_must_be_a_non_negative_integer(seed) -> None:
    lm, cg = gad_binary()
    with pytest.raises(InvalidArgumentError, match="seed must be a non-negative integer"):
        api.sample(lm, cg, [], n=1, seed=seed)


def test_trie_with_a_method_that_ignores_it_is_refused(tmp_path) -> None:
    lm, cg = gad_binary()
    with pytest.raises(InvalidArgumentError, match="uses no Φ̂ trie"):
        api.sample(lm, cg, [], n=1, method="gcd", trie=tmp_path / "t.trie")
    assert not (tmp_path / "t.trie").exists()


@pytest.mark.parametrize("kw", [{"first_index": 2}, {"on_batch": print}])
def test_continuation_options_need_an_estimator_object(kw) -> None:
    lm, cg = gad_binary()
    with pytest.raises(InvalidArgumentError, match="first_index and on_batch need"):
        api.sample(lm, cg, [], n=1, method="gcd", **kw)


def test_first_index_continues_the_seed_stream() -> None:
    lm, cg = gad_binary()
    full = api.sample(lm, cg, [], n=6, method=make_estimator("gcd", lm, cg, []), seed=9, batch_size=2)
    seen: list[int] = []
    tail = api.sample(lm, cg, [], n=4, method=make_estimator("gcd", lm, cg, []), seed=9, batch_size=2,
                      first_index=2, on_batch=lambda b: seen.extend(s.index for s in b))
    assert [s.token_ids for s in tail] == [s.token_ids for s in full[2:]]
    assert seen == [2, 3, 4, 5] and [s.index for s in tail] == [2, 3, 4, 5]
    with pytest.raises(InvalidArgumentError, match="first_index must be a non-negative integer"):
        api.sample(lm, cg, [], n=1, method=make_estimator("gcd", lm, cg, []), first_index=-1)
