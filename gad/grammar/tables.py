"""What gad's engine reads of an LALR(1) grammar: its parse table and its contextual lexer's terminals.

:class:`gad.engine.compiler.CompiledGrammar` needs, of a grammar, Lark's LALR(1) parse table and, per
parser state, the terminals Lark's contextual lexer scans there, in its scanning order (Lark's
``ContextualLexer``: the terminals with an action in the state plus the ``%ignore`` ones, each set in
a ``BasicLexer`` sorted by priority, longest possible match, literal length and name).
:class:`ParserTables` holds exactly that, made either from a built ``lark.Lark`` parser
(:meth:`ParserTables.from_lark`) or, for plain-BNF text (:mod:`gad.grammar.plain_bnf`: every grammar
made per request from a JSON Schema or a regex), from Lark's rules and terminals directly
(:meth:`ParserTables.from_plain`): the table from :func:`gad.grammar.lalr_table.lalr_table`, the
contexts from the table's rows.  Both give the same tables (tested on the shipped grammars and on
schema grammars in ``tests/grammar/test_tables.py``); the second skips Lark's parser construction
(its contextual lexer, one ``BasicLexer`` per distinct terminal set, and its parse-tree callbacks),
about a tenth of a schema's time to first mask, so a :class:`gad.grammar.Grammar` made per request
builds its ``lark.Lark`` only when something parses with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lark.grammar import Rule
from lark.lexer import PatternStr, TerminalDef
from lark.parsers.lalr_analysis import IntParseTable

from gad.errors import UnsupportedGrammarError
from gad.grammar.automata import clip, unsupported_feature
from gad.grammar.lalr_table import lalr_table


def lexer_order(t: TerminalDef) -> tuple[int, int, int, str]:
    """Lark's ``BasicLexer`` scanning order: higher priority, then longer possible match, then longer
    literal text, then name (a total order: names are unique)."""
    return (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name)


# Lark's global regex flags (``g_regex_flags``, applied by its scanner to every terminal) as the
# pattern flags a terminal carries itself (``/.../i``): gad's automata read a terminal's own flags
# (re.UNICODE is what a str pattern has anyway, and re.MULTILINE changes only ^ and $, which gad refuses
# in a terminal: neither adds a letter)
_GLOBAL_FLAG_LETTERS = {re.IGNORECASE: "i", re.MULTILINE: "", re.DOTALL: "s", re.VERBOSE: "x", re.UNICODE: ""}


def _with_global_flags(terminals: list[TerminalDef], g_regex_flags: int) -> list[TerminalDef]:
    """``terminals`` with Lark's global regex flags added to each one's pattern flags (new
    ``TerminalDef`` objects; the same list when there are none), so that the lexer automata match
    what Lark's scanner does.

    Raises:
        UnsupportedGrammarError: a flag with no pattern-flag spelling (``re.ASCII``, ``re.LOCALE``, ...).
    """
    letters = "".join(ch for f, ch in _GLOBAL_FLAG_LETTERS.items() if g_regex_flags & f)
    rest = g_regex_flags & ~sum(_GLOBAL_FLAG_LETTERS)
    if rest:
        raise UnsupportedGrammarError(f"Lark's g_regex_flags {re.RegexFlag(rest)!r} are not supported by gad's lexer "
                                      "(supported: re.IGNORECASE, re.DOTALL, re.MULTILINE, re.UNICODE; or write flags "
                                      "on the terminals, /.../i)")
    if not letters:
        return terminals
    return [TerminalDef(t.name, type(t.pattern)(t.pattern.value, frozenset(t.pattern.flags) | set(letters),
                                                 t.pattern.raw), t.priority) for t in terminals]


def terminal_feature(t: TerminalDef) -> str | None:
    """:func:`gad.grammar.automata.unsupported_feature` of terminal ``t``'s regexp; None for a string
    literal (its regexp is ``re.escape``'d text)."""
    return None if isinstance(t.pattern, PatternStr) else unsupported_feature(t.pattern.to_regexp())


@dataclass(frozen=True)
class ParserTables:
    """An LALR(1) grammar as gad's engine reads it.

    Attributes:
        parse_table: Lark's ``IntParseTable`` (states are ints; ``states[s]`` maps a terminal or rule
            name to ``(Shift, state)`` / ``(Reduce, rule)``).
        start: the start rule.
        terminals: every terminal definition of the grammar (Lark ``TerminalDef``).
        ignore: names of the ``%ignore``-d terminals.
        contexts: per parser state, the terminals Lark's contextual lexer scans there, in its order
            (lists are shared between states with the same set).
        g_regex_flags: Lark's global regex flags (``re`` flags, an int).
        rules: the grammar's rules (Lark ``Rule`` objects).
        source: the grammar text, when known (names the grammar in hashes); else ``""``.
    """

    parse_table: IntParseTable
    start: str
    terminals: list[TerminalDef]
    ignore: list[str]
    contexts: dict[int, list[TerminalDef]]
    g_regex_flags: int
    rules: list[Rule]
    source: str = ""

    @classmethod
    def from_lark(cls, lark_obj: Any, start: str | None = None) -> ParserTables:
        """The tables of a built ``lark.Lark`` parser (``parser="lalr"``, ``lexer="contextual"``).

        Raises:
            AttributeError: ``lark_obj`` is not such a parser (no contextual lexer or LALR table).
        """
        lexers = lark_obj.parser.lexer.lexers
        root = getattr(lark_obj.parser.lexer, "root_lexer", None)
        flags = getattr(root, "g_regex_flags", 0) if root is not None else 0
        own = _with_global_flags(list(lark_obj.terminals), flags)
        for t in own:  # (a grammar gad loads is checked so by its loader; a lark.Lark object is checked here)
            bad = terminal_feature(t)
            if bad:
                raise UnsupportedGrammarError(f"terminal {t.name} /{clip(t.pattern.to_regexp())}/ uses {bad}, which "
                                              "a DFA cannot express as Python's re reads it")
        by_name = {t.name: t for t in own}
        lists: dict[int, list[TerminalDef]] = {}  # one list per BasicLexer (Lark shares them between states)
        contexts = {state: lists.setdefault(id(bl), [by_name.get(t.name, t) for t in bl.terminals])
                    for state, bl in lexers.items()}
        return cls(lark_obj.parser.parser.parser.parse_table, start or lark_obj.options.start[0],
                   own, list(lark_obj.ignore_tokens), contexts, flags,
                   list(lark_obj.rules), str(getattr(lark_obj, "source_grammar", "") or ""))

    @classmethod
    def from_plain(cls, terminals: list[TerminalDef], rules: list[Rule], ignore: list[str], start: str,
                   source: str = "") -> ParserTables | None:
        """The tables Lark would build for the compiled rules and terminals of plain-BNF text
        (:func:`gad.grammar.plain_bnf.compile_plain`, whose terminals passed
        :func:`~gad.grammar.plain_bnf.validate_terminals`), without building Lark's parser; None
        where Lark must speak (its analyzer's errors, or a shift/reduce conflict it would resolve
        silently: gad's loader reports those from Lark's parser)."""
        conflicts: list[tuple[int, str]] = []
        table = lalr_table(rules, [start], conflicts)
        if table is None or conflicts:
            return None
        by_name = {t.name: t for t in terminals}
        ranked = sorted(terminals, key=lexer_order)
        rank = {t.name: i for i, t in enumerate(ranked)}
        ign = list(dict.fromkeys(n for n in ignore if n in by_name))  # (a repeated %ignore line: once, as Lark's set)
        seen: dict[frozenset[str], list[TerminalDef]] = {}
        contexts: dict[int, list[TerminalDef]] = {}
        for state, acts in table.states.items():
            names = [n for n in acts if n in by_name]
            key = frozenset(names)
            lst = seen.get(key)
            if lst is None:
                names.extend(n for n in ign if n not in acts)
                names.sort(key=rank.__getitem__)
                lst = seen[key] = [by_name[n] for n in names]
            contexts[state] = lst
        return cls(table, start, list(terminals), list(ignore), contexts, 0, list(rules), source)

