"""rs / smc / mcmc through the method registry: ``gad.sample(method=…, options=…)``, ``gad sample``'s
flags and ``gad eval``'s summary (compute and weight fields)."""

from __future__ import annotations

import argparse
import json
import math

import pytest

import gad
from gad.cli import sample as cli_sample
from gad.errors import InvalidArgumentError
from gad.eval.harness import run as run_eval
from gad.phi.trie import PhiTrie
from gad.sampling.methods import get_method, method_names
from gad.testing.toys import gad_binary


def test_registry_lists_the_aligned_methods() -> None:
    names = method_names()
    for m in ("rs", "smc", "mcmc"):
        assert m in names and get_method(m).uses_trie
    assert get_method("smc").options == ("particles", "ess_threshold", "proposal", "draws")


@pytest.mark.parametrize("method,options", [("rs", {}), ("rs", {"trie_cache": False}),
                                            ("smc", {"particles": 8}), ("smc", {"draws": True, "particles": 20}),
                                            ("smc", {"proposal": "asap", "ess_threshold": 1.0}),
                                            ("mcmc", {"steps": 2, "move": "restart"}),
                                            ("mcmc", {"steps": 2, "move": "priority"}), ("asap", {})])
def test_sample_runs_each_method(method, options) -> None:
    lm, cg = gad_binary()
    s = gad.sample(lm, cg, [], n=8, method=method, seed=2, max_new_tokens=7, options=options)
    assert len(s) == 8 and [x.index for x in s] == list(range(8))
    assert all(x.method == method for x in s)
    assert all(x.log_weight is not None for x in s)
    assert s[-1].stats["compute"]["model_rows"] >= 0
    if method in ("rs", "mcmc") or options.get("draws"):
        assert all(x.finished and x.log_weight == 0.0 and x.log_z0 is None for x in s)
    if method == "smc" and not options.get("draws"):
        z = s[-1].stats["log_z_hat"]
        mean_w = sum(math.exp(x.log_z0 + x.log_weight) for x in s) / len(s)
        assert math.log(mean_w) == pytest.approx(z, abs=1e-9)


def test_smc_draws_when_no_particle_finishes_are_budget_cut_particles() -> None:
    """Every binary string is 5 characters: with a 2-token budget no particle finishes, and the draws
    are budget-cut particles (finished False, weight 0) instead of an error; with 7 tokens they finish."""
    lm, cg = gad_binary()
    opts = {"draws": True, "particles": 6}
    s = gad.sample(lm, cg, [], n=4, method="smc", seed=3, max_new_tokens=2, options=opts)
    assert len(s) == 4 and not any(x.finished for x in s)
    assert all(x.log_weight == -math.inf and len(x.token_ids) == 2 for x in s)
    parts = gad.sample(lm, cg, [], n=6, method="smc", seed=3, max_new_tokens=2, options={"particles": 6})
    assert {x.text for x in s} <= {x.text for x in parts}  # the same run's particles
    assert all(x.finished for x in gad.sample(lm, cg, [], n=4, method="smc", seed=3, max_new_tokens=7,
                                              options=opts))


def test_rs_and_mcmc_keep_a_persistent_trie(tmp_path) -> None:
    lm, cg = gad_binary()
    path = tmp_path / "t.trie"
    gad.sample(lm, cg, [], n=20, method="rs", max_new_tokens=7, trie=str(path))
    assert path.is_file()
    s = gad.sample(lm, cg, [], n=20, method="rs", seed=1, max_new_tokens=7, trie=str(path))
    assert s[-1].stats["acceptance_rate"] > 0.9  # the saved trie already knows the language
    gad.sample(lm, cg, [], n=4, method="mcmc", max_new_tokens=7, trie=str(path), options={"steps": 1})
    with pytest.raises(gad.errors.TrieMismatchError):
        gad.sample(lm, cg, [1], n=2, method="rs", max_new_tokens=7, trie=str(path))  # another prompt


@pytest.mark.parametrize("method,options,msg", [
    ("gcd", {"particles": 3}, "particles mean nothing to method gcd"),
    ("rs", {"max_proposals": 0}, "max_proposals"),
    ("rs", {"trie_cache": "yes"}, "trie_cache"),
    ("mcmc", {"move": "sideways"}, "move"),
    ("mcmc", {"steps": -1}, "steps"),
    ("smc", {"proposal": "nope"}, "option proposal"),
    ("smc", {"ess_threshold": 2.0}, "ess_threshold"),
    ("smc", {"particles": 0}, "particles"),
])
def test_bad_options_name_the_option(method, options, msg) -> None:
    lm, cg = gad_binary()
    with pytest.raises(InvalidArgumentError, match=msg):
        gad.sample(lm, cg, [], n=3, method=method, max_new_tokens=7, options=options)


