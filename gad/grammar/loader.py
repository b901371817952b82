"""Grammar loading and validation: Lark (``.lark``) and GBNF/EBNF (``.ebnf`` / ``.gbnf``) files.

A :class:`Grammar` holds Lark text plus its start symbol; its language is defined by Lark itself
(issue 2, "Grammars"): a string is in L(G) iff ``lark.Lark(lark_text, parser="lalr",
lexer="contextual", start=start, maybe_placeholders=False)`` parses it.  Loading validates eagerly
so that every problem surfaces at load time as a typed :mod:`gad.errors` exception, never as a raw
Lark stack trace:

* bad grammar syntax -> :class:`~gad.errors.GrammarSyntaxError` (path:line:column);
* a rule / terminal used but not defined -> :class:`~gad.errors.UndefinedSymbolError` (``symbol``);
* a shift/reduce or reduce/reduce LALR(1) conflict -> :class:`~gad.errors.GrammarConflictError`
  (``rules``; Lark itself silently resolves shift/reduce as shift, which would make L(G) differ from
  the written CFG, so gad rejects it);
* a start symbol that derives no finite string -> :class:`~gad.errors.EmptyLanguageError`;
* zero-width terminals, or terminal regexps that interegular cannot turn into a DFA (lookarounds,
  back-references) -> :class:`~gad.errors.UnsupportedGrammarError` (the mask engine builds DFAs
  with interegular).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import lark
import lark.lark as lark_module
import lark.lexer as lark_lexer
from lark import Lark
from lark.common import LexerConf, ParserConf
from lark.exceptions import GrammarError as LarkGrammarError
from lark.exceptions import LarkError, LexError, UnexpectedInput
from lark.lexer import TerminalDef
from lark.load_grammar import eval_escaping
from lark.parsers.lalr_analysis import LALR_Analyzer
from lark.utils import logger as lark_logger

from gad.errors import (
    EmptyLanguageError,
    GrammarConflictError,
    GrammarError,
    GrammarSyntaxError,
    UndefinedSymbolError,
    UnsupportedGrammarError,
)
from gad.grammar import ebnf, json_schema, regex
from gad.grammar.automata import (
    MAX_DEFINITIONS,
    MAX_REGEX_CHARS,
    MAX_TERMINAL_STATES,
    MAX_TERMINALS,
    AutomatonTooLarge,
    clip,
    regex_fsm,
)
from gad.grammar.lalr_sets import lark_uses_fast_sets
from gad.grammar.plain_bnf import (
    PrebuiltGrammar,
    ValidatedLexerConf,
    compile_plain,
    pattern_literal,
    validate_terminals,
)
from gad.grammar.tables import ParserTables, terminal_feature

__all__ = ["Grammar"]

_KINDS = ("lark", "ebnf")
BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"  # shipped grammars (package data)
_SUFFIX_KIND = {".lark": "lark", ".ebnf": "ebnf", ".gbnf": "ebnf"}


# Size limits, checked before Lark's LALR analysis (which took over 120 s on 56,790 rules and hit
# Python's recursion limit on rule chains ~1,000 deep) and before gad's automata (5,000 string
# literals took 64-99 s and 924 MB to compile; 1,000 take ~6 s; a 200 KB regexp took 23 s and 830 MB).
# The shipped grammars use a few KB, < 200 definitions and < 100 terminals.
MAX_GRAMMAR_CHARS = 1_000_000  # characters of grammar text (the source, GBNF before conversion too)
# MAX_DEFINITIONS (gad.grammar.automata, read by the JSON Schema writer too): rule and terminal definitions
# MAX_TERMINALS (gad.grammar.automata, where the JSON Schema writer reads it too): terminals, named and
# anonymous (distinct string literals count one each)

_LARK_LOCK = threading.Lock()


def _source_path(path: str) -> str:
    """The ``source_path`` Lark resolves relative ``%import`` lines against: the grammar file itself, or
    a name in the current directory for a grammar given as a string (Lark's own default for strings
    is the directory of the running script, which depends on who imports gad)."""
    if path == "<string>" or not path:
        return str(Path.cwd() / "<string>")
    return str(Path(path).resolve())


def _build_lark(text: str, start: str, path: str = "<string>") -> Lark:
    # Lark's own terminal-collision check (only log warnings when strict=False) builds every
    # terminal's automaton with interegular without any bound: two terminals such as
    # /(a|b)*a(a|b){20}/ and /c+/ made Lark run for hours.  gad checks each terminal itself under a
    # state budget (_check_terminals), so Lark's check is switched off while the parser is built.
    # Lark resolves shift/reduce conflicts silently (as shift), with a debug log line: the line is
    # counted (``_gad_shift_reduce``), so that gad's own conflict analysis runs only when there is one.
    with _LARK_LOCK:
        saved = lark_lexer.has_interegular
        lark_lexer.has_interegular = False
        counter = _ConflictCounter()
        saved_handlers, saved_level, saved_prop = lark_logger.handlers, lark_logger.level, lark_logger.propagate
        lark_logger.handlers, lark_logger.propagate = [counter], False  # counted, never printed
        _set_level(lark_logger, logging.DEBUG)
        try:
            prebuilt = compile_plain(text, [start])
            source: Any = text
            if prebuilt is not None:  # plain BNF: Lark's rules built directly, terminals checked once
                validate_terminals(prebuilt[0], prebuilt[2])
                source = PrebuiltGrammar(*prebuilt)
                lark_module.LexerConf = ValidatedLexerConf  # type: ignore[misc]
            try:
                with lark_uses_fast_sets():
                    parser = lark.Lark(source, parser="lalr", lexer="contextual", start=start,
                                       maybe_placeholders=False, source_path=_source_path(path))
            finally:
                lark_module.LexerConf = LexerConf  # type: ignore[misc]
            parser.source_grammar = text
            parser._gad_prebuilt = prebuilt is not None  # type: ignore[attr-defined]
        finally:
            lark_lexer.has_interegular = saved
            _set_level(lark_logger, saved_level)
            lark_logger.handlers, lark_logger.propagate = saved_handlers, saved_prop
    parser._gad_shift_reduce = counter.n  # type: ignore[attr-defined]
    return parser


def _set_level(logger: logging.Logger, level: int) -> None:
    """``logger.setLevel(level)`` for a logger without child loggers (Lark logs through "lark" alone):
    its own cache of enabled levels is cleared, not every logger's of the process (``setLevel`` does
    that: ~0.35 ms per call once transformers has made its hundreds of loggers, twice per grammar)."""
    cache = getattr(logger, "_cache", None)
    if isinstance(cache, dict):
        logger.level = level
        cache.clear()
    else:  # (a logging module without the per-logger cache)
        logger.setLevel(level)


class _ConflictCounter(logging.Handler):
    """Counts Lark's "Shift/Reduce conflict" log records (emitted only where Lark resolves one)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.n = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "Shift/Reduce conflict" in str(record.msg):
            self.n += 1


