"""Python ``re`` syntax trees to regex text for gad's automata: the one translator behind both
JSON Schema ``pattern`` (:mod:`gad.grammar.json_schema`) and ``Grammar.from_regex``
(:mod:`gad.grammar.regex`).

A pattern is parsed with Python's own parser (``re._parser``, ``sre_parse`` before 3.11) and each
node is written back as plain regex syntax that interegular (gad's automaton builder) reads
exactly: literals, classes, groups, alternation and bounded / unbounded repeats.  What differs
between the two users is a :class:`Dialect`: how one character and one set of characters are
spelled (JSON Schema patterns run over the canonical JSON spelling of a string's content, so one
character may be an escape such as ``\\\\n``; ``from_regex`` runs over raw characters), what the
classes ``\\d \\w \\s`` mean (ECMA-262 or ASCII) and what ``.`` excludes.  Constructs without an
exact automaton (lookarounds, back-references, conditionals, possessive repeats, anchors inside
the pattern, inline flags) raise :class:`RegexUnsupported`; anchors at the ends are the caller's
business (a search vs a full match).

Character sets are lists of inclusive code-point ranges ``[(lo, hi), ...]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

try:  # Python >= 3.11
    import re._constants as _sc
    import re._parser as _sp
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sc  # type: ignore[no-redef, unused-ignore]
    import sre_parse as _sp  # type: ignore[no-redef, unused-ignore]

__all__ = ["Ranges", "Dialect", "RegexUnsupported", "parse", "translate", "norm", "complement", "intersect",
           "contains", "end_split", "len_of", "ranges_text", "rx_lit", "rx_or", "nullable", "strip_anchors", "MAX_CP"]

MAX_CP = 0x10FFFF
Ranges = list[tuple[int, int]]


class RegexUnsupported(Exception):
    """A construct without an exact automaton, or not a regular expression; ``str(e)`` says which."""


# ------------------------------------------------------------------------------ character sets
def norm(ranges: Ranges) -> Ranges:
    """Sorted, merged ranges."""
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def complement(ranges: Ranges) -> Ranges:
    """Every code point not in ``ranges``."""
    out, prev = [], 0
    for lo, hi in norm(ranges):
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CP:
        out.append((prev, MAX_CP))
    return out


def intersect(a: Ranges, b: Ranges) -> Ranges:
    out = []
    for lo1, hi1 in a:
        for lo2, hi2 in b:
            lo, hi = max(lo1, lo2), min(hi1, hi2)
            if lo <= hi:
                out.append((lo, hi))
    return norm(out)


def len_of(ranges: Ranges) -> int:
    """The number of code points in ``ranges``."""
    return sum(hi - lo + 1 for lo, hi in ranges)


def contains(ranges: Ranges, o: int) -> bool:
    return any(lo <= o <= hi for lo, hi in ranges)


def lark_regexp(rx: str) -> str:
    """``rx`` as the body of a Lark ``/.../`` literal that Lark reads back as ``rx``.  Lark's
    ``eval_escaping`` turns a backslash-quote into a bare quote, so a quote right after an escaped
    backslash (regex ``\\\\"``: a backslash, then a quote) would lose its backslash: it is written
    ``\\x22``, which Lark reads as the quote."""
    if '\\"' not in rx:
        return rx
    out = []
    i, n = 0, len(rx)
    while i < n:
        c = rx[i]
        if c == "\\" and i + 1 < n:
            out.append(rx[i:i + 2])
            i += 2
            if rx[i - 1] == "\\" and i < n and rx[i] == '"':
                out.append("\\x22")
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def rx_lit(s: str) -> str:
    """``s`` as a regex literal usable inside a Lark ``/.../`` terminal."""
    out = []
    for c in s:
        o = ord(c)
        if c.isalnum() and o < 128:
            out.append(c)
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif o < 128:
            out.append("\\" + c if c in "\\.^$*+?{}[]|()/" else c)
        else:
            out.append(c)  # interegular takes raw non-ASCII characters (no \\u escapes)
    return "".join(out)


def _class_char(o: int) -> str:
    c = chr(o)
    if o < 0x20 or o == 0x7F:
        return f"\\x{o:02x}"
    if 0xD800 <= o <= 0xDFFF:  # (a lone surrogate has no UTF-8 spelling: escaped, never written raw)
        return f"\\u{o:04x}"
    if c in "\\]^-[/":
        return "\\" + c
    return c


def ranges_text(ranges: Ranges) -> str:
    """The inside of a ``[...]`` class for ``ranges``."""
    parts = []
    for lo, hi in ranges:
        if lo == hi:
            parts.append(_class_char(lo))
        elif hi == lo + 1:
            parts.append(_class_char(lo) + _class_char(hi))
        else:
            parts.append(_class_char(lo) + "-" + _class_char(hi))
    return "".join(parts)


# ------------------------------------------------------------------------------------ dialects
@dataclass(frozen=True)
class Dialect:
    """How the translated regex spells characters.

    Attributes:
        char: regex for one character (a code point).
        chars: regex for one character of a non-empty set of ranges.
        categories: ``CATEGORY_DIGIT`` ... ``CATEGORY_NOT_SPACE`` -> ranges.
        dot: the ranges ``.`` matches.
    """

    char: Callable[[int], str]
    chars: Callable[[Ranges], str]
    categories: dict[str, Ranges]
    dot: Ranges


def parse(pattern: str) -> list:
    """``pattern``'s top-level items (Python's parser).

    Raises:
        RegexUnsupported: not a regex Python can parse, or global inline flags such as ``(?i)``.
    """
    try:
        # parsed as ASCII (gad's classes are ASCII): an explicit (?u) then fails to parse, where
        # under the default flags it would pass unnoticed and \w would silently mean ASCII
        parsed = _sp.parse(pattern, _sc.SRE_FLAG_ASCII)
    except ValueError as e:
        if "ASCII and UNICODE" not in str(e):
            raise RegexUnsupported(f"not a regular expression Python can parse ({e})") from None
        raise RegexUnsupported("the inline flag (?u) is not supported: gad's classes \\d, \\w, \\s are ASCII") \
            from None
    except Exception as e:  # noqa: BLE001 - re's error types vary across versions
        raise RegexUnsupported(f"not a regular expression Python can parse ({e})") from None
    if parsed.state.flags & ~(_sc.SRE_FLAG_UNICODE | _sc.SRE_FLAG_ASCII):
        raise RegexUnsupported("inline flags such as (?i) are not supported")
    if _names_surrogate(parsed):
        raise RegexUnsupported("a surrogate code point (U+D800-U+DFFF) as a character or a class bound: "
                               "UTF-8 text cannot hold one (a pair such as \\uD83D\\uDE00 is one character in "
                               "JavaScript but two in Python's re, which jsonschema uses: write the character "
                               "itself)")
    return list(parsed)


def _names_surrogate(items: Any) -> bool:
    """Does a parsed pattern name a surrogate code point as a literal or a range bound?"""
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2):
            continue
        op, av = item
        if op in (_sc.LITERAL, _sc.NOT_LITERAL) and isinstance(av, int) and 0xD800 <= av <= 0xDFFF:
            return True
        if op is _sc.RANGE and any(0xD800 <= x <= 0xDFFF for x in av):
            return True
        subs = av if isinstance(av, (list, tuple)) else ()
        for sub in subs:
            if isinstance(sub, (list, _sp.SubPattern)) and _names_surrogate(sub):
                return True
            if isinstance(sub, tuple) and _names_surrogate([sub]):
                return True
    return False


def _is_at(item: Any, names: tuple[str, ...]) -> bool:
    return item[0] is _sc.AT and str(item[1]) in names


def strip_anchors(items: list) -> tuple[list, bool, bool]:
    """``(items, start, end)``: ``items`` without a leading ``^`` / ``\\A`` and a trailing ``$`` /
    ``\\Z``, and whether each was there."""
    start = bool(items) and _is_at(items[0], ("AT_BEGINNING", "AT_BEGINNING_STRING"))
    if start:
        items = items[1:]
    end = bool(items) and _is_at(items[-1], ("AT_END", "AT_END_STRING"))
    if end:
        items = items[:-1]
    return items, start, end


def has_anchor(items: list) -> bool:
    """Whether any item (at any depth) is an anchor."""
    for op, av in items:
        if op is _sc.AT:
            return True
        if op is _sc.BRANCH and any(has_anchor(list(b)) for b in av[1]):
            return True
        if op is _sc.SUBPATTERN and has_anchor(list(av[3])):
            return True
        if op in (_sc.MAX_REPEAT, _sc.MIN_REPEAT) and has_anchor(list(av[2])):
            return True
    return False


def branches(items: list) -> list[list] | None:
    """The alternatives of a top-level ``a|b`` (or of one plain group around it), else None."""
    if len(items) == 1 and items[0][0] is _sc.BRANCH:
        return [list(b) for b in items[0][1][1]]
    return None


def plain_group(items: list) -> list | None:
    """The inside of a pattern that is one capturing / non-capturing group without flags."""
    if len(items) == 1 and items[0][0] is _sc.SUBPATTERN and not items[0][1][1] and not items[0][1][2]:
        return list(items[0][1][3])
    return None


def distribute_branch(items: list) -> list[list] | None:
    """``p (a|b)`` as ``[p a, p b]`` (and ``(a|b) s`` as ``[a s, b s]``) when the alternation is the
    last (first) item and holds an anchor: Python's parser factors a common ``^`` out of
    ``^a$|^b$``, leaving the ``$`` inside the alternatives; None otherwise."""
    if len(items) > 1 and items[-1][0] is _sc.BRANCH and has_anchor([items[-1]]):
        return [items[:-1] + list(b) for b in items[-1][1][1]]
    if len(items) > 1 and items[0][0] is _sc.BRANCH and has_anchor([items[0]]):
        return [list(b) + items[1:] for b in items[0][1][1]]
    return None


def splice_groups(items: list) -> list:
    """``items`` with every top-level plain group (capturing or not, no flags) replaced by its
    inside, recursively: the same language (the parse tree keeps an inner ``a|b`` as one node), and
    anchors written inside a group (``(^[a-z]+$)``) come to the edges."""
    out: list = []
    for it in items:
        if it[0] is _sc.SUBPATTERN and not it[1][1] and not it[1][2]:
            out.extend(splice_groups(list(it[1][3])))
        else:
            out.append(it)
    return out


def _quant(lo: int, hi: Any) -> str:
    if hi is _sc.MAXREPEAT or hi == _sc.MAXREPEAT:
        return "*" if lo == 0 else ("+" if lo == 1 else f"{{{lo},}}")
    if lo == hi:
        return f"{{{lo}}}"
    if lo == 0 and hi == 1:
        return "?"
    return f"{{{lo},{hi}}}"


def _class_ranges(av: Any, d: Dialect) -> Ranges:
    neg = False
    ranges: Ranges = []
    for iop, iav in av:
        n = str(iop)
        if n == "NEGATE":
            neg = True
        elif n == "LITERAL":
            ranges.append((iav, iav))
        elif n == "RANGE":
            ranges.append((iav[0], iav[1]))
        elif n == "CATEGORY" and str(iav) in d.categories:
            ranges.extend(d.categories[str(iav)])
        else:
            raise RegexUnsupported(f"the class item {n} {iav} is not supported")
    ranges = complement(ranges) if neg else norm(ranges)
    if not ranges:
        raise RegexUnsupported("an empty character class")
    return ranges


def translate(items: list, d: Dialect) -> str:
    """Regex text for a sequence of parsed items (anchors anywhere raise).

    Raises:
        RegexUnsupported: see the module docstring.
    """
    return "".join(_item(op, av, d) for op, av in items)


def _item(op: Any, av: Any, d: Dialect) -> str:
    name = str(op)
    if name == "LITERAL":
        return d.char(av)
    if name == "NOT_LITERAL":
        return d.chars(complement([(av, av)]))
    if name == "ANY":
        return d.chars(d.dot)
    if name == "IN":
        return d.chars(_class_ranges(av, d))
    if name == "CATEGORY":
        if str(av) not in d.categories:
            raise RegexUnsupported(f"the character class {av} is not supported")
        return d.chars(d.categories[str(av)])
    if name in ("MAX_REPEAT", "MIN_REPEAT"):
        lo, hi, sub = av
        inner = translate(list(sub), d)
        return f"(?:{inner}){_quant(lo, hi)}" if inner else ""
    if name == "SUBPATTERN":
        _gid, add, dele, sub = av
        if add or dele:
            raise RegexUnsupported("inline flags in a group are not supported")
        return "(?:" + translate(list(sub), d) + ")"
    if name == "BRANCH":
        return "(?:" + "|".join(translate(list(b), d) for b in av[1]) + ")"
    if name == "AT":
        raise RegexUnsupported(f"the anchor {av} inside the pattern (only a leading ^ and a trailing $)")
    raise RegexUnsupported(f"{name} (lookarounds, back-references, conditionals, possessive repeats) "
                           "has no exact automaton")


# ---------------------------------------------------------------------- "$" inside a pattern
def rx_or(alts: Sequence[str | None]) -> str | None:
    """Regex text of the alternation of the ``alts`` that are not None (None when none is)."""
    got = [a for a in alts if a is not None]
    if not got:
        return None
    return got[0] if len(got) == 1 else "(?:" + "|".join(got) + ")"


def end_split(items: list, d: Dialect) -> tuple[str | None, str | None]:
    """``(N, E)`` for a sequence whose anchors are all ``$`` (end of input, ECMA-262 without the
    multiline flag), possibly inside groups, alternations and repeats: N is the regex of the
    strings it matches without passing a ``$``, E of those it matches passing one at its end (what
    follows in the pattern then matches ""); None for no string.  A full match of the pattern is
    then ``N | E``, and a match that must end at the end of the input ``N | E`` as well.

    Raises:
        RegexUnsupported: another anchor, or a construct :func:`translate` refuses.
    """
    n: str | None = ""
    e_alts: list[str | None] = []
    for i, (op, av) in enumerate(items):
        ni, ei = _end_split_item(op, av, d)
        if ei is not None and n is not None and nullable(items[i + 1:]):
            e_alts.append(n + ei)
        n = None if (n is None or ni is None) else n + ni
    return n, rx_or(e_alts)


def _end_split_item(op: Any, av: Any, d: Dialect) -> tuple[str | None, str | None]:
    name = str(op)
    if name == "AT":
        if str(av) in ("AT_END", "AT_END_STRING"):
            return None, ""
        raise RegexUnsupported(f"the anchor {av} inside the pattern (only a leading ^; $ anywhere)")
    if not has_anchor([(op, av)]):
        return _item(op, av, d), None
    if name == "SUBPATTERN":
        if av[1] or av[2]:
            raise RegexUnsupported("inline flags in a group are not supported")
        n, e = end_split(list(av[3]), d)
        return (None if n is None else f"(?:{n})"), (None if e is None else f"(?:{e})")
    if name == "BRANCH":
        parts = [end_split(list(b), d) for b in av[1]]
        return rx_or([p[0] for p in parts]), rx_or([p[1] for p in parts])
    if name in ("MAX_REPEAT", "MIN_REPEAT"):
        lo, hi, sub = av
        ns, es = end_split(list(sub), d)
        unbounded = hi is _sc.MAXREPEAT or hi == _sc.MAXREPEAT
        if ns is None:
            n = "" if lo == 0 else None
        else:
            n = f"(?:{ns}){_quant(lo, hi)}" if ns else ""
        if es is None or hi == 0:
            return n, None
        # the k-th copy passes the $, the k - 1 before it do not, the ones after it match ""
        first = 0 if nullable(list(sub)) else max(lo - 1, 0)
        last = _sc.MAXREPEAT if unbounded else hi - 1
        if not ns:  # (copies before the k-th match "" only, or nothing)
            return n, es if first == 0 else None
        if not unbounded and last < first:
            return n, None
        return n, (f"(?:{ns}){_quant(first, last)}{es}" if (unbounded or last > 0) else es)
    return _item(op, av, d), None


# ---------------------------------------------------------------------- the empty string
def nullable(items: list) -> bool:
    """Whether the item sequence matches the empty string (anchors count as empty)."""
    return all(_nullable_item(op, av) for op, av in items)


def _nullable_item(op: Any, av: Any) -> bool:
    name = str(op)
    if name in ("MAX_REPEAT", "MIN_REPEAT"):
        return av[0] == 0 or nullable(list(av[2]))
    if name == "SUBPATTERN":
        return nullable(list(av[3]))
    if name == "BRANCH":
        return any(nullable(list(b)) for b in av[1])
    return name == "AT"


def non_empty(items: list, d: Dialect) -> str | None:
    """Regex for the non-empty strings the item sequence matches (None: it matches none)."""
    if not items:
        return None
    (op, av), rest = items[0], items[1:]
    alts = []
    a = _non_empty_item(op, av, d)
    if a is not None:
        alts.append(a + translate(rest, d))
    if _nullable_item(op, av):
        b = non_empty(rest, d)
        if b is not None:
            alts.append(b)
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def _non_empty_item(op: Any, av: Any, d: Dialect) -> str | None:
    if not _nullable_item(op, av):
        return _item(op, av, d)
    name = str(op)
    if name == "AT":  # (refused as translate refuses it: read as "" it would change the language)
        return _item(op, av, d)
    if name == "SUBPATTERN":
        if av[1] or av[2]:
            raise RegexUnsupported("inline flags in a group are not supported")
        return non_empty(list(av[3]), d)
    if name == "BRANCH":
        alts = [x for x in (non_empty(list(b), d) for b in av[1]) if x is not None]
        return "(?:" + "|".join(alts) + ")" if alts else None
    lo, hi, sub = av  # a nullable repeat: X{lo,hi} = X{0,hi} minus "" = NE(X) X{0,hi-1}
    first = non_empty(list(sub), d)
    if first is None or hi == 0:
        return None
    rest = "" if hi == 1 else f"(?:{translate(list(sub), d)})" + (
        "*" if hi is _sc.MAXREPEAT or hi == _sc.MAXREPEAT else f"{{0,{hi - 1}}}")
    return f"(?:{first}){rest}"
