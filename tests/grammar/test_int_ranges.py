"""Integer ranges' automata built directly from their bounds equal the converter's regexps."""

from __future__ import annotations

import random
import re

import interegular
import pytest

from gad.grammar.automata import int_range_fsm, regex_fsm
from gad.grammar.json_schema import _int_range
from gad.testing.schemas import SchemaChecker, schema_oracle

INT64 = (-(2 ** 63), 2 ** 63 - 1)
INT32 = (-(2 ** 31), 2 ** 31 - 1)


def _accepts(f: interegular.FSM, text: str) -> bool:
    state = f.initial
    for ch in text:
        sym = f.alphabet[ch] if ch in f.alphabet else f.alphabet[interegular.fsm.anything_else]
        state = f.map.get(state, {}).get(sym)
        if state is None:
            return False
    return state in f.finals


def _ranges() -> list[tuple[int, int]]:
    rng = random.Random(11)
    out = [(0, 0), (0, 9), (1, 9), (-5, -3), (-10, 10), (0, 100), (7, 1234), (-999, -100), (5, 5), (-1, 0),
           (0, 1), (99, 101), (-100, -1), (10 ** 18, INT64[1]), INT32, INT64]
    for _ in range(120):
        lo = rng.randint(-10 ** 7, 10 ** 7)
        out.append((lo, lo + rng.randint(0, 10 ** rng.randint(0, 8))))
    return out


@pytest.mark.parametrize("lo,hi", _ranges())
def test_direct_automaton_equals_the_regexp(lo: int, hi: int) -> None:
    f = int_range_fsm(lo, hi)
    rx = re.compile(_int_range(lo, hi))
    rng = random.Random(lo ^ hi)
    texts = {str(lo), str(hi), str(lo - 1), str(hi + 1), "0", "-0", "00", "01", "-01", "-", "", "+1", "1.0",
             str(lo) + "0", "9" * 20, "-" + "9" * 20}
    texts |= {str(rng.randint(lo - 1000, hi + 1000)) for _ in range(80)}
    texts |= {str(rng.randint(-(10 ** 19), 10 ** 19)) for _ in range(40)}
    for t in texts:
        assert _accepts(f, t) is (rx.fullmatch(t) is not None), (lo, hi, t)


@pytest.mark.parametrize("lo,hi", [(0, 100), (-10, 10), (7, 1234), (-999, -100), (-5, -3), (0, 0), (-3000, 20)])
def test_direct_automaton_is_interegulars_language_and_minimal(lo: int, hi: int) -> None:
    f = int_range_fsm(lo, hi)
    g = interegular.parse_pattern(_int_range(lo, hi)).to_fsm()
    assert f.symmetric_difference(g).empty()
    assert len(f.reduce().states) == len(g.reduce().states)


def test_converter_regexps_get_the_direct_automaton() -> None:
    """The converter notes its integer ranges: their automata come from the bounds (an int64 range made by
    interegular from its text needs over 10,000 intermediate states, refused as too large)."""
    for lo, hi in (INT64, INT32, (0, INT64[1])):
        assert len(regex_fsm(_int_range(lo, hi)).states) == len(int_range_fsm(lo, hi).states) <= 60


@pytest.mark.parametrize("schema", [
    {"type": "integer", "format": "int64"},
    {"type": "integer", "format": "int32", "minimum": -7},
    {"type": "object", "properties": {"n": {"type": "integer", "format": "int64", "maximum": 10 ** 12}}},
    # an exclusive bound beyond the format's: the format's own bound is inclusive
    {"type": "integer", "format": "int64", "exclusiveMaximum": 2 ** 63, "exclusiveMinimum": -(2 ** 63) - 1},
    {"type": "integer", "format": "int32", "exclusiveMaximum": 2 ** 40},
])
def test_int64_schemas_compile_and_agree_with_jsonschema(schema: dict) -> None:
    c = SchemaChecker(schema)
    values = [0, -1, 7, -7, -8, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), -(2 ** 31) - 1, 10 ** 12, 10 ** 12 + 1,
              2 ** 63 - 1, 2 ** 63, -(2 ** 63), -(2 ** 63) - 1]
    for v in values:
        value = {"n": v} if schema["type"] == "object" else v
        assert c.accepts_value(value) is schema_oracle(schema, value), value