@dataclass(frozen=True)
class Grammar:
    """A validated grammar in Lark form.

    Attributes:
        lark_text: the Lark grammar text (for GBNF input, the converted text).
        path: the source file, or ``"<string>"``.
        kind: ``"lark"`` or ``"ebnf"`` (the source dialect).
        start: the start rule (Lark name): ``"start"`` by default for Lark, ``"root"`` for GBNF.
        sha256: hex digest of ``lark_text`` and ``start`` (keys on-disk caches).
        per_request: made per request (``from_json_schema``, ``from_pydantic``, ``from_regex``):
            :func:`gad.compile` then builds its automata lazily and writes no disk cache.

    Build with :meth:`from_file` or :meth:`from_string`; both validate eagerly (see module doc).
    """

    lark_text: str
    path: str
    kind: str
    start: str
    sha256: str = field(init=False)
    rule_names: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    per_request: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha256((self.lark_text + "\0" + self.start).encode("utf-8", "surrogatepass"))
        object.__setattr__(self, "sha256", digest.hexdigest())

    # --- construction -----------------------------------------------------------------------

    @classmethod
    def builtin(cls, name: str) -> Grammar:
        """A grammar shipped with gad as package data (:data:`BUILTIN_DIR`): ``json`` (RFC 8259),
        ``sql`` (the SQLite SELECT dialect of Spider), ``text`` (any non-empty text), …

        Raises:
            GrammarError: no shipped grammar has that name (the message lists them).
        """
        names = builtin_names()
        if name not in names:
            raise GrammarError(f"no shipped grammar named {name!r}; shipped: {', '.join(names)}",
                               path=f"<builtin {name}>")
        return cls.from_file(BUILTIN_DIR / f"{name}.lark")

    @classmethod
    def from_json_schema(cls, schema: Any, *, whitespace: str | int = "compact", strict: bool = False,
                         lenient: bool = False) -> Grammar:
        """The grammar of JSON texts valid under a JSON Schema (:mod:`gad.grammar.json_schema`).

        Args:
            schema: a dict / bool, JSON text, or a ``.json`` file (``str`` ending in ``.json`` or ``Path``).
            whitespace: ``"compact"`` (default: no white space), ``"flexible"`` (RFC 8259 white space
                between tokens) or an ``int`` n (each run at most n characters).
            strict: an absent ``additionalProperties`` means ``false``.
            lenient: drop keywords gad cannot express exactly, with a ``UserWarning`` listing them.
        Raises:
            UnsupportedSchemaError: a keyword gad cannot express exactly (names the JSON pointer).
            InvalidSchemaError: unreadable / invalid schema, unresolvable ``$ref``.
        """
        sg = json_schema.convert(schema, whitespace=whitespace, strict=strict, lenient=lenient)
        g = cls.from_string(sg.lark_text, path="<json-schema>")
        g.__dict__["schema_grammar"] = sg  # .dumps(value) writes values in the accepted spelling
        g.__dict__["per_request"] = True
        return g

    @classmethod
    def from_pydantic(cls, model: Any, *, whitespace: str | int = "compact", strict: bool = False,
                      lenient: bool = False) -> Grammar:
        """:meth:`from_json_schema` of ``model.model_json_schema()`` (a Pydantic v2 model class).

        Raises:
            InvalidArgumentError: not a Pydantic model class; otherwise as :meth:`from_json_schema`.
        """
        return cls.from_json_schema(regex.pydantic_schema(model), whitespace=whitespace, strict=strict,
                                    lenient=lenient)

    @classmethod
    def from_regex(cls, pattern: str) -> Grammar:
        """The strings ``s`` with ``re.fullmatch(pattern, s, re.ASCII)`` (:mod:`gad.grammar.regex`: the
        classes ``\\d``, ``\\w``, ``\\s`` are ASCII, as in gad's lexer).

        Raises:
            GrammarSyntaxError: not a valid Python regex.  UnsupportedGrammarError: lookarounds,
            back-references, inline flags, inner anchors.
        """
        g = cls.from_string(regex.regex_lark(pattern), path="<regex>")
        g.__dict__["per_request"] = True
        return g

    @classmethod
    def from_name_or_file(cls, spec: str | os.PathLike[str]) -> Grammar:
        """``spec`` as a file path when it names one (or ends in .lark/.ebnf/.gbnf), else a shipped name.

        Raises:
            GrammarError: neither a readable grammar file nor a shipped grammar's name.
        """
        p = Path(spec)
        if p.suffix.lower() in _SUFFIX_KIND or p.exists():
            return cls.from_file(p)
        return cls.builtin(str(spec))


    @classmethod
    def from_file(cls, path: str | Path, start: str | None = None) -> Grammar:
        """Load a grammar file: ``.lark`` as Lark text, ``.ebnf`` / ``.gbnf`` converted by :mod:`gad.ebnf`.

        Raises:
            GrammarError: the file is missing, unreadable, not UTF-8, or has an unknown suffix.
            GrammarSyntaxError, UndefinedSymbolError, GrammarConflictError, EmptyLanguageError,
            UnsupportedGrammarError: as :meth:`from_string`.
        """
        p = Path(path)
        kind = _SUFFIX_KIND.get(p.suffix.lower())
        if kind is None:
            raise GrammarError(f"unknown grammar file type {p.suffix!r} (expected .lark, .ebnf or .gbnf)",
                               path=str(path))
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise GrammarError("grammar file not found", path=str(path)) from None
        except UnicodeDecodeError as e:
            raise GrammarError(f"grammar file is not valid UTF-8 ({e.reason} at byte {e.start})",
                               path=str(path)) from None
        except OSError as e:
            raise GrammarError(f"cannot read grammar file: {e.strerror or e}", path=str(path)) from None
        return cls.from_string(text, kind=kind, path=str(path), start=start)

    @classmethod
    def from_string(cls, text: str, kind: str = "lark", path: str = "<string>",
                    start: str | None = None) -> Grammar:
        """Build and validate a grammar from text.

        Args:
            text: Lark grammar text (``kind="lark"``) or GBNF/EBNF text (``kind="ebnf"``).
            kind: ``"lark"`` or ``"ebnf"``.
            path: shown in error messages.
            start: start rule; default ``"start"`` (Lark) or ``"root"`` (GBNF; a GBNF rule name may be
                given and is mapped to its Lark name).

        Raises:
            GrammarError: unknown ``kind``, or a Lark error not covered below.
            GrammarSyntaxError: syntax error (path:line:column).
            UndefinedSymbolError: a rule or terminal (or the start rule) used but not defined.
            GrammarConflictError: an LALR(1) shift/reduce or reduce/reduce conflict.
            EmptyLanguageError: the start symbol derives no finite string.
            UnsupportedGrammarError: zero-width terminal, or a terminal regexp interegular cannot compile.
        """
        if kind not in _KINDS:
            raise GrammarError(f"unknown grammar kind {kind!r} (expected 'lark' or 'ebnf')", path=path)
        _check_size(text, path)
        rule_names: dict[str, str] = {}
        positions: dict[str, tuple[int, int]] = {}
        if kind == "ebnf":
            lark_text, g = ebnf.convert(text, path)
            if start is None:
                start = ebnf.START
            elif start in g.lark_names:
                start = g.lark_names[start]
            elif start not in g.lark_names.values():
                raise UndefinedSymbolError(f"start rule {start!r} is not defined", symbol=start, path=path)
            rule_names = {v: k for k, v in g.lark_names.items()} | g.helper_rules | g.atom_names
            positions = {g.lark_names[k]: v for k, v in g.positions.items()} | dict(g.positions)
        else:
            lark_text = text
            start = start or "start"
            json_schema.note_direct_automata(text)  # (a JSON Schema's grammar names its integer ranges, not-words sets)
        if kind == "ebnf":
            _check_size(lark_text, path, what="the grammar converted from GBNF")
        grammar = cls(lark_text=lark_text, path=path, kind=kind, start=start, rule_names=rule_names)
        checked = grammar._validate(source_text=text, positions=positions)
        # cached_property slots, built once: plain BNF leaves Lark's parser to be built on first use
        grammar.__dict__["tables" if isinstance(checked, ParserTables) else "lark"] = checked
        return grammar

    # --- use ---------------------------------------------------------------------------------

    @cached_property
    def lark(self) -> Lark:
        """The Lark LALR parser (contextual lexer, ``maybe_placeholders=False``), built once."""
        return _build_lark(self.lark_text, self.start, self.path)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without Lark's parser and the parser tables (made again on first use: Lark's
        action objects are compared by identity, which a pickled copy would not keep)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("lark", "tables")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        json_schema.note_direct_automata(self.lark_text)  # (as from_string: in this process too)

    @cached_property
    def tables(self) -> ParserTables:
        """What gad's engine reads of the grammar (:class:`gad.grammar.tables.ParserTables`): Lark's
        LALR(1) table and its contextual lexer's terminals per parser state, built once."""
        return ParserTables.from_lark(self.lark, self.start)

    @property
    def terminal_defs(self) -> list[TerminalDef]:
        """Lark's terminal definitions (``t.name``, ``t.pattern.to_regexp()``, ``t.priority``)."""
        return list(self.tables.terminals)

    @property
    def ignore_terminals(self) -> list[str]:
        """Names of the ``%ignore``-d terminals."""
        return list(self.tables.ignore)

    def parses(self, text: str) -> bool:
        """True iff Lark parses ``text`` (the definition of L(G)); only Lark's UnexpectedInput means False."""
        try:
            self.lark.parse(text)
        except UnexpectedInput:
            return False
        return True

    # --- validation --------------------------------------------------------------------------

    def _user_name(self, lark_name: str) -> str:
        lark_name = str(lark_name)
        m = re.fullmatch(r"__(.+?)_(?:plus|star)_\d+", lark_name)
        if m:
            lark_name = m.group(1)
        return self.rule_names.get(lark_name, lark_name)

    def _helper_note(self, raw_names: list[str]) -> str:
        """For a grammar converted from GBNF: what the helper rules and character atoms named in a
        conflict stand for ("" when none is named)."""
        if self.kind != "ebnf":
            return ""
        helpers = _dedupe(n for n in raw_names if re.fullmatch(r"_(?:rep|opt|g)_[0-9]+", n))
        if not helpers:
            return ""
        owners = _dedupe(self.rule_names.get(h, h) for h in helpers)
        return (f"\n({', '.join(helpers[:6])}{', ...' if len(helpers) > 6 else ''}: gad's helper rules for a "
                f"repetition x{{m,n}} or a large group in rule {', '.join(owners)}; C_k are the grammar's "
                "character sets)")

    def _err_pos(self, name: str, source_text: str, positions: dict[str, tuple[int, int]],
                 definition: bool = True) -> dict:
        if name in positions:
            line, col = positions[name]
            return {"path": self.path, "line": line, "column": col}
        m = re.fullmatch(r"__IGNORE_(\d+)", name)
        if m and self.kind == "lark":  # Lark's name for the n-th inline pattern of an %ignore line
            found = [mm.start(1) for mm in re.finditer(r'^[ \t]*(%ignore\s+[/"])', source_text, re.M)]
            if int(m.group(1)) < len(found):
                line, col = _line_col(source_text, found[int(m.group(1))])
                return {"path": self.path, "line": line, "column": col}
        if self.kind == "lark":
            pos = _find_definition(source_text, name) if definition else _find_use(source_text, name)
            if pos is not None:
                return {"path": self.path, "line": pos[0], "column": pos[1]}
        return {"path": self.path}

    def _validate(self, source_text: str, positions: dict[str, tuple[int, int]]) -> Lark | ParserTables:
        """The checked grammar: its :class:`ParserTables` when the text is plain BNF Lark would take as
        it is (:meth:`_plain_tables`), else Lark's parser.  Raises the errors listed in :meth:`from_string`."""
        tables = self._plain_tables()
        if tables is not None:
            fsms = self._check_terminals(tables, source_text, positions)
            self._check_nonempty(tables, fsms, source_text, positions)
            return tables
        parser = self._construct(source_text, positions)
        if getattr(parser, "_gad_shift_reduce", 1):  # Lark resolved a shift/reduce conflict: name it
            self._check_conflicts(parser, source_text, positions)
        fsms = self._check_terminals(parser, source_text, positions)
        self._check_scanners(parser, source_text, positions)
        self._check_nonempty(parser, fsms, source_text, positions)
        return parser

    def _plain_tables(self) -> ParserTables | None:
        """The tables of plain-BNF text (:func:`compile_plain`, what a JSON Schema or a regex makes),
        built without Lark's parser; None where Lark must read the text or report a problem (not
        plain BNF, a terminal Lark's lexer checks refuse, one holding a named group, which only
        Lark's combined scanner can check, or a conflict in the LALR(1) table)."""
        prebuilt = compile_plain(self.lark_text, [self.start])
        if prebuilt is None:
            return None
        terminals, rules, ignore = prebuilt
        if any(_INLINE_GROUP.search(t.pattern.to_regexp()) for t in terminals):
            return None  # (a named group or a flag: only Lark's combined scanner tells if it compiles)
        try:
            validate_terminals(terminals, ignore)
        except LexError:
            return None
        return ParserTables.from_plain(terminals, rules, ignore, self.start, self.lark_text)

    def _construct(self, source_text: str, positions: dict[str, tuple[int, int]]) -> Lark:
        path = self.path
        try:
            return _build_lark(self.lark_text, self.start, path)
        except AssertionError as e:  # Lark asserts when a relative %import file exists elsewhere
            parts = re.findall(r"Token\('\w+', '([^']*)'\)", str(e))
            module = ".".join(parts) or "?"
            pos = _find_directive(source_text, "%import", module.split(".")[-1]) if self.kind == "lark" else None
            raise GrammarSyntaxError(
                f"%import: module {module!r} not found beside the grammar "
                f"({'the current directory' if path == '<string>' else Path(path).resolve().parent})",
                path=path, line=pos[0] if pos else None, column=pos[1] if pos else None) from None
        except UnexpectedInput as e:  # Lark's own grammar parser (the position is in the prefix already)
            head = re.sub(r"\s*at line \d+,? column \d+\.?$", "", _first_line(str(e)))
            raise GrammarSyntaxError(f"syntax error: {head}", path=path,
                                     line=getattr(e, "line", None), column=getattr(e, "column", None)) from None
        except LarkGrammarError as e:
            msg = str(e)
            m = re.search(r"at line (\d+),? column (\d+)", msg)
            if m:
                head = msg.split(" at line")[0].split(", at line")[0].strip()
                raise GrammarSyntaxError(f"syntax error: {head}", path=path, line=int(m.group(1)),
                                         column=int(m.group(2))) from None
            m = (re.search(r"'([^']+)' used but not defined", msg)
                 or re.search(r"undefined (?:rule|terminal): (?:NonTerminal|Terminal)\('([^']+)'\)", msg)
                 or re.search(r"Terminal used but not defined: (\S+)", msg))
            if m:
                sym = self._user_name(m.group(1))
                what = "terminal" if sym.isupper() or sym.lstrip("_").isupper() else "rule"
                if sym == self.start and "undefined rule" in msg:
                    raise UndefinedSymbolError(f"start rule {sym!r} is not defined", symbol=sym,
                                               path=path) from None
                raise UndefinedSymbolError(f"{what} {sym!r} is used but not defined", symbol=sym,
                                           **self._err_pos(sym, source_text, positions, definition=False)) from None
            m = re.search(r"Terminals \{(.*)\} were marked to ignore but were not defined", msg)
            if m:
                sym = m.group(1).split(",")[0].strip().strip("'\"")
                raise UndefinedSymbolError(f"terminal {sym!r} is %ignore-d but not defined", symbol=sym,
                                           **self._err_pos(sym, source_text, positions, definition=False)) from None
            m = re.search(r"'([^']+)' defined more than once", msg)
            if m:
                sym = m.group(1)
                pos = _find_definition(source_text, sym, nth=2) if self.kind == "lark" else None
                raise GrammarSyntaxError(f"{sym!r} is defined more than once", path=path,
                                         line=pos[0] if pos else None, column=pos[1] if pos else None) from None
            if "Reduce/Reduce collision" in msg:
                rules = _dedupe(self._user_name(n) for n in re.findall(r"<(\S+) :", msg))
                # Lark lists the rules from a set: order them by definition for stable messages
                rules.sort(key=lambda n: (self._err_pos(n, source_text, positions).get("line") or 1 << 30, n))
                # the first collision as Lark words it (terminals named as the user knows them),
                # then a count of the rest: Lark lists every one, 174,000 characters for a small GBNF
                blocks = [b for b in re.split(r"\n\s*\n", msg.strip()) if "Reduce/Reduce collision" in b]
                first = re.sub(r"Terminal\('([^']+)'\)", lambda m: f"terminal {self._user_name(m.group(1))}",
                               blocks[0] if blocks else msg)
                more = f"\n({len(blocks) - 1} more reduce/reduce collisions)" if len(blocks) > 1 else ""
                raise GrammarConflictError(
                    f"LALR(1) reduce/reduce conflict between rules {', '.join(rules)}:\n{first}{more}"
                    f"{self._helper_note(re.findall(r'_[a-z]+_[0-9]+', msg))}", rules=rules,
                    **self._err_pos(rules[0], source_text, positions)) from None
            raise self._other_lark_error(msg, source_text) from None
        except LexError as e:
            msg = str(e)
            m = re.search(r"zero-width terminals\. \((\w+):", msg)
            if m:
                what = "the %ignore pattern" if m.group(1).startswith("__IGNORE_") else f"terminal {m.group(1)}"
                raise UnsupportedGrammarError(
                    f"{what} matches the empty string (zero-width terminals are not supported)",
                    **self._err_pos(m.group(1), source_text, positions)) from None
            m = re.search(r"Cannot compile token (\w+): (.*)", msg)
            if m:  # Python's re refuses the pattern (syntax error, \p{..} classes, ...)
                raise GrammarSyntaxError(f"terminal {m.group(1)} has an invalid regular expression {m.group(2)}",
                                         **self._err_pos(m.group(1), source_text, positions)) from None
            raise UnsupportedGrammarError(_first_line(msg), path=path) from None
        except RecursionError:
            raise UnsupportedGrammarError(
                "rules nest too deeply for Lark's LALR analysis (Python's recursion limit): "
                "flatten long chains of rules, e.g. with repetition (item+)", path=path) from None
        except (LarkError, OSError) as e:
            raise self._other_lark_error(str(e), source_text) from None

    def _other_lark_error(self, msg: str, source_text: str) -> GrammarError:
        """A typed error, with a position where one can be found, for a Lark error not handled above."""
        msg = _first_line(msg)
        pos = None
        if self.kind == "lark":
            m = re.search(r"No such file or directory: '([^']+)'", msg)
            if m:  # %import of an unknown module
                module = Path(m.group(1)).stem
                msg = f"%import: module {module!r} not found (Lark's built-in modules: common, unicode, lark)"
                pos = _find_directive(source_text, "%import", module)
            elif "Empty terminals are not allowed" in msg:
                pos = _find_regex(source_text, r'""i?')
                msg = 'empty string literal "": terminals must match at least one character'
            elif "null bytes" in msg:
                pos = _find_regex(source_text, r"\x00")
                msg = "a raw NUL character in the grammar text (write it as \\x00 in a literal)"
        if pos is not None:
            return GrammarSyntaxError(msg, path=self.path, line=pos[0], column=pos[1])
        return GrammarError(msg, path=self.path)

    def _check_scanners(self, parser: Lark, source_text: str,
                        positions: dict[str, tuple[int, int]]) -> None:
        """Build Lark's lexer scanners now (Lark builds them on the first parse), so that a terminal
        Python's ``re`` refuses inside Lark's combined pattern (e.g. a literal such as
        ``"\\u0301\\u0301"``, which Lark names after its text, an invalid group name) is reported
        here with its position, never as an ``re.error`` from :meth:`parses`.

        Raises:
            UnsupportedGrammarError: such a terminal (path:line:column of the literal when found).
        """
        if getattr(parser, "_gad_prebuilt", False) and not any(_INLINE_GROUP.search(t.pattern.to_regexp())
                                                                for t in parser.terminals):
            # plain BNF names every terminal itself (valid group names, checked by compile_plain) and
            # each pattern compiled alone (validate_terminals): without groups of their own (a name,
            # a global flag) the combined pattern compiles too, so Lark may build it when a parse
            # first needs it
            return
        lexer = parser.parser.lexer
        # the root lexer's scanner holds every terminal's pattern (each wrapped in its own named
        # group, so a context's scanner, a subset of them, compiles whenever this one does)
        for bl in [getattr(lexer, "root_lexer", lexer)]:
            try:
                bl.scanner  # noqa: B018 - the property builds and caches the scanner
            except re.error as e:
                bad = next((t for t in bl.terminals if _bad_group_name(t.name)), None)
                if bad is None:
                    raise UnsupportedGrammarError(f"Python's re refuses the lexer's combined pattern: {e}",
                                                  path=self.path) from None
                pos = _find_literal(source_text, bad.pattern.value) if self.kind == "lark" else None
                where = ({"path": self.path, "line": pos[0], "column": pos[1]} if pos
                         else self._err_pos(bad.name, source_text, positions))
                raise UnsupportedGrammarError(
                    f"literal {bad.pattern.value!r:.60} gets the terminal name {bad.name!r:.60} from Lark, "
                    "which Python's re refuses as a group name; give it a named terminal "
                    "(e.g. MARK: \"...\") and use that name", **where) from None

    def _check_conflicts(self, parser: Lark, source_text: str,
                         positions: dict[str, tuple[int, int]]) -> None:
        conf = ParserConf(parser.rules, {}, [self.start])
        a = LALR_Analyzer(conf)
        a.compute_lr0_states()
        a.compute_reads_relations()
        a.compute_includes_lookback()
        a.compute_lookaheads()
        found: list[tuple[str, list[str], list[str]]] = []
        for itemset in sorted(a.lr0_itemsets, key=lambda s: sorted(map(str, s.kernel))):
            for la, rules in sorted(itemset.lookaheads.items(), key=lambda kv: kv[0].name):
                if len(rules) > 1:  # reduce/reduce (Lark resolves by rule priority, else raises)
                    prios = sorted((r.options.priority or 0 for r in rules), reverse=True)
                    if prios[0] == prios[1]:
                        found.append((la.name, [r.origin.name for r in rules], [str(r) for r in rules]))
                    continue
                if la in itemset.transitions:
                    (reduce_rule,) = rules
                    shifters = [rp.rule for rp in itemset.closure if not rp.is_satisfied and rp.next == la]
                    names = [reduce_rule.origin.name] + [r.origin.name for r in shifters]
                    strs = [f"reduce {reduce_rule}"] + [f"shift {r}" for r in shifters]
                    found.append((la.name, names, strs))
        if not found:
            return
        term, names, strs = found[0]
        involved = _dedupe(self._user_name(n) for _, ns, _ in found for n in ns)
        first = _dedupe(self._user_name(n) for n in names)
        kind = "shift/reduce" if strs[0].startswith("reduce") and any(s.startswith("shift") for s in strs) \
            else "reduce/reduce"
        detail = "\n".join("  " + s for s in strs)
        more = f"\n({len(found) - 1} more conflicts)" if len(found) > 1 else ""
        raise GrammarConflictError(
            f"grammar is not LALR(1): {kind} conflict on terminal {self._user_name(term)} between rules "
            f"{', '.join(first)}:\n{detail}{more}{self._helper_note(names + re.findall(r'_[a-z]+_[0-9]+', detail))}",
            rules=involved,
            **self._err_pos(first[0], source_text, positions))

    def _check_terminals(self, parser: Lark | ParserTables, source_text: str,
                         positions: dict[str, tuple[int, int]]) -> dict[str, object | None]:
        """Each terminal's automaton (None for a plain literal: none is built), after the checks on its
        size and its features."""
        fsms: dict[str, object | None] = {}
        if len(parser.terminals) > MAX_TERMINALS:
            raise UnsupportedGrammarError(
                f"the grammar has {len(parser.terminals):,} terminals, more than gad's limit of {MAX_TERMINALS:,} "
                "(each is a lexer automaton); fold keyword alternatives into fewer terminals", path=self.path)
        for t in parser.terminals:
            regexp = t.pattern.to_regexp()
            if len(regexp) > MAX_REGEX_CHARS:
                raise UnsupportedGrammarError(
                    f"terminal {t.name} /{clip(regexp)}/ is longer than gad's limit of {MAX_REGEX_CHARS:,} "
                    "characters for one regular expression", **self._err_pos(t.name, source_text, positions))
            bad = terminal_feature(t)
            if bad:
                raise UnsupportedGrammarError(
                    f"terminal {t.name} /{clip(regexp)}/ uses {bad}, which a DFA cannot express exactly "
                    "(lookarounds, back-references, anchors, atomic groups and possessive quantifiers are not "
                    "supported)",
                    **self._err_pos(t.name, source_text, positions))
            lit = pattern_literal(t.pattern)
            if lit is not None and len(lit) < MAX_TERMINAL_STATES:
                # (a literal, or a regexp of one string such as a schema's enum value: a chain of len + 1
                # states, not empty; none built)
                fsms[t.name] = None
                continue
            try:
                fsms[t.name] = regex_fsm(regexp)
            except AutomatonTooLarge:
                raise UnsupportedGrammarError(
                    f"terminal {t.name} /{clip(regexp)}/ needs more than {MAX_TERMINAL_STATES:,} automaton states "
                    "(exponential or huge repetition); simplify the pattern or express it with rules",
                    **self._err_pos(t.name, source_text, positions)) from None
            except Exception as e:  # interegular raises several unrelated types (Unsupported, ...)
                raise UnsupportedGrammarError(
                    f"terminal {t.name} /{clip(regexp)}/ cannot be compiled to a DFA by interegular "
                    f"({type(e).__name__}: {_first_line(str(e))}); lookarounds and back-references are "
                    "not supported", **self._err_pos(t.name, source_text, positions)) from None
        return fsms

    def _check_nonempty(self, parser: Lark | ParserTables, fsms: dict[str, object | None], source_text: str,
                        positions: dict[str, tuple[int, int]]) -> None:
        productive: set[str] = {name for name, f in fsms.items() if f is None or not _fsm_empty(f)}
        rules = list(parser.rules)
        changed = True
        while changed:
            changed = False
            for r in rules:
                o = r.origin.name
                if o not in productive and all(s.name in productive for s in r.expansion):
                    productive.add(o)
                    changed = True
        if self.start not in productive:
            user = self._user_name(self.start)
            raise EmptyLanguageError(
                f"the language is empty: start rule {user!r} derives no finite string",
                **self._err_pos(self.start, source_text, positions))


