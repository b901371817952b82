"""Bad grammar inputs of issue 9: each gets a typed gad.errors exception naming file:line:column,
never an AssertionError / re.error from inside Lark, and relative imports resolve beside the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gad import Grammar
from gad.errors import GrammarSyntaxError, UnsupportedGrammarError


def test_relative_import_resolves_beside_the_grammar_file(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "helper.lark").write_text('X: "x"\n')
    (tmp_path / "main.lark").write_text("start: X\n%import .helper.X\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the grammar's directory
    g = Grammar.from_file(tmp_path / "main.lark")
    assert g.parses("x") and not g.parses("y")


def test_relative_import_found_only_in_cwd_is_a_typed_error(tmp_path: Path, monkeypatch) -> None:
    # Lark raised a bare AssertionError when the file exists where it does not search (here: the cwd)
    sub = tmp_path / "sub"
    sub.mkdir()
    (tmp_path / "helper.lark").write_text('X: "x"\n')
    (sub / "main.lark").write_text('start: X | "y"\n%import .helper.X\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GrammarSyntaxError) as ei:
        Grammar.from_file(sub / "main.lark")
    e = ei.value
    assert (e.path, e.line, e.column) == (str(sub / "main.lark"), 2, 1)
    assert "'helper' not found beside the grammar" in str(e) and str(sub) in str(e)


def test_relative_import_in_a_string_grammar_resolves_in_cwd(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "helper.lark").write_text('X: "x"\n')
    monkeypatch.chdir(tmp_path)
    assert Grammar.from_string("start: X\n%import .helper.X\n").parses("x")
    os.remove(tmp_path / "helper.lark")
    with pytest.raises(GrammarSyntaxError) as ei:
        Grammar.from_string("start: X\n\n%import .helper.X\n", path="g.lark")
    assert (ei.value.line, ei.value.column) == (3, 1) and "'helper' not found" in str(ei.value)


@pytest.mark.parametrize("literal", ['"\\u0301\\u0301"', '"\u0301\u0301"'])
def test_literal_lark_cannot_name_is_refused_at_load(literal: str) -> None:
    # Lark names the literal's terminal after its text; Python's re refuses it as a group name on
    # the first parse (re.error from Grammar.parses)
    with pytest.raises(UnsupportedGrammarError) as ei:
        Grammar.from_string(f'start: "a"\n    | {literal}\n', path="g.lark")
    e = ei.value
    assert (e.path, e.line, e.column) == ("g.lark", 2, 7)
    assert "group name" in str(e) and "named terminal" in str(e)


def test_the_named_form_of_that_literal_works() -> None:
    g = Grammar.from_string('start: "a" | MARK\nMARK: "\\u0301\\u0301"\n')
    assert g.parses("\u0301\u0301") and g.parses("a") and not g.parses("\u0301")
