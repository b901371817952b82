"""Lark's compiled rules and terminals read straight from plain BNF text, skipping Lark's grammar parser.

A grammar made per request (:mod:`gad.grammar.json_schema`, :mod:`gad.grammar.regex`) is plain BNF:
rules whose alternatives are sequences of symbol names (a name may carry ``?``), and terminals that
are one string or regexp literal.  Lark reads such text with its own LALR grammar parser and then
rewrites the trees (EBNF to BNF, templates, literals, simplification): about half of its parser
construction for a JSON Schema of a few dozen properties, paid per request.  :func:`compile_plain`
reads the same text with line-level regular expressions and returns what ``lark.load_grammar.Grammar.
compile`` would (the same ``TerminalDef`` and ``Rule`` objects, in the same order, with the same
``order`` indices: tested equal on every grammar the schema converter and the regex front door make);
:class:`PrebuiltGrammar` hands them to ``lark.Lark`` in place of a parsed grammar.

Anything outside that subset (EBNF operators, inline literals, ``%`` directives other than
``%ignore NAME``, rule priorities, ``?rule`` / ``!rule`` modifiers, duplicate definitions, undefined
names, templates) makes :func:`compile_plain` return ``None``, and the caller lets Lark read the text,
so every error message is Lark's (as mapped by :mod:`gad.grammar.loader`).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from lark.common import LexerConf
from lark.exceptions import LexError
from lark.grammar import NonTerminal, Rule, Terminal
from lark.lexer import TOKEN_DEFAULT_PRIORITY, PatternRE, PatternStr, TerminalDef, Token
from lark.load_grammar import Grammar as LarkGrammar
from lark.load_grammar import _literal_to_pattern

from gad.grammar.automata import literal_text

_RULE_NAME = r"_?[a-z][_a-z0-9]*"  # Lark's RULE token without the ``!`` / ``?`` modifiers
_TERM_NAME = r"_?[A-Z][_A-Z0-9]*"  # Lark's TERMINAL token
_RULE_DEF = re.compile(rf"({_RULE_NAME})[ \t]*:(?!:)(.*)")
_MORE = re.compile(r"[ \t]+\|(.*)")
_TERM_DEF = re.compile(rf"({_TERM_NAME})(?:\.(-?[0-9]+))?[ \t]*:[ \t]*(/(?:[^/\\\n]|\\.)+/[imslux]*|\"(?:[^\"\\\n]|\\.)*\"i?)[ \t]*")
_IGNORE = re.compile(rf"%ignore[ \t]+({_TERM_NAME})[ \t]*")
_SYMBOL = re.compile(rf"({_RULE_NAME}|{_TERM_NAME})(\??)")


class PrebuiltGrammar(LarkGrammar):
    """A ``lark.load_grammar.Grammar`` whose :meth:`compile` returns rules and terminals built already.

    ``lark.Lark(PrebuiltGrammar(...), ...)`` then skips Lark's grammar parser and tree rewriting; the
    rest of Lark's construction (lexer, LALR table) is unchanged.
    """

    def __init__(self, terminals: list[TerminalDef], rules: list[Rule], ignore: list[str]) -> None:
        super().__init__([], [], list(ignore))
        self._compiled = (terminals, rules, list(ignore))

    def compile(self, start: Any, terminals_to_keep: Any) -> tuple[list[TerminalDef], list[Rule], list[str]]:
        """The prebuilt ``(terminals, rules, ignore)``: new lists each call (Lark may edit terminals)."""
        terminals, rules, ignore = self._compiled
        return ([TerminalDef(t.name, t.pattern, t.priority) for t in terminals], list(rules), list(ignore))


# Per process, shared by every grammar read here: a terminal literal's Lark pattern (Lark never
# changes a pattern after making it; it caches its width on it), and the (regexp, flags) pairs that
# passed Lark's lexer checks.  Schema grammars repeat the same terminals (JSON strings, numbers,
# punctuation), so each is parsed, compiled and measured once.
_CACHE_SIZE = 8192
_PATTERNS: OrderedDict[str, Any] = OrderedDict()
_VALID: OrderedDict[tuple[str, int], bool] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _remember(cache: OrderedDict, key: Any, value: Any) -> None:
    with _CACHE_LOCK:
        cache[key] = value
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)


class ValidatedLexerConf(LexerConf):
    """Lark's ``LexerConf`` for terminals :func:`validate_terminals` has checked already: its
    ``skip_validation`` spares each of the contextual lexer's per-state lexers from compiling every
    one of its terminals again (a schema grammar has a few hundred states)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.skip_validation = True