# a named group or a global flag, (?i), in a terminal's regexp: Lark's combined scanner may refuse
# it where the regexp alone compiles (scoped flags, (?i:...), as Lark writes a literal's, are fine)
_INLINE_GROUP = re.compile(r"(?<!\\)\(\?(?:P|[aiLmsux]+\))")

_EMPTY: dict[int, tuple[object, bool]] = {}  # id(fsm) -> (fsm, whether its language is empty)


def _fsm_empty(f: Any) -> bool:
    """``f.empty()`` of an interegular FSM, memoised per object (the terminal automata of grammars made
    per request recur, cached by :func:`regex_fsm`; the memo holds each FSM, so an id is not reused)."""
    hit = _EMPTY.get(id(f))
    if hit is not None and hit[0] is f:
        return hit[1]
    empty = bool(f.empty())
    if len(_EMPTY) >= 8192:
        _EMPTY.clear()
    _EMPTY[id(f)] = (f, empty)
    return empty


_DEFINITION = re.compile(r"^[ \t]*[?!]?\w+(?:\.-?\d+)?[ \t]*:(?!:)", re.M)
_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"i?')


def _check_size(text: str, path: str, what: str = "the grammar") -> None:
    """Refuse grammar text over the documented size limits before Lark analyses it.

    Raises:
        UnsupportedGrammarError: over :data:`MAX_GRAMMAR_CHARS` characters, :data:`MAX_DEFINITIONS`
            definitions or :data:`MAX_TERMINALS` distinct string literals (the limit and the count named).
    """
    if len(text) > MAX_GRAMMAR_CHARS:
        raise UnsupportedGrammarError(
            f"{what} is {len(text):,} characters, more than gad's limit of {MAX_GRAMMAR_CHARS:,}", path=path)
    n_def = sum(1 for _ in _DEFINITION.finditer(text))
    if n_def > MAX_DEFINITIONS:
        raise UnsupportedGrammarError(
            f"{what} has {n_def:,} rule and terminal definitions, more than gad's limit of "
            f"{MAX_DEFINITIONS:,} (Lark's LALR analysis grows too slow)", path=path)
    n_lit = len(set(_LITERAL.findall(text)))
    if n_lit > MAX_TERMINALS:
        raise UnsupportedGrammarError(
            f"{what} has {n_lit:,} distinct string literals, more than gad's limit of {MAX_TERMINALS:,} "
            "terminals (each is a lexer automaton); fold keyword alternatives into fewer terminals", path=path)


