"""``gad sample`` under faults (issue 9), with real subprocesses, signals and files and the toy models of
gad.testing (``--model toy:ascii``): rows are kept as samples finish, interrupted runs continue, concurrent
runs on one trie merge, bad paths and values are one-line errors with exit status 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gad.cli import main
from gad.phi.trie_io import trie_header

ROOT = Path(__file__).resolve().parents[2]
GRAMMAR = 'start: WORD (" " WORD)*\nWORD: /[a-z]{1,6}/\n'


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch) -> None:
    """Compile caches of these runs (in-process and subprocesses) stay in the test's folder."""
    monkeypatch.setenv("GAD_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def grammar(tmp_path: Path) -> Path:
    g = tmp_path / "w.lark"
    g.write_text(GRAMMAR)
    return g


def _argv(grammar: Path, *extra: str, n: int = 6) -> list[str]:
    return ["sample", "--grammar", str(grammar), "--prompt", "x", "--model", "toy:ascii", "-n", str(n),
            "--max-new-tokens", "24", "--no-progress", *extra]


def _gad(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gad.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _rows(path: Path) -> list[dict]:
    data = path.read_text()
    assert data == "" or data.endswith("\n")  # valid JSONL: whole lines only
    return [json.loads(line) for line in data.splitlines()]


def _one_line_error(err: str, *needles: str) -> None:
    err = err.strip()
    assert len(err.splitlines()) == 1, err
    assert "error" in err and "Traceback" not in err
    for n in needles:
        assert n in err, err


def _wait_rows(path: Path, k: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists() and path.read_text().count("\n") >= k:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {k} rows: {proc.communicate()}")
        time.sleep(0.05)
    raise AssertionError("no rows appeared")


# --- one-line errors --------------------------------------------------------------------------------

def _err_cases(tmp_path: Path, grammar: Path) -> list[tuple[list[str], list[str]]]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    notrie = tmp_path / "not.trie"
    notrie.write_text("hello")
    return [
        (["--seed", "-1"], ["--seed", "'-1'"]),
        (["--seed", "1.5"], ["--seed", "'1.5'"]),
        (["--out", str(tmp_path)], ["--out", "is a directory"]),
        (["--method", "asap", "--trie", str(tmp_path)], ["--trie", "is a directory"]),
        (["--out", str(fifo)], ["--out", "not a regular file"]),
        (["--method", "asap", "--trie", str(notrie)], [str(notrie), "not a gad Φ-trie file"]),
        (["--out", str(tmp_path / "no" / "o.jsonl")], ["--out", "folder does not exist"]),
        (["--method", "asap", "--trie", str(tmp_path / "no" / "t.trie")], ["--trie", "folder does not exist"]),
        (["--trie", str(tmp_path / "t.trie")], ["--trie needs", "--method gcd would ignore it"]),
        (["--method", "asap", "--checkpoint-every", "2"], ["--checkpoint-every needs --trie"]),
        (["--checkpoint-every", "2"], ["--checkpoint-every", "keeps no trie"]),
        (["--draft-k", "3"], ["--draft-k", "need --speculative"]),
        (["--accept", "greedy"], ["--accept", "need --speculative"]),
        (["--temperature", "inf"], ["--temperature"]),
        (["--model", "toy:nothing"], ["--model", "toy:nothing"]),
        (["--method", "asap", "--trie", str(tmp_path / "same"), "--out", str(tmp_path / "same")],
         ["same file"]),
    ]


def test_bad_paths_and_values_are_one_line_errors_in_process(tmp_path: Path, grammar: Path, capsys) -> None:
    for extra, needles in _err_cases(tmp_path, grammar):
        try:
            rc = main(_argv(grammar, *extra))
        except SystemExit as exc:  # argparse's own errors
            rc = exc.code
        assert rc == 2, extra
        _one_line_error(capsys.readouterr().err, *needles)


def test_bad_paths_are_one_line_errors_in_a_real_process(tmp_path: Path, grammar: Path) -> None:
    for extra, needles in _err_cases(tmp_path, grammar)[:6]:
        p = _gad(*_argv(grammar, *extra))
        _, err = p.communicate(timeout=120)
        assert p.returncode == 2, (extra, err)
        _one_line_error(err, *needles)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads unreadable files")
def test_unreadable_out_file_is_a_one_line_error(tmp_path: Path, grammar: Path, capsys) -> None:
    out = tmp_path / "o.jsonl"
    out.write_text("")
    out.chmod(0)
    assert main(_argv(grammar, "--out", str(out))) == 2
    _one_line_error(capsys.readouterr().err, "--out", "cannot read")


def test_os_errors_below_are_one_line_not_tracebacks(tmp_path: Path, grammar: Path, capsys, monkeypatch) -> None:
    import gad.cli.sample as cmd

    def boom(*a, **k):
        raise PermissionError(13, "Permission denied", "/some/where")

    monkeypatch.setattr(cmd, "compile_grammar", boom)
    assert main(_argv(grammar)) == 2
    _one_line_error(capsys.readouterr().err, "/some/where: Permission denied")

    def bug(*a, **k):
        raise KeyError("oops")

    monkeypatch.setattr(cmd, "compile_grammar", bug)
    assert main(_argv(grammar)) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "internal error: KeyError" in err and "GAD_DEBUG" in err


# --- rows as they finish; continuing ---------------------------------------------------------------

def test_rerun_continues_and_equals_an_uninterrupted_run(tmp_path: Path, grammar: Path, capsys) -> None:
    full, part = tmp_path / "full.jsonl", tmp_path / "part.jsonl"
    assert main(_argv(grammar, "--out", str(full), "--seed", "4", n=10)) == 0
    assert main(_argv(grammar, "--out", str(part), "--seed", "4", n=4)) == 0  # a run that stopped at 4
    capsys.readouterr()
    assert main(_argv(grammar, "--out", str(part), "--seed", "4", n=10)) == 0
    err = capsys.readouterr().err
    assert "continuing the run" in err and "samples 0..3 of seed 4; drawing 4..9" in err
    assert _rows(part) == _rows(full)
    assert [r["index"] for r in _rows(part)] == list(range(10))
    assert main(_argv(grammar, "--out", str(part), "--seed", "4", n=10)) == 0
    assert "already holds all 10 samples" in capsys.readouterr().err and len(_rows(part)) == 10


def test_rows_of_another_run_are_refused_never_overwritten(tmp_path: Path, grammar: Path, capsys) -> None:
    out = tmp_path / "o.jsonl"
    assert main(_argv(grammar, "--out", str(out), "--seed", "1", n=3)) == 0
    before = out.read_bytes()
    capsys.readouterr()
    assert main(_argv(grammar, "--out", str(out), "--seed", "2", n=3)) == 2
    _one_line_error(capsys.readouterr().err, "--out", "3 rows of another run", "seed 1 instead of 2")
    assert main(_argv(grammar, "--out", str(out), "--seed", "1", "--max-new-tokens", "9", n=3)) == 2
    _one_line_error(capsys.readouterr().err, "another model, grammar, prompt, method or settings")
    assert out.read_bytes() == before


def test_a_line_cut_short_is_dropped_and_redrawn(tmp_path: Path, grammar: Path, capsys) -> None:
    full, out = tmp_path / "full.jsonl", tmp_path / "o.jsonl"
    assert main(_argv(grammar, "--out", str(full), n=5)) == 0
    lines = full.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:3]) + lines[3][:20])  # a writer killed in the middle of row 3
    capsys.readouterr()
    assert main(_argv(grammar, "--out", str(out), n=5)) == 0
    assert "dropped a last line cut short" in capsys.readouterr().err
    assert _rows(out) == _rows(full)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_keeps_finished_rows_and_the_trie_then_rerun_completes(tmp_path: Path, grammar: Path, sig) -> None:
    out, trie = tmp_path / "o.jsonl", tmp_path / "t.trie"
    argv = _argv(grammar, "--method", "asap", "--trie", str(trie), "--out", str(out), n=400)
    p = _gad(*argv)
    _wait_rows(out, 8, p)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "interrupted after" in err and "rerun the same command to continue" in err and "saved" in err
    rows = _rows(out)
    k = len(rows)
    assert 8 <= k < 400 and [r["index"] for r in rows] == list(range(k))
    assert trie_header(trie)["samples"] == k  # the trie learnt from exactly the finished samples
    p = _gad(*argv[:argv.index("-n") + 1], "30", *argv[argv.index("-n") + 2:])
    _, err = p.communicate(timeout=300)
    if k >= 30:
        assert p.returncode == 0 and "already holds all 30" in err
        return
    assert p.returncode == 0, err
    assert f"drawing {k}..29" in err
    rows = _rows(out)
    assert [r["index"] for r in rows] == list(range(30)) and trie_header(trie)["samples"] == 30