def pattern_literal(pattern: Any) -> str | None:
    """The one string a Lark terminal pattern matches, when it has no flags and is a string literal
    (``PatternStr``) or a regexp of one string (:func:`gad.grammar.automata.literal_text`: escapes of
    punctuation only, such as a schema's enum value ``/"a\\.b"/``); else None (also for the empty
    string).  Such a terminal compiles, is never empty, and its width is the string's length."""
    if pattern.flags:
        return None
    if isinstance(pattern, PatternStr):
        return pattern.value or None
    return literal_text(pattern.value)


def validate_terminals(terminals: Sequence[TerminalDef], ignore: Sequence[str], g_regex_flags: int = 0) -> None:
    """Lark's lexer checks (``lark.lexer.BasicLexer``), once per terminal, with Lark's messages.

    Raises:
        lark.exceptions.LexError: a terminal Python's ``re`` refuses, a zero-width terminal, or an
            ``%ignore`` name that is not a terminal.
    """
    for t in terminals:
        if isinstance(t.pattern, PatternStr) and t.pattern.value:
            continue  # a literal's regexp is re.escape'd text: it compiles, and its width is its length
        if not g_regex_flags and pattern_literal(t.pattern):
            continue  # a regexp of one string (escapes of punctuation only): the same
        regexp = t.pattern.to_regexp()
        if (regexp, g_regex_flags) in _VALID:  # compiled and of positive width before
            continue
        try:
            re.compile(regexp, g_regex_flags)
        except re.error:
            raise LexError(f"Cannot compile token {t.name}: {t.pattern}") from None
        if t.pattern.min_width == 0:
            raise LexError(f"Lexer does not allow zero-width terminals. ({t.name}: {t.pattern})")
        _remember(_VALID, (regexp, g_regex_flags), True)
    names = {t.name for t in terminals}
    if not set(ignore) <= names:
        raise LexError(f"Ignore terminals are not defined: {set(ignore) - names}")


_ODD_SPACE = re.compile(r"[^\S \t]")  # white space other than spaces and tabs (Lark's grammar refuses it)


def _alternatives(body: str) -> list[list[tuple[str, bool]]] | None:
    """``[[(name, optional), ...], ...]`` of ``a b? | c``, or None outside plain BNF (symbols are
    separated by spaces and tabs only: Lark reads a form feed or a no-break space otherwise)."""
    if _ODD_SPACE.search(body):
        return None
    alts = []
    for part in body.split("|"):
        syms = []
        for word in part.split():
            m = _SYMBOL.fullmatch(word)
            if m is None:
                return None
            syms.append((m.group(1), m.group(2) == "?"))
        alts.append(syms)
    return alts


def _expand(alt: list[tuple[str, bool]]) -> list[list[str]]:
    """An alternative with ``x?`` symbols as Lark expands it (``maybe_placeholders=False``): the
    leftmost optional symbol present first, then absent, each recursively (Lark's
    ``SimplifyRule_Visitor`` distributes the first ``expansions`` child it finds)."""
    for i, (_name, opt) in enumerate(alt):
        if opt:
            head = [(n, False) for n, _ in alt[:i]]
            with_it = head + [(alt[i][0], False)] + alt[i + 1:]
            without = head + alt[i + 1:]
            return _expand(with_it) + _expand(without)
    return [[n for n, _ in alt]]