def _bad_group_name(name: str) -> bool:
    """Would Python's ``re`` refuse ``name`` as a ``(?P<name>...)`` group name?"""
    try:
        re.compile(f"(?P<{name}>x)")
    except re.error:
        return True
    return False


def _find_literal(text: str, value: str) -> tuple[int, int] | None:
    """(line, column) of the first string literal of ``text`` whose value is ``value``."""
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', text):
        try:
            if eval_escaping(m.group(1)) == value:
                return _line_col(text, m.start())
        except Exception:  # noqa: BLE001, S112 - not a literal Lark can read: keep looking
            continue
    return None


def _first_line(msg: str) -> str:
    return msg.strip().splitlines()[0] if msg.strip() else msg


def _dedupe(names) -> list[str]:
    out: list[str] = []
    for n in names:
        if n not in out:
            out.append(n)
    return out


_LARK_SKIP = re.compile(r'//[^\n]*|"(?:\\.|[^"\\\n])*"i?|/(?!/)(?:\\.|[^/\\\n])+/[imslux]*')
_LARK_NAME = re.compile(r"[_?!]*[A-Za-z_][A-Za-z_0-9]*")


def _lark_symbols(text: str):
    """Yield (name, offset, at_line_start) for every identifier outside comments/strings/regexps."""
    pos = 0
    n = len(text)
    while pos < n:
        m = _LARK_SKIP.match(text, pos)
        if m:
            pos = m.end()
            continue
        m = _LARK_NAME.match(text, pos)
        if m and (pos == 0 or not (text[pos - 1].isalnum() or text[pos - 1] in "_%")):
            line_start = text.rfind("\n", 0, pos) + 1
            yield m.group(0).lstrip("?!"), pos, text[line_start:pos].strip() == ""
            pos = m.end()
            continue
        pos += 1


