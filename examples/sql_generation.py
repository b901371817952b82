"""Text-to-SQL under grammars/sql.lark on Spider questions, checked by sqlglot and SQLite.

    python examples/sql_generation.py [--count 3] [--max-new-tokens 128] [--seed 0] [--model PATH]

For each question of ../shared/data/spider/dev_queries.jsonl the prompt holds the database schema
(CREATE TABLE statements built from ../shared/data/spider/tables.json); the SQL is sampled with GCD
under sql.lark, parsed with sqlglot (dialect sqlite) and executed on an empty in-memory SQLite
database created from the same schema.  Prints question | SQL | parses | executes.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import gad

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "spider"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def create_statements(schema: dict[str, Any]) -> list[str]:
    """``CREATE TABLE`` statements (SQLite) for one Spider schema of tables.json."""
    types = {"number": "NUMERIC", "text": "TEXT", "time": "TEXT", "boolean": "INTEGER", "others": "TEXT"}
    cols: dict[int, list[str]] = {i: [] for i in range(len(schema["table_names_original"]))}
    for (t, name), typ in zip(schema["column_names_original"], schema["column_types"], strict=True):
        if t >= 0:
            cols[t].append(f"{_quote(name)} {types.get(typ, 'TEXT')}")
    return [f"CREATE TABLE {_quote(tname)} ({', '.join(cols[i])})"
            for i, tname in enumerate(schema["table_names_original"])]


def make_prompt(question: str, creates: list[str]) -> str:
    """The text-to-SQL prompt: the schema, then the question."""
    return ("Here is an SQLite database schema:\n" + ";\n".join(creates) + ";\n\n"
            f"Write one SQLite SELECT query that answers: {question}\nReply with the SQL query only.")


def check(sql: str, creates: list[str]) -> tuple[bool, bool, str]:
    """(parses with sqlglot, executes on the empty schema database, error message)."""
    import sqlglot

    try:
        sqlglot.parse_one(sql, read="sqlite")
        parses = True
    except Exception as exc:  # noqa: BLE001 - report any parse failure
        return False, False, f"sqlglot: {exc}".splitlines()[0]
    db = sqlite3.connect(":memory:")
    try:
        for c in creates:
            db.execute(c)
        db.execute(sql).fetchall()
        return parses, True, ""
    except sqlite3.Error as exc:
        return parses, False, f"sqlite: {exc}"
    finally:
        db.close()


def main(argv: list[str] | None = None) -> int:
    """Run ``--count`` Spider questions; prints the table; returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--count", type=int, default=3, help="number of Spider questions")
    ap.add_argument("--start", type=int, default=0, help="index of the first question")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="token budget per query")
    ap.add_argument("--seed", type=int, default=0, help="random seed")
    ap.add_argument("--model", default=None, help="local HF model directory (None: the bundled SmolLM2-135M-Instruct)")
    args = ap.parse_args(argv)

    schemas = {s["db_id"]: s for s in json.loads((DATA / "tables.json").read_text())}
    with open(DATA / "dev_queries.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()][args.start: args.start + args.count]
    lm = gad.load_model(args.model)
    compiled = gad.compile(gad.Grammar.builtin("sql"), lm.vocab)
    results = []
    for row in rows:
        creates = create_statements(schemas[row["db_id"]])
        s = gad.sample(lm, compiled, make_prompt(row["question"], creates), n=1, seed=args.seed,
                       max_new_tokens=args.max_new_tokens)[0]
        sql = " ".join(s.text.split())
        parses, executes, err = check(sql, creates) if s.finished else (False, False, "token budget ran out")
        results.append((row["question"], sql, parses, executes, err))
    print(f"{'question':50} | {'SQL':60} | parses | executes")
    print("-" * 50 + "-+-" + "-" * 60 + "-+--------+---------")
    for q, sql, p, e, err in results:
        print(f"{q[:50]:50} | {sql[:60]:60} | {str(p):6} | {str(e):8}" + (f"  ({err})" if err else ""))
    print(f"\n{sum(r[2] for r in results)}/{len(results)} parse, {sum(r[3] for r in results)}/{len(results)} execute")
    return 0


if __name__ == "__main__":
    sys.exit(main())
