"""Grammar loading, validation errors, and the shipped grammars (json.lark, sql.lark).

Data: tests/data/jsontestsuite (RFC 8259 conformance files) and
tests/data/spider/dev_queries.jsonl (Spider gold SQL), read in place.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gad.errors import (
    EmptyLanguageError,
    GrammarConflictError,
    GrammarError,
    GrammarSyntaxError,
    UndefinedSymbolError,
    UnsupportedGrammarError,
)
from gad.grammar import BUILTIN_DIR
from gad.grammar.loader import Grammar

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data"
JSON_SUITE = DATA / "jsontestsuite"
SPIDER = DATA / "spider" / "dev_queries.jsonl"


@pytest.fixture(scope="module")
def json_grammar() -> Grammar:
    return Grammar.from_file(BUILTIN_DIR / "json.lark")


@pytest.fixture(scope="module")
def sql_grammar() -> Grammar:
    return Grammar.from_file(BUILTIN_DIR / "sql.lark")


# --- JSON -------------------------------------------------------------------------------------------


def _json_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")  # strict: invalid UTF-8 is not JSON text
    except UnicodeDecodeError:
        return None


def test_json_suite_y_and_n(json_grammar: Grammar) -> None:
    files = sorted(JSON_SUITE.iterdir())
    ys = [f for f in files if f.name.startswith("y_")]
    ns = [f for f in files if f.name.startswith("n_")]
    assert len(ys) > 50 and len(ns) > 50
    wrongly_rejected = [f.name for f in ys if (t := _json_text(f)) is None or not json_grammar.parses(t)]
    wrongly_accepted = [f.name for f in ns if (t := _json_text(f)) is not None and json_grammar.parses(t)]
    assert wrongly_rejected == []
    assert wrongly_accepted == []
    for f in files:
        if f.name.startswith("i_"):
            t = _json_text(f)
            print(f"{f.name}: {'accepted' if t is not None and json_grammar.parses(t) else 'rejected'}")


def test_json_agrees_with_python_json_on_y_files(json_grammar: Grammar) -> None:
    # Python's json module is an independent oracle for the accepted files.
    for f in sorted(JSON_SUITE.glob("y_*")):
        json.loads(f.read_bytes().decode("utf-8"))


@pytest.mark.parametrize("text, ok", [
    ('{"a": [1, 2.5e-3, -0, true, false, null, "\\u00e9\\n"]}', True),
    (" \t\n\r[]\r\n ", True),
    ("\ufeff{}", False),           # BOM rejected
    ("01", False), ("1.", False), (".5", False), ("+1", False), ("-", False), ("1e", False),
    ('"\\x41"', False), ('"a\tb"', False), ('"\\u12"', False), ("[1,]", False), ('{"a" 1}', False),
    ("[1 2]", False), ("tru", False), ("True", False), ("nulls", False), ("", False), (" ", False),
    ('"\U0001f600\u007f"', True), ("1E+2", True), ("[[[]]]", True), ("\f1", False),
])
def test_json_cases(json_grammar: Grammar, text: str, ok: bool) -> None:
    assert json_grammar.parses(text) is ok


def test_json_grammar_attributes(json_grammar: Grammar) -> None:
    assert json_grammar.kind == "lark" and json_grammar.start == "start"
    names = {t.name for t in json_grammar.terminal_defs}
    assert {"STRING", "NUMBER", "WS"} <= names
    assert json_grammar.ignore_terminals == ["WS"]
    assert len(json_grammar.sha256) == 64
    again = Grammar.from_file(BUILTIN_DIR / "json.lark")
    assert again.sha256 == json_grammar.sha256
    assert Grammar.from_string(json_grammar.lark_text, start="value").sha256 != json_grammar.sha256
    assert json_grammar.lark is json_grammar.lark  # built once


# --- SQL --------------------------------------------------------------------------------------------


def test_spider_gold_queries(sql_grammar: Grammar) -> None:
    queries = [json.loads(line)["query"] for line in SPIDER.read_text(encoding="utf-8").splitlines() if line]
    assert len(queries) > 500
    failures = [q for q in queries if not sql_grammar.parses(q)]
    for q in failures:
        print("REJECTED:", q)
    print(f"accepted {len(queries) - len(failures)}/{len(queries)}")
    assert (len(queries) - len(failures)) / len(queries) >= 0.98


@pytest.mark.parametrize("text, ok", [
    ("SELECT count(*) FROM singer", True),
    ("select T1.name, avg(T2.age) AS a from t1 as T1 join t2 as T2 on T1.id = T2.id "
     "where T1.x between 1 and 2 and not T1.y like '%a%' group by T1.name having count(*) >= 2 "
     "order by a desc limit 3", True),
    ("SELECT a FROM t WHERE b NOT IN (SELECT b FROM u) INTERSECT SELECT a FROM v", True),
    ("SELECT a FROM t WHERE b IN (1, 2, 'x') UNION SELECT a FROM w EXCEPT SELECT 1", True),
    ("SELECT DISTINCT a + b * (c - 1) / 2 FROM t;", True),
    ("SELECT a FROM t WHERE s = \"it's\" OR s <> 'say ''hi'''", True),
    ("SELECT", False), ("SELECT a FROM", False), ("SELECT a FROM t WHERE", False),
    ("SELECT a FROM t ORDER a", False), ("SELECT a, , b FROM t", False), ("SELECT a FROM t LIMIT", False),
    ("SELECT count(* FROM t", False), ("SELECT a FROM t WHERE a = 'unterminated", False),
])
def test_sql_cases(sql_grammar: Grammar, text: str, ok: bool) -> None:
    assert sql_grammar.parses(text) is ok


def test_sql_keywords_are_carved_out_of_names(sql_grammar: Grammar) -> None:
    # NAME is case-insensitive like the keywords, so Lark embeds every keyword into NAME
    # (no separate keyword terminal competes with NAME in the lexer).
    names = {t.name for t in sql_grammar.terminal_defs}
    assert "NAME" in names
    assert sql_grammar.parses("SeLeCt NaMe FrOm SiNgEr WhErE selected = 1")
    # where a keyword can follow, its spelling is the keyword (not an alias NAME) ...
    assert not sql_grammar.parses("SELECT a FROM t where")
    assert sql_grammar.parses("SELECT a FROM t wherever")
    # ... and where no keyword can follow, Lark's contextual lexer reads it as a NAME (documented
    # in sql.lark's header): a column named "from" with alias t.
    assert sql_grammar.parses("SELECT a, FROM t")


# --- loading and errors -------------------------------------------------------------------------


def test_missing_file_names_path(tmp_path: Path) -> None:
    p = tmp_path / "nope.lark"
    with pytest.raises(GrammarError) as ei:
        Grammar.from_file(p)
    assert ei.value.path == str(p) and str(p) in str(ei.value)


def test_unknown_suffix(tmp_path: Path) -> None:
    p = tmp_path / "g.txt"
    p.write_text('start: "a"\n')
    with pytest.raises(GrammarError, match="unknown grammar file type"):
        Grammar.from_file(p)


def _raises(exc: type[GrammarError], text: str, tmp_path: Path, name: str = "g.lark") -> GrammarError:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    with pytest.raises(exc) as ei:
        Grammar.from_file(p)
    err = ei.value
    assert type(err) is exc
    assert err.path == str(p)
    return err


def test_syntax_error_position(tmp_path: Path) -> None:
    err = _raises(GrammarSyntaxError, 'start: "a"\n  bar: !!\n', tmp_path)
    assert (err.line, err.column) == (2, 8)
    assert str(err).startswith(f"{err.path}:2:8: ")
    err = _raises(GrammarSyntaxError, 'start: "a"\nfoo: ( "b"\n', tmp_path)
    assert err.line == 2


def test_undefined_rule(tmp_path: Path) -> None:
    err = _raises(UndefinedSymbolError, 'start: "a"\n    | "b" foo\n', tmp_path)
    assert err.symbol == "foo" and (err.line, err.column) == (2, 11)


def test_undefined_terminal(tmp_path: Path) -> None:
    err = _raises(UndefinedSymbolError, '// c\nstart: "a" FOO\n', tmp_path)
    assert err.symbol == "FOO" and (err.line, err.column) == (2, 12)


def test_undefined_start(tmp_path: Path) -> None:
    err = _raises(UndefinedSymbolError, 'foo: "a"\n', tmp_path)
    assert err.symbol == "start"


def test_reduce_reduce_conflict(tmp_path: Path) -> None:
    err = _raises(GrammarConflictError, 'start: a | b\na: "x"\nb: "x"\n', tmp_path)
    assert sorted(err.rules) == ["a", "b"]
    assert (err.line, err.column) == (2, 1)


def test_shift_reduce_conflict(tmp_path: Path) -> None:
    # Lark would silently resolve this as shift; gad refuses (L(Lark) would differ from the CFG).
    err = _raises(GrammarConflictError, 'start: e\ne: e "+" e | "1"\n', tmp_path)
    assert err.rules == ["e"] and "shift/reduce" in str(err) and "PLUS" in str(err)
    assert (err.line, err.column) == (2, 1)


def test_empty_language(tmp_path: Path) -> None:
    err = _raises(EmptyLanguageError, 'start: a\na: "x" a\n', tmp_path)
    assert (err.line, err.column) == (1, 1)


def test_zero_width_terminal(tmp_path: Path) -> None:
    err = _raises(UnsupportedGrammarError, 'start: A\nA: /a*/\n', tmp_path)
    assert "A" in str(err) and (err.line, err.column) == (2, 1)


@pytest.mark.parametrize("regex", [r"a(?=b)", r"a(?!b)", r"(?<=a)b", r"(a)\1", r"\bab", r"^a"])
def test_dfa_incompatible_terminal(tmp_path: Path, regex: str) -> None:
    err = _raises(UnsupportedGrammarError, f"start: A\nA: /{regex}/\n", tmp_path)
    assert "terminal A" in str(err)


def test_defined_twice(tmp_path: Path) -> None:
    err = _raises(GrammarSyntaxError, 'start: "a"\nstart: "b"\n', tmp_path)
    assert (err.line, err.column) == (2, 1)


def test_priority_resolves_reduce_reduce() -> None:
    g = Grammar.from_string('start: a | b\na.2: "x"\nb: "x"\n')
    assert g.parses("x") and not g.parses("xx")


def test_common_imports_and_ignore() -> None:
    g = Grammar.from_string("%import common.NUMBER\n%import common.WS\n%ignore WS\nstart: NUMBER+\n")
    assert g.parses(" 1 2.5 ") and not g.parses("1 x")


def test_bad_kind() -> None:
    with pytest.raises(GrammarError, match="unknown grammar kind"):
        Grammar.from_string('start: "a"', kind="yaml")
