"""A regular expression (or a Pydantic model) as a gad grammar (issue 11).

:func:`regex_lark` writes a one-terminal Lark grammar whose language is the set of strings ``s``
with ``re.fullmatch(pattern, s)``, for Python ``re`` syntax without lookarounds, back-references,
inline flags or inner anchors (a leading ``^`` and a trailing ``$`` are no-ops under a full
match and are dropped).  Classes are ASCII, as in gad's lexer (``\\d`` = ``[0-9]``, ``\\w`` =
``[A-Za-z0-9_]``, ``\\s`` = ``[ \\t\\n\\r\\f\\v]``); ``.`` is any character but ``\\n``.

Lark refuses terminals that match the empty string, so for a pattern that matches ``""`` the
terminal is the pattern's non-empty part (rewritten on the parsed pattern) and the start rule
also derives the empty string.

Exactness is with gad's engine (longest match over the terminal's automaton).  ``Grammar.parses``
runs Lark's own scanner, which takes Python's leftmost alternative (``a|ab`` lexes ``ab`` as ``a``),
so for such patterns it may disagree; masks and ``Matcher.accept_bytes`` do not.
"""

from __future__ import annotations

import re
from typing import Any

from gad.errors import GrammarSyntaxError, InvalidArgumentError, UnsupportedGrammarError
from gad.grammar.json_schema import _complement, _norm, _ranges_text, _rx_lit

try:  # Python >= 3.11
    import re._constants as _sc
    import re._parser as _sp
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sc  # type: ignore[no-redef, unused-ignore]
    import sre_parse as _sp  # type: ignore[no-redef, unused-ignore]

__all__ = ["regex_lark", "pydantic_schema"]

_ASCII_CATS = {
    "CATEGORY_DIGIT": [(0x30, 0x39)],
    "CATEGORY_WORD": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "CATEGORY_SPACE": [(0x09, 0x0D), (0x20, 0x20)],
}
for _k in list(_ASCII_CATS):
    _ASCII_CATS[_k.replace("CATEGORY_", "CATEGORY_NOT_")] = _complement(_ASCII_CATS[_k])


class _Unsupported(Exception):
    pass


def _cls(ranges: list[tuple[int, int]]) -> str:
    ranges = _norm(ranges)
    if not ranges:
        raise _Unsupported("an empty character class")
    if sum(hi - lo + 1 for lo, hi in ranges) > 4096:
        comp = _complement(ranges)
        return "[^" + _ranges_text(comp) + "]" if comp else "(?:[\\x00-\\x7f]|[^\\x00-\\x7f])"
    return "[" + _ranges_text(ranges) + "]"


def _nullable(op: Any, av: Any) -> bool:
    name = str(op)
    if name in ("MAX_REPEAT", "MIN_REPEAT"):
        return av[0] == 0 or _seq_nullable(list(av[2]))
    if name == "SUBPATTERN":
        return _seq_nullable(list(av[3]))
    if name == "BRANCH":
        return any(_seq_nullable(list(b)) for b in av[1])
    if name == "AT":
        return True
    return False


def _seq_nullable(items: list) -> bool:
    return all(_nullable(op, av) for op, av in items)


def _emit(op: Any, av: Any) -> str:
    name = str(op)
    if name == "LITERAL":
        return _rx_lit(chr(av))
    if name == "NOT_LITERAL":
        return _cls(_complement([(av, av)]))
    if name == "ANY":
        return _cls(_complement([(0x0A, 0x0A)]))
    if name == "IN":
        neg, ranges = False, []
        for iop, iav in av:
            n = str(iop)
            if n == "NEGATE":
                neg = True
            elif n == "LITERAL":
                ranges.append((iav, iav))
            elif n == "RANGE":
                ranges.append((iav[0], iav[1]))
            elif n == "CATEGORY" and str(iav) in _ASCII_CATS:
                ranges.extend(_ASCII_CATS[str(iav)])
            else:
                raise _Unsupported(f"class item {n} {iav}")
        return _cls(_complement(ranges) if neg else ranges)
    if name == "CATEGORY" and str(av) in _ASCII_CATS:
        return _cls(_ASCII_CATS[str(av)])
    if name in ("MAX_REPEAT", "MIN_REPEAT"):
        lo, hi, sub = av
        return f"(?:{_emit_seq(list(sub))}){_quant(lo, hi)}"
    if name == "SUBPATTERN":
        if av[1] or av[2]:
            raise _Unsupported("inline flags")
        return "(?:" + _emit_seq(list(av[3])) + ")"
    if name == "BRANCH":
        return "(?:" + "|".join(_emit_seq(list(b)) for b in av[1]) + ")"
    if name == "AT":
        raise _Unsupported(f"the anchor {av} inside the pattern")
    raise _Unsupported(f"{name} (lookarounds, back-references, conditionals, possessive repeats)")


