"""Text-to-SQL on Spider questions under sql.lark: GCD vs grammar-aligned sampling, checked by execution.

    python examples/sql_generation.py [--n-questions 20] [-k 3] [--out sql.jsonl] [--data-dir DIR]

Run time with the defaults (20 questions, GCD and smc with 8 particles, 40 tokens): about 4 minutes on
2 CPU cores (bundled SmolLM2-135M-Instruct; 250 s measured on 2026-12-01 on the project's 2-core machine
while other jobs shared it: the run got 64 % of one core, 159 s of CPU time).  ``--separate`` took
493 s (246 s of CPU); ``--methods gcd,rs --max-new-tokens 64`` took 44 minutes in an earlier run.  Time
scales with ``--n-questions``.

Questions come from ``DIR/spider/dev_queries.jsonl`` and ``DIR/spider/tables.json`` (``--data-dir``, else
``$GAD_DATA_DIR``), else from the Spider excerpt shipped with gad (``gad/eval/data/spider``: 3 questions
of each of the 20 databases, with their schemas).  Questions are taken round-robin over the databases
(the 20 defaults are the first question of each).  Each prompt holds the database's schema as
``CREATE TABLE`` statements, then the question.

Per question, ``-k`` candidates are sampled under ``sql.lark`` (its whitespace is bounded, so no query
spends its budget on blanks) with GCD and with gad's aligned method that fits a few minutes: sequential
Monte Carlo ``smc`` (Loula et al., ICLR 2025: ``--particles`` particles with the GCD proposal, decoded as
one batch, resampled when their effective sample size falls below half; the ``-k`` candidates are drawn
from the final weights).  smc is *consistent* — its draws approach ``Q*`` (the model conditioned on the
grammar, within the token budget) as the particle count grows — not exact for a finite count; the
summary prints its mean effective sample size.  When no particle finishes within the budget, the
question's smc candidates are budget-cut particles (counted as failures).  GCD and smc share one
decoding pass per question: the smc run decodes ``-k`` plain draws from its GCD proposal alongside its
particles (``gad.sampling.smc.smc(proposal_draws=k)``: never weighted or resampled, draw ``j`` from
sample ``j``'s random source), and those are the samples ``gad.sample(method="gcd", n=k, seed=seed)``
draws, up to float noise (on long GCD queries, where tens of thousands of tokens carry ~1e-6 each, a
uniform sometimes falls within float error of a boundary); a CPU decoding step costs about the same for
several rows as for a few, so this cut the CPU time by a third (159 s against 246 s).  ``--separate``
decodes the two methods apart (the same laws and, up to float noise, the same candidates; per-method
seconds).  ``--methods gcd,rs`` runs exact
rejection sampling ``rs`` on the ASAp trie instead (exact draws of ``Q*``, about 10x slower here:
it needs 5-6 proposals per accepted query); it gives up on a question after ``--max-proposals``
proposals, and that question's candidates are then ASAp's (marked ``asap`` in the table and in
``--out``; ASAp's samples approach ``Q*`` but are not exact draws).  The default budget of 40 tokens is
1.5 times the longest of the 20 default gold queries (27 tokens); a candidate that runs out counts as
not parsing.  Each candidate is checked:

* **parses**: ``sqlglot.parse_one(sql, read="sqlite")`` succeeds;
* **executes**: SQLite runs it on the question's database;
* **correct** (execution accuracy): its result equals the gold query's result on that database.

The database.  Spider's schemas come without their rows, so the database is the schema filled with
3-10 deterministic synthetic rows per table (the count a hash of the table's name, so ``count(*)``
mostly tells tables apart): key columns numbered from 1, foreign keys pointing at existing keys (so joins match),
other numbers alternating between pseudo-random values in 1-100 (a hash of table, column and row) and
the gold query's numbers -1 / +0 / +1, text columns alternating between the gold query's string
literals (``'France'``; ``LIKE`` patterns without ``%``) and ``"<column> <row>"``, so that the gold
query's filters select something and cut something.
**Equal result** means: the same rows with the same column order, compared as multisets (as lists
when the gold query has ``ORDER BY``), numbers compared after rounding to 6 decimals (``3 == 3.0``).
Synthetic rows make equality weaker evidence than on Spider's real databases: when the gold result is
empty, any query returning no rows counts as correct; the table reports how many gold results are
non-empty.

Printed: per question the gold query and every candidate in full with its checks, then per method the
share that parse / execute / are correct and the mean model log-likelihood (nats).  ``--out`` writes
every candidate as one JSON line (rewritten after each question, so an interrupted run keeps its lines).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sqlite3
import sys
import textwrap
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import sqlglot
import torch
from tqdm.auto import tqdm

import gad
from gad.errors import InvalidArgumentError
from gad.models.hf import torch_threads
from gad.phi.registry import make_estimator
from gad.sampling.methods import method_names
from gad.sampling.smc import resampled_draws
from gad.sampling.smc import smc as smc_run

PACKAGE_SPIDER = Path(gad.__file__).resolve().parent / "eval" / "data" / "spider"
TYPES = {"number": "NUMERIC", "text": "TEXT", "time": "TEXT", "boolean": "INTEGER", "others": "TEXT"}


# --- data ------------------------------------------------------------------------------------------


def load_spider(data_dir: str | os.PathLike[str] | None) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    """(questions in round-robin database order, db_id → schema, where they came from).

    ``data_dir`` (or ``$GAD_DATA_DIR`` when None) must hold ``spider/dev_queries.jsonl`` and
    ``spider/tables.json``; without either, the excerpt shipped with gad is used.

    Raises:
        InvalidArgumentError: ``data_dir`` was given but lacks the Spider files (the message names them).
    """
    if data_dir is None and os.environ.get("GAD_DATA_DIR"):
        from gad.eval.tasks import data_dir as env_data_dir

        cand = env_data_dir() / "spider"
        if (cand / "dev_queries.jsonl").exists() and (cand / "tables.json").exists():
            data_dir = cand.parent
    if data_dir is not None:
        base = Path(data_dir).expanduser() / "spider"
        qfile, tfile = base / "dev_queries.jsonl", base / "tables.json"
        for f in (qfile, tfile):
            if not f.exists():
                raise InvalidArgumentError(f"--data-dir: {f} is missing (expected DIR/spider/dev_queries.jsonl "
                                           "and DIR/spider/tables.json)")
        source = str(base)
    else:
        qfile, tfile = PACKAGE_SPIDER / "questions.jsonl", PACKAGE_SPIDER / "tables.json"
        source = f"the Spider excerpt shipped with gad ({PACKAGE_SPIDER})"
    rows = [json.loads(line) for line in qfile.read_text(encoding="utf-8").splitlines() if line.strip()]
    schemas = {s["db_id"]: s for s in json.loads(tfile.read_text(encoding="utf-8"))}
    by_db: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["db_id"] in schemas:
            by_db.setdefault(r["db_id"], []).append(r)
    ordered: list[dict[str, Any]] = []
    for k in range(max((len(v) for v in by_db.values()), default=0)):
        ordered += [qs[k] for qs in by_db.values() if k < len(qs)]
    return ordered, schemas, source


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def create_statements(schema: dict[str, Any]) -> list[str]:
    """``CREATE TABLE`` statements (SQLite) for one Spider schema of tables.json."""
    cols: dict[int, list[str]] = {i: [] for i in range(len(schema["table_names_original"]))}
    for (t, name), typ in zip(schema["column_names_original"], schema["column_types"], strict=True):
        if t >= 0:
            cols[t].append(f"{_quote(name)} {TYPES.get(typ, 'TEXT')}")
    return [f"CREATE TABLE {_quote(tname)} ({', '.join(cols[i]) or 'dummy TEXT'})"
            for i, tname in enumerate(schema["table_names_original"]) if not _internal(tname)]


def _internal(table: str) -> bool:
    """SQLite reserves ``sqlite_*`` names (one Spider schema lists ``sqlite_sequence``): left out."""
    return table.lower().startswith("sqlite_")


def gold_literals(sql: str) -> tuple[list[str], list[float]]:
    """The string literals of a query (``LIKE`` wildcards ``%`` at the ends removed) and its numbers."""
    strings: list[str] = []
    for a, b in re.findall(r"'((?:[^']|'')*)'|\"((?:[^\"]|\"\")*)\"", sql):
        s = (a.replace("''", "'") if a else b.replace('""', '"')).strip("%")
        if s and s not in strings:
            strings.append(s)
    bare = re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", " ", sql)
    numbers = sorted({float(x) for x in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", bare)})
    return strings, numbers


def n_rows(schema: dict[str, Any], table: int) -> int:
    """Rows of table ``table``: 3 to 10, from a hash of its name (so ``count(*)`` mostly tells tables apart)."""
    return 3 + zlib.crc32(f"{schema['db_id']}|{schema['table_names_original'][table]}".encode()) % 8


def synthetic_rows(schema: dict[str, Any], gold: str) -> dict[int, list[list[Any]]]:
    """Table index → :func:`n_rows` rows of deterministic values for the question's gold query (module doc)."""
    names = schema["column_names_original"]
    types = schema["column_types"]
    pks = set(schema.get("primary_keys", []))
    fk = {int(a): int(b) for a, b in schema.get("foreign_keys", [])}
    strings, numbers = gold_literals(gold)

    def value(c: int, row: int, depth: int = 0) -> Any:
        t, name = names[c]
        if c in fk and depth < 8 and fk[c] != c:
            ref = fk[c]
            return value(ref, (row * 3 + 1) % n_rows(schema, names[ref][0]), depth + 1)
        typ = types[c]
        if c in pks:
            return row + 1 if typ == "number" else f"{name} {row + 1}"
        h = zlib.crc32(f"{schema['db_id']}|{t}|{name}|{row}".encode())
        if typ == "number":
            if numbers and row % 2 == 1:  # around the gold query's numbers: below, equal, above
                x = numbers[(row // 2 + h) % len(numbers)] + (h % 3 - 1)
                return int(x) if x == int(x) else x
            return 1 + h % 100
        if typ == "boolean":
            return h % 2
        if typ == "time":
            return f"20{10 + h % 15}-0{1 + row}-1{row}"
        if strings and row % 2 == 0:
            return strings[(row // 2 + h) % len(strings)]
        return f"{name} {row + 1}"

    out: dict[int, list[list[Any]]] = {}
    for i in range(len(schema["table_names_original"])):
        cols = [c for c, (t, _) in enumerate(names) if t == i]
        rows = range(n_rows(schema, i))
        out[i] = [[value(c, r) for c in cols] for r in rows] if cols else [[None] for _ in rows]
    return out


def build_database(schema: dict[str, Any], gold: str) -> sqlite3.Connection:
    """An in-memory SQLite database: the schema plus :func:`synthetic_rows` for the question's gold query."""
    db = sqlite3.connect(":memory:")
    for stmt in create_statements(schema):
        db.execute(stmt)
    for i, rows in synthetic_rows(schema, gold).items():
        if _internal(schema["table_names_original"][i]):
            continue
        table = _quote(schema["table_names_original"][i])
        for r in rows:
            db.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(r))})", r)
    db.commit()
    return db


# --- checks ----------------------------------------------------------------------------------------


def parses(sql: str) -> bool:
    """True iff sqlglot parses ``sql`` as SQLite."""
    try:
        return sqlglot.parse_one(sql, read="sqlite") is not None
    except Exception:  # noqa: BLE001 - sqlglot raises several error types on bad input
        return False


def execute(db: sqlite3.Connection, sql: str, max_steps: int = 2_000_000) -> list[tuple[Any, ...]] | None:
    """The rows ``sql`` returns on ``db`` (None when SQLite refuses it or it runs past ``max_steps``)."""
    steps = [0]

    def guard() -> int:
        steps[0] += 1
        return 1 if steps[0] * 1000 > max_steps else 0

    db.set_progress_handler(guard, 1000)
    try:
        return [tuple(r) for r in db.execute(sql).fetchall()]
    except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError):
        return None
    finally:
        db.set_progress_handler(None, 1000)


