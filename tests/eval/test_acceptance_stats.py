"""Acceptance statistics on hand-built logs with known rate, length, profile, ρ and certified shares."""

from __future__ import annotations

import json
import math

import pytest

from gad.errors import InvalidArgumentError
from gad.eval.acceptance import DOMAINS, PROMPTS_DIR, load_prompts
from gad.speculative.stats import (
    AcceptanceRecord,
    format_table,
    main,
    read_records,
    spearman_rho,
    summarize,
    write_plot,
    write_records,
)

nan = math.nan


def R(domain: str, step: int, depth: int, acc: bool, ent: float = nan, kl: float = nan,
      cert: float = nan, bonus: bool = False) -> AcceptanceRecord:
    return AcceptanceRecord(domain=domain, step=step, depth=depth, token=7, accepted=acc, entropy=ent,
                            margin=0.1, kl=kl, certificate=cert, bonus=bonus)


def _log() -> list[AcceptanceRecord]:
    return [
        # code, step 0: accept, accept, reject, (unreached: logged past the rejection)
        R("code", 0, 1, True, 0.1, kl=0.01, cert=0.05),
        R("code", 0, 2, True, 0.2, kl=0.10, cert=0.05),
        R("code", 0, 3, False, 0.6, kl=0.20, cert=0.10),
        R("code", 0, 4, True, 0.0),                     # not reached: excluded everywhere
        # code, step 1: three accepted + bonus token
        R("code", 1, 1, True, 0.3, kl=0.01, cert=0.50),
        R("code", 1, 2, True, 0.4, kl=0.20, cert=0.10),
        R("code", 1, 3, True, 0.5),
        R("code", 1, 4, True, bonus=True),
        # code, step 2: first node rejected; depth-2 node not reached
        R("code", 2, 1, False, 0.7, kl=0.01, cert=0.02),
        R("code", 2, 2, True, 0.05),
        # math: one step, everything accepted, constant acceptance -> ρ undefined
        R("math", 5, 1, True, 0.3),
        R("math", 5, 2, True, 0.9),
        R("math", 5, 3, True, bonus=True),
    ]


def test_summary_known_values() -> None:
    s = summarize(_log())
    assert list(s) == ["code", "math"]
    c = s["code"]
    assert (c.n_steps, c.n_nodes, c.n_reached, c.n_accepted) == (3, 9, 7, 5)
    assert c.acceptance_rate == pytest.approx(5 / 7)
    assert c.mean_accepted == pytest.approx((2 + 3 + 0) / 3)
    assert c.mean_accepted_with_bonus == pytest.approx((2 + 4 + 0) / 3)
    assert c.depth_profile == {1: pytest.approx(2 / 3), 2: 1.0, 3: 0.5}
    assert c.depth_counts == {1: 3, 2: 2, 3: 2}
    # accepted entropies 0.1..0.5, rejected 0.6, 0.7: rank correlation −sqrt(17.5²/(28·17.5))
    assert c.spearman_rho == pytest.approx(-math.sqrt(17.5 / 28))
    # accepted with a certificate: s0d1 (yes), s0d2 (no), s1d1 (yes), s1d2 (no) -> 2/4
    assert c.certified_share_of_accepted == pytest.approx(0.5)
    # certified: s0d1, s1d1 (accepted), s2d1 (rejected) -> 2/3
    assert c.accepted_share_of_certified == pytest.approx(2 / 3)
    assert c.mean_entropy == pytest.approx(sum([0.1, 0.2, 0.6, 0.3, 0.4, 0.5, 0.7]) / 7)
    m = s["math"]
    assert m.acceptance_rate == 1.0 and m.mean_accepted == 2.0 and m.mean_accepted_with_bonus == 3.0
    assert math.isnan(m.spearman_rho)
    assert math.isnan(m.certified_share_of_accepted) and math.isnan(m.accepted_share_of_certified)
    allg = summarize(_log(), by=None)["all"]
    assert allg.n_steps == 4 and allg.n_reached == 9 and allg.acceptance_rate == pytest.approx(7 / 9)
    by_depth = summarize(_log(), by="depth")
    assert set(by_depth) == {"1", "2", "3", "4"}


