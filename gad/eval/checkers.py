"""Task checkers: does an output do its job? (BRIEF §5, task quality.)

* :func:`check_json` — the text parses as JSON (and validates against a JSON Schema when given).
* :func:`check_sql` — the query executes on an empty SQLite database built from a Spider schema.
* :func:`check_sygus` — a SyGuS solution ``(define-fun …)`` satisfies every ``constraint`` of its
  ``.sl`` spec: the declared variables become free constants and cvc5 proves
  ``not (c_1 ∧ … ∧ c_n)`` unsatisfiable.  Needs the optional ``cvc5`` package (``pip install
  gad[sygus]``); without it :func:`sygus_available` is False and the checker returns None.

Every checker returns True / False (None: checker unavailable) and never raises on bad output text.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sqlite3
from typing import Any

from gad.errors import InvalidArgumentError


def check_json(text: str, schema: dict[str, Any] | None = None) -> bool:
    """True iff ``text`` is one JSON value (RFC 8259) and, with ``schema``, valid under it."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    if schema is None:
        return True
    import jsonschema

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


@functools.lru_cache(maxsize=8)
def _spider_schema(tables_path: str, db_id: str) -> str:
    with open(tables_path, encoding="utf-8") as f:
        dbs = json.load(f)
    for d in dbs:
        if d["db_id"] == db_id:
            break
    else:
        raise InvalidArgumentError(f"database {db_id!r} is not in {tables_path}")
    types = {"number": "REAL", "text": "TEXT", "time": "TEXT", "boolean": "INTEGER", "others": "TEXT"}
    cols: dict[int, list[str]] = {}
    for (ti, name), ty in zip(d["column_names_original"], d["column_types"], strict=True):
        if ti >= 0:
            cols.setdefault(ti, []).append(f'"{name}" {types.get(ty, "TEXT")}')
    stmts = [f'CREATE TABLE "{t}" ({", ".join(cols.get(i, ["dummy TEXT"]))});'
             for i, t in enumerate(d["table_names_original"])]
    return "\n".join(stmts)


def spider_tables(tables_path: str, db_id: str) -> dict[str, list[str]]:
    """Table name → column names of one Spider database (original spelling).

    Raises:
        InvalidArgumentError: ``db_id`` is not in ``tables_path``.
    """
    with open(tables_path, encoding="utf-8") as f:
        for d in json.load(f):
            if d["db_id"] == db_id:
                out: dict[str, list[str]] = {t: [] for t in d["table_names_original"]}
                names = d["table_names_original"]
                for ti, c in d["column_names_original"]:
                    if ti >= 0:
                        out[names[ti]].append(c)
                return out
    raise InvalidArgumentError(f"database {db_id!r} is not in {tables_path}")


def check_sql(text: str, db_id: str, tables_path: str) -> bool:
    """True iff ``text`` executes without error on an empty in-memory SQLite copy of the schema."""
    con = sqlite3.connect(":memory:")
    try:
        con.executescript(_spider_schema(os.fspath(tables_path), db_id))
        con.execute(text).fetchall()
        return True
    except (sqlite3.Error, sqlite3.Warning, ValueError):
        return False
    finally:
        con.close()


def sygus_available() -> bool:
    """True when the ``cvc5`` Python package can be imported."""
    try:
        import cvc5  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means unavailable
        return False
    return True


def _sexprs(text: str) -> list[str]:
    """Top-level s-expressions of ``text`` (comments dropped, string literals respected)."""
    out: list[str] = []
    depth = 0
    start = -1
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == ";" and depth >= 0:
            while i < n and text[i] != "\n":
                i += 1
            continue
        if ch == '"':
            i += 1
            while i < n:
                if text[i] == '"':
                    if i + 1 < n and text[i + 1] == '"':  # SMT-LIB escaped quote
                        i += 2
                        continue
                    break
                i += 1
        elif ch == "(":
            if depth == 0:
                start = i
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced ')'")
            if depth == 0:
                out.append(text[start:i + 1])
        i += 1
    if depth != 0:
        raise ValueError("unbalanced '('")
    return out


def _head(sexpr: str) -> str:
    return sexpr[1:].lstrip().split(None, 1)[0].rstrip(")") if len(sexpr) > 2 else ""


def sygus_script(solution: str, sl_text: str) -> str:
    """The SMT-LIB script whose ``unsat`` proves ``solution`` meets the spec ``sl_text``.

    Raises:
        ValueError: ``solution`` is not exactly one ``define-fun``, or the spec has no constraint.
    """
    sol = _sexprs(solution)
    if len(sol) != 1 or _head(sol[0]) != "define-fun" or solution.strip() != sol[0]:
        raise ValueError("a SyGuS solution must be exactly one (define-fun ...)")
    lines = ["(set-logic ALL)", sol[0]]
    constraints: list[str] = []
    for e in _sexprs(sl_text):
        head = _head(e)
        if head == "declare-var":
            body = e[1:-1].strip()[len("declare-var"):].strip()
            name, sort = body.split(None, 1)
            lines.append(f"(declare-fun {name} () {sort})")
        elif head in ("define-fun", "declare-fun", "declare-datatype", "declare-datatypes", "define-sort"):
            lines.append(e)
        elif head == "constraint":
            constraints.append(e[1:-1].strip()[len("constraint"):].strip())
    if not constraints:
        raise ValueError("the spec has no constraint")
    conj = constraints[0] if len(constraints) == 1 else "(and " + " ".join(constraints) + ")"
    lines += [f"(assert (not {conj}))", "(check-sat)"]
    # SyGuS-IF writes bit-vector sorts as (BitVec n); SMT-LIB 2.6 as (_ BitVec n)
    return re.sub(r"\(\s*BitVec\s+(\d+)\s*\)", r"(_ BitVec \1)", "\n".join(lines) + "\n")


def check_sygus(text: str, sl_path: str, timeout_ms: int = 5000) -> bool | None:
    """True iff the solution ``text`` satisfies every constraint of the spec at ``sl_path`` (cvc5).

    Returns None when cvc5 is not installed; False for unparsable or ill-typed solutions, counter-
    examples, and ``unknown`` / timeouts (``timeout_ms`` per check).
    """
    if not sygus_available():
        return None
    import cvc5

    with open(sl_path, encoding="utf-8") as f:
        sl_text = f.read()
    try:
        script = sygus_script(text, sl_text)
    except ValueError:
        return False
    solver = cvc5.Solver()
    solver.setOption("tlimit-per", str(int(timeout_ms)))
    parser = cvc5.InputParser(solver)
    result = ""
    try:
        parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, script, "sygus-check")
        sm = parser.getSymbolManager()
        while True:
            cmd = parser.nextCommand()
            if cmd.isNull():
                break
            result = cmd.invoke(solver, sm) or result
    except Exception:  # noqa: BLE001 - cvc5 raises RuntimeError on parse / type errors
        return False
    return result.strip() == "unsat"
