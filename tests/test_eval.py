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
    assert (out / "tries" / "slia__bikes_small.trie").exists()


def test_harness_exact_task_kl_ordering(tmp_path) -> None:
    """On the toy binary task ASAp's final KL to Q* is below GCD's (exact-task path of the harness)."""
    from gad.eval.tasks import Task
    from gad.eval.toys import gad_binary

    lm, _ = gad_binary()
    task = Task(name="toy-binary", kind="exact", prompt="", regex="00000|1[01]+", max_new_tokens=10,
                exact_max_len=8)
    s = ev.run([task], ["gcd", "asap"], 300, model=lm, out_dir=tmp_path, batch_size=1, progress=False)
    info = s["tasks"]["toy-binary"]["methods"]
    assert info["asap"]["kl_final"] < 0.1 < info["gcd"]["kl_final"]
    assert info["gcd"]["tv_final"] > 0.8
    assert set(info["gcd"]["kl_at"]) == {"100"}
