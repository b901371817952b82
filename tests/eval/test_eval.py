"""Evaluation harness: metrics by hand, checkers (JSON, SQL, SyGuS via cvc5), and one SyGuS run's files."""

from __future__ import annotations

import csv
import json
import math

import pytest

import gad.eval as ev
from gad.errors import InvalidArgumentError
from gad.eval import checkers, metrics
from gad.eval.tasks import data_dir, get_task

SL = data_dir() / "gad-bench" / "SLIA" / "bikes_small.sl"
BV = data_dir() / "gad-bench" / "bv4" / "find_inv_bvsge_bvadd_4bit.sl"
TABLES = data_dir() / "spider" / "tables.json"
needs_cvc5 = pytest.mark.skipif(not checkers.sygus_available(), reason="cvc5 not installed (pip install gad[sygus])")


def test_kl_tv_by_hand() -> None:
    p = {"a": 0.5, "b": 0.5}
    q = {"a": 0.25, "b": 0.75}
    assert metrics.kl_divergence(p, q) == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3))
    assert metrics.total_variation(p, q) == pytest.approx(0.25)
    assert metrics.kl_divergence({"c": 1.0}, q) == math.inf
    c = metrics.exact_curves(["a", None, "b", "a"], q, [1, 2, 4])
    assert c["kl"][0] == pytest.approx(math.log(4))          # first sample "a": KL = ln(1/.25)
    assert c["tv"][2] == pytest.approx(0.5 * (abs(2 / 3 - 0.25) + abs(1 / 3 - 0.75)))
    assert c["expectation"][2] == pytest.approx((0.25 + 0.75 + 0.25) / 3)


def test_ideal_law_and_window() -> None:
    outs = [("x", (1,), math.log(0.2)), ("x", (1,), math.log(0.2)), ("x", (2, 3), math.log(0.1)),
            ("y", (4,), math.log(0.1))]
    ideal = metrics.ideal_law(outs)   # x: .2 + .1 (two tokenizations, repeats once), y: .1
    assert ideal == pytest.approx({"x": 0.75, "y": 0.25})
    c = metrics.open_curves(["x", "x", "y", "y"], ideal, [4], window=2)   # window = last two: y, y
    assert c["kl"][0] == pytest.approx(math.log(4))
    assert c["expectation"][0] == pytest.approx(0.5)


def test_checkers_json_sql() -> None:
    schema = {"type": "object", "required": ["a"]}
    assert checkers.check_json('{"a": 1}', schema)
    assert not checkers.check_json('{"b": 1}', schema)
    assert not checkers.check_json('{"a": 1', None)
    assert checkers.check_sql("SELECT Name FROM singer WHERE Age > 30", "concert_singer", str(TABLES))
    assert not checkers.check_sql("SELECT Nme FROM singer", "concert_singer", str(TABLES))


@needs_cvc5
def test_checker_sygus() -> None:
    good = "(define-fun f ((name String)) String (str.substr name 0 (- (str.len name) 3)))"
    assert checkers.check_sygus(good, str(SL)) is True
    assert checkers.check_sygus("(define-fun f ((name String)) String name)", str(SL)) is False
    assert checkers.check_sygus("(define-fun f ((name String)) String (", str(SL)) is False
    inv = "(define-fun inv ((s (BitVec 4)) (t (BitVec 4))) (BitVec 4) (bvsub t s))"
    assert checkers.check_sygus(inv, str(BV)) is True        # (t - s) + s = t >= t
    assert checkers.check_sygus(inv.replace("(bvsub t s)", "s"), str(BV)) is False


def test_unknown_task_and_method() -> None:
    with pytest.raises(InvalidArgumentError):
        get_task("no-such-task")
    with pytest.raises(InvalidArgumentError):
        ev.run(["dyck3"], ["no-such-method"], 2)