def _line_col(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _find_definition(text: str, name: str, nth: int = 1) -> tuple[int, int] | None:
    """(line, column) of the ``nth`` definition ``name:`` / ``name.prio:`` at the start of a line."""
    k = 0
    for sym, off, at_start in _lark_symbols(text):
        if sym == name and at_start and re.match(r"[?!]*\w+(?:\.-?\d+)?\s*:", text[off:]):
            k += 1
            if k == nth:
                return _line_col(text, off)
    return None


def _find_regex(text: str, pattern: str) -> tuple[int, int] | None:
    """(line, column) of the first match of ``pattern`` outside comments."""
    for m in re.finditer(pattern, text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if "//" not in text[line_start:m.start()]:
            return _line_col(text, m.start())
    return None


def _find_directive(text: str, directive: str, arg: str) -> tuple[int, int] | None:
    """(line, column) of the first ``directive`` line that mentions ``arg``."""
    for m in re.finditer(rf"^[ \t]*({re.escape(directive)}\b[^\n]*)", text, re.M):
        if arg in m.group(1):
            return _line_col(text, m.start(1))
    return None


def _find_use(text: str, name: str) -> tuple[int, int] | None:
    """(line, column) of the first use of ``name`` that is not its definition."""
    for sym, off, at_start in _lark_symbols(text):
        if sym == name and not (at_start and re.match(r"[?!]*\w+(?:\.-?\d+)?\s*:", text[off:])):
            return _line_col(text, off)
    return None


def builtin_names() -> list[str]:
    """Names of the grammars shipped with gad (``Grammar.builtin(name)``), sorted."""
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.lark"))
