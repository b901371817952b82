"""Checking JSON Schema translations at the text level: gad's matcher over single bytes beside ``jsonschema``."""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence
from typing import Any

import jsonschema

import gad
from gad.engine.vocab import Vocabulary
from gad.errors import EmptyLanguageError, UnsupportedSchemaError
from gad.grammar import Grammar
from gad.grammar.json_schema import convert, format_checker

#: A vocabulary of the 256 single bytes and EOS (id 256): masks over it are byte-level languages.
BYTES = Vocabulary(tokens=tuple(bytes([i]) for i in range(256)) + (None,), eos_ids=(256,), name="bytes")


class SchemaChecker:
    """A schema's grammar (:func:`gad.grammar.json_schema.convert`, keyword arguments passed on)
    compiled over :data:`BYTES`: ``accepts(text)`` runs gad's matcher over the text's UTF-8 bytes and
    asks for an accepting end; ``accepts_value(v)`` checks ``v`` written by the grammar's ``dumps``.

    Raises:
        UnsupportedSchemaError, InvalidSchemaError, EmptyLanguageError: as ``convert`` / ``Grammar``.
    """

    def __init__(self, schema: Any, **kw: Any) -> None:
        self.sg = convert(schema, **kw)
        self.grammar = Grammar.from_string(self.sg.lark_text)
        self.cg = gad.compile(self.grammar, BYTES, cache_dir=False)

    def accepts(self, text: str) -> bool:
        m = self.cg.matcher()
        return m.accept_bytes(text.encode("utf-8")) and m.is_accepting()

    def accepts_value(self, value: Any, indent: int | None = None) -> bool:
        return self.accepts(self.sg.dumps(value, indent=indent))


def schema_oracle(schema: Any, value: Any) -> bool:
    """``jsonschema``'s verdict on ``value`` (the schema's own draft, 2020-12 by default, with gad's
    format checker)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return bool(cls(schema, format_checker=format_checker()).is_valid(value))


def agree_with_jsonschema(schema: Any, values: Sequence[Any], refusable: Collection[str] = ()) -> SchemaChecker | None:
    """Assert that gad's grammar for ``schema`` accepts each of ``values`` iff ``jsonschema`` validates
    it (:func:`schema_oracle`; the AssertionError names the schema, the value and gad's text).  A
    refusal must be under a keyword in ``refusable`` (else it is raised on), and a schema gad finds
    empty must leave every value invalid.  Returns the checker, or None when refused or empty."""
    try:
        c = SchemaChecker(schema)
    except UnsupportedSchemaError as e:
        if e.keyword not in refusable:
            raise
        return None
    except EmptyLanguageError:
        assert not any(schema_oracle(schema, v) for v in values), schema
        return None
    for v in values:
        assert c.accepts_value(v) is schema_oracle(schema, v), (schema, v, c.sg.dumps(v))
    return c


def refused_then_widened(schema: Any, pointer: str, keyword: str, values: Sequence[Any]) -> SchemaChecker:
    """Assert that ``convert(schema)`` raises UnsupportedSchemaError at ``pointer`` / ``keyword``, and
    that ``lenient=True`` (its warnings silenced) drops it into a grammar only wider: each of
    ``values`` that ``jsonschema`` validates is accepted.  Returns the lenient grammar's checker."""
    try:
        convert(schema)
    except UnsupportedSchemaError as e:
        assert (e.pointer, e.keyword) == (pointer, keyword), (schema, e.pointer, e.keyword)
    else:
        raise AssertionError(f"not refused: {schema!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = SchemaChecker(schema, lenient=True)
    for v in values:
        if schema_oracle(schema, v):
            assert c.accepts_value(v), (schema, v)
    return c