def test_a_schema_grammar_read_or_unpickled_in_a_fresh_process_keeps_its_integer_ranges(tmp_path) -> None:
    """The grammar text names its integer ranges' bounds (``// gad:int-range LO HI`` lines), so another
    process reading the text, or unpickling the grammar, builds their automata from the bounds too
    (interegular's construction of an int64 range is over the budget: a refusal there before)."""
    import pickle
    import subprocess
    import sys

    from gad.grammar import Grammar

    g = Grammar.from_json_schema({"type": "object", "properties": {"a": {"type": "integer", "format": "int64"}}})
    assert f"// gad:int-range {INT64[0]} {INT64[1]}" in g.lark_text
    (tmp_path / "g.lark").write_text(g.lark_text)
    (tmp_path / "g.pkl").write_bytes(pickle.dumps(g))
    code = (
        "import pickle, sys, gad\n"
        "from gad.grammar import Grammar\n"
        "from gad.testing.schemas import BYTES\n"
        "for g in (Grammar.from_string(open(sys.argv[1]).read()), pickle.load(open(sys.argv[2], 'rb'))):\n"
        "    m = gad.compile(g, BYTES, cache_dir=False).matcher()\n"
        "    assert m.accept_bytes(b'{\"a\":-9223372036854775808}') and m.is_accepting()\n"
        "    m = gad.compile(g, BYTES, cache_dir=False).matcher()\n"
        "    assert not (m.accept_bytes(b'{\"a\":9223372036854775808}') and m.is_accepting())\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "g.lark"), str(tmp_path / "g.pkl")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


NUMBER_TEXTS = ["0", "7", "-3", "1.5", "1e3", "1E+30", "-1e30", "100.0", "1023", "1024", "1023.5",
                "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
                "9223372036854775808.0", "9223372036854775808e0", "2147483647", "2147483648", "-2147483649",
                "-0", "-0.0", "3", "6", "2.5"]


@pytest.mark.parametrize("schema", [
    {"type": "number", "format": "int64"},
    {"type": "number", "format": "int32"},
    {"type": "number", "format": "int64", "minimum": 1024},  # (as in MaskBench's Github_hard---o17985)
    {"type": ["number", "string"], "format": "int32", "maximum": 5},
    {"type": "number", "format": "int32", "exclusiveMinimum": 1.5, "maximum": 10 ** 10},
    {"type": "number", "format": "int32", "multipleOf": 0.5, "minimum": 0, "maximum": 3},
])
def test_int_format_on_a_number_bounds_its_integer_spellings_only(schema: dict) -> None:
    """OpenAPI's int32 / int64 on a ``number``, as gad's format checker asserts them: a value written
    as an integer (an int once parsed) must be in the format's range; one written with a fraction
    or an exponent (a float) is left alone.  The text decides, so the oracle reads the same text."""
    import json

    c = SchemaChecker(schema)
    bounded = any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"))
    for text in NUMBER_TEXTS:
        if bounded and "e" in text.lower():  # (bounded numbers are spelled without an exponent: see
            assert not c.accepts(text), text  # gad.grammar.json_schema's docstring)
            continue
        assert c.accepts(text) is schema_oracle(schema, json.loads(text)), text


def test_an_int_format_number_read_in_a_fresh_registry_keeps_its_range() -> None:
    """The union terminal ``(?:fractions|range)`` names its range in a ``// gad:int-range`` line, so a
    process that only reads the grammar text builds it from the bounds too (interegular's own
    construction of the int64 range is refused as too large)."""
    from gad.grammar import Grammar, automata
    from gad.grammar.automata import int_range_union

    g = Grammar.from_json_schema({"type": "number", "format": "int64"})
    assert f"// gad:int-range {INT64[0]} {INT64[1]}" in g.lark_text
    saved = dict(automata._INT_RANGES), dict(automata._FSM_CACHE)
    automata._INT_RANGES.clear()
    automata._FSM_CACHE.clear()
    try:
        g2 = Grammar.from_string(g.lark_text)
        (rx,) = [t.pattern.value for t in g2.tables.terminals if t.name.startswith("N_")]
        assert int_range_union(rx) is not None
        assert _accepts(regex_fsm(rx), "9223372036854775807") and not _accepts(regex_fsm(rx), "9223372036854775808")
        assert _accepts(regex_fsm(rx), "9223372036854775808.5")
    finally:
        automata._INT_RANGES.update(saved[0])
        automata._FSM_CACHE.update(saved[1])
