"""Tests of the ``gad`` command line (in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gad.cli import main
from gad.cli.sample import write_jsonl_atomic
from gad.grammar import BUILTIN_DIR

ROOT = Path(__file__).resolve().parents[2]
JSON_GRAMMAR = str(BUILTIN_DIR / "json.lark")


@pytest.mark.parametrize("argv,needle", [
    (["sample", "--prompt", "x"], "--grammar"),
    (["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "-n", "0"], "-n"),
    (["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--max-new-tokens", "abc"], "--max-new-tokens"),
    (["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--method", "magic"], "--method"),
    (["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--tree", "2"], "--tree"),
    (["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--accept", "sometimes"], "--accept"),
    (["frobnicate"], "frobnicate"),
    (["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--threads", "-1"], "--threads"),
    (["eval", "--task", "binary/string_start_w_1_all_0", "--threads", "two"], "--threads"),
])
def test_bad_arguments_exit_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str], one_line_error) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    one_line_error(needle)


def test_bad_values_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], one_line_error) -> None:
    assert main(["sample", "--grammar", str(tmp_path / "missing.lark"), "--prompt", "x"]) == 2
    one_line_error("missing.lark")
    assert main(["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--out", str(tmp_path / "no" / "o.jsonl")]) == 2
    one_line_error("--out")
    assert main(["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--top-p", "2"]) == 2
    one_line_error("--top-p")
    assert main(["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--model", str(tmp_path / "nomodel")]) == 2
    one_line_error("nomodel")
    # a flag of another method would do nothing: refused (the default method is gcd)
    assert main(["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--model", "toy:ascii", "--particles", "4"]) == 2
    one_line_error("--particles")
    assert main(["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--model", "toy:ascii", "--method", "smc",
                 "--steps", "3", "--no-trie-cache"]) == 2
    one_line_error("--steps / --no-trie-cache")
    bad = tmp_path / "bad.lark"
    bad.write_text("start: (\n")
    assert main(["sample", "--grammar", str(bad), "--prompt", "x"]) == 2
    one_line_error("bad.lark")


def test_atomic_write_keeps_old_file_on_failure(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    write_jsonl_atomic(out, [{"a": 1}])
    with pytest.raises(TypeError):
        write_jsonl_atomic(out, [{"a": 2}, {"b": object()}])
    assert out.read_text() == '{"a": 1}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["o.jsonl"]


@pytest.mark.model
def test_sample_prints_and_writes_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.jsonl"
    rc = main(["sample", "--grammar", JSON_GRAMMAR, "--prompt", "Give a JSON list of two small numbers.",
               "-n", "2", "--max-new-tokens", "16", "--seed", "1", "--out", str(out), "--no-progress"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "sample 0" in printed and "sample 1" in printed and "logprob=" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2
    for r in rows:
        assert set(r) >= {"text", "token_ids", "logprob", "finished"}
        assert isinstance(r["token_ids"], list) and isinstance(r["finished"], bool) and r["logprob"] <= 0
        assert r["text"] in printed
        if r["finished"]:
            json.loads(r["text"])


@pytest.mark.parametrize("method", ["gcd", "rs", "smc", "mcmc"])
def test_sample_with_a_progress_bar_runs_every_method(method: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The progress bar (on by default) with each kind of runner: rs / smc / mcmc were handed ``True``
    for a bar and failed with an internal error at their first accepted sample."""
    out = tmp_path / "s.jsonl"
    rc = main(["sample", "--grammar", "json_compact", "--prompt", "x", "--model", "toy:ascii", "-n", "2",
               "--max-new-tokens", "12", "--method", method, "--out", str(out)])
    assert rc == 0
    assert len(out.read_text().splitlines()) == 2
    assert "sampling" in capsys.readouterr().err  # (the bar was drawn)


def test_eval_subcommand_is_wired(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["eval", "--help"])
    assert exc.value.code == 0
    assert "--task" in capsys.readouterr().out


@pytest.mark.parametrize("spec", ["self", "self:8", "self-greedy", "self-greedy:16", "forced", "ngram", "ngram:3",
                                  "forced+ngram", "forced+ngram:2", "forced+self-greedy:8", "Forced + NGRAM",
                                  "forced-token+ngram"])
def test_speculative_accepts_make_drafter_names(spec: str) -> None:
    from gad.speculative.drafters import check_drafter_spec

    assert check_drafter_spec(spec) == spec.strip()


def test_speculative_accepts_existing_path(tmp_path: Path) -> None:
    from gad.speculative.drafters import check_drafter_spec

    assert check_drafter_spec(str(tmp_path)) == str(tmp_path)
    assert check_drafter_spec(f"forced+{tmp_path}") == f"forced+{tmp_path}"


@pytest.mark.parametrize("spec,needle", [("ngram:x", "ngram:x"), ("ngram:0", "ngram:0"), ("self:", "self:"),
                                         ("forced+", "empty drafter"), ("magic", "magic"),
                                         ("forced+/no/such/model", "/no/such/model")])
def test_bad_speculative_exit_2(spec: str, needle: str, capsys: pytest.CaptureFixture[str], one_line_error) -> None:
    rc = main(["sample", "--grammar", JSON_GRAMMAR, "--prompt", "x", "--speculative", spec])
    assert rc == 2
    one_line_error("--speculative", needle)


def test_asap_trie_file_is_created_then_grown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trie = tmp_path / "json.trie"
    argv = ["sample", "--grammar", JSON_GRAMMAR, "--prompt", "Give a JSON list of two small numbers.",
            "-n", "2", "--max-new-tokens", "8", "--method", "asap", "--trie", str(trie), "--no-progress"]
    assert main(argv) == 0
    first = capsys.readouterr().err
    assert f"ASAp trie {trie}:" in first and "(new), saved" in first
    n1 = int(first.split(f"ASAp trie {trie}: ")[1].split(" nodes")[0])
    assert main([*argv, "--seed", "7"]) == 0
    second = capsys.readouterr().err
    n2 = int(second.split(f"ASAp trie {trie}: ")[1].split(" nodes")[0])
    assert f"(was {n1})" in second and n2 >= n1 > 1


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_set_torch_threads_for_the_run_and_restore_them(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    import gad.cli

    before = torch.get_num_threads()
    seen: list[int] = []
    monkeypatch.setattr(gad.cli._COMMANDS["sample"], "run", lambda args: seen.append(torch.get_num_threads()) or 0)
    assert main(["sample", "--grammar", "json", "--prompt", "x", "--threads", str(threads)]) == 0
    assert main(["sample", "--grammar", "json", "--prompt", "x"]) == 0  # (0, the default: left as it is)
    assert seen == [threads, before] and torch.get_num_threads() == before
