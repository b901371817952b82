"""The evaluation task registry (BRIEF §5).

A :class:`Task` names a grammar, a prompt, whether its law ``Q*`` is enumerable (``kind="exact"``) or
not (``"open"``, union estimator), and an optional checker.  Shipped tasks:

* ``binary/<name>`` — the GAD paper's binary-string grammars (shipped as package data), exact
  (enumerated up to ``exact_max_len`` tokens: a truncation of ``Q*``, see :mod:`gad.phi.exact`);
* ``dyck3`` — balanced parentheses of depth ≤ 3, exact (truncated);
* ``json-finite`` — a finite JSON language (fixed keys, enumerated values), exact, JSON-Schema checker;
* ``arith`` — bounded arithmetic expressions ``d op d`` (digits 1–9, ``+ - *``): ``Q*`` spread over 243
  strings, exact;
* ``slia/<name>`` and ``bv4/<name>`` — SyGuS problems from ``$GAD_DATA_DIR/gad-bench`` (prompt
  ``NAME.prompt.txt``, grammar ``NAME.ebnf``, cvc5 checker against ``NAME.sl``), open;
* ``sql/concert_singer`` — a small SELECT grammar over one Spider schema, SQLite checker, open.

Data beyond the binary grammars is read from ``$GAD_DATA_DIR`` (never from a checkout); a task whose
data is missing fails with one line naming the variable or the file.  :func:`register_task` adds more.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gad.engine.compiler import compile as compile_grammar
from gad.errors import InvalidArgumentError
from gad.eval import checkers
from gad.grammar import Grammar
from gad.testing.regex_grammar import regex_grammar

PACKAGE_DATA = Path(__file__).resolve().parent / "data"  # small data shipped with gad (see its README)
DATA_ENV = "GAD_DATA_DIR"


def data_dir() -> Path:
    """The task data folder: ``$GAD_DATA_DIR`` (holding ``gad-bench/`` and ``spider/``; ``~`` expanded).

    Raises:
        InvalidArgumentError: the variable is unset or empty (the message names it).
    """
    env = os.environ.get(DATA_ENV)
    if not env:
        raise InvalidArgumentError(f"this task reads the GAD benchmark / Spider data: set {DATA_ENV} to the "
                                   f"folder holding gad-bench/ and spider/ (e.g. ../shared/data)")
    return Path(env).expanduser()


@dataclass
class Task:
    """One evaluation task.

    Attributes:
        name: registry key.
        kind: ``"exact"`` (``Q*`` by enumeration) or ``"open"`` (the GAD paper's union estimator).
        prompt: prompt text (chat template applied by the model).
        grammar_path: a ``.lark`` / ``.ebnf`` file, or None.
        grammar_text: Lark text, or None.
        regex: a regular expression (compiled by :func:`gad.eval.regex_grammar.regex_grammar`), or None.
        checker: ``"json"``, ``"sql"``, ``"sygus"`` or None; ``checker_args`` its keyword arguments.
        max_new_tokens: token budget per sample.
        exact_max_len: enumeration bound (tokens) for exact tasks.
    """

    name: str
    kind: str
    prompt: str
    grammar_path: str | None = None
    grammar_text: str | None = None
    regex: str | None = None
    checker: str | None = None
    checker_args: dict[str, Any] = field(default_factory=dict)
    max_new_tokens: int = 64
    exact_max_len: int = 8

    def compile(self, vocab: Any) -> Any:
        """The compiled grammar over ``vocab`` (``gad.compile``; a regex as a one-terminal grammar).

        Raises:
            gad.errors.GrammarError: the grammar cannot be loaded or compiled.
        """
        if self.regex is not None:
            return regex_grammar(self.regex, vocab)

        if self.grammar_path is not None:
            g = Grammar.from_file(self.grammar_path)
        else:
            g = Grammar.from_string(self.grammar_text or "", kind="lark")
        return compile_grammar(g, vocab)

    def check(self, text: str) -> bool | None:
        """Run the task's checker on one output (None: no checker or checker unavailable)."""
        if self.checker == "json":
            return checkers.check_json(text, self.checker_args.get("schema"))
        if self.checker == "sql":
            return checkers.check_sql(text, **self.checker_args)
        if self.checker == "sygus":
            return checkers.check_sygus(text, **self.checker_args)
        return None


_REGISTRY: dict[str, Callable[[], Task]] = {}


def register_task(name: str, factory: Callable[[], Task]) -> None:
    """Add (or replace) a task; ``factory`` builds it lazily (data files are read on use)."""
    _REGISTRY[name] = factory


def task_names() -> list[str]:
    """Every registered task name."""
    return sorted(_REGISTRY)


def get_task(name: str | Task) -> Task:
    """The task called ``name`` (a :class:`Task` is returned as is).

    Raises:
        InvalidArgumentError: unknown task name, or its data files are missing.
    """
    if isinstance(name, Task):
        return name
    f = _REGISTRY.get(name)
    if f is None:
        raise InvalidArgumentError(f"unknown task {name!r}; known: {', '.join(task_names())}")
    try:
        return f()
    except FileNotFoundError as exc:
        raise InvalidArgumentError(f"task {name!r}: data file missing ({exc.filename}; data folder: "
                                   f"${DATA_ENV})") from exc


# --- shipped tasks ----------------------------------------------------------------------------

BINARY = ("string_0", "string_01", "string_1", "string_recursive_01", "string_recursive_start_w_1_all_0",
          "string_start_w_0_all_1", "string_start_w_1", "string_start_w_1_all_0")


def _binary(stem: str) -> Task:
    path = PACKAGE_DATA / "binary" / f"{stem}.ebnf"
    if not path.exists():
        raise FileNotFoundError(2, "missing", str(path))
    return Task(name=f"binary/{stem}", kind="exact", grammar_path=str(path), max_new_tokens=16,
                exact_max_len=6,
                prompt="Write a binary string (digits 0 and 1 only). Answer with the string only.")


def _sygus(family: str, stem: str) -> Task:
    base = data_dir() / "gad-bench" / family / stem
    prompt = Path(f"{base}.prompt.txt").read_text(encoding="utf-8")
    grammar = Path(f"{base}.ebnf")
    if not grammar.exists():
        raise FileNotFoundError(2, "missing", str(grammar))
    sl = Path(f"{base}.sl")
    return Task(name=f"{family.lower()}/{stem}", kind="open", prompt=prompt, grammar_path=str(grammar),
                checker="sygus" if sl.exists() else None,
                checker_args={"sl_path": str(sl)} if sl.exists() else {}, max_new_tokens=128)


DYCK3 = r"(\((\((\(\))*\))*\))+"
JSON_FINITE = r'\{"name": "(alice|bob|carol)", "age": (7|30|42), "admin": (true|false)\}'
JSON_SCHEMA = {"type": "object", "required": ["name", "age", "admin"], "additionalProperties": False,
               "properties": {"name": {"enum": ["alice", "bob", "carol"]}, "age": {"enum": [7, 30, 42]},
                              "admin": {"type": "boolean"}}}


def _sql_grammar(tables: dict[str, list[str]]) -> str:
    def alts(xs: list[str]) -> str:
        return " | ".join(json.dumps(x) for x in sorted(set(xs)))

    cols = [c for cs in tables.values() for c in cs]
    return "\n".join([
        'start: "SELECT " select " FROM " TABLE where?',
        'select: "*" | "count(*)" | COLUMN (", " COLUMN)*',
        'where: " WHERE " COLUMN " " OP " " value',
        'value: NUMBER | STRING',
        'OP: "=" | ">" | "<"',
        f"TABLE: {alts(list(tables))}",
        f"COLUMN: {alts(cols)}",
        "NUMBER: /[0-9]{1,4}/",
        "STRING: /'[A-Za-z ]{0,12}'/",
    ]) + "\n"


def _sql(db_id: str) -> Task:

    tables_path = data_dir() / "spider" / "tables.json"
    tables = checkers.spider_tables(str(tables_path), db_id)
    question = "How many singers do we have?"
    qpath = data_dir() / "spider" / "dev_queries.jsonl"
    with open(qpath, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["db_id"] == db_id:
                question = row["question"]
                break
    schema = "; ".join(f"{t}({', '.join(cs)})" for t, cs in tables.items())
    prompt = f"SQLite schema: {schema}\nQuestion: {question}\nWrite one SQL query answering it."
    return Task(name=f"sql/{db_id}", kind="open", prompt=prompt, grammar_text=_sql_grammar(tables),
                checker="sql", checker_args={"db_id": db_id, "tables_path": str(tables_path)},
                max_new_tokens=48)


for _stem in BINARY:
    register_task(f"binary/{_stem}", functools.partial(_binary, _stem))
for _stem in ("bikes_small", "firstname_small", "initials_small", "lastname_small", "dr-name",
              "name-combine_short", "phone_short"):
    register_task(f"slia/{_stem}", functools.partial(_sygus, "SLIA", _stem))
for _stem in ("find_inv_bvsge_bvadd_4bit", "find_inv_bvsge_bvand_4bit", "find_inv_bvsge_bvneg_4bit"):
    register_task(f"bv4/{_stem}", functools.partial(_sygus, "bv4", _stem))
register_task("dyck3", lambda: Task(
    name="dyck3", kind="exact", regex=DYCK3, max_new_tokens=16, exact_max_len=6,
    prompt="Write a short string of balanced parentheses, nested at most 3 deep."))
ARITH = r"[1-9][-+*][1-9]"
register_task("arith", lambda: Task(
    name="arith", kind="exact", regex=ARITH, max_new_tokens=8, exact_max_len=5,
    prompt="Write one arithmetic expression: a digit from 1 to 9, then +, - or *, then a digit from 1 to 9."))
register_task("json-finite", lambda: Task(
    name="json-finite", kind="exact", regex=JSON_FINITE, checker="json", checker_args={"schema": JSON_SCHEMA},
    max_new_tokens=48, exact_max_len=48,
    prompt='Write a JSON object with keys "name" (alice, bob or carol), "age" (7, 30 or 42) and "admin".'))
register_task("sql/concert_singer", lambda: _sql("concert_singer"))