def _quant(lo: int, hi: Any) -> str:
    if hi == _sc.MAXREPEAT:
        return "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def _emit_seq(items: list) -> str:
    return "".join(_emit(op, av) for op, av in items)


def _ne_item(op: Any, av: Any) -> str | None:
    """Regex for the non-empty strings of one item (None: it has none)."""
    if not _nullable(op, av):
        return _emit(op, av)
    name = str(op)
    if name == "AT":
        return None
    if name == "SUBPATTERN":
        if av[1] or av[2]:
            raise _Unsupported("inline flags")
        return _ne_seq(list(av[3]))
    if name == "BRANCH":
        alts = [x for x in (_ne_seq(list(b)) for b in av[1]) if x is not None]
        return "(?:" + "|".join(alts) + ")" if alts else None
    lo, hi, sub = av  # a nullable repeat: X{lo,hi} = X{0,hi} minus "" = NE(X) X{0,hi-1}
    first = _ne_seq(list(sub))
    if first is None or hi == 0:
        return None
    rest = "" if hi == 1 else f"(?:{_emit_seq(list(sub))})" + (
        "*" if hi == _sc.MAXREPEAT else f"{{0,{hi - 1}}}")
    return f"(?:{first}){rest}"


def _ne_seq(items: list) -> str | None:
    if not items:
        return None
    (op, av), rest = items[0], items[1:]
    alts = []
    a = _ne_item(op, av)
    if a is not None:
        alts.append(a + _emit_seq(rest))
    if _nullable(op, av):
        b = _ne_seq(rest)
        if b is not None:
            alts.append(b)
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def regex_lark(pattern: str) -> str:
    """Lark text (start rule ``start``, one terminal ``REGEX``) for ``re.fullmatch(pattern, ·)``.

    Raises:
        InvalidArgumentError: ``pattern`` is not a ``str``.
        GrammarSyntaxError: Python's ``re`` cannot parse it.
        UnsupportedGrammarError: a construct without an exact automaton (see the module doc), or a
            pattern that matches only the empty string.
    """
    if not isinstance(pattern, str):
        raise InvalidArgumentError(f"pattern must be a str, got {type(pattern).__name__}")
    try:
        re.compile(pattern)
        parsed = _sp.parse(pattern)
    except re.error as e:
        raise GrammarSyntaxError(f"invalid regular expression {pattern!r}: {e}", path="<regex>",
                                 column=(e.pos + 1) if e.pos is not None else None) from None
    if parsed.state.flags & ~_sc.SRE_FLAG_UNICODE:
        raise UnsupportedGrammarError(f"regex {pattern!r}: inline flags such as (?i) are not supported",
                                      path="<regex>")
    items = list(parsed)
    if items and items[0][0] is _sc.AT and str(items[0][1]) in ("AT_BEGINNING", "AT_BEGINNING_STRING"):
        items = items[1:]
    if items and items[-1][0] is _sc.AT and str(items[-1][1]) in ("AT_END", "AT_END_STRING"):
        items = items[:-1]
    try:
        if _seq_nullable(items):
            body = _ne_seq(items)
            if body is None:
                raise UnsupportedGrammarError(f"regex {pattern!r} matches only the empty string", path="<regex>")
            start = "start: REGEX\n    |"
        else:
            body = _emit_seq(items)
            start = "start: REGEX"
    except _Unsupported as e:
        raise UnsupportedGrammarError(f"regex {pattern!r}: {e} has no exact automaton", path="<regex>") from None
    return f"// generated by gad.grammar.regex from {pattern!r}\n{start}\nREGEX: /{body}/\n"


def pydantic_schema(model: Any) -> dict:
    """``model.model_json_schema()`` for a Pydantic v2 model class.

    Raises:
        InvalidArgumentError: ``model`` is not a Pydantic model class.
    """
    fn = getattr(model, "model_json_schema", None)
    if not isinstance(model, type) or fn is None:
        raise InvalidArgumentError(f"expected a Pydantic model class (with model_json_schema), got {model!r:.60}")
    schema = fn()
    if not isinstance(schema, dict):  # pragma: no cover - pydantic always returns a dict
        raise InvalidArgumentError("model_json_schema() did not return a dict")
    return schema