def test_exact_methods_refuse_a_changed_law_and_smc_a_useless_trie() -> None:
    lm, cg = gad_binary()
    for m in ("rs", "smc", "mcmc"):
        with pytest.raises(InvalidArgumentError, match="temperature"):
            gad.sample(lm, cg, [], n=2, method=m, max_new_tokens=7, temperature=0.5)
    with pytest.raises(InvalidArgumentError, match="trie"):
        gad.sample(lm, cg, [], n=2, method="smc", max_new_tokens=7, trie=PhiTrie())
    with pytest.raises(InvalidArgumentError, match="max_proposals"):
        gad.sample(lm, cg, [], n=2, method="rs", max_new_tokens=2, options={"max_proposals": 50})


def test_cli_flags_map_to_method_options() -> None:
    p = argparse.ArgumentParser()
    cli_sample.add_arguments(p)
    base = ["--grammar", "g.lark", "--prompt", "x"]
    a = p.parse_args(base + ["--method", "smc", "--particles", "30", "--draws", "--proposal", "asap"])
    assert cli_sample.method_options(a, get_method("smc")) == {"particles": 30, "ess_threshold": 0.5,
                                                               "proposal": "asap", "draws": True}
    a = p.parse_args(base + ["--method", "mcmc", "--steps", "3", "--move", "priority", "--no-trie-cache"])
    assert cli_sample.method_options(a, get_method("mcmc")) == {"steps": 3, "move": "priority",
                                                                "trie_cache": False}
    a = p.parse_args(base + ["--method", "rs", "--particles", "3"])
    with pytest.raises(InvalidArgumentError, match="--particles: options of other methods; --method rs"):
        cli_sample.method_options(a, get_method("rs"))
    a = p.parse_args(base + ["--method", "gcd", "--steps", "3", "--draws"])  # (every method's flags are checked)
    with pytest.raises(InvalidArgumentError, match="--draws / --steps: options of other methods; --method gcd"):
        cli_sample.method_options(a, get_method("gcd"))
    helptext = p.format_help()
    for flag in ("--max-proposals", "--particles", "--ess-threshold", "--steps", "--move", "--no-trie-cache"):
        assert flag in helptext


def test_eval_summary_records_compute_and_weights(tmp_path) -> None:
    summary = run_eval(["dyck3"], ["gcd", "rs", "smc", "mcmc"], 30, model="toy", out_dir=tmp_path,
                       progress=False)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    for m in ("gcd", "rs", "smc", "mcmc"):
        info = on_disk["tasks"]["dyck3"]["methods"][m]
        assert info["model_rows"] > 0 and info["model_positions"] >= info["model_rows"]
        assert info["seconds"] > 0 and info["ess"] is not None
    rs = summary["tasks"]["dyck3"]["methods"]["rs"]
    assert rs["ess"] == pytest.approx(30.0) and rs["kl_snis"] == pytest.approx(rs["kl_final"])
    assert summary["tasks"]["dyck3"]["methods"]["gcd"]["log_z_hat"] < 0
    assert (tmp_path / "tries" / "dyck3__rs.trie").is_file()
    header = (tmp_path / "summary.csv").read_text().splitlines()[0]
    assert "model_rows" in header and "kl_snis" in header


def test_rs_budget_error_keeps_accepted_samples_and_compute() -> None:
    """rs out of proposals raises ProposalBudgetError holding the exact draws already accepted and the
    model calls of every proposal (nothing finished is lost, no compute goes uncounted)."""
    from gad.errors import ProposalBudgetError

    lm, cg = gad_binary()
    with pytest.raises(ProposalBudgetError) as info:
        gad.sample(lm, cg, [], n=2, method="rs", max_new_tokens=2, options={"max_proposals": 7})
    assert info.value.proposals == 7 and info.value.samples == [] and info.value.compute["model_rows"] > 0
    with pytest.raises(ProposalBudgetError) as info:
        gad.sample(lm, cg, [], n=10_000, method="rs", max_new_tokens=7, options={"max_proposals": 40})
    err = info.value
    assert err.proposals == 40 and 0 < len(err.samples) < 40
    for s in err.samples:
        assert s.finished and s.method == "rs" and cg.grammar.parses(s.text)
    assert err.compute["model_rows"] >= sum(int(s.stats.get("model_rows", 0)) for s in err.samples)