def compile_plain(text: str, start: Sequence[str]) -> tuple[list[TerminalDef], list[Rule], list[str]] | None:
    """What ``lark.Lark(text, parser="lalr", maybe_placeholders=False, start=start)`` compiles ``text``
    to — ``(terminals, rules, ignore)`` as ``lark.load_grammar.Grammar.compile`` returns them — when
    ``text`` is plain BNF (see the module doc); ``None`` otherwise (then Lark must read it).
    """
    rule_bodies: dict[str, list[list[tuple[str, bool]]]] = {}
    term_defs: dict[str, TerminalDef] = {}
    ignore: list[str] = []
    current: str | None = None
    for raw in text.split("\n"):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        m = _MORE.fullmatch(line)
        if m is not None:
            if current is None:
                return None
            alts = _alternatives(m.group(1))
            if alts is None:
                return None
            rule_bodies[current].extend(alts)
            continue
        current = None
        m = _RULE_DEF.fullmatch(line)
        if m is not None:
            name = m.group(1)
            alts = _alternatives(m.group(2))
            if alts is None or name in rule_bodies:
                return None
            rule_bodies[name] = alts
            current = name
            continue
        m = _TERM_DEF.fullmatch(line)
        if m is not None:
            name, prio, lit = m.group(1), m.group(2), m.group(3)
            if name in term_defs or "\n" in lit:
                return None
            pattern = _PATTERNS.get(lit)
            if pattern is None:
                try:
                    pattern = _literal_to_pattern(Token("STRING" if lit[0] == '"' else "REGEXP", lit))
                except Exception:  # Lark's own messages for bad literals: let Lark raise them
                    return None
                one = pattern_literal(pattern) if isinstance(pattern, PatternRE) else None
                if one:  # a regexp of one string (a schema's enum value): its width, as sre would find it
                    pattern._width = (len(one), len(one))
                _remember(_PATTERNS, lit, pattern)
            term_defs[name] = TerminalDef(name, pattern, int(prio) if prio else TOKEN_DEFAULT_PRIORITY)
            continue
        m = _IGNORE.fullmatch(line)
        if m is not None:
            ignore.append(m.group(1))
            continue
        return None
    if any(s not in rule_bodies for s in start) or any(n not in term_defs for n in ignore):
        return None

    expansions: dict[str, list[list[str]]] = {}
    for name, alts in rule_bodies.items():
        exps = [e for alt in alts for e in _expand(alt)]
        if len({tuple(e) for e in exps}) != len(exps):
            return None  # Lark drops duplicate empty alternatives and refuses others: its messages
        for exp in exps:
            for sym in exp:
                if sym not in (term_defs if _is_terminal(sym) else rule_bodies):
                    return None  # undefined: Lark's message
        expansions[name] = exps

    # unused rules go, as in Lark's Grammar.compile: repeatedly drop the rules whose origin no rule of
    # another origin uses (the same fixpoint, by reference counts; unreachable cycles stay, as there)
    refs: dict[str, int] = dict.fromkeys(expansions, 0)
    for name, exps in expansions.items():
        for exp in exps:
            for sym in exp:
                if sym != name and sym in refs:
                    refs[sym] += 1
    alive = set(expansions)
    todo = [n for n, k in refs.items() if k == 0 and n not in start]
    while todo:
        n = todo.pop()
        if n not in alive:
            continue
        alive.discard(n)
        for exp in expansions[n]:
            for sym in exp:
                if sym != n and sym in refs:
                    refs[sym] -= 1
                    if refs[sym] == 0 and sym not in start:
                        todo.append(sym)

    rules: list[Rule] = []
    symbols: dict[str, Any] = {}
    for name, exps in expansions.items():
        if name not in alive:
            continue
        origin = NonTerminal(name)
        for order, exp in enumerate(exps):
            syms = []
            for sym in exp:
                obj = symbols.get(sym)
                if obj is None:
                    obj = symbols[sym] = (Terminal(sym, filter_out=sym.startswith("_")) if _is_terminal(sym)
                                          else NonTerminal(sym))
                syms.append(obj)
            rules.append(Rule(origin, syms, order, None, None))
    used_terms = {s.name for r in rules for s in r.expansion if isinstance(s, Terminal)}
    terminals = [t for t in term_defs.values() if t.name in used_terms or t.name in ignore]
    return terminals, rules, ignore


def _is_terminal(name: str) -> bool:
    return name.lstrip("_")[:1].isupper()