def _norm(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(round(float(v), 6) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in row)


def same_result(got: list[tuple[Any, ...]] | None, gold: list[tuple[Any, ...]] | None, ordered: bool) -> bool:
    """Equal results (module doc): same rows, as a multiset (a list when ``ordered``), numbers rounded."""
    if got is None or gold is None:
        return False
    a, b = [_norm(r) for r in got], [_norm(r) for r in gold]
    return a == b if ordered else Counter(a) == Counter(b)


def has_order_by(sql: str) -> bool:
    """True when the query's outermost level sorts (``ORDER BY`` outside parentheses)."""
    depth = 0
    for m in re.finditer(r"\(|\)|\border\s+by\b", sql, re.I):
        tok = m.group(0)
        depth += 1 if tok == "(" else -1 if tok == ")" else 0
        if depth == 0 and tok not in "()":
            return True
    return False


def make_prompt(question: str, creates: list[str]) -> str:
    """The text-to-SQL prompt: the schema, then the question."""
    return ("Here is an SQLite database schema:\n" + ";\n".join(creates) + ";\n\n"
            f"Write one SQLite SELECT query that answers: {question}\nReply with the SQL query only.")


# --- main ------------------------------------------------------------------------------------------


def write_jsonl(path: str, questions: list[dict[str, Any]], methods: list[str]) -> None:
    """One JSON line per candidate (question, db_id, gold, then the candidate's fields), written atomically."""
    from gad.fileio import atomic_write

    lines = [json.dumps({"question": q["question"], "db_id": q["db_id"], "gold": q["gold"], **c},
                        ensure_ascii=False) + "\n"
             for q in questions for m in methods for c in q["candidates"][m]]
    atomic_write(path, [line.encode() for line in lines])


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """--help shows the module docstring as written, and every option's default."""


def _sample(lm: Any, compiled: Any, prompt: str, method: str, k: int, seed: int, max_new_tokens: int,
            max_proposals: int, particles: int, notes: list[str]) -> tuple[list[Any], str, dict[str, Any]]:
    """``k`` samples with ``method``, the method actually used, and its run figures.

    ``smc``: ``particles`` weighted particles (GCD proposal), and ``k`` draws resampled from their final
    weights.  ``rs`` that hits ``max_proposals`` falls back to ASAp for the question (noted).  The figures:
    ``model_rows`` (next-token distributions the model computed, prompt pass excluded), and ``proposals`` /
    ``accepted`` (rs) or ``ess`` (smc, effective sample size of the final weights).
    """
    kw: dict[str, Any] = {}
    if method == "rs":
        kw["options"] = {"max_proposals": max_proposals}
    elif method == "smc":
        kw["options"] = {"particles": particles, "draws": True}
    try:
        samples = gad.sample(lm, compiled, prompt, n=k, method=method, seed=seed, max_new_tokens=max_new_tokens,
                             **kw)
        used = method
    except InvalidArgumentError as exc:
        if method != "rs":
            raise
        notes.append(f"rs gave up ({exc}); ASAp used for this question")
        samples = gad.sample(lm, compiled, prompt, n=k, method="asap", seed=seed, max_new_tokens=max_new_tokens)
        figs = run_figures(samples, "asap", max_proposals)
        # the abandoned rs run's model calls count too (ProposalBudgetError carries them)
        figs["model_rows"] += int(getattr(exc, "compute", {}).get("model_rows", 0))
        return samples, "asap", figs
    return samples, used, run_figures(samples, used, max_proposals)


def _sample_joint(lm: Any, compiled: Any, prompt: str, k: int, seed: int, max_new_tokens: int,
                  particles: int) -> dict[str, tuple[list[Any], str, dict[str, Any]]]:
    """GCD and smc candidates from one decoding pass: ``{"gcd": …, "smc": …}`` as :func:`_sample` returns.

    One :func:`gad.sampling.smc.smc` run of ``particles`` particles with the GCD proposal decodes ``k``
    proposal draws alongside (``proposal_draws=k``): those are GCD samples (the proposal's law, never
    resampled; the samples ``gad.sample(method="gcd", n=k, seed=seed)`` draws); the smc candidates are
    ``k`` draws resampled from the particles' final weights (:func:`gad.sampling.smc.resampled_draws`),
    as ``gad.sample(method="smc", options={"particles": particles, "draws": True})`` returns them.  Figures: ``model_rows`` of gcd
    = the rows computed for the GCD draws alone, of smc = the rest (prompt pass excluded).
    """
    prompt_ids = lm.encode_prompt(prompt)
    est = make_estimator("gcd", lm, compiled, prompt_ids, settings={"batch_size": particles + k})
    res = smc_run(lm, compiled, prompt_ids, est, particles=particles, seed=seed, max_new_tokens=max_new_tokens,
                  proposal_draws=k)
    draws = resampled_draws(res, k, seed)
    smc_fig = {"model_rows": res.compute.model_rows - res.proposal_rows, "ess": res.ess,
               "particles": particles, "all_cut": not any(x.finished for x in draws)}
    return {"gcd": (res.proposal_draws, "gcd", {"model_rows": res.proposal_rows}),
            "smc": (draws, "smc", smc_fig)}


def run_figures(samples: list[Any], method: str, max_proposals: int) -> dict[str, Any]:
    """Compute and method figures of one ``gad.sample`` call (see :func:`_sample`)."""
    last = samples[-1].stats if samples else {}
    total = last.get("compute")
    rows = int(total["model_rows"]) if total else sum(int(s.stats.get("model_rows", 0)) for s in samples)
    fig: dict[str, Any] = {"model_rows": rows}
    if method == "rs":
        fig.update(proposals=int(last.get("proposals_total", 0)), accepted=len(samples))
    elif method == "asap" and samples:  # rs gave up: its proposals are lost, the ASAp run is counted
        fig.update(rs_proposals_lost=max_proposals)
    elif method == "smc" and samples:
        fig.update(ess=float(last.get("ess", math.nan)), particles=int(last.get("particles", 0)),
                   all_cut=not any(x.finished for x in samples))
    return fig


def _main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the comparison; prints per-question blocks and the summary; returns the figures.

    Returns:
        ``{"data", "aligned", "methods", "joint" (gcd and smc decoded in one pass), "questions": [{"question", "db_id", "gold", "gold_rows", "candidates":
        {method: [{"sql", "finished", "parses", "executes", "correct", "logprob", "method"}]}}],
        "summary": {method: {"parse", "execute", "correct", "questions_solved", "mean_logprob", "unfinished",
        "seconds", "model_rows", (rs) "proposals", "acceptance", "fell_back", (smc) "mean_ess", "all_cut"}},
        "runs": {method: [per question: {"model_rows", "method", "seconds", (rs) "proposals", "accepted",
        (smc) "ess", "particles", "all_cut"}]},
        "gold_nonempty", "notes"}`` (shares in [0, 1], log-likelihoods in nats).
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=_HelpFormatter)
    ap.add_argument("--n-questions", type=int, default=20, help="number of Spider questions")
    ap.add_argument("--start", type=int, default=0, help="index of the first question (round-robin order)")
    ap.add_argument("-k", type=int, default=3, help="candidates per question and method")
    ap.add_argument("--methods", default=None,
                    help="comma-separated methods (default: gcd and smc; rs and asap also run here, see "
                         "--max-proposals)")
    ap.add_argument("--max-new-tokens", type=int, default=40, help="token budget per query")
    ap.add_argument("--max-proposals", type=int, default=30,
                    help="rs: proposals per question before it gives up and ASAp is used for that question "
                         "(each proposal costs a whole query's decoding; acceptance on long queries is low)")
    ap.add_argument("--particles", type=int, default=8,
                    help="smc: particles per question (the -k candidates are resampled from their weights)")
    ap.add_argument("--separate", action="store_true",
                    help="decode gcd and smc in two passes per question (default: one pass, the GCD candidates "
                         "being proposal draws of the smc run; same laws, the seconds then split by method)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads for this run (0: torch's default; restored when main returns): on the "
                         "project's shared 2-core machine two threads made a decoding step 3-7x slower than "
                         "one (benchmarks/bench_threads.py)")
    ap.add_argument("--data-dir", default=None, help="folder holding spider/ (default: $GAD_DATA_DIR, else the "
                                                     "excerpt shipped with gad)")
    ap.add_argument("--out", default=None, help="JSONL file with every candidate's full SQL and checks")
    ap.add_argument("--seed", type=int, default=0, help="random seed")
    ap.add_argument("--model", default=None, help="local HF model directory (None: the bundled SmolLM2-135M-Instruct)")
    ap.add_argument("--quiet", action="store_true", help="print the summary only")
    args = ap.parse_args(argv)

    registered = method_names()
    aligned = next(m for m in ("smc", "rs", "asap") if m in registered)
    notes: list[str] = []
    if aligned != "smc":
        notes.append(f"this gad has no sequential Monte Carlo 'smc': the aligned method is {aligned}")
        print(f"note: {notes[-1]}")
    methods = [m.strip() for m in args.methods.split(",")] if args.methods else ["gcd", aligned]
    for m in list(methods):
        if m not in registered:
            notes.append(f"method {m!r} is not in this gad (registered: {', '.join(registered)}); skipped")
            print(f"note: {notes[-1]}")
            methods.remove(m)

    for name in ("n_questions", "k", "max_new_tokens", "max_proposals", "particles"):
        if getattr(args, name) < 1:
            flag = "-k" if name == "k" else "--" + name.replace("_", "-")
            raise InvalidArgumentError(f"{flag} must be a positive integer, "
                                       f"got {getattr(args, name)}")
    if args.threads < 0:
        raise InvalidArgumentError(f"--threads must be >= 0, got {args.threads}")
    if args.threads:
        torch.set_num_threads(args.threads)
    joint = "gcd" in methods and "smc" in methods and not args.separate
    questions, schemas, source = load_spider(args.data_dir)
    questions = questions[args.start: args.start + args.n_questions]
    lm = gad.load_model(args.model)
    compiled = gad.compile(gad.Grammar.builtin("sql"), lm.vocab)

    seconds = dict.fromkeys(methods, 0.0)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    out_q: list[dict[str, Any]] = []
    for q in tqdm(questions, desc="questions", unit="question"):
        schema = schemas[q["db_id"]]
        db = build_database(schema, q["query"])
        gold_rows = execute(db, q["query"])
        ordered = has_order_by(q["query"])
        prompt = make_prompt(q["question"], create_statements(schema))
        cands: dict[str, list[dict[str, Any]]] = {}
        drawn: dict[str, tuple[list[Any], str, dict[str, Any]]] = {}
        if joint:  # one decoding pass: the GCD candidates are proposal draws of the smc run
            t0 = time.perf_counter()
            drawn = _sample_joint(lm, compiled, prompt, args.k, args.seed, args.max_new_tokens, args.particles)
            dt = time.perf_counter() - t0
            for m in ("gcd", "smc"):
                seconds[m] += dt
                runs[m].append({**drawn[m][2], "method": m, "seconds": dt})
        for m in methods:
            if m in drawn:
                samples, used, _ = drawn[m]
            else:
                t0 = time.perf_counter()
                samples, used, fig = _sample(lm, compiled, prompt, m, args.k, args.seed, args.max_new_tokens,
                                             args.max_proposals, args.particles, notes)
                dt = time.perf_counter() - t0
                seconds[m] += dt
                runs[m].append({**fig, "method": used, "seconds": dt})
            cands[m] = []
            for s in samples:
                sql = s.text.strip()
                p = s.finished and parses(sql)
                rows = execute(db, sql) if s.finished else None
                cands[m].append({"sql": sql, "finished": s.finished, "parses": bool(p),
                                 "executes": rows is not None,
                                 "correct": same_result(rows, gold_rows, ordered), "logprob": s.logprob,
                                 "method": used})
        db.close()
        out_q.append({"question": q["question"], "db_id": q["db_id"], "gold": q["query"],
                      "gold_rows": len(gold_rows) if gold_rows is not None else None, "candidates": cands})
        if args.out:  # rewritten after every question, so an interrupted run keeps what it measured
            write_jsonl(args.out, out_q, methods)

    summary: dict[str, dict[str, float]] = {}
    for m in methods:
        cs = [c for q in out_q for c in q["candidates"][m]]
        n = max(len(cs), 1)
        fin = [c["logprob"] for c in cs if c["finished"]]
        summary[m] = {"parse": sum(c["parses"] for c in cs) / n, "execute": sum(c["executes"] for c in cs) / n,
                      "correct": sum(c["correct"] for c in cs) / n,
                      "questions_solved": sum(any(c["correct"] for c in q["candidates"][m]) for q in out_q),
                      "mean_logprob": sum(fin) / len(fin) if fin else math.nan,
                      "unfinished": sum(not c["finished"] for c in cs) / n, "seconds": seconds[m],
                      "model_rows": sum(r["model_rows"] for r in runs[m])}
        if m == "rs":
            props = sum(r.get("proposals", 0) for r in runs[m])
            summary[m].update(proposals=props, acceptance=sum(r.get("accepted", 0) for r in runs[m]) / max(props, 1),
                              fell_back=sum(r["method"] != "rs" for r in runs[m]))
        if m == "smc":
            summary[m]["mean_ess"] = sum(r.get("ess", 0.0) for r in runs[m]) / max(len(runs[m]), 1)
            summary[m]["all_cut"] = sum(bool(r.get("all_cut")) for r in runs[m])
    gold_nonempty = sum(1 for q in out_q if q["gold_rows"])
    results = {"data": source, "aligned": aligned, "methods": methods, "joint": joint, "questions": out_q,
               "summary": summary, "runs": runs, "gold_nonempty": gold_nonempty, "notes": notes}

    if not args.quiet:
        for i, q in enumerate(out_q):
            print(f"\n[{i + 1}] {q['db_id']}: {q['question']}")
            print(f"    gold ({q['gold_rows']} rows): {q['gold']}")
            for m in methods:
                for c in q["candidates"][m]:
                    flags = ("P" if c["parses"] else "-") + ("E" if c["executes"] else "-") + \
                            ("C" if c["correct"] else "-") + ("" if c["finished"] else " (budget ran out)")
                    body = textwrap.fill(c["sql"], 100, initial_indent="", subsequent_indent=" " * 18)
                    print(f"    {c['method']:5} {flags:4} {c['logprob']:7.1f}  {body}")
        print("\n(P parses with sqlglot, E executes, C result equals the gold query's; number: log P in nats)")
    print(f"\ndata: {source}; {len(out_q)} questions x {args.k} candidates per method; "
          f"{gold_nonempty}/{len(out_q)} gold results non-empty on the synthetic rows")
    print(f"{'method':8} {'parse':>6} {'execute':>8} {'correct':>8} {'solved':>7} {'mean log P':>11} "
          f"{'budget out':>11} {'model rows':>11} {'seconds':>8}")
    for m, s in summary.items():
        print(f"{m:8} {s['parse']:6.0%} {s['execute']:8.0%} {s['correct']:8.0%} "
              f"{int(s['questions_solved']):>3}/{len(out_q):<3} {s['mean_logprob']:11.2f} {s['unfinished']:11.0%} "
              f"{int(s['model_rows']):11d} {s['seconds']:8.0f}")
    print("(correct = execution accuracy over all candidates; solved = questions with a correct candidate; "
          "model rows = next-token distributions the model computed, prompt passes excluded)")
    if "rs" in summary:
        r = summary["rs"]
        print(f"rs: {int(r['proposals'])} proposals, acceptance rate {r['acceptance']:.3f}; "
              f"{int(r['fell_back'])} question(s) fell back to ASAp (their abandoned rs proposals' model rows included)")
    if joint:
        print(f"gcd and smc were decoded together, one pass per question (the {args.k} GCD candidates are proposal "
              "draws of the smc run): both rows show that pass's seconds; model rows: gcd = rows for the GCD "
              "draws alone, smc = the rest")
    if "smc" in summary:
        print(f"smc: {args.particles} particles per question, mean final ESS {summary['smc']['mean_ess']:.1f}; "
              f"the {args.k} candidates are resampled from the weighted particles; on "
              f"{int(summary['smc']['all_cut'])} question(s) no particle finished within the budget")
    for n_ in sorted(set(notes)):
        print(f"note: {n_}")
    if args.out:
        print(f"candidates: {args.out}")
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example (:func:`_main`: what it prints and returns), leaving torch's thread count as it was."""
    with torch_threads():
        return _main(argv)


if __name__ == "__main__":
    main()
    sys.exit(0)
