"""Typed errors raised by gad.

Every error a user can provoke with bad input (a grammar file, a CLI argument, a saved trie) is a
subclass of :class:`GadError`, so ``except gad.errors.GadError`` catches them all.  Messages name the
file, line and column (grammars), or the argument (API / CLI), never an internal stack frame.
"""

from __future__ import annotations


class GadError(Exception):
    """Base class of every error gad raises on bad input."""


# --- grammars -----------------------------------------------------------------------------------


class GrammarError(GadError):
    """A grammar could not be loaded or compiled.

    Attributes:
        path: the grammar file (or ``"<string>"``), ``line`` / ``column``: 1-based position or None.
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 column: int | None = None) -> None:
        self.path = path
        self.line = line
        self.column = column
        where = ""
        if path is not None:
            where = str(path)
            if line is not None:
                where += f":{line}"
                if column is not None:
                    where += f":{column}"
            where += ": "
        self.bare_message = message
        super().__init__(where + message)


class GrammarSyntaxError(GrammarError):
    """The grammar file is not valid Lark / GBNF syntax (names file:line:column)."""


class UndefinedSymbolError(GrammarError):
    """A rule or terminal is used but never defined (``symbol`` names it)."""

    def __init__(self, message: str, symbol: str, **kw) -> None:
        self.symbol = symbol
        super().__init__(message, **kw)


class GrammarConflictError(GrammarError):
    """The grammar is not LALR(1): a shift/reduce or reduce/reduce conflict (``rules`` names them)."""

    def __init__(self, message: str, rules: list[str] | None = None, **kw) -> None:
        self.rules = rules or []
        super().__init__(message, **kw)


class EmptyLanguageError(GrammarError):
    """The grammar's start symbol derives no finite string: L(G) is empty."""


class UnsupportedGrammarError(GrammarError):
    """The grammar uses a feature gad cannot compile exactly (e.g. a zero-width or lookaround terminal)."""


class InvalidSchemaError(GrammarError):
    """A JSON Schema could not be read: not valid JSON, not a schema (an object or a boolean), a
    missing file, or a ``$ref`` that does not resolve (``pointer`` names where)."""

    def __init__(self, message: str, pointer: str | None = None, **kw) -> None:
        self.pointer = pointer
        super().__init__(message if pointer is None else f"JSON Schema at #{pointer}: {message}", **kw)


class UnsupportedSchemaError(GrammarError):
    """A JSON Schema uses a keyword (or a combination) that gad cannot express exactly as a grammar.

    Attributes:
        pointer: the JSON pointer (RFC 6901, ``""`` for the root) of the schema object holding it.
        keyword: the keyword, e.g. ``"patternProperties"``.
        reason: why it cannot be expressed.

    ``Grammar.from_json_schema(..., lenient=True)`` drops such keywords instead, with a warning;
    the refusals :func:`gad.grammar.json_schema.convert` raises say so (``hint``), as its callers
    (library and CLI) may not know the option.
    """

    droppable: bool = True  # whether lenient=True can drop it (False: a limit no drop lifts)

    def __init__(self, message: str, pointer: str = "", keyword: str = "", hint: str = "", **kw) -> None:
        self.pointer = pointer
        self.keyword = keyword
        self.reason = message
        super().__init__(f"JSON Schema at #{pointer}: keyword {keyword!r}: {message}" + (f" ({hint})" if hint else ""),
                         **kw)


# --- models / tokenizers --------------------------------------------------------------------------


class ModelLoadError(GadError):
    """A model directory / GGUF file could not be found or loaded."""


class TokenizerError(GadError):
    """A tokenizer's vocabulary could not be mapped to byte strings."""


# --- decoding -------------------------------------------------------------------------------------


class InvalidArgumentError(GadError, ValueError):
    """An API or CLI argument is out of range or of the wrong kind (the message names it)."""


class ProposalBudgetError(InvalidArgumentError):
    """An exact sampler (``rs``) reached its proposal budget before drawing the samples asked for.

    Attributes:
        samples: the samples accepted before the budget ran out (exact draws; nothing is lost).
        compute: the run's compute, ``{"model_rows", "model_positions", "prompt_passes"}`` (model calls
            spent on every proposal, the rejected ones included).
        proposals: proposals drawn.
    """

    def __init__(self, message: str, samples: list | None = None, compute: dict | None = None,
                 proposals: int = 0) -> None:
        super().__init__(message)
        self.samples = list(samples or [])
        self.compute = dict(compute or {})
        self.proposals = proposals


class TokenRejectedError(GadError):
    """A token was forced into a matcher that does not allow it."""


# --- Φ estimation / tries -------------------------------------------------------------------------


class TrieFormatError(GadError):
    """A saved Φ trie is truncated, corrupted or of an unknown format version."""


class TrieMismatchError(GadError):
    """A saved Φ trie was built for another model, grammar, prompt or decoding setting."""


class EnumerationBudgetError(GadError):
    """Exact enumeration would exceed the node budget (``estimate`` holds the size seen so far)."""

    def __init__(self, message: str, estimate: int | None = None) -> None:
        self.estimate = estimate
        super().__init__(message)


class SchemaKeywordWarning(UserWarning):
    """A JSON Schema key that is no keyword but close to one (``maxLenght``): validators ignore it, as
    the spec says an unknown keyword is an annotation, so it constrains nothing; gad says so."""


class UnsafeCacheWarning(UserWarning):
    """A cache folder can be written by other users (or is theirs): gad neither reads nor writes it."""


class ResultsFileError(GadError):
    """An evaluation results file could not be written or read."""
