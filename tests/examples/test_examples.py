"""The three examples, run through their ``main`` in a reduced mode on the bundled model.

They check what a reader of the printed tables relies on: every SQL candidate the GCD / aligned samplers
return parses with sql.lark; the execution checker gives sqlite3's own answer on the gold queries; every
JSON record validates against its schema; the KL figures of the aligned example are the ones its
samples give.  Spider data: tests/data/spider (``GAD_DATA_DIR``, set by conftest) and the excerpt
shipped in gad/eval/data/spider.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import jsonschema
import pytest

import gad

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"gad_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def sql_ex() -> ModuleType:
    return _load("sql_generation")


def _kl(p: dict[str, float], q: dict[str, float]) -> float:
    return sum(pv * math.log(pv / q[k]) for k, pv in p.items() if pv > 0)


# --- SQL: data and the execution checker (no model) ---------------------------------------------


@pytest.mark.parametrize("shipped", [True, False])
def test_execution_checker_agrees_with_sqlite_on_gold(sql_ex: ModuleType, shipped: bool, monkeypatch) -> None:  # noqa: ANN001
    if shipped:  # the excerpt in gad/eval/data/spider (a fresh install without GAD_DATA_DIR)
        monkeypatch.delenv("GAD_DATA_DIR")
    qs, schemas, source = sql_ex.load_spider(None)
    assert len(qs) == (59 if shipped else 517) and ("shipped" in source) is shipped
    assert len({q["db_id"] for q in qs[:20]}) == 20
    sql_grammar = gad.Grammar.builtin("sql")
    nonempty = 0
    told_apart: list[bool] = []
    for q in qs:
        db = sql_ex.build_database(schemas[q["db_id"]], q["query"])
        got = sql_ex.execute(db, q["query"])
        raw = db.execute(q["query"]).fetchall()  # sqlite3 itself, no guard
        assert got == [tuple(r) for r in raw], q["query"]
        ordered = sql_ex.has_order_by(q["query"])
        assert sql_ex.same_result(got, [tuple(r) for r in raw], ordered)
        assert sql_grammar.parses(q["query"])
        nonempty += bool(got)
        # count(*) of the wrong table is not the gold answer: tables have different row counts
        m = re.fullmatch(r"SELECT count\(\*\) FROM (\w+);?", q["query"].strip(), re.I)
        if m:
            others = [t for t in schemas[q["db_id"]]["table_names_original"]
                      if t.lower() != m.group(1).lower() and not t.lower().startswith("sqlite_")]
            counts = {db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in others}
            if others:
                told_apart.append(bool(counts - {got[0][0]}))
        db.close()
    assert len(told_apart) >= 10 and sum(told_apart) >= 0.8 * len(told_apart)
    assert nonempty >= 0.85 * len(qs)  # the synthetic rows make most gold results non-empty (88 % of 517)


def test_same_result_semantics(sql_ex: ModuleType) -> None:
    assert sql_ex.same_result([(1, "a"), (2, "b")], [(2.0, "b"), (1, "a")], ordered=False)
    assert not sql_ex.same_result([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], ordered=True)
    assert not sql_ex.same_result([(1,)], [(1,), (1,)], ordered=False)  # multisets, not sets
    assert not sql_ex.same_result(None, [], ordered=False)
    assert sql_ex.has_order_by("SELECT a FROM t ORDER BY a")
    assert not sql_ex.has_order_by("SELECT a FROM (SELECT a FROM t ORDER BY a LIMIT 1)")
    assert sql_ex.gold_literals("SELECT a FROM t WHERE b = 'x''y' AND c LIKE '%ok%' AND d > 10") == (
        ["x'y", "ok"], [10.0])


def test_data_dir_errors_name_the_file(sql_ex: ModuleType, tmp_path: Path, data_dir: Path) -> None:
    with pytest.raises(gad.errors.InvalidArgumentError, match="dev_queries.jsonl"):
        sql_ex.load_spider(tmp_path)
    qs, schemas, source = sql_ex.load_spider(data_dir)
    assert len(qs) == 517 and source.endswith("spider")
    assert [q["db_id"] for q in qs[:20]] == list(dict.fromkeys(q["db_id"] for q in qs))[:20]


# --- the examples on the bundled model ------------------------------------------------------------


@pytest.fixture()
def bundled(smollm2, monkeypatch):  # noqa: ANN001, ANN201 - fixtures
    monkeypatch.setattr(gad, "load_model", lambda *a, **k: smollm2)
    return smollm2


@pytest.mark.model
def test_sql_example_candidates_parse(bundled, sql_ex: ModuleType, tmp_path: Path) -> None:  # noqa: ANN001
    out = tmp_path / "sql.jsonl"
    res = sql_ex.main(["--n-questions", "1", "-k", "2", "--max-new-tokens", "48", "--quiet", "--out", str(out)])
    g = gad.Grammar.builtin("sql")
    methods = res["methods"]
    assert methods == ["gcd", "smc"] and res["joint"]  # the default: one pass, GCD draws beside smc's particles
    cands = [c for q in res["questions"] for m in methods for c in q["candidates"][m]]
    assert len(cands) == 4
    for c in cands:
        if c["finished"]:
            assert g.parses(c["sql"]), c["sql"]  # the grammar's language, whatever sqlglot thinks
        assert not re.search(r"[ \t\r\n]{4}", c["sql"])  # bounded whitespace
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["sql"] for line in lines] == [c["sql"] for c in cands]
    for m in methods:
        s = res["summary"][m]
        cs = [c for q in res["questions"] for c in q["candidates"][m]]
        assert s["parse"] == sum(c["parses"] for c in cs) / len(cs)
        assert s["correct"] <= s["execute"] <= 1
    # the joint pass: 8 particles and 2 GCD draws, at most 10 rows a step over at most 47 steps
    rows = {m: res["runs"][m][0]["model_rows"] for m in methods}
    assert 0 <= rows["gcd"] <= 2 * 47 and 1 <= rows["smc"] <= 8 * 47
    assert res["runs"]["gcd"][0]["seconds"] == res["runs"]["smc"][0]["seconds"]


@pytest.mark.model
def test_sql_example_smc_and_compute(bundled, sql_ex: ModuleType) -> None:  # noqa: ANN001
    res = sql_ex.main(["--n-questions", "1", "-k", "2", "--methods", "gcd,smc", "--particles", "4",
                       "--max-new-tokens", "24", "--quiet", "--separate"])
    g = gad.Grammar.builtin("sql")
    assert res["methods"] == ["gcd", "smc"] and not res["joint"]
    smc_c = res["questions"][0]["candidates"]["smc"]
    assert len(smc_c) == 2 and all(c["method"] == "smc" for c in smc_c)
    for c in smc_c:
        if c["finished"]:
            assert g.parses(c["sql"]), c["sql"]
    run = res["runs"]["smc"][0]
    assert run["particles"] == 4 and 0.0 <= run["ess"] <= 4.0 + 1e-9
    # 4 particles, at most one new row per particle per step after the first (the prompt pass gives it)
    assert 1 <= run["model_rows"] <= 4 * 23
    gcd_run = res["runs"]["gcd"][0]
    assert 1 <= gcd_run["model_rows"] <= 2 * 23
    for m in ("gcd", "smc"):
        assert res["summary"][m]["model_rows"] == sum(r["model_rows"] for r in res["runs"][m])
    assert res["summary"]["smc"]["mean_ess"] == pytest.approx(run["ess"])


def test_sql_example_rejects_bad_counts(sql_ex: ModuleType) -> None:
    for argv in (["--particles", "0"], ["-k", "0"], ["--threads", "-1"]):
        with pytest.raises(gad.errors.InvalidArgumentError, match=argv[0]):
            sql_ex.main(argv)


def test_examples_restore_torch_threads(sql_ex: ModuleType, tmp_path: Path) -> None:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:  # --threads 1 (the default) is set, then the data directory is refused: the count comes back
        with pytest.raises(gad.errors.InvalidArgumentError, match="dev_queries"):
            sql_ex.main(["--data-dir", str(tmp_path)])
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


@pytest.mark.model
def test_json_example_records_validate(bundled, tmp_path: Path) -> None:  # noqa: ANN001
    ex = _load("json_generation")
    res = ex.main(["-n", "3", "--out", str(tmp_path / "j.jsonl")])
    assert len(res["q_star"]) == 18 and math.isclose(sum(res["q_star"].values()), 1.0, rel_tol=1e-9)
    for m, r in res["methods"].items():
        assert r["records"], m
        for text in r["records"]:
            jsonschema.validate(json.loads(text), ex.SCHEMA)
            assert text in res["q_star"]  # the grammar's spelling is the one Q* scored
        assert r["valid"] == 1.0
        law = {k: v / len(r["records"]) for k, v in Counter(r["records"]).items()}
        assert math.isclose(r["kl"], _kl(law, res["q_star"]), rel_tol=1e-9, abs_tol=1e-12)
    rows = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    assert all(row["valid"] for row in rows if row["finished"])


@pytest.mark.model
def test_aligned_example_kl_from_its_samples(bundled, tmp_path: Path) -> None:  # noqa: ANN001
    ex = _load("aligned_vs_gcd")
    png = tmp_path / "p.png"
    res = ex.main(["-n", "6", "--plot", str(png)])
    q = res["q_star"]
    assert len(q) == 17 and math.isclose(sum(q.values()), 1.0, rel_tol=1e-9)
    assert all(re.fullmatch(r"00000|1[01]{4}", s) for s in q)
    assert math.isclose(sum(res["gcd_exact"].values()), 1.0, rel_tol=1e-9)
    assert res["kl_gcd_exact"] > 1.0  # GCD's law is far from Q* here (00000: GCD ~0.23, Q* ~0)
    assert q["00000"] < 0.01 < res["gcd_exact"]["00000"]
    assert {"gcd", "asap"} <= set(res["methods"])
    for m, r in res["methods"].items():
        law = {k: v / len(r["texts"]) for k, v in Counter(r["texts"]).items()}
        assert r["law"] == pytest.approx(law)
        assert math.isclose(r["kl"], _kl(law, q), rel_tol=1e-9, abs_tol=1e-12), m
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
