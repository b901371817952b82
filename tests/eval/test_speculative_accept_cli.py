"""``gad accept-stats``: per-domain acceptance table, records JSONL, summary JSON and plot (toy models)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gad.cli import main
from gad.engine.vocab import Vocabulary
from gad.eval.acceptance import collect
from gad.models.base import ToyLM
from gad.speculative.stats import read_records, summarize


def cyclic_lm(p_next: float = 0.97) -> ToyLM:
    """ASCII chars; after a char the next one of the cycle ``abc`` with probability ``p_next``; EOS after
    12 chars.  Repetitive, so the n-gram drafter's guesses are usually right."""
    vocab = Vocabulary.from_strings([chr(i) for i in range(32, 127)] + ["\n"], name="ascii")
    v = vocab.size
    eos = list(vocab.eos_ids)
    ids = {ch: ord(ch) - 32 for ch in "abc"}

    def f(ctx: tuple[int, ...]) -> np.ndarray:
        p = np.full(v, (1 - p_next) / v)
        if len(ctx) >= 12:
            p[eos] += 1.0
            return p
        nxt = "abc"[len(ctx) % 3]
        p[ids[nxt]] += p_next
        return p

    return ToyLM(vocab, f, name="toy-cyclic")


def test_collect_per_domain_on_a_repetitive_toy() -> None:
    lm = cyclic_lm()
    recs, totals = collect(lm, ["chat", "code"], 2, drafter="forced+ngram", draft_k=4, max_new_tokens=16)
    assert {r.domain for r in recs} == {"chat", "code"}
    steps = [(r.domain, r.step, r.depth, r.bonus) for r in recs]
    assert len(steps) == len(set(steps))  # step ids unique over the run
    summ = summarize(recs)
    for d in ("chat", "code"):
        t = totals[d]
        assert t["samples"] == 2 and t["finished"] == 2 and t["tokens"] == 2 * 13   # 12 chars + EOS
        assert t["grammar"] == "text"
        assert t["passes_per_token"] == pytest.approx(t["target_passes"] / t["tokens"]) and t["passes_per_token"] < 0.7
        assert summ[d].n_accepted == t["accepted"] and summ[d].acceptance_rate > 0.7
        # accepted draft tokens + target tokens (one per step) = generated tokens
        assert t["accepted"] + sum(r.bonus for r in recs if r.domain == d) == t["tokens"]


def test_accept_stats_command_writes_files(tmp_path, capsys) -> None:
    out = tmp_path / "as"
    rc = main(["accept-stats", "--model", "toy", "--domain", "json", "chat", "--prompts-per-domain", "2",
               "--max-new-tokens", "12", "--drafter", "forced+ngram:3", "--accept", "greedy", "--draft-k", "3",
               "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "rule greedy" in printed and "len+bonus" in printed and "pass/tok" in printed
    recs = read_records(out / "records.jsonl")
    assert {r.domain for r in recs} == {"json", "chat"}
    doc = json.loads((out / "summary.json").read_text())
    assert doc["settings"]["drafter"] == "forced+ngram:3" and doc["settings"]["accept"] == "greedy"
    summ = summarize(recs)
    for d in ("json", "chat"):
        row = doc["domains"][d]
        assert row["samples"] == 2 and row["n_steps"] == summ[d].n_steps > 0
        assert row["tokens"] == row["accepted"] + sum(r.bonus for r in recs if r.domain == d)
    assert doc["domains"]["json"]["grammar"] == "json"
    assert (out / "acceptance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in out.iterdir()) == ["acceptance.png", "records.jsonl", "summary.json"]


@pytest.mark.parametrize("argv,needle", [(["--domain", "poetry"], "--domain"), (["--drafter", "ngram:x"], "--drafter"),
                                         (["--tree", "2"], "--tree"), (["--accept", "maybe"], "--accept")])
def test_accept_stats_bad_arguments_exit_2(argv, needle, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["accept-stats", "--model", "toy", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


@pytest.mark.model
def test_accept_stats_bundled_model(tmp_path, capsys) -> None:
    rc = main(["accept-stats", "--domain", "json", "--prompts-per-domain", "1", "--max-new-tokens", "4",
               "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "summary.json").read_text())
    row = doc["domains"]["json"]
    recs = read_records(tmp_path / "records.jsonl")
    assert row["samples"] == 1 and row["tokens"] == 4 and row["target_passes"] <= 4
    assert row["tokens"] == row["accepted"] + sum(r.bonus for r in recs)
    assert "json" in capsys.readouterr().out
