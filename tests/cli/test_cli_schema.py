"""``gad sample --schema`` / ``--regex``: typed one-line errors; with the bundled model, samples
under a dozen schemas pass ``jsonschema`` (issue 11, "Generated JSON validates")."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from gad.cli import main
from gad.grammar.json_schema import format_checker


def test_schema_and_regex_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], one_line_error) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["sample", "--schema", str(bad), "--prompt", "x"]) == 2
    one_line_error("bad.json")
    unsup = tmp_path / "unsup.json"
    unsup.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 1001}}}))
    assert main(["sample", "--schema", str(unsup), "--prompt", "x"]) == 2
    one_line_error("multipleOf", "#/properties/a")
    assert main(["sample", "--regex", "a(", "--prompt", "x"]) == 2
    one_line_error("regular expression")
    assert main(["sample", "--grammar", "json", "--strict", "--prompt", "x"]) == 2
    one_line_error("--schema")
    with pytest.raises(SystemExit) as exc:
        main(["sample", "--schema", str(unsup), "--whitespace", "lots", "--prompt", "x"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["sample", "--schema", str(unsup), "--regex", "a", "--prompt", "x"])
    assert exc.value.code == 2


SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer",
     "minimum": 0, "maximum": 120}}, "required": ["name", "age"], "additionalProperties": False},
    {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "minItems": 1, "maxItems": 3},
    {"enum": ["red", "green", "blue"]},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}, "required": ["id"],
     "additionalProperties": False},
    {"type": "object", "properties": {"day": {"type": "string", "format": "date"}}, "required": ["day"],
     "additionalProperties": False},
    {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
    {"$defs": {"p": {"type": "object", "properties": {"x": {"type": "number", "minimum": 0, "maximum": 1}},
                     "required": ["x"], "additionalProperties": False}},
     "type": "array", "items": {"$ref": "#/$defs/p"}, "maxItems": 2},
    {"anyOf": [{"type": "null"}, {"type": "boolean"}, {"type": "string", "minLength": 2, "maxLength": 4}]},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
     "required": ["tags"], "additionalProperties": False},
    {"type": "object", "properties": {"ip": {"type": "string", "format": "ipv4"}}, "required": ["ip"],
     "additionalProperties": False},
    {"type": "object", "properties": {"ok": {"const": True}, "n": {"type": "integer", "exclusiveMinimum": 10}},
     "required": ["ok", "n"], "additionalProperties": False},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}, "required": ["when"],
     "additionalProperties": False},
]


@pytest.mark.model
def test_generated_json_validates(smollm2) -> None:
    import gad
    from gad.grammar import Grammar

    for schema in SCHEMAS:
        g = Grammar.from_json_schema(schema)
        samples = gad.sample(smollm2, g, "Write one JSON value.", n=2, seed=1, max_new_tokens=96)
        assert any(s.finished for s in samples), schema
        for s in samples:
            if not s.finished:
                continue
            v = json.loads(s.text)
            jsonschema.Draft202012Validator(schema, format_checker=format_checker()).validate(v)


def test_dropped_keywords_warn_in_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A keyword --lenient drops and a misspelled keyword are one ``gad sample: warning:`` line each, not
    Python's ``file:line: Category`` with the source line under it (the command still samples)."""
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "name": {"type": "string", "maxLenght": 3}}, "required": ["name"]}))
    rc = main(["sample", "--schema", str(schema), "--lenient", "--prompt", "x", "--model", "toy:ascii", "-n", "1",
               "--max-new-tokens", "2", "--no-progress"])
    assert rc == 0
    err = capsys.readouterr().err.strip().splitlines()
    warned = [line for line in err if line.startswith("gad sample: warning: ")]
    assert any("uniqueItems" in line and "#/properties/tags" in line for line in warned), err
    assert any("maxLenght" in line and "maxLength" in line for line in warned), err
    assert not any("sys.exit" in line or "Warning:" in line.split("warning:", 1)[0] for line in err), err