def test_kill_9_loses_at_most_the_samples_in_flight(tmp_path: Path, grammar: Path) -> None:
    out, trie = tmp_path / "o.jsonl", tmp_path / "t.trie"
    argv = _argv(grammar, "--method", "asap", "--trie", str(trie), "--out", str(out), n=400)
    p = _gad(*argv)
    _wait_rows(out, 8, p)
    p.kill()
    p.wait(timeout=60)
    rows = _rows(out)  # every line whole and JSON
    k = len(rows)
    assert [r["index"] for r in rows] == list(range(k))
    learnt = trie_header(trie)["samples"]  # the trie file is whole (atomic checkpoints)
    assert k - 1 <= learnt <= k  # at most the sample between its row and its checkpoint
    n = k + 3
    p = _gad(*argv[:argv.index("-n") + 1], str(n), *argv[argv.index("-n") + 2:])
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert [r["index"] for r in _rows(out)] == list(range(n))
    assert n - 1 <= trie_header(trie)["samples"] <= n
    assert [q.name for q in tmp_path.iterdir() if q.name.startswith(".")] == []  # no temp file stays


def test_temp_files_of_a_killed_trie_save_are_removed_by_the_next_run(tmp_path: Path, grammar: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    trie = tmp_path / "t.trie"
    left = tmp_path / f".t.trie.pid{dead.pid}.k2j3.trie"  # what a run killed inside save_trie leaves
    left.write_bytes(b"\0" * 4096)
    other = tmp_path / f".other.trie.pid{dead.pid}.k2j3.trie"  # another file's temp: not ours to judge
    other.write_bytes(b"")
    assert main(_argv(grammar, "--method", "asap", "--trie", str(trie), n=2)) == 0
    assert not left.exists() and other.exists() and trie.exists()


def test_three_concurrent_cli_runs_on_one_trie_add_up(tmp_path: Path, grammar: Path) -> None:
    trie = tmp_path / "t.trie"
    procs = [_gad(*_argv(grammar, "--method", "asap", "--trie", str(trie), "--seed", str(s), n=6))
             for s in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert trie_header(trie)["samples"] == 18  # 3 x 6, not 6


def test_failed_trie_save_keeps_printed_and_written_samples(tmp_path: Path, grammar: Path, capsys,
                                                            monkeypatch) -> None:
    import gad.fileio

    real = gad.fileio.os.replace

    def refuse(src, dst):
        if str(dst).endswith(".trie"):
            raise PermissionError(13, "Permission denied", src)
        return real(src, dst)

    monkeypatch.setattr(gad.fileio.os, "replace", refuse)
    out, trie = tmp_path / "o.jsonl", tmp_path / "t.trie"
    rc = main(_argv(grammar, "--method", "asap", "--trie", str(trie), "--out", str(out), n=4))
    assert rc == 2
    cap = capsys.readouterr()
    assert all(f"--- sample {i}:" in cap.out for i in range(4))  # printed ...
    assert [r["index"] for r in _rows(out)] == [0, 1, 2, 3]  # ... and written
    errors = [ln for ln in cap.err.splitlines() if "error" in ln]
    assert len(errors) == 1 and f"{trie}: Permission denied" in errors[0] and ".pid" not in cap.err
    assert not trie.exists() and not [q for q in tmp_path.iterdir() if q.name.startswith(".t.trie")]
