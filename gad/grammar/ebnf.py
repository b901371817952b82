"""GBNF / EBNF (llama.cpp, transformers-CFG dialect) -> an equivalent Lark grammar.

The dialect (as in ``../shared/data/gad-bench/**/*.ebnf`` and llama.cpp's ``grammars/README.md``)::

    name ::= alternatives          # a rule; the start symbol is ``root``
    "lit\\n"  [a-z0-9_]  [^"\\\\]  .   # literals (escapes \\n \\r \\t \\\\ \\" \\xHH \\uHHHH ...), classes, any char
    ( ... )  x*  x+  x?  x{m}  x{m,}  x{m,n}  a | b

GBNF is a *character-level* context-free grammar, while Lark's lexer is greedy over terminals, so
turning every literal into one Lark terminal changes the language (``("a" | "aa") "ab"`` would lose
``"aab"``).  :func:`to_lark` therefore converts at character level: the characters of all literals
and classes are partitioned into disjoint *atoms* (sets of characters that every literal / class
either wholly contains or wholly excludes); each atom is one single-character Lark terminal
``C_<i>``, a literal becomes the sequence of its characters' atoms and a class the alternation of
its atoms.  Every character of an input then lexes to exactly one terminal, so
L(Lark) = L(GBNF) exactly.  EBNF operators are kept as Lark's own (``* + ?`` and groups), so the
result is LALR(1) whenever Lark's expansion of the GBNF rules is.

Rule names are mapped to Lark rule names (``ntString`` -> ``nt_string``; ``root`` stays ``root``);
:attr:`EbnfGrammar.lark_names` holds the mapping.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import cast

from gad.errors import GrammarSyntaxError, UndefinedSymbolError, UnsupportedGrammarError

START = "root"
MAX_CODEPOINT = 0x10FFFF

# --- AST ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lit:
    """A string literal (possibly empty: the empty string)."""

    text: str


@dataclass(frozen=True)
class CharClass:
    """A character class: ``ranges`` are inclusive code-point intervals; ``negated`` for ``[^...]``.

    ``.`` (any character) is ``CharClass((), negated=True)``.
    """

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False

    def intervals(self) -> list[tuple[int, int]]:
        """The matched characters as sorted, disjoint, non-adjacent inclusive intervals."""
        merged = _merge(self.ranges)
        if not self.negated:
            return merged
        out: list[tuple[int, int]] = []
        lo = 0
        for a, b in merged:
            if a > lo:
                out.append((lo, a - 1))
            lo = b + 1
        if lo <= MAX_CODEPOINT:
            out.append((lo, MAX_CODEPOINT))
        return out


@dataclass(frozen=True)
class Ref:
    """A reference to the rule ``name`` (``line``/``column``: 1-based position of the use)."""

    name: str
    line: int = 0
    column: int = 0


@dataclass(frozen=True)
class Seq:
    """Concatenation (an empty ``items`` is the empty string)."""

    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Alt:
    """Alternation of two or more options."""

    options: tuple[Expr, ...]


@dataclass(frozen=True)
class Repeat:
    """``item`` repeated ``min``..``max`` times (``max`` None = unbounded): ``? * + {m,n}``."""

    item: Expr
    min: int
    max: int | None


Expr = Lit | CharClass | Ref | Seq | Alt | Repeat


@dataclass
class EbnfGrammar:
    """A parsed GBNF grammar.

    Attributes:
        rules: rule name -> right-hand side, in definition order.
        positions: rule name -> (line, column) of its definition.
        path: the source file (or ``"<string>"``).
        lark_names: GBNF rule name -> Lark rule name (filled by :func:`to_lark`).
        helper_rules: Lark helper rule (``_rep_k``, ``_opt_k``, ``_g_k``) -> the GBNF rule whose
            right-hand side it was written for (filled by :func:`to_lark`; error messages name that rule).
        atom_names: Lark terminal ``C_k`` -> ``C_k /regex/``, the characters it stands for.
    """

    rules: dict[str, Expr]
    positions: dict[str, tuple[int, int]]
    path: str = "<string>"
    lark_names: dict[str, str] = field(default_factory=dict)
    helper_rules: dict[str, str] = field(default_factory=dict)
    atom_names: dict[str, str] = field(default_factory=dict)


def _merge(ranges: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


# --- lexer ----------------------------------------------------------------------------------------

_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v", "0": "\0", "\\": "\\",
                   '"': '"', "'": "'", "[": "[", "]": "]", "-": "-", "^": "^", "/": "/"}
_HEX_LEN = {"x": 2, "u": 4, "U": 8}
_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")
# x{m,n} needs n - m nested optional rules (an LALR parser cannot do with fewer); Lark's analysis
# is quadratic in their number (1,000 took 12 s), so wider ranges are refused at load.
MAX_OPTIONAL_REPEAT = 512
_REPEAT_RE = re.compile(r"\{\s*(\d+)\s*(?:(,)\s*(\d*)\s*)?\}")


@dataclass
class _Tok:
    kind: str  # NAME DEF STR CLASS DOT ( ) | * + ? REPEAT EOF
    value: object
    line: int
    col: int


class _Lexer:
    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self.pos = 0
        self.line = 1
        self.line_start = 0

    def error(self, msg: str, pos: int | None = None) -> GrammarSyntaxError:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return GrammarSyntaxError(msg, path=self.path, line=line, column=col)

    def _where(self, pos: int) -> tuple[int, int]:
        return self.text.count("\n", 0, pos) + 1, pos - (self.text.rfind("\n", 0, pos) + 1) + 1

    def _escape(self) -> str:
        # self.pos is at the backslash
        text = self.text
        start = self.pos
        if self.pos + 1 >= len(text):
            raise self.error("unterminated escape sequence", start)
        c = text[self.pos + 1]
        if c in _HEX_LEN:
            n = _HEX_LEN[c]
            digits = text[self.pos + 2:self.pos + 2 + n]
            if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"bad \\{c} escape: expected {n} hex digits", start)
            cp = int(digits, 16)
            if cp > MAX_CODEPOINT:
                raise self.error(f"escape \\{c}{digits} is beyond U+10FFFF", start)
            self.pos += 2 + n
            return chr(cp)
        if c in _SIMPLE_ESCAPES:
            self.pos += 2
            return _SIMPLE_ESCAPES[c]
        raise self.error(f"unknown escape sequence \\{c}", start)

    def tokens(self) -> list[_Tok]:
        text = self.text
        out: list[_Tok] = []
        n = len(text)
        while True:
            # skip blanks and comments
            while self.pos < n:
                c = text[self.pos]
                if c in " \t\r\n\f\v":
                    self.pos += 1
                elif c == "#":
                    nl = text.find("\n", self.pos)
                    self.pos = n if nl < 0 else nl
                else:
                    break
            if self.pos >= n:
                line, col = self._where(self.pos)
                out.append(_Tok("EOF", None, line, col))
                return out
            start = self.pos
            line, col = self._where(start)
            c = text[start]
            if text.startswith("::=", start):
                self.pos += 3
                out.append(_Tok("DEF", None, line, col))
            elif c == '"':
                self.pos += 1
                buf: list[str] = []
                while True:
                    if self.pos >= n or text[self.pos] == "\n":
                        raise self.error("unterminated string literal", start)
                    ch = text[self.pos]
                    if ch == '"':
                        self.pos += 1
                        break
                    if ch == "\\":
                        buf.append(self._escape())
                    else:
                        buf.append(ch)
                        self.pos += 1
                out.append(_Tok("STR", "".join(buf), line, col))
            elif c == "[":
                self.pos += 1
                negated = False
                if self.pos < n and text[self.pos] == "^":
                    negated = True
                    self.pos += 1
                ranges: list[tuple[int, int]] = []
                while True:
                    if self.pos >= n:
                        raise self.error("unterminated character class", start)
                    ch = text[self.pos]
                    if ch == "]":
                        self.pos += 1
                        break
                    lo = self._class_char(start)
                    hi = lo
                    if (self.pos + 1 < n and text[self.pos] == "-" and text[self.pos + 1] != "]"):
                        self.pos += 1
                        hi = self._class_char(start)
                        if ord(hi) < ord(lo):
                            raise self.error(f"bad range {lo!r}-{hi!r} in character class", start)
                    ranges.append((ord(lo), ord(hi)))
                cls = CharClass(tuple(_merge(ranges)), negated)
                if not cls.intervals():
                    raise UnsupportedGrammarError("character class matches no character", path=self.path,
                                                  line=line, column=col)
                out.append(_Tok("CLASS", cls, line, col))
            elif c in "()|*+?.":
                self.pos += 1
                out.append(_Tok("DOT" if c == "." else c, None, line, col))
            elif c == "{":
                m = _REPEAT_RE.match(text, start)
                if not m:
                    raise self.error("bad repetition: expected {m}, {m,} or {m,n}", start)
                lo_n = int(m.group(1))
                hi_n: int | None = lo_n
                if m.group(2):
                    hi_n = int(m.group(3)) if m.group(3) else None
                if hi_n is not None and hi_n < lo_n:
                    raise self.error(f"bad repetition {{{lo_n},{hi_n}}}: max < min", start)
                if hi_n is not None and hi_n - lo_n > MAX_OPTIONAL_REPEAT:
                    raise UnsupportedGrammarError(
                        f"repetition {{{lo_n},{hi_n}}} allows {hi_n - lo_n} optional copies; at most "
                        f"{MAX_OPTIONAL_REPEAT} are supported (each is a rule of the LALR parser)",
                        path=self.path, line=line, column=col)
                self.pos = m.end()
                out.append(_Tok("REPEAT", (lo_n, hi_n), line, col))
            else:
                m = _NAME_RE.match(text, start)
                if not m:
                    raise self.error(f"unexpected character {c!r}", start)
                self.pos = m.end()
                out.append(_Tok("NAME", m.group(0), line, col))

    def _class_char(self, start: int) -> str:
        if self.text[self.pos] == "\\":
            return self._escape()
        if self.text[self.pos] == "\n":
            raise self.error("unterminated character class", start)
        ch = self.text[self.pos]
        self.pos += 1
        return ch


# --- parser ---------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, toks: list[_Tok], path: str) -> None:
        self.toks = toks
        self.i = 0
        self.path = path

    def peek(self, k: int = 0) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def error(self, msg: str, tok: _Tok) -> GrammarSyntaxError:
        return GrammarSyntaxError(msg, path=self.path, line=tok.line, column=tok.col)

    def grammar(self) -> EbnfGrammar:
        rules: dict[str, Expr] = {}
        positions: dict[str, tuple[int, int]] = {}
        while self.peek().kind != "EOF":
            name_tok = self.peek()
            if name_tok.kind != "NAME" or self.peek(1).kind != "DEF":
                what = "'::='" if name_tok.kind == "NAME" else "a rule name"
                bad = self.peek(1) if name_tok.kind == "NAME" else name_tok
                raise self.error(f"expected {what}", bad)
            self.i += 2
            name = str(name_tok.value)
            if name in rules:
                raise self.error(f"rule {name!r} defined more than once", name_tok)
            rules[name] = self.alternatives()
            positions[name] = (name_tok.line, name_tok.col)
        return EbnfGrammar(rules, positions, self.path)

    def _seq_ends(self) -> bool:
        t = self.peek()
        return (t.kind in ("EOF", ")", "|") or (t.kind == "NAME" and self.peek(1).kind == "DEF"))

    def alternatives(self) -> Expr:
        options = [self.sequence()]
        while self.peek().kind == "|":
            self.i += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self) -> Expr:
        items: list[Expr] = []
        while not self._seq_ends():
            items.append(self.item())
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def item(self) -> Expr:
        t = self.peek()
        if t.kind == "NAME":
            self.i += 1
            e: Expr = Ref(str(t.value), t.line, t.col)
        elif t.kind == "STR":
            self.i += 1
            e = Lit(str(t.value))
        elif t.kind == "CLASS":
            self.i += 1
            assert isinstance(t.value, CharClass)
            e = t.value
        elif t.kind == "DOT":
            self.i += 1
            e = CharClass((), negated=True)
        elif t.kind == "(":
            self.i += 1
            e = self.alternatives()
            if self.peek().kind != ")":
                raise self.error("expected ')'", self.peek())
            self.i += 1
        else:
            raise self.error(f"unexpected {t.kind!r}", t)
        while True:
            t = self.peek()
            if t.kind == "*":
                e = Repeat(e, 0, None)
            elif t.kind == "+":
                e = Repeat(e, 1, None)
            elif t.kind == "?":
                e = Repeat(e, 0, 1)
            elif t.kind == "REPEAT":
                lo, hi = cast("tuple[int, int | None]", t.value)
                e = Repeat(e, lo, hi)
            else:
                return e
            self.i += 1


def _refs(e: Expr) -> list[Ref]:
    if isinstance(e, Ref):
        return [e]
    if isinstance(e, Seq):
        return [r for x in e.items for r in _refs(x)]
    if isinstance(e, Alt):
        return [r for x in e.options for r in _refs(x)]
    if isinstance(e, Repeat):
        return _refs(e.item)
    return []


def parse_ebnf(text: str, path: str = "<string>") -> EbnfGrammar:
    """Parse GBNF text into an :class:`EbnfGrammar`.

    Raises:
        GrammarSyntaxError: bad syntax (names path:line:column).
        UndefinedSymbolError: a rule used but not defined, or no ``root`` rule (``symbol`` names it).
        UnsupportedGrammarError: a character class that matches no character.
    """
    g = _Parser(_Lexer(text, path).tokens(), path).grammar()
    for rhs in g.rules.values():
        for r in _refs(rhs):
            if r.name not in g.rules:
                raise UndefinedSymbolError(f"rule {r.name!r} is used but not defined", symbol=r.name,
                                           path=path, line=r.line, column=r.column)
    if START not in g.rules:
        raise UndefinedSymbolError(f"no {START!r} rule (the GBNF start symbol)", symbol=START, path=path,
                                   line=1 if text else None, column=1 if text else None)
    return g


# --- conversion -----------------------------------------------------------------------------------

_REGEX_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _!\"#%&',:;<=>@`~")


_REGEX_META = set("\\()[]{}.*+?|^$-/")


def _re_char(cp: int) -> str:
    # Lark evaluates \xHH / \uHHHH escapes inside /regexps/ before Python's re sees them, so a
    # metacharacter must be backslash-escaped, never written as \xHH.
    ch = chr(cp)
    if ch in _REGEX_SAFE:
        return ch
    if ch in _REGEX_META:
        return "\\" + ch
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _atom_regex(intervals: list[tuple[int, int]]) -> str:
    """A regex for one atom. Large sets are written as a negated class: interegular (which builds the
    mask engine's DFAs) expands positive ranges character by character, but handles ``[^...]``
    cheaply through its "anything else" symbol."""
    if len(intervals) == 1 and intervals[0][0] == intervals[0][1]:
        return _re_char(intervals[0][0])
    size = sum(b - a + 1 for a, b in intervals)
    if size > (MAX_CODEPOINT + 1) // 2:
        complement = CharClass(tuple(intervals), negated=True).intervals()
        if not complement:
            return "(?:\\x00|[^\\x00])"  # every character
        return "[^" + _class_body(complement) + "]"
    return "[" + _class_body(intervals) + "]"


def _class_body(intervals: list[tuple[int, int]]) -> str:
    parts = []
    for a, b in intervals:
        if a == b:
            parts.append(_re_char(a))
        elif b == a + 1:
            parts.append(_re_char(a) + _re_char(b))
        else:
            parts.append(f"{_re_char(a)}-{_re_char(b)}")
    return "".join(parts)


def _lark_name(name: str, taken: set[str]) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    s = re.sub(r"[^a-z0-9_]", "_", s).strip("_") or "r"
    if not s[0].isalpha():
        s = "r_" + s
    base, k = s, 2
    while s in taken:
        s = f"{base}_{k}"
        k += 1
    taken.add(s)
    return s


class _Converter:
    MAX_EXPANSIONS = 64  # hoist groups into helper rules when Lark's inline expansion would exceed this
    MAX_INLINE_REPEAT = 8  # larger x{m,n} counts are written with helper rules (see emit)
    MAX_REPEAT_EXPANSIONS = 256  # copies of a group that would expand to more are written as a chain
    MAX_CHAIN_REPEAT = 512  # x{m} with m above this: O(log m) helper rules instead of a chain of m

    def __init__(self, g: EbnfGrammar) -> None:
        self.g = g
        taken: set[str] = {START}
        names = {START: START}
        for name in g.rules:
            if name != START:
                names[name] = _lark_name(name, taken)
        g.lark_names = names
        self.names = names
        self.helpers: list[str] = []
        self.helper_by_body: dict[str, str] = {}
        self.current = START  # the GBNF rule being written (helpers are credited to it)
        self._build_atoms()

    # character partition
    def _collect_sets(self, e: Expr, out: set[tuple[tuple[int, int], ...]]) -> None:
        if isinstance(e, Lit):
            for ch in e.text:
                out.add(((ord(ch), ord(ch)),))
        elif isinstance(e, CharClass):
            out.add(tuple(e.intervals()))
        elif isinstance(e, Seq):
            for x in e.items:
                self._collect_sets(x, out)
        elif isinstance(e, Alt):
            for x in e.options:
                self._collect_sets(x, out)
        elif isinstance(e, Repeat):
            self._collect_sets(e.item, out)

    def _build_atoms(self) -> None:
        sets: set[tuple[tuple[int, int], ...]] = set()
        for rhs in self.g.rules.values():
            self._collect_sets(rhs, sets)
        set_list = sorted(sets)
        bounds = sorted({a for s in set_list for a, _ in s} | {b + 1 for s in set_list for _, b in s})
        # membership signature of each elementary segment [bounds[i], bounds[i+1])
        sig_of_seg: list[frozenset[int]] = []
        seg_members: list[list[int]] = [[] for _ in range(max(len(bounds) - 1, 0))]
        for sid, s in enumerate(set_list):
            for a, b in s:
                i = bisect.bisect_left(bounds, a)
                while i < len(bounds) - 1 and bounds[i] <= b:
                    seg_members[i].append(sid)
                    i += 1
        sig_of_seg = [frozenset(m) for m in seg_members]
        atoms: dict[frozenset[int], list[tuple[int, int]]] = {}
        for i, sig in enumerate(sig_of_seg):
            if sig:
                atoms.setdefault(sig, []).append((bounds[i], bounds[i + 1] - 1))
        ordered = sorted(atoms.items(), key=lambda kv: kv[1][0])
        self.atom_intervals: list[list[tuple[int, int]]] = [_merge(iv) for _, iv in ordered]
        self.atoms_of_set: dict[tuple[tuple[int, int], ...], list[int]] = {
            s: [k for k, (sig, _) in enumerate(ordered) if sid in sig] for sid, s in enumerate(set_list)}
        self.starts = [iv[0][0] for iv in self.atom_intervals]

    def atom_of_char(self, ch: str) -> int:
        return self.atoms_of_set[((ord(ch), ord(ch)),)][0]

    # expression emission
    def count(self, e: Expr) -> int:
        """Number of BNF alternatives Lark's inline expansion of ``e`` produces."""
        if isinstance(e, Seq):
            n = 1
            for x in e.items:
                n *= self.count(x)
            return n
        if isinstance(e, Alt):
            return sum(self.count(x) for x in e.options)
        if isinstance(e, Repeat):
            return self._repeat_plan(e)[1]
        if isinstance(e, CharClass):
            n = len(self.atoms_of_set[tuple(e.intervals())])
            return n if n <= self.MAX_EXPANSIONS else 1
        return 1

    def _repeat_plan(self, e: Repeat) -> tuple[bool, int]:
        """``(inline, n)`` for ``e``: whether its copies are written inline (else as helper chains,
        see :meth:`emit`), and the number of alternatives Lark's expansion of what is written makes
        (one copy counting 1 where the item is hoisted into a helper rule)."""
        big, cap = self.MAX_INLINE_REPEAT, 1 << 40
        c = 1 if self._is_atomic(e.item) else self.count(e.item)
        if c > self.MAX_EXPANSIONS:
            c = 1
        lo, hi = e.min, e.max
        if lo > big:
            return False, 1
        if hi is None:  # x{lo-1} x+ (x+ and x* are rules of Lark's own)
            n = 2 if lo == 0 else min(c ** (lo - 1), cap)
        else:  # x{lo} (x (x ...)?)?  inline, or an opt_k helper chain past MAX_INLINE_REPEAT
            opt = sum(min(c ** k, cap) for k in range(hi - lo + 1)) if hi - lo <= big else 1
            n = min(c ** lo * opt, cap)
        # copies naming rules expand by the rules' own alternatives in Lark's LR(0) item sets: 775
        # inline alternatives of ((root r1) | [...]){2,4} took Lark's LALR analysis minutes
        if n > (self.MAX_EXPANSIONS if _names_rule(e.item) else self.MAX_REPEAT_EXPANSIONS):
            return False, 2 if (lo == 0 and hi is None) else 1
        return True, n

    def helper(self, prefix: str, body: str) -> str:
        if body in self.helper_by_body:
            return self.helper_by_body[body]
        name = f"_{prefix}_{len(self.helpers)}"
        self.g.helper_rules[name] = self.current
        self.helpers.append(f"{name}: {body}")
        self.helper_by_body[body] = name
        return name

    def term(self, k: int) -> str:
        return f"C_{k}"

    def emit(self, e: Expr) -> str:
        """Lark expansion text for ``e`` (an alternation is parenthesised; empty string -> "")."""
        if isinstance(e, Lit):
            return " ".join(self.term(self.atom_of_char(ch)) for ch in e.text)
        if isinstance(e, CharClass):
            ks = self.atoms_of_set[tuple(e.intervals())]
            if len(ks) == 1:
                return self.term(ks[0])
            if len(ks) > self.MAX_EXPANSIONS:
                return self.helper("cls", " | ".join(self.term(k) for k in ks))
            return "(" + " | ".join(self.term(k) for k in ks) + ")"
        if isinstance(e, Ref):
            return self.names[e.name]
        if isinstance(e, Alt):
            return "(" + " | ".join(self.emit(x) for x in e.options) + ")"
        if isinstance(e, Seq):
            items = list(e.items)
            total = self.count(e)
            parts = []
            for x in items:
                if total > self.MAX_EXPANSIONS and self.count(x) > 1:
                    parts.append(self.hoist(x))
                else:
                    parts.append(self.emit(x))
            return " ".join(p for p in parts if p)
        if isinstance(e, Repeat):
            inner = self.emit(e.item)
            if not inner:  # repetition of the empty string
                return ""
            lo, hi = e.min, e.max
            big = self.MAX_INLINE_REPEAT
            inline = self._repeat_plan(e)[0]
            if not self._is_atomic(e.item):
                inner = f"({inner})" if self.count(e.item) <= self.MAX_EXPANSIONS else self.hoist(e.item)
            # the optional copies after the mandatory ones: up to k more as a chain of helper rules
            # opt_k: (x opt_{k-1})?  (linear size; nested inline, Lark expands k alternatives of up
            # to k symbols each, times the item's count per level); unbounded: Lark's x*
            if hi is None:
                tail = f"{inner}*"
            elif hi - lo > big or (hi > lo and not inline):
                tail = self.helper("opt", f"({inner})?")
                for _ in range(hi - lo - 1):
                    tail = self.helper("opt", f"({inner} {tail})?")
            elif hi > lo:
                tail = f"({inner})?"
                for _ in range(hi - lo - 1):
                    tail = f"({inner} {tail})?"
            else:
                tail = ""
            if inline:
                if hi is None and lo > 0:
                    return " ".join([inner] * (lo - 1) + [f"{inner}+"])
                return " ".join([inner] * lo + ([tail] if tail else []))
            # More copies than are written inline (Lark's LALR analysis is quadratic in a rule's
            # length: "a"{500} inline took 40 s), or copies whose inline expansion multiplies
            # (("a"{1,3} "b"{1,3}){7}, [0-9a-f]{8} beside "deadbeef": millions of rules): a right-
            # linear chain rep_k: x rep_{k-1}, rep_1: x tail.  Linear in lo, and the parser reduces
            # the chain only after its last copy, so it adds no LALR conflict where copies written
            # inline have none (helper rules for x{2^i} forced a reduction every 2^i copies).
            if lo == 0:
                return tail
            if lo > self.MAX_CHAIN_REPEAT:
                # past the chain's limit: x{lo} as O(log lo) helper rules x{2^i} (compact, but the
                # parser must reduce each, which can conflict with an alternative sharing a prefix)
                parts, power, n = [], inner, lo
                while n:
                    if n & 1:
                        parts.append(power)
                    n >>= 1
                    if n:
                        power = self.helper("rep", f"{power} {power}")
                return " ".join(parts + [tail]).rstrip()
            rep = self.helper("rep", f"{inner} {tail}".rstrip())
            for _ in range(lo - 1):
                rep = self.helper("rep", f"{inner} {rep}")
            return rep
        raise TypeError(f"unknown expression {e!r}")

    def _is_atomic(self, e: Expr) -> bool:
        if isinstance(e, Ref):
            return True
        if isinstance(e, CharClass):
            return len(self.atoms_of_set[tuple(e.intervals())]) == 1
        return isinstance(e, Lit) and len(e.text) == 1

    def hoist(self, e: Expr) -> str:
        body = self.emit_top(e)
        return self.helper("g", body if body.strip() else "")

    def emit_top(self, e: Expr) -> str:
        if isinstance(e, Alt):
            opts = []
            for x in e.options:
                t = self.emit(x)
                opts.append(t)
            return " | ".join(opts)
        return self.emit(e)

    def convert(self) -> str:
        lines = ["// converted from GBNF by gad.ebnf (character-level atoms C_i)",
                 f"// start: {START}", ""]
        for name, rhs in self.g.rules.items():
            self.current = name
            lines.append(f"{self.names[name]}: {self.emit_top(rhs)}")
        body = lines + self.helpers
        body.append("")
        for k, iv in enumerate(self.atom_intervals):
            body.append(f"{self.term(k)}: /{_atom_regex(iv)}/")
            self.g.atom_names[self.term(k)] = f"{self.term(k)} /{_atom_regex(iv)}/"
        return "\n".join(body) + "\n"


def _names_rule(e: Expr) -> bool:
    """Does ``e`` refer to a rule (anywhere inside)?"""
    if isinstance(e, Ref):
        return True
    if isinstance(e, Seq):
        return any(_names_rule(x) for x in e.items)
    if isinstance(e, Alt):
        return any(_names_rule(x) for x in e.options)
    if isinstance(e, Repeat):
        return _names_rule(e.item)
    return False


def to_lark(g: EbnfGrammar) -> str:
    """Convert a parsed GBNF grammar to equivalent Lark text (start rule ``root``).

    Fills ``g.lark_names`` (GBNF rule name -> Lark rule name).  L(Lark) = L(GBNF) exactly: see the
    module docstring for the character-atom construction.
    """
    return _Converter(g).convert()


def convert(text: str, path: str = "<string>") -> tuple[str, EbnfGrammar]:
    """Parse GBNF ``text`` and convert it: returns (Lark text, parsed grammar). Errors as :func:`parse_ebnf`."""
    g = parse_ebnf(text, path)
    return to_lark(g), g