def test_harness_sygus_task_files(tmp_path) -> None:
    out = tmp_path / "ev"
    summary = ev.run(["slia/bikes_small"], ["gcd", "asap"], 4, model="toy", out_dir=out, seed=0,
                     max_new_tokens=60, batch_size=2, progress=False)
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 8
    for r in rows:
        assert {"task", "method", "index", "text", "token_ids", "logprob", "finished", "valid",
                "target_prob"} <= set(r)
        if r["finished"]:
            assert r["text"].startswith("(define-fun f ((name String)) String ")
            assert r["target_prob"] is not None and 0 < r["target_prob"] <= 1
            if checkers.sygus_available():
                assert r["valid"] in (True, False)
        else:
            assert r["valid"] is False
    t = summary["tasks"]["slia/bikes_small"]
    assert t["kind"] == "open" and t["checker"] == "sygus"
    for m in ("gcd", "asap"):
        info = t["methods"][m]
        assert info["n"] == 4 and 0 <= info["share_finished"] <= 1
        assert set(info["curve"]) == {"n", "kl", "expectation"} and info["curve"]["n"][-1] == 4
    assert json.loads((out / "summary.json").read_text())["tasks"]["slia/bikes_small"]["kind"] == "open"
    with open(out / "summary.csv") as f:
        table = list(csv.DictReader(f))
    assert [r["method"] for r in table] == ["gcd", "asap"] and "kl_final" in table[0]
    for kind in ("kl", "expectation"):
        png = out / "plots" / f"slia__bikes_small_{kind}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        png.unlink()
    assert (out / "tries" / "slia__bikes_small.trie").exists()
    from gad.eval.plots import main as plots_main
    from gad.eval.plots import replot  # redraws the plots from summary.json alone

    assert plots_main([str(tmp_path / "no-such-run")]) == 2  # a clear one-line error, no traceback

    assert sorted(p.name for p in replot(out)) == ["slia__bikes_small_expectation.png", "slia__bikes_small_kl.png"]
    assert (out / "plots" / "slia__bikes_small_kl.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_harness_exact_task_kl_ordering(tmp_path) -> None:
    """On the toy binary task ASAp's final KL to Q* is below GCD's (exact-task path of the harness)."""
    from gad.eval.tasks import Task
    from gad.testing.toys import gad_binary

    lm, _ = gad_binary()
    task = Task(name="toy-binary", kind="exact", prompt="", regex="00000|1[01]+", max_new_tokens=10,
                exact_max_len=8)
    s = ev.run([task], ["gcd", "asap"], 300, model=lm, out_dir=tmp_path, batch_size=1, progress=False)
    info = s["tasks"]["toy-binary"]["methods"]
    assert info["asap"]["kl_final"] < 0.1 < info["gcd"]["kl_final"]
    assert info["gcd"]["tv_final"] > 0.8
    assert set(info["gcd"]["kl_at"]) == {"100"}


def _gcd_law_texts(lm, compiled, max_len: int) -> dict[str, float]:
    """The exact mask-only (GCD) output law μ_proj over texts, by recursion over viable prefixes."""
    import numpy as np

    out: dict[str, float] = {}
    eos = set(compiled.vocab.eos_ids)

    def rec(prefix: list[int], m, q: float) -> None:
        p = np.exp(lm.logprobs([prefix])[0])
        mask = np.asarray(m.mask(), dtype=bool)
        z = p[mask].sum()
        for t in np.flatnonzero(mask & (p > 0)).tolist():
            if t in eos:
                s = compiled.vocab.decode(prefix).decode()
                out[s] = out.get(s, 0.0) + q * p[t] / z
            elif len(prefix) < max_len:
                c = m.fork()
                c.accept_token(t)
                rec(prefix + [t], c, q * p[t] / z)

    rec([], compiled.matcher(), 1.0)
    return out


def _tv_noise(law: dict[str, float], n: int) -> float:
    """Expected TV between ``law`` and an n-sample empirical law (normal approximation per outcome)."""
    return 0.5 * sum(math.sqrt(2 * p * (1 - p) / (math.pi * n)) for p in law.values())


def test_harness_speculative_methods_exact_task(tmp_path) -> None:
    """spec-gcd samples the GCD law (its KL to Q* is GCD's gap), spec-exact samples Q*; acceptance fields."""
    from gad.eval.tasks import Task
    from gad.phi.exact import enumerate_language
    from gad.testing.toys import gad_binary

    lm, _ = gad_binary()
    task = Task(name="toy-binary", kind="exact", prompt="", regex="00000|1[01]+", max_new_tokens=10,
                exact_max_len=8)
    n = 300
    s = ev.run([task], ["gcd", "spec-gcd", "spec-exact"], n, model=lm, out_dir=tmp_path, batch_size=1,
               progress=False)
    info = s["tasks"]["toy-binary"]["methods"]
    compiled = task.compile(lm.vocab)
    enum = enumerate_language(lm, compiled, [], max_len=8)
    q_star = {b.decode(): q for b, q in enum.q_strings().items()}
    mu = _gcd_law_texts(lm, compiled, 8)
    assert sum(mu.values()) == pytest.approx(1.0) and sum(q_star.values()) == pytest.approx(1.0)
    gap_kl = metrics.kl_divergence(mu, q_star)
    gap_tv = metrics.total_variation(mu, q_star)
    assert gap_kl > 5 and gap_tv > 0.85                       # the GCD gap on this task is large
    for m in ("gcd", "spec-gcd"):                             # both sample μ_proj: KL to Q* ≈ the gap
        assert info[m]["kl_final"] == pytest.approx(gap_kl, abs=0.3)
        assert info[m]["tv_final"] == pytest.approx(gap_tv, abs=3 * _tv_noise(mu, n))
    assert info["spec-exact"]["tv_final"] < 2.5 * _tv_noise(q_star, n) < 0.2   # Q* up to sampling noise
    assert info["spec-exact"]["kl_final"] < 0.1
    # the empirical law of spec-gcd is μ_proj up to noise (samples.jsonl)
    rows = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    spec_texts = [r["text"] for r in rows if r["method"] == "spec-gcd" and r["finished"]]
    assert len(spec_texts) == n
    assert metrics.total_variation(metrics.empirical(spec_texts), mu) < 2.5 * _tv_noise(mu, n)
    # acceptance statistics next to KL/TV
    assert "acceptance_rate" not in info["gcd"]
    for m in ("spec-gcd", "spec-exact"):
        a = info[m]
        assert a["drafter"] == "forced+ngram" and a["rule"] == "lossless" and a["draft_k"] == 4
        assert 0 <= a["acceptance_rate"] <= 1 and a["accepted"] <= a["drafted"]
        # (with a bonus ending every step the two means differ by exactly 1: compare up to rounding)
        assert 0 <= a["mean_accepted"] <= a["mean_accepted_with_bonus"] <= a["mean_accepted"] + 1 + 1e-12
        assert a["passes_per_token"] == pytest.approx(a["target_passes"] / a["tokens"])
        assert a["tokens"] == sum(len(r["token_ids"]) + 1 for r in rows if r["method"] == m)  # all finished
        assert a["certified_share"] is None                   # the lossless rule has no certificate
    # mask-only drafts of forced zeros are accepted far more often than under Φ-reweighting
    assert info["spec-gcd"]["acceptance_rate"] > 0.8 > info["spec-exact"]["acceptance_rate"]
    assert info["spec-gcd"]["passes_per_token"] < 0.5
    with open(tmp_path / "summary.csv") as f:
        table = {r["method"]: r for r in csv.DictReader(f)}
    assert float(table["spec-gcd"]["acceptance_rate"]) == pytest.approx(info["spec-gcd"]["acceptance_rate"])
    assert table["gcd"]["acceptance_rate"] == ""


def test_harness_speculative_settings_and_certificates(tmp_path) -> None:
    """--accept greedy / --draft-k / --drafter reach the spec methods; certificates are logged."""
    from gad.eval.tasks import Task
    from gad.testing.toys import gad_binary

    lm, _ = gad_binary()
    task = Task(name="toy-binary", kind="exact", prompt="", regex="00000|1[01]+", max_new_tokens=10,
                exact_max_len=8)
    s = ev.run([task], ["spec-gcd", "spec-asap"], 20, model=lm, out_dir=tmp_path, progress=False,
               speculative={"accept": "greedy", "draft_k": 2, "drafter": "forced-token"})
    for m in ("spec-gcd", "spec-asap"):
        a = s["tasks"]["toy-binary"]["methods"][m]
        assert a["rule"] == "greedy" and a["draft_k"] == 2 and a["drafter"] == "forced"  # ForcedDrafter.name
        assert a["certified_share"] is not None and 0 <= a["certified_share"] <= 1
    assert (tmp_path / "tries" / "toy-binary__spec-asap.trie").exists()
    with pytest.raises(InvalidArgumentError, match="draft_k"):
        ev.run([task], ["spec-gcd"], 2, model=lm, out_dir=tmp_path, progress=False, speculative={"draft_k": 0})


def test_eval_cli_prints_acceptance_next_to_kl(tmp_path, capsys) -> None:
    from gad.cli import main

    rc = main(["eval", "--task", "dyck3", "--method", "gcd", "spec-gcd", "-n", "6", "--out", str(tmp_path),
               "--no-progress", "--drafter", "forced+ngram:2", "--draft-k", "2", "--accept", "topm:2"])
    assert rc == 0
    out = capsys.readouterr().out.splitlines()
    lines = [json.loads(x) for x in out if x.startswith("{")]
    spec = next(x for x in lines if x["method"] == "spec-gcd")
    assert spec["drafter"] == "forced+ngram" and spec["rule"] == "topm:2" and spec["draft_k"] == 2
    assert {"kl_final", "tv_final", "acceptance_rate", "mean_accepted", "mean_accepted_with_bonus",
            "passes_per_token", "certified_share"} <= set(spec)
    assert "acceptance_rate" not in next(x for x in lines if x["method"] == "gcd")
    header = next(x for x in out if x.startswith("task "))
    for col in ("KL", "TV", "acc.rate", "len+bonus", "pass/tok", "cert|acc"):
        assert col in header
    with pytest.raises(SystemExit) as exc:
        main(["eval", "--task", "dyck3", "--drafter", "ngram:x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--drafter" in err


def test_exact_max_len_override(tmp_path) -> None:
    s = ev.run(["dyck3"], ["gcd"], 3, model="toy", out_dir=tmp_path, exact_max_len=4, progress=False)
    assert s["tasks"]["dyck3"]["exact_max_len"] == 4
    # dyck3 words of <= 4 characters (one token each in the toy model): (), ()(), (())
    assert s["tasks"]["dyck3"]["support"] == 3
    with pytest.raises(InvalidArgumentError, match="exact_max_len"):
        ev.run(["dyck3"], ["gcd"], 3, model="toy", out_dir=tmp_path, exact_max_len=0)
