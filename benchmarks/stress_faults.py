"""Fault injection for gad's state: kills, concurrent runs and corrupted files, repeated many times.

    PYTHONPATH=$PWD python benchmarks/stress_faults.py --kills 12 --concurrent 4 --corrupt 60 --budget 600

Every case runs the real command line (``python -m gad.cli sample``, the toy model ``toy:ascii``) in
real processes, or real files through the library, and is classified:

* **kill** — a run ``--method asap --trie T --out F`` gets SIGKILL, SIGINT or SIGTERM after a random number
  of finished rows, then the same command is rerun to the end.  Checked: ``F`` is valid JSONL at the kill
  and after, sample indices are 0..n-1 exactly once, the trie learnt from every row (SIGINT/SIGTERM: the
  same count as rows; SIGKILL: at most the one sample between its row and its checkpoint missing), the
  rerun said it continues.
* **concurrent** — 3 processes run on one trie at once; the trie must have learnt ``3 × n`` samples and
  equal, node by node, a trie that learnt from all their rows (replayed in this process).
* **corrupt** — a valid trie, compile-cache file or ``--out`` file gets a random corruption (byte flips,
  truncation, values or header fields replaced under a recomputed checksum, planted pickles, cut lines);
  then the command or compile runs.  Expected: a one-line error with exit status 2 (trie, ``--out``
  garbage), or a correct result (compile cache rebuilt with the right masks; a cut last line dropped).

Columns: cases tried, clear errors (one-line, exit 2), handled (correct result), silent wrong answers,
tracebacks, hangs (over the per-case timeout), data-loss events.  The goal is zero in the last four.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import pickle
import random
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gad.cli import main  # noqa: E402
from gad.engine import compiler  # noqa: E402
from gad.engine.vocab import Vocabulary  # noqa: E402
from gad.grammar import Grammar  # noqa: E402
from gad.phi.registry import estimator_identity, make_estimator  # noqa: E402
from gad.phi.trie_io import _COLUMNS, FORMAT_VERSION, MAGIC, load_trie, trie_header  # noqa: E402
from gad.testing.toys import toy_model  # noqa: E402

GRAMMAR = 'start: WORD (" " WORD)*\nWORD: /[a-z]{1,6}/\n'
COLS = ["tried", "clear error", "handled", "silent wrong", "traceback", "hang", "data loss"]


class Tally:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, int]] = {}
        self.notes: list[str] = []

    def add(self, cls: str, outcome: str, note: str = "") -> None:
        r = self.rows.setdefault(cls, dict.fromkeys(COLS, 0))
        r["tried"] += 1
        r[outcome] += 1
        if outcome not in ("clear error", "handled"):
            self.notes.append(f"{cls}: {outcome}: {note}")

    def table(self) -> str:
        total = dict.fromkeys(COLS, 0)
        lines = ["| class | " + " | ".join(COLS) + " |", "|---" * (len(COLS) + 1) + "|"]
        for cls, r in self.rows.items():
            lines.append(f"| {cls} | " + " | ".join(str(r[c]) for c in COLS) + " |")
            for c in COLS:
                total[c] += r[c]
        lines.append("| **all** | " + " | ".join(f"**{total[c]}**" for c in COLS) + " |")
        return "\n".join(lines)


def _argv(work: Path, *extra: str, n: int) -> list[str]:
    return ["sample", "--grammar", str(work / "w.lark"), "--prompt", "x", "--model", "toy:ascii", "-n", str(n),
            "--max-new-tokens", "24", "--no-progress", *extra]


def _spawn(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gad.cli", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _jsonl(path: Path) -> list[dict] | None:
    """Rows of a JSONL file, or None when it is not valid JSONL (a cut line, a non-JSON line)."""
    if not path.exists():
        return []
    data = path.read_text()
    if data and not data.endswith("\n"):
        return None
    try:
        return [json.loads(line) for line in data.splitlines()]
    except ValueError:
        return None


def _samples(trie: Path) -> int:
    return int(trie_header(trie)["samples"]) if trie.exists() else 0


# ------------------------------------------------------------------------------------------- kills
def kill_case(work: Path, rng: random.Random, timeout: float, tally: Tally) -> None:
    out, trie = work / "o.jsonl", work / "t.trie"
    for p in (out, trie):
        p.unlink(missing_ok=True)
    n = rng.randint(20, 40)
    argv = _argv(work, "--method", "asap", "--trie", str(trie), "--out", str(out), "--seed", str(rng.randint(0, 99)),
                 n=n)
    sig = rng.choice([signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
    after = rng.randint(0, 12)
    p = _spawn(argv)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if p.poll() is not None:
            break
        if out.exists() and out.read_text().count("\n") >= after:
            break
        time.sleep(0.01)
    if p.poll() is None:
        p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        tally.add("kill", "hang", f"{sig.name} not obeyed")
        return
    if "Traceback" in err:
        tally.add("kill", "traceback", err[-300:])
        return
    rows = _jsonl(out)
    if rows is None:
        tally.add("kill", "data loss", "--out not valid JSONL after the kill")
        return
    k = len(rows)
    learnt = _samples(trie)
    if [r["index"] for r in rows] != list(range(k)):
        tally.add("kill", "silent wrong", "indices not 0..k-1")
        return
    lo = k - 1 if sig == signal.SIGKILL else k
    if p.returncode == 0:
        lo = k
    if not lo <= learnt <= k:
        tally.add("kill", "data loss" if learnt < lo else "silent wrong", f"{sig.name}: {k} rows, trie {learnt}")
        return
    q = _spawn(argv)  # the same command again: continues
    try:
        _, err = q.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        q.kill()
        tally.add("kill", "hang", "rerun")
        return
    rows = _jsonl(out)
    if q.returncode != 0 or "Traceback" in err:
        tally.add("kill", "traceback" if "Traceback" in err else "data loss", err[-300:])
        return
    if rows is None or [r["index"] for r in rows] != list(range(n)):
        tally.add("kill", "data loss", "rerun did not complete 0..n-1")
        return
    if 0 < k < n and "continuing the run" not in err:
        tally.add("kill", "silent wrong", "rerun did not say it continues")
        return
    final = _samples(trie)
    if not (lo - k + n) <= final <= n:
        tally.add("kill", "data loss" if final < n - 1 else "silent wrong", f"trie {final} of {n}")
        return
    tally.add("kill", "handled")


# --------------------------------------------------------------------------------------- concurrent
def _replay(rows: list[dict]) -> dict:
    """A fresh trie that learnt from ``rows`` (as ``gad sample`` drew them), by path."""
    lm = toy_model(0)
    cg = compiler.compile(Grammar.from_string(GRAMMAR), lm.vocab, cache_dir=False)
    est = make_estimator("asap", lm, cg, [], trie=None)
    eos = cg.vocab.eos_ids[0]
    for r in rows:
        toks, fin = r["token_ids"], r["finished"]
        m = cg.matcher()
        for k in range(len(toks) + (1 if fin else 0)):
            est.child_phi(toks[:k], lm.logprobs([toks[:k]])[0], np.asarray(m.mask(), dtype=bool))
            if k < len(toks):
                m.accept_token(toks[k])
        est.observe(toks + ([eos] if fin else []), fin)
    est.trie.recompute()
    return est.trie.canonical()


def concurrent_case(work: Path, rng: random.Random, timeout: float, tally: Tally) -> None:
    trie = work / "c.trie"
    trie.unlink(missing_ok=True)
    n = rng.randint(3, 8)
    outs = [work / f"c{i}.jsonl" for i in range(3)]
    for o in outs:
        o.unlink(missing_ok=True)
    procs = [_spawn(_argv(work, "--method", "asap", "--trie", str(trie), "--out", str(o),
                          "--seed", str(rng.randint(0, 10**6)), n=n)) for o in outs]
    errs = []
    for p in procs:
        try:
            errs.append(p.communicate(timeout=timeout)[1])
        except subprocess.TimeoutExpired:
            p.kill()
            tally.add("concurrent", "hang", "a run did not finish")
            return
    if any("Traceback" in e for e in errs) or any(p.returncode != 0 for p in procs):
        tally.add("concurrent", "traceback", " / ".join(e[-200:] for e in errs))
        return
    if _samples(trie) != 3 * n:
        tally.add("concurrent", "data loss", f"trie learnt {_samples(trie)} of {3 * n}")
        return
    rows = [r for o in outs for r in (_jsonl(o) or [])]
    lm = toy_model(0)
    cg = compiler.compile(Grammar.from_string(GRAMMAR), lm.vocab, cache_dir=False)
    merged = load_trie(trie, expected=estimator_identity(lm, cg, [], None)).canonical()
    if merged != _replay(rows):
        tally.add("concurrent", "silent wrong", "merged trie differs from the trie of all samples")
        return
    tally.add("concurrent", "handled")


# ------------------------------------------------------------------------------------------ corrupt
def _run_main(argv: list[str]) -> tuple[int | None, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
        except BaseException as exc:  # noqa: BLE001 - an escaping exception is a traceback
            return None, f"{type(exc).__name__}: {exc}"
    return rc, err.getvalue()


def _rewrite_trie(path: Path, rng: random.Random) -> str:
    """Corrupt a trie file at random; returns what was done."""
    data = bytearray(path.read_bytes())
    kind = rng.choice(["flip", "truncate", "value", "value", "header", "empty", "pickle"])
    if kind == "flip":
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        return f"flip byte {i}"
    if kind == "truncate":
        path.write_bytes(bytes(data[:rng.randrange(len(data))]))
        return "truncate"
    if kind == "empty":
        path.write_bytes(b"")
        return "empty"
    if kind == "pickle":
        path.write_bytes(pickle.dumps({"samples": 10**6}))
        return "pickle"
    hlen = struct.unpack_from("<II", data, 8)[1]
    header = json.loads(bytes(data[16:16 + hlen]))
    n = header["n_nodes"]
    off = 16 + hlen
    cols = {}
    for name, dt in _COLUMNS:
        cols[name] = np.frombuffer(bytes(data[off:off + 8 * n]), dtype=dt).copy()
        off += 8 * n
    if kind == "value":
        name = rng.choice(["phi", "p", "mass", "eos", "token", "nallow", "vsum", "ssum"])
        i = rng.randrange(n) if name not in ("p", "token") or n == 1 else rng.randrange(1, n)
        bad = rng.choice([float("nan"), -0.5, 1.5, 7.0, float("inf"), 0.123456]) if cols[name].dtype.kind == "f" \
            else rng.choice([-7, 10**6, 2**40])
        cols[name][i] = bad
        what = f"{name}[{i}] = {bad}"
    else:
        field = rng.choice(["samples", "n_nodes", "identity", "identity.vocab_size", "identity.model",
                            "identity.settings", "format"])
        val = rng.choice(["x", 1.5, True, None, [1], {"a": 1}, -4])
        if field.startswith("identity."):
            header["identity"][field.split(".")[1]] = val
        else:
            header[field] = val
        what = f"header {field} = {val!r}"
    hb = json.dumps(header, sort_keys=True).encode()
    payload = b"".join(np.ascontiguousarray(cols[k], dtype=dt).tobytes() for k, dt in _COLUMNS)
    path.write_bytes(MAGIC + struct.pack("<II", FORMAT_VERSION, len(hb)) + hb + payload
                     + hashlib.sha256(hb + payload).digest())  # a *valid* checksum around bad content
    return what


def corrupt_trie_case(work: Path, rng: random.Random, tally: Tally, good: Path) -> None:
    trie = work / "x.trie"
    trie.write_bytes(good.read_bytes())
    what = _rewrite_trie(trie, rng)
    before = trie.read_bytes()
    rc, err = _run_main(_argv(work, "--method", "asap", "--trie", str(trie), n=2))
    if rc is None:
        tally.add("corrupt trie", "traceback", f"{what}: {err}")
    elif rc == 2 and len(err.strip().splitlines()) == 1 and str(trie) in err:
        ok = trie.read_bytes() == before  # the bad file is left as it was, not "repaired" silently
        tally.add("corrupt trie", "clear error" if ok else "silent wrong", what)
    elif rc == 0:
        # accepted: only right when the change was harmless (the same value, or a value recomputed anyway)
        try:
            load_trie(trie)
            tally.add("corrupt trie", "handled")
        except Exception as exc:  # noqa: BLE001
            tally.add("corrupt trie", "silent wrong", f"{what}: accepted, then {exc}")
    else:
        tally.add("corrupt trie", "silent wrong", f"{what}: rc {rc}: {err.strip()[:200]}")


def corrupt_cache_case(work: Path, rng: random.Random, tally: Tally) -> None:
    cache = work / "cache"
    vocab = Vocabulary.from_strings(["a", "b", "ab", "c", " c", "bc", "ca"])
    g = Grammar.from_string('start: "ab" "c"+ | "ca" "b"*\n%ignore " "')
    compiler._MEMO.clear()
    want = compiler.compile(g, vocab, cache_dir=False)
    compiler._MEMO.clear()
    compiler.compile(g, vocab, cache_dir=cache)
    (f,) = (cache / "compiled").glob("*.npz")
    data = bytearray(f.read_bytes())
    kind = rng.choice(["flip", "truncate", "pickle", "garbage", "swap"])
    marker = work / "pwned"
    marker.unlink(missing_ok=True)
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        f.write_bytes(bytes(data))
    elif kind == "truncate":
        f.write_bytes(bytes(data[:rng.randrange(len(data))]))
    elif kind == "pickle":
        f.write_bytes(pickle.dumps(_Touch(marker)))
    elif kind == "garbage":
        f.write_bytes(os.urandom(rng.randint(0, 4096)))
    else:
        other = work / "other"
        compiler._MEMO.clear()
        compiler.compile(Grammar.from_string('start: "b"+'), vocab, cache_dir=other)
        (o,) = (other / "compiled").glob("*.npz")
        f.write_bytes(o.read_bytes())
    compiler._MEMO.clear()
    try:
        cg = compiler.compile(g, vocab, cache_dir=cache)
    except Exception as exc:  # noqa: BLE001
        tally.add("corrupt cache", "traceback", f"{kind}: {type(exc).__name__}: {exc}")
        return
    if marker.exists():
        tally.add("corrupt cache", "silent wrong", f"{kind}: code in the cache file ran")
        return
    rng_np = np.random.default_rng(rng.randrange(10**6))
    for _ in range(20):
        a, b = want.matcher(), cg.matcher()
        for _ in range(8):
            ma, mb = a.mask(), b.mask()
            if not np.array_equal(ma, mb):
                tally.add("corrupt cache", "silent wrong", f"{kind}: masks differ")
                return
            ok = np.flatnonzero(ma[:vocab.size - len(vocab.eos_ids)])
            if not ok.size:
                break
            t = int(rng_np.choice(ok))
            a.accept_token(t)
            b.accept_token(t)
    tally.add("corrupt cache", "handled")


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # what an attacker's pickle would do: run code on load
        return (Path.touch, (self.marker,))


def corrupt_out_case(work: Path, rng: random.Random, tally: Tally) -> None:
    out = work / "r.jsonl"
    out.unlink(missing_ok=True)
    n = 6
    rc, err = _run_main(_argv(work, "--out", str(out), "--seed", "3", n=3))
    full = work / "full.jsonl"
    if not full.exists():
        _run_main(_argv(work, "--out", str(full), "--seed", "3", n=n))
    lines = out.read_text().splitlines(keepends=True)
    kind = rng.choice(["cut", "garbage-middle", "other-seed", "not-json-last"])
    if kind == "cut":
        out.write_text("".join(lines[:2]) + lines[2][:rng.randrange(1, len(lines[2]) - 1)])
    elif kind == "garbage-middle":
        out.write_text(lines[0] + "garbage\n" + "".join(lines[1:]))
    elif kind == "other-seed":
        out.write_text("".join(ln.replace('"seed": 3', '"seed": 4') for ln in lines))
    else:
        out.write_text("".join(lines) + "{not json}\n")
    before = out.read_bytes()
    rc, err = _run_main(_argv(work, "--out", str(out), "--seed", "3", n=n))
    if rc is None:
        tally.add("corrupt --out", "traceback", f"{kind}: {err}")
    elif kind == "cut":
        if rc == 0 and _jsonl(out) == _jsonl(full):
            tally.add("corrupt --out", "handled")
        else:
            tally.add("corrupt --out", "data loss" if rc == 0 else "silent wrong", f"{kind}: rc {rc} {err[:200]}")
    elif rc == 2 and len(err.strip().splitlines()) == 1 and "--out" in err and out.read_bytes() == before:
        tally.add("corrupt --out", "clear error")
    else:
        tally.add("corrupt --out", "data loss" if out.read_bytes() != before else "silent wrong",
                  f"{kind}: rc {rc} {err[:200]}")


# --------------------------------------------------------------------------------------------- main
def run(args: argparse.Namespace) -> Tally:
    rng = random.Random(args.seed)
    tally = Tally()
    t_end = time.monotonic() + args.budget
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["GAD_CACHE_DIR"] = str(work / "gad-cache")  # this run's compile caches stay here
        (work / "w.lark").write_text(GRAMMAR)
        good = work / "good.trie"
        _run_main(_argv(work, "--method", "asap", "--trie", str(good), n=8))
        plan = (["kill"] * args.kills + ["concurrent"] * args.concurrent
                + ["trie", "cache", "out"] * (args.corrupt // 3))
        rng.shuffle(plan)
        for what in plan:
            if time.monotonic() > t_end:
                print(f"time budget of {args.budget} s reached", file=sys.stderr)
                break
            if what == "kill":
                kill_case(work, rng, args.timeout, tally)
            elif what == "concurrent":
                concurrent_case(work, rng, args.timeout, tally)
            elif what == "trie":
                corrupt_trie_case(work, rng, tally, good)
            elif what == "cache":
                corrupt_cache_case(work, rng, tally)
            else:
                corrupt_out_case(work, rng, tally)
    return tally


def main_cli() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=12, help="kill / interrupt cases (default 12)")
    ap.add_argument("--concurrent", type=int, default=4, help="3-process concurrency cases (default 4)")
    ap.add_argument("--corrupt", type=int, default=60, help="corruption cases, split over trie/cache/--out")
    ap.add_argument("--budget", type=float, default=900, help="stop starting new cases after this many s")
    ap.add_argument("--timeout", type=float, default=120, help="per-process timeout (a hang beyond it)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.monotonic()
    tally = run(args)
    print(tally.table())
    print(f"\n{sum(r['tried'] for r in tally.rows.values())} cases in {time.monotonic() - t0:.0f} s "
          f"(seed {args.seed})")
    for note in tally.notes:
        print("  " + note)
    bad = sum(r[c] for r in tally.rows.values() for c in COLS[3:])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main_cli())