def test_certified_flag_and_validation() -> None:
    assert R("x", 0, 1, True, kl=0.1, cert=0.2).certified is True
    assert R("x", 0, 1, True, kl=0.2, cert=0.2).certified is False
    assert R("x", 0, 1, True, kl=0.2).certified is False
    assert R("x", 0, 1, True, kl=0.2, cert=math.inf).certified is True
    with pytest.raises(InvalidArgumentError, match="depth"):
        R("x", 0, 0, True)
    with pytest.raises(InvalidArgumentError, match="by"):
        summarize(_log(), by="nope")
    with pytest.raises(InvalidArgumentError, match="records"):
        summarize([{"domain": "x"}])  # type: ignore[list-item]


def test_from_distributions() -> None:
    p = [0.6, 0.3, 0.1]
    q = [0.5, 0.4, 0.1]
    r = AcceptanceRecord.from_distributions("json", 3, 1, 0, True, p, q, rule="greedy")
    assert r.entropy == pytest.approx(-(0.6 * math.log(0.6) + 0.3 * math.log(0.3) + 0.1 * math.log(0.1)))
    assert r.margin == pytest.approx(0.3)
    assert r.kl == pytest.approx(0.6 * math.log(0.6 / 0.5) + 0.3 * math.log(0.3 / 0.4))
    cert = 0.6 * math.log(1.2 / 0.9) + 0.3 * math.log(0.6 / 0.9)
    assert r.certificate == pytest.approx(cert)
    assert r.certified is (r.kl < cert)
    r2 = AcceptanceRecord.from_distributions("json", 3, 1, 0, True, p, q, rule="lossless")
    assert math.isnan(r2.certificate) and r2.certified is False
    with pytest.raises(InvalidArgumentError, match="rule"):
        AcceptanceRecord.from_distributions("json", 3, 1, 0, True, p, q, rule="nope")


def test_spearman_nan_safe() -> None:
    assert math.isnan(spearman_rho([0.1, 0.1, 0.1], [1, 0, 1]))
    assert math.isnan(spearman_rho([0.1, 0.2, 0.3], [1, 1, 1]))
    assert math.isnan(spearman_rho([0.1], [1]))
    assert spearman_rho([0.1, 0.2, nan, 0.3], [3, 1, 0, 1]) == pytest.approx(-math.sqrt(0.75))
    assert spearman_rho([1, 2, 3], [2, 4, 9]) == pytest.approx(1.0)


def test_io_table_plot_and_cli(tmp_path, capsys) -> None:
    log = _log()
    path = tmp_path / "log.jsonl"
    write_records(log, path)
    back = read_records(path)
    assert len(back) == len(log)
    for a, b in zip(log, back):
        for f in ("domain", "step", "depth", "accepted", "certified", "bonus"):
            assert getattr(a, f) == getattr(b, f)
        assert (math.isnan(a.kl) and math.isnan(b.kl)) or a.kl == b.kl
    table = format_table(summarize(back))
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["group", "steps", "nodes", "rate"]
    code_row = next(line for line in lines if line.startswith("code")).split()
    assert code_row[1:6] == ["3", "7", "0.714", "1.67", "2.00"]
    png = write_plot(back, tmp_path / "acc.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([str(path), "--plot", str(tmp_path / "b.png")]) == 0
    out = capsys.readouterr().out
    assert "math" in out and (tmp_path / "b.png").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"domain": "x"}\n')
    with pytest.raises(InvalidArgumentError, match="bad.jsonl:1"):
        read_records(bad)


def test_prompt_sets() -> None:
    allp = load_prompts()
    for d in DOMAINS:
        ps = load_prompts(d)
        assert len(ps) >= 20, d
        assert len({p["prompt"] for p in ps}) == len(ps), f"duplicate prompts in {d}"
        for p in ps:
            assert set(p) == {"domain", "prompt", "grammar"}
            assert p["domain"] == d and isinstance(p["prompt"], str) and p["prompt"].strip()
            expected = {"json": "json", "sql": "sql"}.get(d)
            assert p["grammar"] == expected
    assert len(allp) == sum(len(load_prompts(d)) for d in DOMAINS)
    with pytest.raises(InvalidArgumentError, match="domain"):
        load_prompts("poetry")
    # files are strict JSON lines
    for d in DOMAINS:
        for line in (PROMPTS_DIR / f"{d}.jsonl").read_text(encoding="utf-8").splitlines():
            assert isinstance(json.loads(line), dict)
