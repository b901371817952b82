"""JSON Schema -> Lark grammar for gad's LALR(1) + contextual-lexer engine (issue 11).

:func:`convert` turns a JSON Schema (a dict / bool, JSON text, or a ``.json`` file) into Lark text
whose language is exactly the set of JSON texts (in gad's spelling, below) whose value the schema
validates.  Anything gad cannot express exactly raises :class:`gad.errors.UnsupportedSchemaError`
naming the JSON pointer and the keyword; ``lenient=True`` drops such keywords instead and lists them
in a :class:`UserWarning` (and in :attr:`SchemaGrammar.dropped`).

Keywords (draft 2020-12, plus the draft-04/06/07/2019-09 spellings):

* ``type`` (incl. unions), ``enum``, ``const``: an ``enum`` / ``const`` node is the finite set of
  its values that the whole node validates (checked with the ``jsonschema`` package, so every
  sibling keyword is honoured exactly).
* objects: ``properties``, ``required``, ``additionalProperties`` (true by default as the spec says;
  ``strict=True`` makes an absent one false).  **Property order**: properties are emitted in the
  order the schema writes them, then required names that ``properties`` does not list (in
  ``required`` order), then additional properties in any order.  An additional key never spells a
  listed property (the key terminal is the complement of the listed names), so a value cannot dodge
  its property's schema.  ``patternProperties``: one key terminal per pattern (a search over the
  key's canonical spelling), exact when the patterns are pairwise disjoint (checked on the
  automata; overlapping ones are refused); a listed name a pattern matches takes both schemas
  (``allOf``), and keys no pattern matches fall to ``additionalProperties`` through a terminal at
  Lark priority -1 (tried after the pattern terminals, so it only takes what they do not).
  ``minProperties`` / ``maxProperties``: the object rules count members (one rule per position
  and count, counts up to 64).  Listed properties appear once each; where additional or pattern
  keys may repeat a key, ``minProperties`` over 1 is refused (two members could be one property)
  and ``maxProperties`` refuses texts that repeat a key (the value's own spelling has each key
  once).  ``dependentRequired`` / ``dependentSchemas`` (and draft-04..07 ``dependencies``, each
  only under the drafts whose validator defines it; an annotation otherwise) are the unions
  "``A`` absent, or ``A`` present with the names required / the schema", built as below.
* arrays: ``items``, ``prefixItems`` (and draft-04..2019 ``items: [...]`` + ``additionalItems``),
  ``minItems``, ``maxItems``, ``uniqueItems: false``.
* ``anyOf``, ``oneOf``, ``allOf``: ``allOf`` is merged into one schema; sibling keywords are
  distributed into ``anyOf`` / ``oneOf`` branches.  String, number and literal branches are merged
  into one terminal per kind; at most one branch may admit arrays (an unconstrained array branch
  absorbs the others under ``anyOf``).  Object branches (an unconstrained one absorbs the others
  under ``anyOf``) become the alternatives ``o_1 | o_2 | ...`` when that is exact and LALR(1):
  every branch requires a property, and for each pair the keys they can write first (properties up
  to the first required one, in order) are disjoint, or both write the same required key first and
  its value schemas are disjoint (a discriminator such as ``"kind": {"const": ...}``); under
  ``oneOf`` each pair must also be disjoint as sets of values (a discriminator, or a key one branch
  requires and the other forbids).  Otherwise (branches sharing leading keys, or requiring none)
  the union is one deterministic automaton over key sequences (a subset construction over the
  branches' positions, :meth:`_Gen.object_product`): a key is written once and leads every branch
  that can take it on; after a shared key the branches must give its value the same schema, or
  disjoint ones (each then leads on to its own branches); a state left with one branch goes on in
  that branch's rules.  Each branch keeps its own property order; :meth:`dumps` writes
  an object in the order of the first branch that validates it.  ``oneOf`` is exact when its
  branches are pairwise disjoint (checked on the automata for strings and numbers, by kind
  otherwise); overlapping branches raise
  ``UnsupportedSchemaError(keyword="oneOf")`` (``lenient``: treated as ``anyOf``), unless each
  branch can be negated (:func:`_not_schema`: ``required``, ``type``, ``not`` and ``anyOf`` /
  ``allOf`` of those): then branch i becomes "B_i and not B_j for every j != i", disjoint by
  construction (:meth:`_Gen.split_one_of`).
* ``$ref`` to ``#...`` JSON pointers (``$defs``, ``definitions``, any local path), recursive refs;
  siblings of ``$ref`` are ignored for drafts 04-07 (as those drafts say) and merged otherwise.
* strings: ``pattern`` (a search, not a full match, as the spec says; ECMA-262 classes ``\\d`` =
  ``[0-9]``, ``\\w`` = ``[A-Za-z0-9_]``, ``\\s`` = ECMA white space, ``.`` excludes line
  terminators), ``minLength`` / ``maxLength`` (code points; a bound over 64 is a chain of
  chunk terminals of 64 to 256 units, one rule per chunk, so no terminal needs thousands of
  automaton states; bounds over 131,072 are refused), ``format``: date, time, date-time
  (RFC 3339, with month lengths and leap years), email (dot-atom ``@`` hostname), uri (RFC 3986
  scheme ``:`` then URI characters / %-escapes), uuid, ipv4, ipv6 (RFC 4291 text forms), hostname
  (RFC 1123 labels of 1-63 characters; the 253-character total is not enforced), int32 / int64 on
  integers, and on numbers for the values written as integers (a fraction or an exponent makes a
  float, which the format leaves alone, as ``jsonschema`` reads it).  Two or three of pattern / length / format on one string are an automaton
  intersection: a pattern ``C*`` / ``C+`` over a class of plain characters under a length is
  ``C{lo,hi}`` (chunked like a length); otherwise the product automaton is minimised and written
  back as one regex (state elimination, re-parsed and checked equivalent) where it has at most 400
  states and its regex 20,000 characters, else written as the terminal ``"(?=A")B"``, which Python's
  ``re`` and gad's automata both read as the intersection (:func:`gad.grammar.automata.meet_parts`),
  where that automaton fits gad's budget for one terminal (10,000 states), else refused.  The formats the JSON Schema drafts define but gad does not implement (duration,
  idn-email, idn-hostname, uri-reference, iri, iri-reference, uri-template, json-pointer,
  relative-json-pointer, regex; draft-03's host-name, ip-address, color, ... under a draft-03
  ``$schema``) are refused; any other name (``password``, ``byte``, ``topic`` ...) is unknown to
  the spec and, as draft 2020-12 section 7.2 says, an annotation that validators (``jsonschema``
  included) ignore, so it constrains nothing.
* numbers: integer ranges (``minimum``, ``maximum``, exclusive bounds in both spellings) are exact
  regular languages.  ``number`` ranges with integer-valued bounds are exact over the spelling
  without exponent (``-?int(.digits)?``); an unbounded ``number`` takes every RFC 8259 number.
  Non-integer bounds and ``multipleOf`` (``m = a * 10^-d``: the digits up to d places read as an
  integer are divisible by a, later digits 0; refused where a's automaton, with the bounds, is over
  the budget for one terminal's regex: a over 1000, and among 1-100 all but 1-6, 8, 10, 15, 20, 25,
  30, 40, 50, 60, 75, 80, 100) are exact in decimal arithmetic (the
  spec's "division results in an integer"; ``jsonschema`` divides binary floats, which can differ,
  e.g. for 0.07 and multipleOf 0.01) over the spelling without exponent, as an intersection of
  automata like strings'.  :meth:`SchemaGrammar.dumps` writes floats without exponent.
* ``not``: rewritten as the schema of the values it admits where the negated schema is one of the
  shapes :func:`_negation` negates (a ``type``, ``required``, ``properties`` of such shapes, ``enum`` /
  ``const`` of strings, ``null`` and booleans, ``pattern`` (the strings it finds no match in: the
  lookahead difference ``"(?!P")..."`` where the complement is too large to write back as a regex),
  and ``$ref`` / ``anyOf`` / ``allOf`` / ``not`` of those); ``if`` / ``then`` / ``else`` is the disjoint union "(``if`` and ``then``) or (not ``if``
  and ``else``)" (:meth:`_Gen.conditional`), so ``if`` must be such a shape unless ``else`` is
  ``false`` (a rewrite spelling out over 64 alternatives is refused).
* refused (``UnsupportedSchemaError``): overlapping ``patternProperties``, ``propertyNames``,
  ``minProperties`` over 1 with additional keys, ``unevaluated*``, ``contains``, ``uniqueItems: true``,
  ``not`` / ``if`` of any other shape, ``$dynamicRef``, ``$recursiveRef``, remote ``$ref``, formats the spec defines that gad does not
  implement, draft-03 ``extends`` / ``disallow`` / ``divisibleBy`` (under a draft-03
  ``$schema``; annotations otherwise).  Every other key is an annotation (title, description,
  ``x-...`` extensions and any keyword no draft defines: validators ignore them).
* each draft reads its own keywords: one the schema's draft (its ``$schema``; 2020-12 when absent)
  does not define is an annotation there, as that draft's ``jsonschema`` validator reads it (draft-03
  has no ``anyOf`` / ``allOf`` / ``oneOf`` / ``not`` / ``const`` / ``multipleOf``, draft-04 no
  ``const``, draft-07 no ``dependentRequired``, 2020-12 no ``dependencies``); draft-03's
  ``"required": true`` inside a property's schema, its one-name ``dependencies`` and type ``"any"``
  are read as draft-03 says (:meth:`_Gen.own_keywords`); the draft is ``jsonschema``'s reading of
  the root's ``$schema`` (an unknown URI is 2020-12), switched by a subschema's own ``$schema``
  for it and what it holds (:func:`_mark_drafts`).

Spelling: strings under a pattern / length / format, ``enum`` / ``const`` strings and object keys
use the canonical spelling of ``json.dumps(..., ensure_ascii=False)`` (non-ASCII raw, only the
required escapes, ``\\u00xx`` lower case), so that every value has exactly one spelling there;
unconstrained strings accept every RFC 8259 spelling.  Integers are written without fraction or
exponent.  :meth:`SchemaGrammar.dumps` writes a value in exactly the spelling and property order
the grammar accepts.

Whitespace: ``"compact"`` (default) allows none; ``"flexible"`` allows RFC 8259 white space
(``[ \\t\\n\\r]*``) between tokens; an ``int`` n allows runs of at most n characters.  White space
is folded into the punctuation terminals (``{``, ``,``, ``:`` ...), so each gap between two tokens
is covered by exactly one terminal and a run can never exceed the bound.

The grammar stays LALR(1) and lexically unambiguous by construction: in any parser state the
acceptable terminals have pairwise disjoint languages (one string terminal and one number terminal
per value position; key terminals are disjoint literals plus the complement of them).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import math
import os
import re
import sys
import threading
import types
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import interegular
import jsonschema
from interegular.fsm import FSM as _FSM
from interegular.fsm import Alphabet as _Alphabet
from interegular.fsm import anything_else as _anything_else
from lark.load_grammar import eval_escaping

from gad.errors import (
    EmptyLanguageError,
    GadError,
    InvalidArgumentError,
    InvalidSchemaError,
    SchemaKeywordWarning,
    UnsupportedSchemaError,
)
from gad.gcpause import paused_gc
from gad.grammar.automata import (
    MAX_CONTEXT_STATES,
    MAX_DEFINITIONS,
    MAX_REGEX_CHARS,
    MAX_TERMINAL_STATES,
    MAX_TERMINALS,
    AutomatonTooLarge,
    budgeted,
    cached_fsm,
    clip,
    fsm_regex,
    greedy_regex,
    int_range_of,
    literal_words,
    minimize,
    note_int_range,
    note_not_words,
    regex_fsm,
)
from gad.grammar.regex_ast import (
    MAX_CP,
    Dialect,
    RegexUnsupported,
    branches,
    distribute_branch,
    end_split,
    has_anchor,
    lark_regexp,
    len_of,
    nullable,
    plain_group,
    splice_groups,
    strip_anchors,
    translate,
)
from gad.grammar.regex_ast import complement as _complement
from gad.grammar.regex_ast import contains as _contains
from gad.grammar.regex_ast import intersect as _intersect
from gad.grammar.regex_ast import norm as _norm
from gad.grammar.regex_ast import parse as _parse_regex
from gad.grammar.regex_ast import ranges_text as _ranges_text
from gad.grammar.regex_ast import rx_lit as _rx_lit
from gad.grammar.regex_ast import rx_or as _rx_or
from gad.grammar.schema_meta import check_schema

__all__ = ["SchemaGrammar", "Dropped", "convert", "load_schema", "FORMATS", "format_checker", "pattern_regex"]

_MAX_CP = MAX_CP
_MAX_ITEMS_CHAIN = 1024  # bounded arrays longer than this are refused (one rule per position; 1,000-item
# bounds are common in MaskBench, and 2,000 positions still build in seconds)
_MAX_UNION_ALTS = 256
_MAX_DEPENDENCIES = 4  # dependencies of one object (each doubles its union's branches)
_MAX_PRODUCT_STATES = 2048  # states of an object union's key automaton (object_product)
_MAX_PROPERTY_COUNT = 64
_TREE_RUN = 8  # optional properties in a run written as a balanced tree (build_object's optional_runs)
_MAX_PRODUCT_REGEX_STATES = 400  # pattern / length / format intersections: automaton states, ...
_MAX_PRODUCT_REGEX_CHARS = 20_000  # ... and characters of the regex written back
_QUICK_REGEX_STATES, _QUICK_REGEX_CHARS = 64, 4_000  # ... where a lookahead intersection may stand in
_MAX_PRODUCT_STATES_BUILT = 20_000  # states built while intersecting (product, difference, minimising)  # min/maxProperties over this are refused (one rule per count and position)
_MAX_LENGTH = 64  # longer length bounds are written as a chain of chunk terminals (_Chunked)
_CHUNK = 64  # units per chunk terminal of a long length-bounded string
_MAX_CHUNK = 256  # chunks grow past _CHUNK to keep the chain at most _MAX_CHAIN rules ...
_MAX_CHAIN = 512  # ... (deeper chains overflow Lark's recursive LALR analysis); longer bounds are refused
# one character of a length-bounded string (any escape except \/ and \u above U+001F)
_LEN_UNIT = r'(?:[^\x00-\x1f"\\]|\\(?:[btnfr"\\]|u00[01][0-9a-f]))'

# --------------------------------------------------------------------------------- char level
# A JSON string's content is a sequence of "units"; here every character has one canonical unit:
# raw, except '"' '\\' and the controls U+0000..U+001F, spelled as json.dumps spells them.
_SPECIALS = [chr(i) for i in range(0x20)] + ['"', "\\"]
_SPECIAL_SET = frozenset(_SPECIALS)


def _spell(c: str) -> str:
    """Canonical JSON spelling of one character (json.dumps, ensure_ascii=False)."""
    return json.dumps(c, ensure_ascii=False)[1:-1]


_SPECIAL_RANGES = [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]


def _unit_set(ranges: list[tuple[int, int]]) -> str | None:
    """Regex for one canonical unit whose character is in ``ranges`` (None: no character)."""
    ranges = _norm(ranges)
    alts: list[str] = []
    raw = _norm([r for r in _intersect(ranges, _complement(_SPECIAL_RANGES))])
    if raw:
        size = sum(hi - lo + 1 for lo, hi in raw)
        comp = _complement(raw)
        # the smaller side written: interegular stores a class, negated or not, as the set of the
        # characters it lists ([\u4e00-\u9fa5] as a negated class listed 1.09 million: 73 s)
        if size > len_of(comp):
            alts.append("[^" + _ranges_text(comp) + "]")
        else:
            alts.append("[" + _ranges_text(raw) + "]")
    short = [c for c in _SPECIALS if _contains(ranges, ord(c)) and len(_spell(c)) == 2]
    codes = [_spell(c)[4:] for c in _SPECIALS if _contains(ranges, ord(c)) and len(_spell(c)) == 6]
    esc = []
    if short:
        esc.append("[" + "".join("\\\\" if _spell(c)[1] == "\\" else _spell(c)[1] for c in short) + "]")
    if len(codes) == 27:
        esc.append("u00(?:0[0-7bef]|1[0-9a-f])")
    elif codes:
        esc.append("u00(?:" + "|".join(codes) + ")")
    if esc:
        alts.append("\\\\" + (esc[0] if len(esc) == 1 else "(?:" + "|".join(esc) + ")"))
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


_ANY_RANGES = [(0, _MAX_CP)]
UNIT = _unit_set(_ANY_RANGES) or ""
# every RFC 8259 spelling of a string's content (used for unconstrained strings)
ANY_CONTENT = r'(?:[^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*'
JSON_STRING = '"' + ANY_CONTENT + '"'
JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+\-]?[0-9]+)?"
JSON_INTEGER = r"-?(?:0|[1-9][0-9]*)"

_ECMA_SPACE = _norm([(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                     (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
                     (0xFEFF, 0xFEFF)])
_DIGIT = [(0x30, 0x39)]
_WORD = _norm([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
_LINE_TERM = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]
_CATEGORIES = {
    "CATEGORY_DIGIT": _DIGIT, "CATEGORY_NOT_DIGIT": _complement(_DIGIT),
    "CATEGORY_WORD": _WORD, "CATEGORY_NOT_WORD": _complement(_WORD),
    "CATEGORY_SPACE": _ECMA_SPACE, "CATEGORY_NOT_SPACE": _complement(_ECMA_SPACE),
}


#: JSON Schema patterns: ECMA-262 classes over the canonical units of a JSON string's content
_ECMA = Dialect(char=lambda o: _rx_lit(_spell(chr(o))), chars=lambda r: _unit_set(r) or "(?!)",
                categories=_CATEGORIES, dot=_complement(_LINE_TERM))


MAX_SCHEMA_NESTING = 128  # JSON levels (objects and arrays) a schema document may nest; MaskBench's deepest: 27


def _check_nesting(root: Any) -> bool:
    """Refuse a schema document nested deeper than :data:`MAX_SCHEMA_NESTING` JSON levels (objects and
    arrays), found without recursion: past it, the checks and the conversion would overflow Python's
    stack (a ``RecursionError`` deep inside ``jsonschema``).  Returns whether an object below the root
    has a ``$schema`` key (a subschema that may declare its own draft: :func:`_mark_drafts`).

    Raises:
        UnsupportedSchemaError: at the pointer of the first value past the limit, its key the keyword."""
    # a scan without pointers first (what every schema pays: ~0.1 ms for one with pointers made);
    # the pointers only where it finds the limit passed, by the same walk in the same order
    scan: list[tuple[Any, int]] = [(root, 1)] if isinstance(root, (dict, list)) else []
    nested_schema = False
    while scan:
        node, depth = scan.pop()
        if depth > MAX_SCHEMA_NESTING:
            break
        for v in (node.values() if isinstance(node, dict) else node):
            if isinstance(v, (dict, list)):
                scan.append((v, depth + 1))
                nested_schema = nested_schema or (isinstance(v, dict) and "$schema" in v)
    else:
        return nested_schema
    todo: list[tuple[Any, str, str, int]] = [(root, "", "", 1)]
    while todo:
        node, ptr, key, depth = todo.pop()
        if not isinstance(node, (dict, list)):
            continue
        if depth > MAX_SCHEMA_NESTING:
            err = UnsupportedSchemaError(f"the schema nests objects and arrays over {MAX_SCHEMA_NESTING} "
                                         "levels deep (gad's limit)", pointer=ptr, keyword=key)
            err.droppable = False
            raise err
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            if isinstance(v, (dict, list)):
                todo.append((v, _ptr_join(ptr, str(k)), str(k) if isinstance(node, dict) else key, depth + 1))
    raise AssertionError("unreachable: the scan found the limit passed")  # pragma: no cover


def pattern_regex(pattern: str) -> str:
    """The content regex (canonical units) of strings in which ``pattern`` finds a match.

    Raises:
        RegexUnsupported: a construct without an exact automaton (lookaround, back-reference,
            inline flags, ``\\b`` / ``\\B``, a ``^`` not at the start), or not a regex.  A ``$`` anywhere is
            ECMA-262's end of input (:func:`gad.grammar.regex_ast.end_split`).
    """
    return _top(_parse_regex(pattern))


def _top(items: list) -> str:
    items = splice_groups(items)
    # alternatives with anchors are searches of their own; without anchors, one search of the
    # whole alternation (UNIT* (a|b) UNIT*) has a far smaller automaton than a union of searches
    alts = (branches(items) or distribute_branch(items)) if has_anchor(items) else None
    if alts is not None:
        return "(?:" + "|".join(_top(b) for b in alts) + ")"
    inner = plain_group(items)
    if inner is not None and branches(inner) is not None and has_anchor(inner):
        return _top(inner)
    items, start, end = strip_anchors(items)
    any_star = f"{UNIT}*"
    if has_anchor(items):  # a "$" inside ("(,|$)"): the matches that pass it end the input
        n, e = end_split(items, _ECMA)
        ends = ([n + ("" if end else any_star)] if n is not None else []) + ([e] if e is not None else [])
        if not ends:  # (as an empty class is: refused at the keyword)
            raise RegexUnsupported("a $ inside the pattern leaves it no string to match")
        return ("" if start else any_star) + "(?:" + "|".join(ends) + ")"
    if not (start and end) and nullable(items):  # a search that finds "" somewhere: every string
        translate(items, _ECMA)  # (still refuse what has no automaton)
        return any_star
    return ("" if start else any_star) + translate(items, _ECMA) + ("" if end else any_star)


# ------------------------------------------------------------------------------------- formats
_Y = r"[0-9]{4}"
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_MD = (r"(?:(?:0[13578]|1[02])\-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)\-(?:0[1-9]|[12][0-9]|30)"
       r"|02\-(?:0[1-9]|1[0-9]|2[0-8]))")
_DATE = rf"(?:{_Y}\-{_MD}|{_LEAP}\-02\-29)"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?(?:[Zz]|[+\-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}"
_H16 = r"[0-9a-fA-F]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"


def _h(n: int) -> str:
    return f"(?:{_H16}:){{{n}}}" if n else ""


def _hpre(n: int) -> str:  # [ *n( h16 ":" ) h16 ]
    if n == 0:
        return f"(?:{_H16})?"
    return f"(?:(?:{_H16}:){{0,{n}}}{_H16})?"


_IPV6 = "(?:" + "|".join([
    f"{_h(6)}{_LS32}", f"::{_h(5)}{_LS32}", f"{_hpre(0)}::{_h(4)}{_LS32}", f"{_hpre(1)}::{_h(3)}{_LS32}",
    f"{_hpre(2)}::{_h(2)}{_LS32}", f"{_hpre(3)}::{_H16}:{_LS32}", f"{_hpre(4)}::{_LS32}",
    f"{_hpre(5)}::{_H16}", f"{_hpre(6)}::"]) + ")"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = rf"{_LABEL}(?:\.{_LABEL})*"
_ATEXT = r"[A-Za-z0-9!#$%&'*+\/=?\^_`{|}~\-]"
_EMAIL = rf"{_ATEXT}+(?:\.{_ATEXT}+)*@{_HOSTNAME}"
_URI = r"[A-Za-z][A-Za-z0-9+\-.]*:(?:[A-Za-z0-9\-._~!$&'()*+,;=:@\/?#\[\]]|%[0-9A-Fa-f]{2})*"
_UUID = r"[0-9a-fA-F]{8}\-[0-9a-fA-F]{4}\-[0-9a-fA-F]{4}\-[0-9a-fA-F]{4}\-[0-9a-fA-F]{12}"

#: string formats: name -> content regex (ASCII, no character needs escaping in JSON)
FORMATS: dict[str, str] = {
    "date": _DATE, "time": _TIME, "date-time": f"{_DATE}[Tt]{_TIME}", "email": _EMAIL, "uri": _URI,
    "uuid": _UUID, "ipv4": _IPV4, "ipv6": _IPV6, "hostname": _HOSTNAME,
}
_INT_FORMATS = {"int32": (-(2 ** 31), 2 ** 31 - 1), "int64": (-(2 ** 63), 2 ** 63 - 1)}
#: formats the JSON Schema drafts define that gad does not implement: refused (a validator may
#: assert them, and MaskBench's labels do).  Any other name is unknown to the spec and, as
#: draft 2020-12 section 7.2 says, an annotation that validators ignore.
SPEC_FORMATS_REFUSED = frozenset({
    "duration", "idn-email", "idn-hostname", "uri-reference", "iri", "iri-reference", "uri-template",
    "json-pointer", "relative-json-pointer", "regex"})
#: draft-03 formats (asserted only under a draft-03 ``$schema``)
_DRAFT3_FORMATS = frozenset({"host-name", "ip-address", "color", "utc-millisec", "phone", "style"})


def format_checker() -> jsonschema.FormatChecker:
    """A ``jsonschema.FormatChecker`` that asserts the formats exactly as gad defines them
    (:data:`FORMATS`, int32 / int64); used to filter ``enum`` values and by the tests' oracle."""
    fc = jsonschema.FormatChecker(formats=())
    for name, rx in FORMATS.items():
        compiled = re.compile(rx.replace("\\/", "/"))
        fc.checks(name)(lambda v, _c=compiled: not isinstance(v, str) or _c.fullmatch(v) is not None)
    for name, (lo, hi) in _INT_FORMATS.items():
        fc.checks(name)(lambda v, _lo=lo, _hi=hi: not isinstance(v, int) or isinstance(v, bool)
                        or _lo <= v <= _hi)
    return fc


# ------------------------------------------------------------------------------ integer ranges
def _same_len(x: str, y: str) -> str:
    """Regex for decimal strings of len(x) digits in [x, y] (x <= y, same length)."""
    if x == y:
        return x
    if len(x) == 1:
        return f"[{x}-{y}]"
    if x[0] == y[0]:
        return x[0] + _same_len(x[1:], y[1:])
    n = len(x) - 1
    if x[1:] == "0" * n and y[1:] == "9" * n:
        return f"[{x[0]}-{y[0]}][0-9]{{{n}}}"
    parts = [x[0] + _wrap(_same_len(x[1:], "9" * n))]
    if int(y[0]) - int(x[0]) >= 2:
        parts.append(f"[{int(x[0]) + 1}-{int(y[0]) - 1}][0-9]{{{n}}}")
    parts.append(y[0] + _wrap(_same_len("0" * n, y[1:])))
    return "(?:" + "|".join(parts) + ")"


def _wrap(r: str) -> str:
    return r if r.startswith("(?:") and r.endswith(")") else f"(?:{r})" if "|" in r else r


def _nat_range(a: int, b: int | None) -> str | None:
    """Regex for decimal naturals (no leading zeros) in [a, b]; b None = unbounded; None if empty."""
    a = max(a, 0)
    if b is not None and b < a:
        return None
    parts = []
    la = len(str(a))
    lb = len(str(b)) if b is not None else la
    for L in range(la, lb + 1):
        lo = max(a, 10 ** (L - 1) if L > 1 else 0)
        hi = min(b, 10 ** L - 1) if b is not None else 10 ** L - 1
        if lo <= hi:
            parts.append(_same_len(str(lo).zfill(L), str(hi).zfill(L)))
    if b is None:
        parts.append(f"[1-9][0-9]{{{la},}}")
    parts.reverse()  # longest first: Python's leftmost alternation then matches like a DFA would
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _int_range(lo: int | None, hi: int | None) -> str | None:
    """Regex for JSON integer spellings (incl. ``-0``) whose value is in [lo, hi] (None = unbounded)."""
    if lo is None and hi is None:
        return JSON_INTEGER
    if lo is not None and hi is not None and lo > hi:
        return None
    parts = []
    if hi is None or hi >= 0:
        p = _nat_range(max(lo, 0) if lo is not None else 0, hi)
        if p:
            parts.append(p)
    if lo is None or lo <= 0:  # negatives -y with y in [max(-hi,0), -lo]; "-0" when 0 is in range
        ylo = max(-hi, 0) if hi is not None else 0
        p = _nat_range(ylo, -lo if lo is not None else None)
        if p:
            parts.append(r"\-" + _wrap(p) if "|" in p else r"\-" + p)
    if not parts:
        return None
    rx = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    # (both bounds known: its automaton is built from them, not from this text)
    return note_int_range(rx, lo, hi) if lo is not None and hi is not None else rx


_INT_RANGE_LINE = re.compile(r"^// gad:int-range (-?[0-9]{1,400}) (-?[0-9]{1,400})$", re.M)
_NOT_WORDS_LINE = re.compile(r"^// gad:not-words (\{.*\})$", re.M)


def note_direct_automata(text: str) -> None:
    """Record the integer ranges grammar text written by :func:`convert` names in its
    ``// gad:int-range LO HI`` comment lines (Lark ignores them), so that their terminals' automata are
    built from the bounds (:func:`gad.grammar.automata.int_range_fsm`) in any process that reads the
    text, not only the one that converted the schema; and the same for its ``// gad:not-words
    {"keys": [...], "quoted": ...}`` lines (the JSON strings other than the keys, whose automata are
    the strings' minus the keys' trie: :func:`_not_keys_regex`).  Each regexp is made again here: a
    line can only record a regexp together with its true language."""
    if "// gad:not-words " in text:
        for line in _NOT_WORDS_LINE.findall(text):
            try:
                spec = json.loads(line)
                keys, quoted = spec["keys"], spec["quoted"]
                if isinstance(keys, list) and all(isinstance(k, str) for k in keys) and isinstance(quoted, bool):
                    _not_keys_regex(keys, quoted)  # (records it: note_not_words)
            except (ValueError, TypeError, KeyError, RecursionError, AttributeError):
                continue  # (not a line convert wrote: its terminal's automaton is built from its text)
    if "// gad:int-range" not in text:
        return
    for lo, hi in _INT_RANGE_LINE.findall(text):
        a, b = int(lo), int(hi)
        if a <= b:
            _int_range(a, b)  # (records it: note_int_range)


def _nonneg_decimal(ylo: int | None, ylo_x: bool, yhi: int | None, yhi_x: bool) -> str | None:
    """Spellings ``I`` / ``I.F`` (no exponent) of values y >= 0 with integer bounds on y."""
    a = 0 if ylo is None else max(ylo, 0)
    a_x = ylo_x if ylo is not None and ylo >= 0 else False
    parts = []
    # integral values (F absent or all zeros): I in [a(+1 if excl), b(-1 if excl)]
    ilo = a + 1 if a_x else a
    ihi = None if yhi is None else (yhi - 1 if yhi_x else yhi)
    # non-integral values first (Python's alternation is leftmost, not longest):
    # y in (I, I+1) needs I >= a and I + 1 <= b
    fhi = None if yhi is None else yhi - 1
    p = _nat_range(a, fhi)
    if p:
        parts.append(f"{_wrap(p)}\\.[0-9]*[1-9][0-9]*")
    p = _nat_range(ilo, ihi)
    if p:
        parts.append(f"{_wrap(p)}(?:\\.0+)?")
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _number_range(lo: float | None, lo_x: bool, hi: float | None, hi_x: bool) -> str | None:
    """Regex for non-exponent JSON number spellings with value in the range (integer bounds)."""
    ilo = None if lo is None else int(lo)
    ihi = None if hi is None else int(hi)
    parts = []
    if ihi is None or ihi > 0 or (ihi == 0 and not hi_x):
        p = _nonneg_decimal(ilo if ilo is not None and ilo > 0 else 0,
                            lo_x if ilo is not None and ilo >= 0 else False, ihi, hi_x)
        if p:
            parts.append(p)
    if ilo is None or ilo < 0 or (ilo == 0 and not lo_x):
        # v = -y, v in [lo, hi]  <=>  y in [-hi, -lo]
        ylo = 0 if ihi is None or ihi >= 0 else -ihi
        ylo_x = hi_x if ihi is not None and ihi <= 0 else False
        p = _nonneg_decimal(ylo, ylo_x, None if ilo is None else -ilo, lo_x)
        if p:
            parts.append(r"\-" + _wrap(p) if "|" in p else r"\-" + p)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"



# ------------------------------------------------------------------- decimal bounds, multipleOf
# Numbers under a non-integer bound or multipleOf are spelled without exponent (as other bounded
# numbers are), and compared exactly as decimals (not in binary floating point).
_N_SPELL = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"
# the numbers written with a fraction or an exponent (JSON_NUMBER less the integers)
_N_FRACTION = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:[eE][+\-]?[0-9]+)?|[eE][+\-]?[0-9]+)"
_NONNEG = r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"
_MAX_MULTIPLE = 1000  # multipleOf a * 10^-d with a over this is refused (a DFA with a states per digit)


def _dec(v: float) -> Decimal:
    """``v`` as the decimal it is written as (``repr`` of a float: 0.1 is 0.1, not its binary value)."""
    return Decimal(repr(v)) if isinstance(v, float) else Decimal(int(v))


def _split_dec(b: Decimal) -> tuple[int, str]:
    """``b >= 0`` as its integer part and its fraction digits (no trailing zeros)."""
    i = int(b)
    frac = b - i
    digits = "" if frac == 0 else format(frac, "f").split(".")[1].rstrip("0")
    return i, digits


def _nonneg_ge(b: Decimal, strict: bool) -> str | None:
    """Spellings ``I`` / ``I.F`` of values y >= b (y > b if ``strict``), for a decimal b >= 0."""
    bi, fb = _split_dec(b)
    alts = []
    p = _nat_range(bi + 1, None)
    if p:
        alts.append(f"{_wrap(p)}(?:\\.[0-9]+)?")
    if not fb:
        alts.append(str(bi) + (r"\.[0-9]*[1-9][0-9]*" if strict else r"(?:\.[0-9]+)?"))
    else:
        fr = [fb[:i] + f"[{int(d) + 1}-9][0-9]*" for i, d in enumerate(fb) if d != "9"]
        fr.append(fb + ("[0-9]*[1-9][0-9]*" if strict else "[0-9]*"))
        alts.append(str(bi) + r"\." + (_rx_or(fr) or ""))
    return _rx_or(alts)


def _nonneg_le(b: Decimal, strict: bool) -> str | None:
    """Spellings ``I`` / ``I.F`` of values y <= b (y < b if ``strict``), for a decimal b >= 0."""
    bi, fb = _split_dec(b)
    alts = []
    if bi >= 1:
        p = _nat_range(0, bi - 1)
        if p:
            alts.append(f"{_wrap(p)}(?:\\.[0-9]+)?")
    if not fb:
        if not strict:
            alts.append(str(bi) + r"(?:\.0+)?")
    else:
        fr = [fb[:i] + f"[0-{int(d) - 1}][0-9]*" for i, d in enumerate(fb) if d != "0"]
        fr += [fb[:i] + "0*" for i in range(len(fb))]
        if not strict:
            fr.append(fb + "0*")
        alts.append(str(bi) + r"(?:\." + (_rx_or(fr) or "") + ")?")
    return _rx_or(alts)


def _ge_regex(lo: Decimal, strict: bool) -> str:
    """Non-exponent spellings of values >= lo (> lo if ``strict``); may match nothing (``(?!)``)."""
    alts = [_nonneg_ge(max(lo, Decimal(0)), strict if lo >= 0 else False)]
    if lo <= 0:
        n = _nonneg_le(-lo, strict)
        if n:
            alts.append(r"\-" + _wrap(n))
    return _rx_or(alts) or "(?!)"


def _le_regex(hi: Decimal, strict: bool) -> str:
    """Non-exponent spellings of values <= hi (< hi if ``strict``)."""
    alts = [_nonneg_le(hi, strict)] if hi >= 0 else []
    n = _nonneg_ge(max(-hi, Decimal(0)), strict if hi <= 0 else False)
    if n:
        alts.append(r"\-" + _wrap(n))
    return _rx_or(alts) or "(?!)"


def _multiple_fsm(m: Decimal) -> interegular.FSM | None:
    """An automaton for the non-exponent spellings whose value is a multiple of ``m`` > 0 (exact
    decimal arithmetic): with m = a * 10^-d, the digits up to d places after the point, read as an
    integer, are divisible by a (a DFA with a states per place) and every later digit is 0.  It
    also accepts some spellings that are not JSON (leading zeros, ``1.``): callers intersect it
    with a JSON number spelling.  None when a is over :data:`_MAX_MULTIPLE`."""
    m = m.normalize()
    exp = m.as_tuple().exponent
    assert isinstance(exp, int)
    d = max(0, -exp)
    a = int(m.scaleb(d))
    if a > _MAX_MULTIPLE:
        return None
    sym: dict[Any, int] = {str(g): g for g in range(10)}
    sym["-"], sym["."], sym[_anything_else] = 10, 11, 12
    alphabet = _Alphabet(sym)  # type: ignore[arg-type]
    # states: 0 start, 1 after '-', then (k, r) for k = 0..d places after the point (k = 0: the
    # integer part, before any point; k = -1 doubles as "just after the point" with no digit yet)
    idx: dict[tuple[int, int, bool], int] = {}

    def st(k: int, r: int, dot: bool) -> int:
        key = (k, r, dot)
        if key not in idx:
            idx[key] = 2 + len(idx)
        return idx[key]

    trans: dict[int, dict[int, int]] = {0: {10: 1}, 1: {}}
    finals: set[int] = set()
    for g in range(10):
        trans[0][g] = st(0, g % a, False)
        trans[1][g] = st(0, g % a, False)
    todo = list(idx)
    seen = set(todo)
    while todo:
        k, r, dot = todo.pop()
        s = st(k, r, dot)
        row: dict[int, int] = {}
        if not dot:  # integer part: more digits, or the point
            for g in range(10):
                row[g] = st(0, (10 * r + g) % a, False)
            row[11] = st(0, r, True)
        elif k < d:
            for g in range(10):
                row[g] = st(k + 1, (10 * r + g) % a, True)
        else:
            row[0] = s  # past d places: zeros only
        if (r * 10 ** (d - k)) % a == 0:
            finals.add(s)
        trans[s] = row
        for nk in list(idx):
            if nk not in seen:
                seen.add(nk)
                todo.append(nk)
    return _FSM(alphabet=alphabet, states=set(trans), initial=0, finals=finals, map=trans)

# ----------------------------------------------------------------------------- schema reading
def load_schema(schema: Any) -> Any:
    """``schema`` as a Python object: a dict / bool as is; a ``Path`` or a ``str`` naming an existing
    ``.json`` file is read; any other ``str`` / ``bytes`` is parsed as JSON text.

    Raises:
        InvalidSchemaError: unreadable file, invalid JSON, or not an object / boolean.
    """
    src = None
    if isinstance(schema, Path) or (isinstance(schema, str) and not schema.lstrip().startswith(("{", "[", "t", "f"))
                                    and schema.strip().endswith(".json")):
        src = str(schema)
        try:
            schema = Path(schema).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InvalidSchemaError(f"cannot read schema file: {e}", path=src) from None
    if isinstance(schema, (bytes, bytearray)):
        schema = bytes(schema).decode("utf-8", errors="strict")
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise InvalidSchemaError(f"schema is not valid JSON: {e.msg}", path=src or "<schema>",
                                     line=e.lineno, column=e.colno) from None
    if not isinstance(schema, (dict, bool)):
        raise InvalidSchemaError(f"a JSON Schema is an object or a boolean, got {type(schema).__name__}",
                                 path=src)
    return schema


def _is_keyword_step(parts: list[str], i: int) -> bool:
    """Step ``parts[i]`` of a split JSON pointer is a keyword of a schema object, not a name under
    ``properties`` / ``$defs`` / ... (a property may be called ``if``)."""
    return i == 1 or parts[i - 1] not in ("properties", "patternProperties", "$defs", "definitions",
                                          "dependentSchemas", "dependencies")


def _walk(root: Any, ptr: str) -> list[tuple[str, Any]]:
    """``(pointer, node)`` for the document ``root`` and each node down JSON pointer ``ptr`` (RFC
    6901) as far as it resolves: all ``ptr.count("/") + 1`` of them where it does."""
    out: list[tuple[str, Any]] = [("", root)]
    node, here = root, ""
    for part in ptr.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            break
        here = _ptr_join(here, part)
        out.append((here, node))
    return out


def _ptr_join(ptr: str, *keys: Any) -> str:
    for k in keys:
        ptr += "/" + str(k).replace("~", "~0").replace("/", "~1")
    return ptr


_ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$comment", "$anchor", "$vocabulary", "title", "description", "default",
    "examples", "example", "readOnly", "writeOnly", "deprecated", "contentMediaType", "contentEncoding",
    "contentSchema", "$defs", "definitions", "nullable_", "$dynamicAnchor", "$recursiveAnchor"})
#: keywords with assertion semantics in some draft; any other key is an annotation (validators
#: ignore unknown keywords, e.g. ``x-...`` extensions, ``markdownDescription``)
_KEYWORDS = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "dependencies", "dependentRequired",
    "dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains",
    "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef",
    "pattern", "minLength", "maxLength", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "extends", "disallow", "divisibleBy",
    "gad:notIn", "gad:notPattern"})  # (gad's own, in flattened schemas only: no draft defines them, so a user's is dropped)


_DRAFT3_KEYWORDS = frozenset({"extends", "disallow", "divisibleBy"})  # keywords only under draft-03


#: the keywords whose value is a count (a non-negative integer, which JSON Schema lets be written 2.0)
_COUNT_KEYWORDS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                             "minContains", "maxContains"})


_ITEM_KEYWORDS = ("prefixItems", "items", "additionalItems")


def _item_shape(d: Any) -> tuple[list[Any], Any, str] | None:
    """``(prefix schemas, schema of the rest, pointer)`` of a flattened schema's array items (as
    :meth:`_Gen.array_part` reads them), or None when it has no item keyword."""
    pp = d["_ptr"]
    if "prefixItems" in d:
        return list(d["prefixItems"]), d.get("items", True), pp.get("prefixItems", "")
    if isinstance(d.get("items"), list):
        return list(d["items"]), d.get("additionalItems", True), pp.get("items", "")
    if "items" in d:
        return [], d["items"], pp.get("items", "")
    return None


class _Internal(dict[str, Any]):
    """A schema gad writes itself (a union branch, a meet): its keywords are gad's (2020-12's), read
    whatever the document's draft; the user's subschemas inside it are read under their draft.
    ``member_ptrs``, where set, are the JSON pointers its ``allOf`` members are reported at;
    ``src_ptrs`` (a meet's) where they are in the user's schema, for refusals only
    (:meth:`_Gen.real_pointers`)."""

    member_ptrs: list[str] | None = None
    src_ptrs: list[str] | None = None


def _meet_members(x: Any) -> frozenset[str]:
    """The schemas whose meet ``x`` is, as JSON texts, nested ``allOf``-only schemas flattened (``true``
    is none): equal for two meets of the same schemas however nested, so a memo keyed by it ties
    the knot where merges under ``patternProperties`` nest one level deeper per recursion."""
    if x is True:
        return frozenset()
    if isinstance(x, dict) and set(x) == {"allOf"} and isinstance(x["allOf"], list):
        return frozenset().union(*(_meet_members(m) for m in x["allOf"]))
    return frozenset((json.dumps(x, sort_keys=True, default=str),))


def _schema_meet(x: Any, y: Any, alike: bool = True, ptrs: list[str] | None = None) -> Any:
    """The schema of both ``x`` and ``y`` (``true`` is the unit; a schema meets itself, and with
    ``alike`` so does one written alike: not where subschemas switch drafts, as a copy may be read
    under another draft); ``ptrs``: where ``x`` and ``y`` are, for the refusals inside their
    ``allOf`` to name (:meth:`_Gen.real_pointer`; the members keep pointers made below the merged
    key, unique to this meet, which the converter's memos and pruning key on)."""
    if y is True or x is y or (alike and _same_schema(x, y)):
        return x
    if x is True:
        return y
    both = _Internal(allOf=[x, y])
    if ptrs is not None:
        both.src_ptrs = ptrs
    return both


def _same_schema(x: Any, y: Any) -> bool:
    """``x`` and ``y`` are the same schema object or written alike, value for value and type for type
    (``true`` and ``1``, ``1`` and ``1.0``, a dict and gad's :class:`_Internal` apart: a cheap, sure
    test, not equivalence)."""
    if x is y:
        return True
    if type(x) is not type(y):
        return False
    if isinstance(x, dict):
        return (len(x) == len(y) and getattr(x, "member_ptrs", None) == getattr(y, "member_ptrs", None)
                and all(k in y and _same_schema(v, y[k]) for k, v in x.items()))
    if isinstance(x, list):
        return len(x) == len(y) and all(_same_schema(a, b) for a, b in zip(x, y, strict=True))
    return bool(x == y)


def _whole(v: float) -> bool:
    """``v`` (an int of any size, or a float) is a whole number."""
    return isinstance(v, int) or v.is_integer()


def _is_annotation(kw: str) -> bool:
    return kw in _ANNOTATIONS or kw not in _KEYWORDS


#: keywords a draft's validator reads inside another keyword (``then`` / ``else`` inside ``if``,
#: ``minContains`` / ``maxContains`` inside ``contains`` from 2019-09 on, the boolean exclusive
#: bounds of drafts 03/04 inside ``minimum`` / ``maximum``), with the keyword that reads each
_MODIFIERS = {"then": "if", "else": "if", "minContains": "unevaluatedItems", "maxContains": "unevaluatedItems",
              "exclusiveMinimum": "minimum", "exclusiveMaximum": "maximum"}


_OLD_REF = (jsonschema.Draft3Validator, jsonschema.Draft4Validator, jsonschema.Draft6Validator,
            jsonschema.Draft7Validator)  # the drafts whose $ref ignores its siblings


def _mark_drafts(x: Any, cls: Any, root_cls: Any, out: dict[int, Any]) -> None:
    """Record in ``out`` (``id -> validator class``) each dict under ``x`` read under another draft than
    ``root_cls``: a ``$schema`` switches the draft for its dict and everything inside it, as
    ``jsonschema`` reads it (an unknown URI keeps the enclosing draft)."""
    stack = [(x, cls)]
    while stack:
        node, c = stack.pop()
        if isinstance(node, dict):
            uri = node.get("$schema")
            if isinstance(uri, str) and node is not x:
                c = jsonschema.validators.validator_for({"$schema": uri}, default=c)
            if c is not root_cls:
                out[id(node)] = c
            stack.extend((v, c) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, c) for v in node if isinstance(v, (dict, list)))


@functools.lru_cache(maxsize=16)
def _draft_keywords(cls: Any) -> frozenset[str]:
    """The keywords of :data:`_KEYWORDS` that the draft of validator class ``cls`` defines: its
    ``VALIDATORS`` and the modifiers those read (:data:`_MODIFIERS`; ``unevaluatedItems`` marks
    2019-09 and later, where ``minContains`` exists).  Any other keyword is an annotation under that
    draft, as its validator reads it: e.g. draft-03 has no ``anyOf`` / ``not`` / ``const``, draft-07
    no ``dependentRequired``, 2020-12 no ``dependencies`` / ``additionalItems``."""
    defined = set(getattr(cls, "VALIDATORS", {})) or set(_KEYWORDS)
    defined |= {kw for kw, host in _MODIFIERS.items() if host in defined}
    return frozenset(_KEYWORDS & defined)


_UNSUPPORTED = {  # keyword -> kinds it constrains (None: every kind)
    "propertyNames": {"object"}, "unevaluatedProperties": {"object"},
    "contains": {"array"}, "minContains": {"array"}, "maxContains": {"array"},
    "unevaluatedItems": {"array"},
    "not": None, "if": None, "then": None, "else": None, "$dynamicRef": None, "$recursiveRef": None,
    "extends": None, "disallow": None, "divisibleBy": {"integer", "number"},  # draft-03
}
_KINDS = ("object", "array", "string", "number", "integer", "boolean", "null")
_TYPE_KINDS = {"object": {"object"}, "array": {"array"}, "string": {"string"}, "number": {"number", "integer"},
               "integer": {"integer"}, "boolean": {"boolean"}, "null": {"null"}}


@dataclass(frozen=True)
class Dropped:
    """A keyword dropped under ``lenient=True``: JSON pointer, keyword, reason."""

    pointer: str
    keyword: str
    reason: str

    def __str__(self) -> str:
        return f"#{self.pointer} {self.keyword}: {self.reason}"


_FALSE = object()  # a flattened schema that admits nothing


@dataclass(frozen=True)
class _Chunked:
    """A string of ``lo``..``hi`` canonical units (``hi`` None: unbounded) with a bound over
    :data:`_MAX_LENGTH`: one terminal would need ~6 automaton states per unit, so the grammar
    spells it as a chain of terminals of ``k`` units each, then a last one of fewer than ``k``
    units and the closing quote (see :meth:`_Gen.chunked_string`)."""

    lo: int
    hi: int | None
    k: int
    unit: str = _LEN_UNIT  # one unit's regex (a class of raw characters under a pattern C* / C+)


@dataclass(frozen=True)
class _Meet:
    """A string whose content matches every one of ``parts`` and none of ``negs`` (content regexes)
    where that automaton fits gad's budget for one terminal but is too large to write back as one
    regex: the terminal is ``"(?!N1")...(?=P1")...(?=Pk-1")Pk"``, which Python's ``re`` (Lark's
    scanner) and gad's automata (:func:`gad.grammar.automata.meet_split`) both read as the
    intersection of the P less the N."""

    parts: tuple[str, ...]
    negs: tuple[str, ...] = ()

    def terminal(self) -> str:
        return ('"' + "".join(f'(?!{n}")' for n in self.negs) + "".join(f'(?={p}")' for p in self.parts[:-1])
                + self.parts[-1] + '"')


_OPAQUE = (_Chunked, _Meet)  # string parts that unions cannot merge as regex text


# An enum's strings whose one terminal would be over gad's budgets for a terminal (characters of its
# regex, automaton states) are spelled by several terminals, each a run of the sorted strings kept
# under both with a margin; a lexer context holds all of them, so their byte-level tries together
# stay under automata.MAX_CONTEXT_STATES (with a margin).
_WORD_CHUNK_CHARS = MAX_REGEX_CHARS * 4 // 5
_WORD_CHUNK_STATES = MAX_TERMINAL_STATES * 4 // 5
_MAX_WORD_CHUNKS = 8
_MAX_WORD_BYTES = MAX_CONTEXT_STATES * 3 // 4  # the runs' byte-level trie states together (emoji: 4 bytes each)


def _word_chunks(strs: list[tuple[str, str]]) -> list[list[str]] | None:
    """``strs`` (distinct strings: each one's spelling inside its quotes and that spelling regex-escaped
    as :func:`_rx_lit` writes it) cut into runs, in the order of their spellings, whose terminal
    ``"(?:a|b|...)"`` has at most :data:`_WORD_CHUNK_CHARS` characters and a trie of at most
    :data:`_WORD_CHUNK_STATES` states (the root, the opening quote, each string's characters past its
    common prefix with the one before it, and its closing quote), or is one string alone; None when
    one string alone is over gad's budgets for a terminal (:data:`MAX_REGEX_CHARS`,
    :data:`MAX_TERMINAL_STATES`), or when the runs' byte-level tries together are over
    :data:`_MAX_WORD_BYTES` states (one lexer context holds them all).

    The terminals spell disjoint sets of complete quoted strings, none a prefix of another's (each
    ends at its closing quote), so exactly one of them matches a value and the lexer never chooses."""
    words = sorted(strs)
    chunks: list[list[str]] = []
    cur: list[str] = []
    chars = states = 0
    total_bytes = 0
    prev = ""
    for w, e in words:
        lcp = 0
        if cur:
            n = min(len(w), len(prev))
            while lcp < n and w[lcp] == prev[lcp]:
                lcp += 1
        total_bytes += len(w[lcp:].encode("utf-8")) + 1
        if total_bytes > _MAX_WORD_BYTES:
            return None
        add_chars, add_states = len(e) + 1, len(w) - lcp + 1
        if cur and (chars + add_chars > _WORD_CHUNK_CHARS or states + add_states > _WORD_CHUNK_STATES):
            chunks.append(cur)
            cur, lcp = [], 0
            add_states = len(w) + 1
        if not cur:
            chars, states = 6, 2  # '"(?:' and ')"'; the root and the opening quote
            if chars + add_chars > MAX_REGEX_CHARS or states + add_states > MAX_TERMINAL_STATES:
                return None  # (a string over the margin but within the budgets is a run alone)
        cur.append(e)
        chars += add_chars
        states += add_states
        prev = w
    if cur:
        chunks.append(cur)
    return chunks


@dataclass
class _Parts:
    """What one value position admits, grouped by the first token's kind."""

    string: str | _Chunked | _Meet | None = None  # content regex; "*" = any spelling of any string
    number: str | None = None       # full regex
    lits: set[str] = field(default_factory=set)  # "true", "false", "null"
    obj: str | None = None          # rule name
    arr: str | None = None
    obj_any: bool = False
    arr_any: bool = False
    obj_key: Any = None             # identity of the object alternative (to dedupe)
    arr_key: Any = None
    where: dict[str, str] = field(default_factory=dict)  # kind -> pointer (errors)

    def empty(self) -> bool:
        return self.string is None and self.number is None and not self.lits and self.obj is None \
            and self.arr is None


@dataclass(frozen=True)
class SchemaGrammar:
    """The result of :func:`convert`.

    Attributes:
        lark_text: Lark grammar text (start rule ``start``) for ``gad.Grammar.from_string``.
        dropped: keywords dropped under ``lenient=True`` (empty otherwise).
        schema: the schema as read.
    """

    lark_text: str
    dropped: tuple[Dropped, ...]
    schema: Any
    _info: dict = field(repr=False, compare=False, default_factory=dict)
    _root: str = field(repr=False, compare=False, default="")
    _ws: bool = field(repr=False, compare=False, default=False)
    _float_kind: bool = field(repr=False, compare=False, default=False)  # (draft 3 / 4: 1.0 is no integer)
    _float_nums: frozenset[str] = field(repr=False, compare=False, default=frozenset())  # (int32 / int64 numbers)

    def dumps(self, value: Any, indent: int | None = None) -> str:
        """``value`` as JSON text in the spelling and property order the grammar accepts.

        Args:
            value: a JSON value (dict / list / str / int / float / bool / None).
            indent: spaces per nesting level (needs a whitespace mode that allows it), or None
                for compact output.
        Returns:
            the JSON text; objects list the schema's properties in its order, then the rest.
        """
        out: list[str] = []
        self._dump(value, self._root, indent, 0, out)
        return "".join(out)

    def _dump(self, v: Any, rule: str | None, indent: int | None, depth: int, out: list[str]) -> None:
        info = self._info.get(rule, {}) if rule else {}
        nl = ("\n" + " " * (indent * (depth + 1))) if indent else ""
        end = ("\n" + " " * (indent * depth)) if indent else ""
        if isinstance(v, dict):
            oi = info.get("obj")
            if not v:
                out.append("{}")
                return
            keys = list(v)
            child: dict[str, str | None] = {}
            add = None
            if oi is not None and "union" in oi:  # the first branch that validates the value
                branch = next((r for r, val in oi["union"] if val is not None and val.is_valid(v)),
                              oi["union"][0][0])
                self._dump(v, branch, indent, depth, out)
                return
            if oi is not None:
                if "lits" in oi:
                    for lit in oi["lits"]:
                        if _json_eq(lit, v):
                            v, keys = lit, list(lit)
                            break
                else:
                    order = [k for k in oi["order"] if k in v]
                    # every other key follows as given: additional ones, and listed ones whose schema
                    # admits no value (never dropped: the text must stay as invalid as the value)
                    listed = set(order)
                    keys = order + [k for k in v if k not in listed]
                    child = oi["child"]
                    add = oi["add"]
            out.append("{")
            for i, k in enumerate(keys):
                out.append(("," if i else "") + nl)
                out.append(json.dumps(k, ensure_ascii=False) + ":" + (" " if indent else ""))
                r = child.get(k, add) if oi else None
                if oi and k not in child and oi.get("pats"):
                    spelled = json.dumps(k, ensure_ascii=False)
                    r = next((pr for f, pr in oi["pats"] if f.accepts(spelled)), add)
                self._dump(v[k], r, indent, depth + 1, out)
            out.append(end + "}")
            return
        if isinstance(v, list):
            ai = info.get("arr")
            if not v:
                out.append("[]")
                return
            out.append("[")
            for i, x in enumerate(v):
                out.append(("," if i else "") + nl)
                r = None
                if ai is not None and "items" in ai:
                    r = ai["items"][i] if i < len(ai["items"]) else ai["rest"]
                self._dump(x, r, indent, depth + 1, out)
            out.append(end + "]")
            return
        num = info.get("num")
        if isinstance(v, float) and v.is_integer() and math.isfinite(v) and (
                self._float_kind or (num is not None and num in self._float_nums)):
            # (a float keeps its fraction where it is no integer: under drafts 3 and 4, and for an
            # int32 / int64 number, a float, which the format leaves alone)
            out.append(f"{int(v)}.0")  # (the float's exact value: 2.0 ** 63 is 9223372036854775808)
            return
        if isinstance(v, float) and v.is_integer() and math.isfinite(v):
            v = int(v)  # (exact: the shortest repr of 2.0 ** 63 reads back as another integer)
        if isinstance(v, float) and math.isfinite(v):
            out.append(_plain_number(v))  # no exponent: bounded numbers are spelled without one
            return
        out.append(json.dumps(v, ensure_ascii=False))


def _plain_number(x: float) -> str:
    """A finite float in JSON without exponent (``1e-06`` -> ``0.000001``), the same value."""
    return format(Decimal(repr(x)), "f")


def _json_key(v: Any) -> Any:
    """A hashable key equal for two values iff :func:`_json_eq` holds (1 and 1.0 alike, True apart)."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, (int, float)):
        return ("num", v)  # Python: 1 == 1.0 and hash(1) == hash(1.0)
    if isinstance(v, dict):
        return ("obj", frozenset((k, _json_key(x)) for k, x in v.items()))
    if isinstance(v, list):
        return ("arr", tuple(_json_key(x) for x in v))
    return (type(v).__name__, v)


def _json_eq(a: Any, b: Any) -> bool:
    """JSON Schema equality (1 == 1.0, but True != 1; objects unordered)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_eq(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_eq(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


# ------------------------------------------------------------------------------------ converter
class _Gen:
    def __init__(self, root: Any, ws: str | int, strict: bool, lenient: bool,
                 dead: frozenset[str] = frozenset(),
                 split: Mapping[str, UnsupportedSchemaError | None] = types.MappingProxyType({}),
                 enum_literals: bool = True) -> None:
        self.root = root
        # an enum of a few strings written as one literal terminal per string (_string_terminals), and
        # how many terminals that added; convert builds again without it where it passes a limit
        self.enum_literals = enum_literals
        self.n_enum_literals = 0
        self.split = split  # split oneOfs whose branches as written make no union: pointer -> _SplitFirst.first
        # pointers of property schemas found to admit no value only once the grammar was pruned
        # (an object requiring a property it forbids): their names are banned from the start
        self.dead_ptrs = dead
        self.strict = strict
        self.lenient = lenient
        self.parts_memo: dict[tuple[int, str, int], tuple[Any, _Parts]] = {}  # (prop_parts)
        self.overlap_memo: dict[tuple[str, str], bool] = {}  # (overlap)
        # the lenient probe of _pruned_when_lenient: it looks for empty places only, so a string's
        # pattern / format / nots and a number's products are left out (wider, never emptier), no
        # terminal's automaton is built to check its size, and terminals are taken to overlap
        self.probe = False
        self.dropped: list[Dropped] = []
        self.merged_ptrs: dict[tuple[str, str], set[str]] = {}  # (pointer, keyword) -> others merged into it
        self.real_of: dict[str, set[str]] = {}  # pointer made for a merged schema -> where it may be
        self.aliases: dict[str, set[str]] = {}  # a kept schema's place -> places of copies merged into it
        self.near_misses: dict[tuple[str, str], str] = {}  # (pointer, key) -> the keyword it is close to
        self.not_why: dict[str, str] = {}  # pointer of a not -> why its rewrite was given up (a limit)
        self.float_nums: set[str] = set()  # number terminals of int32 / int64 numbers (int_format_number)
        if ws == "compact":
            self.ws = ""
        elif ws == "flexible":
            self.ws = r"[ \t\n\r]*"
        else:
            self.ws = rf"[ \t\n\r]{{0,{int(ws)}}}" if int(ws) > 0 else ""
        self.ws_mode = ws
        self.rules: dict[str, list[str]] = {}
        self.terms: dict[str, str] = {}   # regex -> name
        self.word_chunks: dict[str, list[str]] = {}  # an enum's string content -> its terminals' (_word_chunks)
        self.term_names: set[str] = set()
        self.term_defs: list[tuple[str, str]] = []
        self.keylits: dict[str, str] = {}
        self.lit_defs: list[tuple[str, str]] = []
        self.memo: dict[Any, str | None] = {}
        self.obj_memo: dict[Any, str] = {}
        self.obj_meta: dict[str, dict] = {}  # object rule -> props / req / addl (unions: members)
        self.obj_jobs: dict[str, tuple] = {}  # object rule -> its build job (built on demand by unions)
        self.obj_built: dict[str, dict] = {}  # object rule -> its members' layout, once built
        self.branch_schema: dict[Any, Any] = {}  # union branch (object rule, pointer) -> its flattened schema
        self.arr_memo: dict[Any, str] = {}
        self.info: dict[str, dict] = {}
        self.work: list[Any] = []
        self.n = 0
        self.depth = 0
        nested_schema = _check_nesting(root)
        if isinstance(root, dict) and "$schema" in root and not isinstance(root["$schema"], str):
            raise InvalidSchemaError(f"$schema must be a string (the draft's URI), got {root['$schema']!r}",
                                     pointer="/$schema")
        try:
            cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator)
            check_schema(cls, root)  # cls.check_schema's verdict, most schemas without jsonschema
            self.validator = cls(root, format_checker=format_checker())
        except jsonschema.exceptions.SchemaError as e:
            where = "/".join(str(x) for x in e.path)
            raise InvalidSchemaError(f"not a valid JSON Schema: {e.message}",
                                     pointer="/" + where if where else "") from None
        except Exception as e:  # noqa: BLE001 - jsonschema raises several types for odd roots
            raise InvalidSchemaError(f"cannot build a validator for the schema: {e}") from None
        self.draft_class: Any = cls  # (jsonschema's reading of $schema: an unknown URI is 2020-12)
        self.draft3 = cls is jsonschema.Draft3Validator
        self.sub_drafts: dict[int, Any] = {}  # id of a subschema under another draft's $schema -> its class
        if nested_schema:
            _mark_drafts(root, cls, cls, self.sub_drafts)
        self._gad_validator: Any = None

    def flat_validator(self, flat: dict) -> Any:
        """A ``jsonschema`` validator of the flattened schema ``flat`` (its keywords read as gad reads
        them, the user's subschemas inside it under their own draft)."""
        if self.draft_class is jsonschema.Draft202012Validator:
            return self.validator.evolve(schema=_unflatten(flat))
        if self._gad_validator is None:
            self._gad_validator = _gad_validator_class(self.draft_class)(self.root, format_checker=format_checker())
        return self._gad_validator.evolve(schema=_gad_spelled(_unflatten(flat), self.draft_class))

    # ------------------------------------------------------------------------ bookkeeping
    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def content_name(self, prefix: str, text: str) -> str:
        """A terminal name made from the terminal's own text (``S_1F0A…``): the same terminal gets
        the same name in every schema's grammar, so that the compiler can share its lexer
        automata and token walks across schemas (gad.engine.compiler, ``share``)."""
        name = f"{prefix.upper()}_{hashlib.sha1(text.encode('utf-8', 'surrogatepass')).hexdigest()[:12].upper()}"
        if name in self.term_names:  # a 48-bit collision: fall back to a counter
            name = self.fresh(prefix.upper())
        self.term_names.add(name)
        return name

    def term(self, regex: str, prefix: str = "T", priority: int = 0) -> str:
        """The terminal for ``regex`` (Lark priority ``priority``; 0 is Lark's default)."""
        key = regex if not priority else f"{regex}\0{priority}"
        name = self.terms.get(key)
        if name is None:
            name = self.content_name(prefix, key)
            self.terms[key] = name
            self.term_defs.append((name if not priority else f"{name}.{priority}", regex))
        return name

    def punct(self, ch: str, lead: bool, trail: bool) -> str:
        w = self.ws
        return self.term((w if lead else "") + "\\" + ch + (w if trail else ""), "P")

    def unsupported(self, ptr: str, kw: str, why: str) -> None:
        """Refuse keyword ``kw`` at ``ptr`` (UnsupportedSchemaError), or with ``lenient`` record it as
        dropped, with every other pointer whose ``kw`` ``allOf`` / ``$ref`` merged into it
        (:meth:`merge`: the merged keyword keeps one pointer), so that the list of drops names each
        keyword the grammar no longer holds."""
        if not self.lenient:
            raise UnsupportedSchemaError(why, pointer=ptr, keyword=kw)
        for at in [ptr, *sorted(self.merged_ptrs.get((ptr, kw), ()))]:
            d = Dropped(at, kw, why)
            if d not in self.dropped:
                self.dropped.append(d)

    def resolve(self, ref: str, ptr: str) -> tuple[Any, str]:
        if not isinstance(ref, str) or not ref.startswith("#"):
            self.unsupported(ptr, "$ref", f"only local references '#...' are supported, got {ref!r}")
            return True, ptr
        frag = ref[1:]
        if frag and not frag.startswith("/"):
            self.unsupported(ptr, "$ref", f"anchor references ({ref!r}) are not supported")
            return True, ptr
        why = self.foreign_base(ptr)
        if why is not None:  # (lenient: the $ref dropped, the place admits anything)
            self.unsupported(ptr, "$ref", why)
            return True, ptr
        node = self.root
        for part in frag.split("/")[1:] if frag else []:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise InvalidSchemaError(f"$ref {ref!r} does not resolve", pointer=ptr)
        return node, frag

    def refused_inside(self, e: UnsupportedSchemaError, uptr: str, kinds: tuple[str, ...]) -> UnsupportedSchemaError | None:
        """The refusal to raise for ``e``, met while building the union gad wrote at ``uptr``: ``e``
        itself where it names a keyword of the user's (a union of theirs inside, or no union at
        all), ``e`` at the user's ``not`` / ``if`` whose own rewrite (below ``uptr``) made it, or None
        where it is the union's own (a keyword of ``kinds`` at a pointer gad made for it)."""
        if e.keyword not in kinds or (e.pointer != uptr and self.names_keyword(e.pointer, e.keyword)):
            return e
        inner = None
        if e.pointer != uptr:
            inner = self.rewritten_at(e.pointer) or ((e.pointer, "not") if self.names_keyword(e.pointer, "not") else None)
        if inner is not None and inner[0].startswith(uptr + "/"):
            return UnsupportedSchemaError(e.reason, pointer=inner[0], keyword=inner[1])
        return None

    def real_pointers(self, ptr: str) -> list[str]:
        """The places in the user's schema that ``ptr`` may name: its longest prefix made for a merged
        schema (a member of a meet, :func:`_schema_meet`; one side's schema under the other side's
        pointer, :meth:`merge`) replaced by each place it stands for, again until none is left."""
        out: list[str] = []
        todo, seen = [ptr], set[str]()
        while todo and len(seen) < 256:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            parts = p.split("/")
            for i in range(len(parts), 0, -1):
                head = "/".join(parts[:i])
                if head in self.real_of:
                    todo.extend(r + p[len(head):] for r in sorted(self.real_of[head]) if r != head)
                    break
            else:
                out.append(p)
        return out or [ptr]

    def real_pointer(self, ptr: str, keyword: str) -> str:
        """One of :meth:`real_pointers`, holding ``keyword`` where one does."""
        places = self.real_pointers(ptr)
        return next((p for p in places if self.names_keyword(p, keyword)), places[0])

    def rewritten_at(self, ptr: str, kinds: tuple[str, ...] = ("not", "if")) -> tuple[str, str] | None:
        """(pointer, keyword) of the innermost user keyword of ``kinds`` whose rewrite gad's schema at
        ``ptr`` is part of (the rewrite's pointers run on below the keyword: ``/a/not/properties/b``),
        for a refusal or a drop to name; None when none is found."""
        parts = ptr.split("/")
        for i in range(len(parts) - 1, 0, -1):
            at, kw = "/".join(parts[:i]), parts[i]
            if kw in kinds and _is_keyword_step(parts, i) and self.names_keyword(at, kw):
                return at, kw
        return None

    def names_keyword(self, ptr: str, keyword: str) -> bool:
        """The user's schema holds ``keyword`` in the object at JSON pointer ``ptr`` (a pointer gad made
        for a schema it wrote, such as a rewritten ``not``'s union, does not)."""
        path = _walk(self.root, ptr)
        return len(path) == ptr.count("/") + 1 and isinstance(path[-1][1], dict) and keyword in path[-1][1]

    def existing_place(self, ptr: str, keyword: str) -> str:
        """Where a refusal or drop of ``keyword`` found at ``ptr`` is named: ``ptr`` where the user's
        schema holds ``keyword`` there; else the deepest place above it that does; else the one place
        in the document that does, where only one does; else the deepest place above it in the document.
        (A place gad made for a rewrite or a merge that :meth:`real_pointers` could not map back is
        never named: it holds nothing the user wrote.)"""
        if self.names_keyword(ptr, keyword):
            return ptr
        path = _walk(self.root, ptr)
        for here, node in reversed(path):
            if isinstance(node, dict) and keyword in node:
                return here
        holders = _places_holding(self.root, keyword, 2)
        return holders[0] if len(holders) == 1 else path[-1][0]

    def foreign_base(self, ptr: str) -> str | None:
        """Why a ``#...`` reference made at ``ptr`` cannot be resolved against the root, or None: inside
        a subschema with its own ``$id`` (draft-04's ``id``) it resolves against that resource (a bundled
        schema's ``$defs`` entries carry their ``$id``), which gad does not follow."""
        ids = ("$id", "id") if type(self.validator).__name__ in ("Draft3Validator", "Draft4Validator") else ("$id",)
        for here, node in _walk(self.root, ptr)[1:]:  # (a merged schema's pointer stops where it leaves the document)
            if isinstance(node, dict) and any(isinstance(node.get(k), str) for k in ids):
                kw = next(k for k in ids if isinstance(node.get(k), str))
                return (f"a $ref inside a subschema with its own {kw} (#{here}) resolves against that resource; "
                        "gad resolves against the root only")
        return None

    def resolve_negated(self, ref: str, ptr: str) -> Any:
        """The target of ``ref`` (made at ``ptr``) inside a schema gad negates (:func:`_not_schema`), or
        :data:`_UNRESOLVED` under ``lenient`` where :meth:`resolve` would drop it: dropping a ``$ref``
        under a ``not`` would narrow the schema, so the negation is refused, and dropped, whole."""
        why = self.foreign_base(ptr)
        if why is not None:
            if not self.lenient:
                self.unsupported(ptr, "$ref", why)
            return _UNRESOLVED
        return self.resolve(ref, ptr)[0]

    # ------------------------------------------------------------------------ flattening
    def defined(self, node: Any) -> frozenset[str]:
        """The keywords the draft of the user's ``node`` defines (:meth:`draft_of`, :func:`_draft_keywords`)."""
        return _draft_keywords(self.draft_of(node))

    def draft_of(self, node: Any) -> Any:
        """The validator class of the draft ``node`` (the user's) is read under: its own or its nearest
        enclosing ``$schema``'s, as ``jsonschema`` switches drafts there (:func:`_mark_drafts`)."""
        return self.sub_drafts.get(id(node), self.draft_class)

    def ref_draft(self, node: Any) -> Any:
        """The draft that decides whether ``node``'s ``$ref`` siblings apply, as ``jsonschema`` reads
        it: the node's own (:meth:`draft_of`), except on a node that carries ``$schema`` itself, which
        ``jsonschema`` reads under the root's draft."""
        if isinstance(node, dict) and "$schema" in node:
            return self.draft_class
        return self.draft_of(node)

    def own_keywords(self, node: dict, ptr: str) -> dict:
        """``node``'s keywords as gad reads them (2020-12's spellings), under the document's draft: a
        keyword the draft does not define is an annotation (:func:`_draft_keywords`), and so is a
        modifier without the keyword it modifies (``then`` / ``else`` without ``if``, ``minContains`` /
        ``maxContains`` without ``contains``); draft-03's ``"required": true`` inside a property's
        schema, its one-name ``dependencies`` and its type ``"any"`` are rewritten; draft-03 schemas
        inside ``type`` are refused (UnsupportedSchemaError).  The draft is the node's
        (:meth:`draft_of`)."""
        cls = self.draft_of(node)
        draft3 = cls is jsonschema.Draft3Validator
        keywords = _draft_keywords(cls)
        rest = {k: v for k, v in node.items() if not (k in _KEYWORDS and k not in keywords)}
        for kw, host in (("then", "if"), ("else", "if"), ("minContains", "contains"), ("maxContains", "contains")):
            if kw in rest and host not in rest:
                rest.pop(kw)
        if draft3 and "type" in rest:
            types = rest["type"] if isinstance(rest["type"], list) else [rest["type"]]
            if any(isinstance(t, dict) for t in types):
                self.unsupported(ptr, "type", "draft-03 schemas inside type")
                rest.pop("type")
            elif "any" in types:
                rest.pop("type")
        if draft3 and isinstance(rest.get("properties"), dict):
            names = [k for k, sub in rest["properties"].items() if isinstance(sub, dict) and sub.get("required") is True]
            if names:
                rest["required"] = names
        if draft3 and isinstance(rest.get("dependencies"), dict):
            rest["dependencies"] = {k: [d] if isinstance(d, str) else d for k, d in rest["dependencies"].items()}
        return rest

    def flatten(self, node: Any, ptr: str, depth: int = 0) -> Any:
        """Resolve $ref / allOf into one dict: {kw: value}, '_ptr': {kw: ptr}, '_unions': [...]."""
        if depth > 64:
            self.unsupported(ptr, "$ref", "$ref / allOf nested over 64 deep without an object or array in "
                                          "between: a reference cycle, or nesting past gad's limit")
            return {"_ptr": {}, "_unions": []}
        if node is True:
            return {"_ptr": {}, "_unions": []}
        if node is False:
            return _FALSE
        if not isinstance(node, dict):
            raise InvalidSchemaError(f"a schema must be an object or a boolean, got {type(node).__name__}",
                                     pointer=ptr)
        flat: Any = {"_ptr": {}, "_unions": []}
        rest = dict(node) if isinstance(node, _Internal) else self.own_keywords(node, ptr)
        if "$ref" in rest:
            target, tptr = self.resolve(rest.pop("$ref"), ptr)
            sub = self.flatten(target, tptr, depth + 1)
            if self.ref_draft(node) in _OLD_REF:  # (drafts 04-07: $ref's siblings are ignored)
                return sub
            flat = self.merge(flat, sub, ptr)
        for kw in ("allOf",):
            if kw in rest:
                branches = rest.pop(kw)
                at = getattr(node, "member_ptrs", None)  # (a split oneOf's branch: its members' real pointers)
                for i, src in enumerate(getattr(node, "src_ptrs", None) or ()):  # (a meet's: for refusals)
                    self.real_of.setdefault(_ptr_join(ptr, kw, i), set()).add(src)
                for i, b in enumerate(branches):
                    flat = self.merge(flat, self.flatten(b, at[i] if at else _ptr_join(ptr, kw, i), depth + 1), ptr)
        for kw in ("anyOf", "oneOf"):
            if kw in rest:
                branches = rest.pop(kw)
                if flat is not _FALSE:
                    split = self.split_one_of(branches, ptr) if kw == "oneOf" else None
                    plain = [(b, _ptr_join(ptr, kw, i)) for i, b in enumerate(branches)]
                    if split is None:
                        flat["_unions"].append((kw, plain, ptr))
                    else:  # (tried as written first: union_parts)
                        kind = _Rewrite(kw)
                        kind.plain = plain
                        flat["_unions"].append((kind, [(b, _ptr_join(ptr, kw, i)) for i, b in enumerate(split)], ptr))
        for kw in ("dependencies", "dependentRequired", "dependentSchemas"):
            # {A: [B, ...]} / {A: S}: A absent, or A present with B ... required / S (an anyOf)
            deps = rest.pop(kw, None)
            if not isinstance(deps, dict) or flat is _FALSE:
                continue
            if len(deps) > _MAX_DEPENDENCIES:
                self.unsupported(ptr, kw, f"{len(deps)} dependencies make a union of 2^{len(deps)} branches "
                                          f"(gad's limit: {_MAX_DEPENDENCIES})")
                continue
            for a, dep in deps.items():
                dptr = _ptr_join(ptr, kw, a)
                present: Any = _Internal(required=[a])
                if isinstance(dep, list):
                    if kw == "dependentSchemas":
                        raise InvalidSchemaError("dependentSchemas values must be schemas", pointer=dptr)
                    present["required"] = [a] + [x for x in dep if x != a]
                elif kw == "dependentRequired":
                    raise InvalidSchemaError("dependentRequired values must be arrays of names", pointer=dptr)
                elif dep is False:
                    present = False
                elif isinstance(dep, dict):  # the dependent schema itself (its pointers stay real)
                    for _ in range(64):  # drafts 04-07 ignore $ref's siblings: add "required" to the target
                        if not (self.ref_draft(dep) in _OLD_REF and isinstance(dep, dict) and "$ref" in dep):
                            break
                        dep, dptr = self.resolve(dep["$ref"], dptr)
                        dptr = dptr or ""
                    if dep is False:
                        present = False
                    elif isinstance(dep, dict):
                        present = _Internal(self.own_keywords(dep, dptr))
                        own_req = present.get("required", [])
                        present["required"] = [a] + [x for x in (own_req if isinstance(own_req, list) else []) if x != a]
                branches_ = [(_Internal(properties={a: False}), _ptr_join(ptr, kw))]
                if present is not False:
                    branches_.append((present, dptr))
                flat["_unions"].append((kw, branches_, ptr))
        not_in = not_pattern = None
        if isinstance(node, _Internal) and isinstance(rest.get("not"), _Internal) and set(rest["not"]) == {"enum"}:
            not_in = rest.pop("not")["enum"]  # (gad's own not of an enum, from _negation)
        elif isinstance(node, _Internal) and isinstance(rest.get("not"), _Internal) and set(rest["not"]) == {"pattern"}:
            not_pattern = [rest.pop("not")["pattern"]]  # (gad's own not of a pattern, from _negation)
        if "not" in rest:
            why: list[str] = []
            neg = _not_schema(rest["not"], lambda ref: self.resolve_negated(ref, _ptr_join(ptr, "not")), self.defined,
                              why)
            if why:
                self.not_why[ptr] = why[0]
            if neg is not None:  # (other shapes stay, and are refused where they constrain: kind_parts)
                rest.pop("not")
                flat = self.merge(flat, self.flatten(neg, _ptr_join(ptr, "not"), depth + 1), ptr)
        if "if" in rest:
            cases = self.conditional(rest, ptr)
            if cases is not None:  # (else "if" stays, and is refused where it constrains: kind_parts)
                for kw in ("if", "then", "else"):
                    rest.pop(kw, None)
                if flat is _FALSE:
                    pass
                elif not cases:
                    flat = _FALSE
                elif len(cases) == 1:
                    flat = self.merge(flat, self.flatten(cases[0][0], cases[0][1], depth + 1), ptr)
                else:
                    flat["_unions"].append((_Rewrite("if"), cases, ptr))
        own: dict = {"_ptr": {}, "_unions": []}
        if not_in is not None:
            own["gad:notIn"] = not_in
            own["_ptr"]["gad:notIn"] = ptr
        if not_pattern is not None:
            own["gad:notPattern"] = not_pattern
            own["_ptr"]["gad:notPattern"] = ptr
        for kw, v in rest.items():
            if _is_annotation(kw):
                if kw not in _KEYWORDS and kw not in _ANNOTATIONS and not kw.startswith(("_", "x-")):
                    # (a key switched off on purpose, "_format", or an extension, "x-maxLength", is quiet)
                    near = _near_keyword(kw)
                    if near is not None:
                        self.near_misses.setdefault((ptr, kw), near)
                continue
            if kw == "const":
                kw, v = "enum", [v]
            if kw == "exclusiveMinimum" and isinstance(v, bool):  # draft-04 spelling
                if v and "minimum" in rest:
                    own["exclusiveMinimum"] = rest["minimum"]
                    own["_ptr"]["exclusiveMinimum"] = ptr
                    own.pop("minimum", None)
                continue
            if kw == "exclusiveMaximum" and isinstance(v, bool):
                if v and "maximum" in rest:
                    own["exclusiveMaximum"] = rest["maximum"]
                    own["_ptr"]["exclusiveMaximum"] = ptr
                    own.pop("maximum", None)
                continue
            if kw in ("minimum", "maximum") and rest.get("exclusive" + kw[:1].upper() + kw[1:]) is True:
                continue
            if kw == "enum" and "enum" in own:
                v = [x for x in own["enum"] if any(_json_eq(x, y) for y in v)]
            if kw in _COUNT_KEYWORDS and isinstance(v, float) and v.is_integer():
                v = int(v)  # (1.0 is an integer in JSON Schema: the count keywords take it)
            own[kw] = v
            own["_ptr"][kw] = ptr
        if flat is _FALSE:
            return _FALSE
        return self.merge(flat, own, ptr)

    def split_one_of(self, branches: list[Any], ptr: str) -> list[Any] | None:
        """``oneOf: [B_1, ..., B_n]`` as disjoint branches ``B_i`` and not ``B_j`` for each j != i (the
        values exactly one branch admits), when each branch's negation is a schema gad writes
        (:func:`_not_schema`; e.g. ``required``, ``type`` and ``not`` of them) and some branch is more
        than a ``type`` (a oneOf of types alone is exact already); else None."""
        if not 2 <= len(branches) <= 8:
            return None
        if all(b is True or b is False or (isinstance(b, dict) and {k for k in b if not _is_annotation(k)} <= {"type"})
               for b in branches):
            return None
        negs = [_not_schema(b, lambda ref: self.resolve_negated(ref, _ptr_join(ptr, "oneOf")), self.defined) for b in branches]
        if any(x is None for x in negs):
            return None
        split = []
        for i, b in enumerate(branches):
            x = _Internal(allOf=[b] + [neg for j, neg in enumerate(negs) if j != i])
            x.member_ptrs = [_ptr_join(ptr, "oneOf", i)] + [_ptr_join(ptr, "oneOf")] * (len(negs) - 1)
            split.append(x)
        return split if sum(_alternatives(x) for x in split) <= 2 * _MAX_REWRITE_ALTERNATIVES else None

    def conditional(self, rest: dict, ptr: str) -> list[tuple[Any, str]] | None:
        """``if`` / ``then`` / ``else`` of a schema (its keywords ``rest``, at ``ptr``) as disjoint cases,
        each a schema with its pointer: "``if`` and ``then``" and "not ``if`` and ``else``" (JSON Schema
        2020-12 section 10.2.2.1; an absent ``then`` / ``else`` is ``true``), a ``false`` case left
        out; ``[]`` when no value is valid.  The second case needs ``if``'s negation
        (:func:`_not_schema`); None when gad cannot write it (the ``if`` is then refused)."""
        cond, then, other = rest["if"], rest.get("then", True), rest.get("else", True)
        at_if = _ptr_join(ptr, "if")
        if then is True and other is True:
            return [(True, at_if)]  # (an if alone constrains nothing)
        cases: list[tuple[Any, str]] = []
        if then is not False:
            yes = _Internal(allOf=[cond, then])
            yes.member_ptrs = [at_if, _ptr_join(ptr, "then")]
            cases.append((yes, _ptr_join(ptr, "then")))
        if other is not False:
            neg = _not_schema(cond, lambda ref: self.resolve_negated(ref, at_if), self.defined)
            if neg is None:
                return None
            no = _Internal(allOf=[neg, other])
            no.member_ptrs = [at_if, _ptr_join(ptr, "else")]
            cases.append((no, _ptr_join(ptr, "else")))
        return cases

    def merge(self, a: Any, b: Any, ptr: str) -> Any:
        if a is _FALSE or b is _FALSE:
            return _FALSE
        out = dict(a)
        out["_ptr"] = dict(a["_ptr"])
        out["_unions"] = list(a["_unions"]) + list(b["_unions"])
        for kw, v in b.items():
            if kw in ("_ptr", "_unions"):
                continue
            bp = b["_ptr"].get(kw, ptr)
            if kw in _ITEM_KEYWORDS:
                continue  # (merge_items: a side's additionalItems means something only beside its items)
            if kw not in out:
                out[kw] = v
                out["_ptr"][kw] = bp
                continue
            u = out[kw]
            if self.lenient and bp != out["_ptr"].get(kw, ptr):  # (both sides' pointers, for a drop to name)
                here = out["_ptr"].get(kw, ptr)
                also = self.merged_ptrs.setdefault((here, kw), set())
                also.add(bp)
                also |= self.merged_ptrs.get((bp, kw), set())
            if kw == "type":
                ta = _type_set(u)
                tb = _type_set(v)
                out[kw] = sorted(_type_meet(ta, tb))
            elif kw in ("minLength", "minItems", "minimum", "exclusiveMinimum", "minProperties"):
                out[kw] = max(u, v)
            elif kw in ("maxLength", "maxItems", "maximum", "exclusiveMaximum", "maxProperties"):
                out[kw] = min(u, v)
            elif kw == "required":
                out[kw] = list(u) + [x for x in v if x not in u]
            elif kw == "enum":
                out[kw] = [x for x in u if any(_json_eq(x, y) for y in v)]
            elif kw in ("properties", "additionalProperties"):
                pass  # merged below, needs both sides
            elif kw == "uniqueItems":
                out[kw] = bool(u) or bool(v)
            elif kw == "gad:notIn":
                out[kw] = list(u) + [x for x in v if not any(_json_eq(x, y) for y in u)]
            elif kw == "gad:notPattern":
                out[kw] = list(u) + [x for x in v if x not in u]
            elif _json_eq(u, v):
                pass
            else:
                self.unsupported(bp, kw, f"allOf / $ref siblings with two different {kw!r} values "
                                         "need an intersection gad cannot write as one terminal")
        self.merge_items(a, b, out, ptr)
        keyed_a = [k for k in ("properties", "patternProperties", "additionalProperties") if k in a]
        keyed_b = [k for k in ("properties", "patternProperties", "additionalProperties") if k in b]
        if keyed_a and keyed_b and ("patternProperties" in a or "patternProperties" in b) and \
                (a.get("additionalProperties", True) is not True or b.get("additionalProperties", True) is not True):
            # one side's additionalProperties applies to the keys outside *its own* properties and
            # patternProperties: after a merge the other side's patterns would hide keys from it
            kw = "patternProperties" if "patternProperties" in b else "additionalProperties"
            self.unsupported(b["_ptr"].get(kw, ptr), kw, "allOf / $ref siblings with patternProperties beside "
                             "another schema's additionalProperties: the merged object is not one schema's")
        if "properties" in b or "additionalProperties" in b:
            if "properties" in a or "additionalProperties" in a:
                pa, pb = a.get("properties", {}), b.get("properties", {})
                xa, xb = a.get("additionalProperties", True), b.get("additionalProperties", True)
                props = {}

                def at(side: Any, listed: bool, k: str) -> str:  # where a side's schema for key k is
                    if listed:
                        return _ptr_join(side["_ptr"].get("properties", ptr), "properties", k)
                    return _ptr_join(side["_ptr"].get("additionalProperties", ptr), "additionalProperties")

                for k in list(pa) + [k for k in pb if k not in pa]:
                    sa, sb = pa.get(k, xa), pb.get(k, xb)
                    props[k] = self.meet(sa, sb, at(a, k in pa, k), at(b, k in pb, k))
                    if props[k] is sb and sa is True and at(a, True, k) != at(b, k in pb, k):  # (b's, under a's pointer)
                        self.real_of.setdefault(at(a, True, k), set()).add(at(b, k in pb, k))
                out["properties"] = props
                if "additionalProperties" in a or "additionalProperties" in b:
                    out["additionalProperties"] = self.meet(xa, xb, at(a, False, ""), at(b, False, ""))
            else:
                for kw in ("properties", "additionalProperties"):
                    if kw in b:
                        out[kw] = b[kw]
                        out["_ptr"][kw] = b["_ptr"].get(kw, ptr)
        return out

    def meet(self, x: Any, y: Any, at_x: str, at_y: str) -> Any:
        """:func:`_schema_meet` of ``x`` (at ``at_x``) and ``y`` (at ``at_y``); where ``y`` is written like
        ``x`` and only ``x`` is kept, a keyword dropped inside it (``lenient``) is also named at
        ``y``'s place (:data:`aliases`)."""
        both = _schema_meet(x, y, not self.sub_drafts, [at_x, at_y])
        if both is x and y is not True and y is not x:
            self.aliases.setdefault(at_x, set()).add(at_y)
        return both

    def drops(self) -> list[Dropped]:
        """The keywords dropped (``lenient``), each named where the user wrote it
        (:meth:`real_pointer`), and again at each place holding a copy merged into it (:meth:`meet`)."""
        aliases: dict[str, set[str]] = {}
        for a, bs in self.aliases.items():
            for ra in self.real_pointers(a):
                aliases.setdefault(ra, set()).update(rb for b in bs for rb in self.real_pointers(b))
        out: dict[Dropped, None] = {}
        todo: list[Dropped] = []
        for d in self.dropped:
            places = self.real_pointers(d.pointer)
            named = [p for p in places if self.names_keyword(p, d.keyword)]
            todo.extend(Dropped(*self.dropped_as(p, d.keyword), d.reason) for p in (named or places[:1]))
        while todo and len(out) < 10_000:
            d = todo.pop()
            if d in out:
                continue
            out[d] = None
            for a, bs in aliases.items():
                if d.pointer == a or d.pointer.startswith(a + "/"):
                    todo.extend(Dropped(b + d.pointer[len(a):], d.keyword, d.reason) for b in bs)
        placed = [Dropped(self.existing_place(d.pointer, d.keyword), d.keyword, d.reason) for d in out]
        once = {(d.pointer, d.keyword): d for d in sorted(placed, key=lambda d: (d.pointer, d.keyword, d.reason), reverse=True)}
        return sorted(once.values(), key=lambda d: (d.pointer, d.keyword))

    def dropped_as(self, ptr: str, keyword: str) -> tuple[str, str]:
        """The (pointer, keyword) a lenient drop of ``keyword`` at ``ptr`` (a real place) is listed as:
        inside a rewritten ``if`` (read in both of its cases, once negated) the whole conditional, its
        ``if`` (removing it leaves ``then`` / ``else`` inert); at a place gad made for a rewrite (a
        split ``oneOf``'s negations, a rewritten ``not``'s union) the user's keyword rewritten."""
        parts = ptr.split("/")
        for i in range(1, len(parts)):
            if parts[i] == "if" and _is_keyword_step(parts, i) and self.names_keyword("/".join(parts[:i]), "if"):
                return "/".join(parts[:i]), "if"
        if self.names_keyword(ptr, keyword):
            return ptr, keyword
        return self.rewritten_at(ptr, ("not", "if", "oneOf")) or (ptr, keyword)

    def merge_items(self, a: Any, b: Any, out: dict, ptr: str) -> None:
        """The array items of ``allOf: [a, b]`` into ``out``: each side read as a prefix and the schema
        of the elements after it (``prefixItems`` + ``items``, or drafts 04-2019's ``items: [...]`` +
        ``additionalItems``; ``additionalItems`` beside no array ``items`` does nothing), then element
        ``i`` meets both sides' schemas for ``i`` and the rest meets both rests, written as
        ``prefixItems`` + ``items``."""
        sa, sb = _item_shape(a), _item_shape(b)
        if sb is None:
            return
        if sa is None:
            for kw in _ITEM_KEYWORDS:
                if kw in b:
                    out[kw] = b[kw]
                    out["_ptr"][kw] = b["_ptr"].get(kw, ptr)
            return
        (pa, ra, ptr_a), (pb, rb, ptr_b) = sa, sb
        for kw in _ITEM_KEYWORDS:
            out.pop(kw, None)
        n = max(len(pa), len(pb))

        def at(d: Any, items: list[Any], i: int | None) -> str:  # where a side's schema for element i is
            pp = d["_ptr"]
            if "prefixItems" in d:
                return _ptr_join(pp.get("prefixItems", ptr), "prefixItems", i) if i is not None and i < len(items) \
                    else _ptr_join(pp.get("items", pp.get("prefixItems", ptr)), "items")
            if isinstance(d.get("items"), list):
                return _ptr_join(pp.get("items", ptr), "items", i) if i is not None and i < len(items) \
                    else _ptr_join(pp.get("additionalItems", pp.get("items", ptr)), "additionalItems")
            return _ptr_join(pp.get("items", ptr), "items")

        prefix = [self.meet(pa[i] if i < len(pa) else ra, pb[i] if i < len(pb) else rb, at(a, pa, i), at(b, pb, i))
                  for i in range(n)]
        if prefix:
            out["prefixItems"] = prefix
            out["_ptr"]["prefixItems"] = ptr_a if len(pa) >= len(pb) else ptr_b
        out["items"] = self.meet(ra, rb, at(a, pa, None), at(b, pb, None))
        out["_ptr"]["items"] = ptr_a

    # ------------------------------------------------------------------------ value rules
    def value_rule(self, node: Any, ptr: str, memo_key: Any = None) -> str | None:
        """Name of the rule for values valid under ``node`` (None: no value is); memoised by
        ``memo_key`` (default: the pointer with the node's content, or the ``$ref`` target).

        The content is part of the key because merged schemas keep one side's pointer: two
        objects built from ``allOf: [{"$ref": base}]`` plus their own ``properties`` both name
        their merged properties after ``base``'s pointer, with different schemas.
        """
        key: Any = memo_key
        if key is None:
            key = (ptr, json.dumps(node, sort_keys=True, default=str)) if isinstance(node, dict) else ptr
        if memo_key is not None:
            pass
        elif isinstance(node, dict) and "$ref" in node and all(k == "$ref" or _is_annotation(k) for k in node):
            _t, tptr = self.resolve(node["$ref"], ptr)
            key = ("ref", tptr)
        elif node is True or (isinstance(node, dict) and all(_is_annotation(k) for k in node)):
            return self.any_value()
        if key in self.memo:
            return self.memo[key]
        name = self.fresh("v")
        self.memo[key] = name
        parts = self.parts(node, ptr)
        if parts.empty():
            self.memo[key] = None
            self.rules[name] = [name]  # referenced while in progress: an unproductive rule
            return None
        self.emit_value(name, parts)
        return name

    def emit_value(self, name: str, p: _Parts) -> None:
        alts = []
        if p.obj:
            alts.append(p.obj)
        if p.arr:
            alts.append(p.arr)
        if isinstance(p.string, _Chunked):
            alts.append(self.chunked_string(p.string))
        elif isinstance(p.string, _Meet):
            alts.append(self.term(p.string.terminal(), "S"))
        elif p.string == "*":
            alts.append(self.term(JSON_STRING, "S"))
        elif p.string is not None:
            chunks = self.word_chunks.get(p.string)
            # (a chunk of a large enum stays a word set; a const is a literal either way)
            most = _ENUM_LITERALS_MAX if chunks is None and self.enum_literals else 1
            for c in chunks or (p.string,):
                terms = _string_terminals(c, most)
                self.n_enum_literals += len(terms) - 1
                alts.extend(self.term(t, "S") for t in terms)
        if p.number is not None:
            alts.append(self.term(p.number, "N"))
        for lit in sorted(p.lits):
            alts.append(self.term(lit, "L"))
        self.rules[name] = alts
        self.info[name] = {"obj": self.info.get(p.obj, {}).get("obj") if p.obj else None,
                           "arr": self.info.get(p.arr, {}).get("arr") if p.arr else None}
        self.info[name]["_obj_rule"] = p.obj
        self.info[name]["_arr_rule"] = p.arr
        self.info[name]["num"] = p.number

    def parts(self, node: Any, ptr: str, flat: Any = None) -> _Parts:
        self.depth += 1
        try:
            if self.depth > 48:
                self.unsupported(ptr, "$ref", "anyOf / oneOf / allOf / $ref nested over 48 deep without an "
                                              "object or array in between: a reference cycle, or nesting past "
                                              "gad's limit")
                return _Parts()
            return self._parts(node, ptr, flat)
        finally:
            self.depth -= 1

    def _parts(self, node: Any, ptr: str, flat: Any = None) -> _Parts:
        if flat is None:
            flat = self.flatten(node, ptr)
        if flat is _FALSE:
            return _Parts()
        if "enum" in flat:
            return self.enum_parts(node, flat, ptr)
        if flat["_unions"]:
            return self.union_parts(flat, ptr)
        return self.kind_parts(flat, ptr)

    def union_parts(self, flat: dict, ptr: str) -> _Parts:
        """The parts of ``flat``'s first union (each branch merged with the rest of ``flat``).  A split
        ``oneOf`` (:meth:`split_one_of`) is first built as written, which is exact when its branches
        prove disjoint and gives a smaller grammar; a rewrite gad cannot build is refused at the
        keyword rewritten (UnsupportedSchemaError), not at the union gad wrote."""
        rewrites = [u for u in flat["_unions"] if isinstance(u[0], _Rewrite)]
        size = math.prod(len(br) for _k, br, _p in flat["_unions"])
        if rewrites and size > _MAX_REWRITE_PRODUCT:
            for rkw, _br, rptr in rewrites:  # (strict: the first one raises; lenient: each is dropped)
                self.unsupported(rptr, str(rkw), f"with the unions beside it, its rewrite spells out {size:,} "
                                 f"alternatives (gad's limit: {_MAX_REWRITE_PRODUCT})")
            flat = dict(flat, _unions=[u for u in flat["_unions"] if not isinstance(u[0], _Rewrite)])  # (lenient)
            if not flat["_unions"]:
                return self.parts(None, ptr, flat)
        kw, _branches, uptr = flat["_unions"][0]
        if not isinstance(kw, _Rewrite) or self.lenient:
            return self._union_parts(flat, ptr)
        plain = kw.plain
        if plain is not None and uptr not in self.split:
            try:
                return self._union_parts(dict(flat, _unions=[(str(kw), plain, uptr)] + flat["_unions"][1:]), ptr)
            except UnsupportedSchemaError as e:
                # the split may build where the union as written cannot (its branches narrowed by the
                # others' negations); if it cannot either, a refusal at a keyword of the user's met here
                # is the one raised.  The attempt left memos of rules it never finished: the conversion
                # starts again
                raise _SplitFirst(uptr, self.refused_inside(e, uptr, ("anyOf", "oneOf"))) from None
        try:
            return self._union_parts(flat, ptr)
        except UnsupportedSchemaError as e:
            inner = self.refused_inside(e, uptr, ("anyOf", "oneOf", str(kw))) or self.split.get(uptr)
            if inner is not None:
                raise inner from None
            how = ("if / then / else, written as '(if and then) or (not if and else)', makes" if kw == "if" else
                   "branches that overlap, split into 'this branch and no other one', make")
            raise UnsupportedSchemaError(f"{how} a union gad cannot build: {e.reason}", pointer=uptr,
                                         keyword=str(kw)) from None

    def _union_parts(self, flat: dict, ptr: str) -> _Parts:
        (kw, branches, uptr), *others = flat["_unions"]
        base = dict(flat)
        base["_unions"] = others
        if len(branches) > _MAX_UNION_ALTS:
            self.unsupported(uptr, kw, f"more than {_MAX_UNION_ALTS} branches")
        alts: list[tuple[_Parts, str]] = []
        for b, bptr in branches:
            sub = self.merge(base, self.flatten(b, bptr), bptr)
            if sub is _FALSE:
                continue
            p = self.parts(None, bptr, sub)
            if not p.empty():
                alts.append((p, bptr))
                self.branch_schema[(p.obj, bptr)] = sub  # (two branches may share a pointer)
        return self.combine(alts, kw, uptr, base)

    def combine(self, alts: list[tuple[_Parts, str]], kw: str, uptr: str, base: Any = None) -> _Parts:
        out = _Parts()
        one_of = _is_one_of(kw)
        objs: list[tuple[str, bool, Any, str]] = []
        strings_joined = False  # string branches united into one terminal
        for p, bptr in alts:
            for lit in sorted(p.lits):  # (sorted: the refusal names the same one in every process)
                if lit in out.lits and one_of:
                    self.unsupported(uptr, kw, f"branches {out.where.get(lit)} and {bptr} both admit {lit} "
                                               "(oneOf over overlapping branches)")
                out.lits.add(lit)
                out.where.setdefault(lit, bptr)
            if p.string is not None:
                if out.string is None:
                    out.string = p.string
                    out.where["string"] = bptr
                elif isinstance(out.string, _OPAQUE) or isinstance(p.string, _OPAQUE):
                    if not one_of and "*" in (out.string, p.string):
                        out.string = "*"
                    elif not one_of and out.string == p.string:
                        pass
                    else:
                        what = (f"a length bound over {_MAX_LENGTH} is a chain of terminals"
                                if isinstance(out.string, _Chunked) or isinstance(p.string, _Chunked) else
                                "a string under several of pattern / length / format is a lookahead "
                                "intersection terminal")
                        self.unsupported(uptr, kw, f"string branches {out.where['string']} and {bptr}: {what} "
                                                   "and cannot be merged with another string branch")
                        out.string = "*"
                else:
                    if one_of and self.overlap('"' + _cx(out.string) + '"', '"' + _cx(p.string) + '"'):
                        self.unsupported(uptr, kw, f"string branches {out.where['string']} and {bptr} overlap "
                                                   "(oneOf is exact only over disjoint branches)")
                    out.string = "*" if "*" in (out.string, p.string) else f"(?:{out.string}|{p.string})"
                    strings_joined = True
            if p.number is not None:
                if out.number is None:
                    out.number = p.number
                    out.where["number"] = bptr
                else:
                    if one_of and self.overlap(out.number, p.number):
                        self.unsupported(uptr, kw, f"number branches {out.where['number']} and {bptr} overlap "
                                                   "(oneOf is exact only over disjoint branches)")
                    if JSON_NUMBER in (out.number, p.number):
                        out.number = JSON_NUMBER
                    else:
                        joined = _join_numbers(out.number, p.number)
                        if joined is None:
                            self.unsupported(uptr, kw, f"number branches {out.where['number']} and {bptr}: "
                                                       "their union is too large to write as one terminal")
                            joined = JSON_NUMBER
                        out.number = joined
            if p.obj is not None:
                objs.append((p.obj, p.obj_any, p.obj_key, bptr))
            for kind in ("arr",):
                r = getattr(p, kind)
                if r is None:
                    continue
                cur = getattr(out, kind)
                if cur is None:
                    setattr(out, kind, r)
                    setattr(out, kind + "_any", getattr(p, kind + "_any"))
                    setattr(out, kind + "_key", getattr(p, kind + "_key"))
                    out.where[kind] = bptr
                    continue
                if cur == r or (getattr(out, kind + "_key") is not None
                                and getattr(out, kind + "_key") == getattr(p, kind + "_key")):
                    if one_of:
                        self.unsupported(uptr, kw, f"branches {out.where[kind]} and {bptr} admit the same values")
                    continue
                if not one_of and getattr(out, kind + "_any"):
                    continue
                if not one_of and getattr(p, kind + "_any"):
                    setattr(out, kind, r)
                    setattr(out, kind + "_any", True)
                    continue
                self.unsupported(uptr, kw, f"branches {out.where[kind]} and {bptr} both admit arrays; a union "
                                           "of two arrays schemas is not supported")
                self.widen(out, kind, uptr, base)
        if (strings_joined and isinstance(out.string, str) and out.string != "*"
                and self.fitting(out.string, uptr, kw) == "*"):
            # lenient: the strings the node admits without this union (drops the keyword, never narrows)
            wide = self.parts(None, uptr, base) if base is not None else None
            out.string = wide.string if wide is not None and wide.string is not None else "*"
        if objs:
            self.combine_objects(out, objs, kw, uptr, base)
        return out

    def widen(self, out: _Parts, kind: str, uptr: str, base: Any) -> None:
        """lenient: the node without this union (drops the keyword, never narrows)."""
        wide = self.parts(None, uptr, base) if base is not None else None
        r = getattr(wide, kind) if wide is not None else None
        if r is None:
            r = self.any_object() if kind == "obj" else self.any_array()
        setattr(out, kind, r)
        setattr(out, kind + "_any", getattr(wide, kind + "_any") if wide is not None else True)
        setattr(out, kind + "_key", ("wide", r))  # (by content: two unions may share a pointer)

    def combine_objects(self, out: _Parts, objs: list[tuple[str, bool, Any, str]], kw: str, uptr: str,
                        base: Any) -> None:
        """The object alternative of a union: one branch, an unconstrained one (``anyOf``), or an
        exact union of object rules (:meth:`object_union`)."""
        one_of = _is_one_of(kw)
        uniq: list[tuple[str, bool, Any, str]] = []
        for o in objs:
            dup = next((u for u in uniq if u[0] == o[0] or (u[2] is not None and u[2] == o[2])), None)
            if dup is not None:
                if one_of:
                    self.unsupported(uptr, kw, f"branches {dup[3]} and {o[3]} admit the same values")
                continue
            uniq.append(o)
        anys = [u for u in uniq if u[1]]
        pick = uniq[0] if len(uniq) == 1 else anys[0] if anys and not one_of else None
        if pick is not None:
            out.obj, out.obj_any, out.obj_key = pick[0], pick[1], pick[2]
            out.where["obj"] = pick[3]
            return
        rule, why = self.object_union(uniq, one_of)
        if rule is None:
            self.unsupported(uptr, kw, f"branches {uniq[0][3]} and {uniq[1][3]} both admit objects; a union of "
                                       f"objects schemas is exact only when the first key (or a required first "
                                       f"key's value) tells the branches apart: {why}")
            self.widen(out, "obj", uptr, base)
            return
        out.obj, out.obj_any, out.obj_key = rule, False, ("union", rule)
        out.where["obj"] = uniq[0][3]

    def object_union(self, objs: list[tuple[str, bool, Any, str]], one_of: bool) -> tuple[str | None, str]:
        """``(rule, "")``: a rule for the union of the object rules in ``objs``; ``(None, why)`` when it
        would not be exact.

        The grammar is ``o_1 | o_2 | ...``; it is LALR(1) and lexically unambiguous when every branch
        has a required property (so no branch is ``{}`` or starts with an additional key) and, for
        each pair, the keys a branch can write first (its properties up to the first required one)
        are disjoint, or both branches write the same required key ``k`` first and ``k``'s value
        schemas are disjoint (a discriminator: ``{"kind": {"const": "a"}, ...}``).  For ``oneOf`` the
        branches must also be disjoint as sets of values: a discriminator, or a key one branch
        requires that the other forbids (closed object without it, or its schema ``false``).
        """
        members: list[tuple[str, dict, Any]] = []
        nested = False
        for r, _any, _key, bptr in objs:
            meta = self.obj_meta.get(r)
            if meta is None:
                return None, f"branch {bptr} is not a plain object schema"
            if "union" in meta:
                if meta.get("exactly_one"):
                    return None, f"branch {bptr} is a oneOf over overlapping objects"
                members.extend(meta["union"])
                nested = True
            else:
                sub = self.branch_schema.get((r, bptr))
                members.append((r, meta, None if sub is None else self.flat_validator(sub)))
        why = self.simple_union_why(members, one_of)
        if why:
            rule, why2 = self.object_product(members, one_of, nested)
            if rule is None:
                return None, f"{why}; {why2}"
            return rule, ""
        name = self.fresh("ou")
        self.rules[name] = [r for r, _m, _v in members]
        self.obj_meta[name] = {"union": members}
        self.info[name] = {"obj": {"union": [(r, v) for r, _m, v in members]}}
        return name, ""

    def simple_union_why(self, members: list[tuple[str, dict, Any]], one_of: bool) -> str:
        """Why ``o_1 | o_2 | ...`` would not be exact and LALR(1) ("" when it is; see
        :meth:`object_union`)."""
        firsts: list[list[str]] = []
        for _r, meta, _v in members:
            fk = _first_keys(meta)
            if fk is None:
                return f"branch {meta['ptr']} requires no property (it may be {{}} or start with any key)"
            firsts.append(fk)
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                a, b = members[i][1], members[j][1]
                shared = set(firsts[i]) & set(firsts[j])
                if shared:
                    k = next(iter(shared))
                    if not (firsts[i] == firsts[j] == [k]):
                        return f"branches {a['ptr']} and {b['ptr']} can both start with the key {k!r}"
                    if not self.values_disjoint(a, b, k):
                        return (f"branches {a['ptr']} and {b['ptr']} both start with the key {k!r} and "
                                      "its values overlap (or are numbers one of whose spellings starts another's, "
                                      "which the lexer cannot tell apart)")
                elif one_of and not (_excludes(a, b) or _excludes(b, a)):
                    return f"oneOf branches {a['ptr']} and {b['ptr']} may both hold for one object"
        return ""

    def object_product(self, members: list[tuple[str, dict, Any]], one_of: bool,
                       nested: bool = False) -> tuple[str | None, str]:
        """The union of object rules whose branches may share leading keys, as one deterministic
        automaton over key sequences (a subset construction): a state is the set of branches still
        possible after the keys so far, each at its own position (and member count); a key leads
        every branch that can write it next to its next position, and the state's rule writes the
        key once.  The value after a key is one rule when the branches taking the key give it
        the same schema; when they give different schemas these must be disjoint (checked on their
        first terminals, as for a discriminator) and each value leads to the branches that gave it.
        A state left with one branch goes on in that branch's own rules.

        A state knows which branches accept the text so far, so the closing brace is allowed when
        one of them may end there (``anyOf``), or exactly one (``oneOf`` over closed branches that
        list their common keys in the same order, so that a text is in every branch its value is
        valid for: overlapping branches are then fine).  Any other ``oneOf`` (or one whose branches
        include another union's members, ``nested``) needs pairwise disjoint branches: one requires
        a key the other forbids, or both require a key with disjoint value schemas.

        Exact, LALR(1) and lexically unambiguous by construction; ``(None, why)`` when a state would
        need two overlapping value schemas for one key, a branch has ``patternProperties``, or the
        automaton exceeds :data:`_MAX_PRODUCT_STATES` states.
        """
        live_members: list[tuple[str, dict, Any]] = []
        for r, meta, v in members:
            if r not in self.obj_built:
                job = self.obj_jobs.get(r)
                if job is None:
                    return None, f"branch {meta['ptr']} is not a plain object schema"
                self.build_object(*job[1:])
            lay = self.obj_built[r]
            if not lay:
                if self.rules.get(r) == [r]:
                    continue  # admits no object
                return None, f"branch {meta['ptr']} is recursive through the union"
            if not lay["plain"]:
                return None, f"branch {meta['ptr']} has patternProperties"
            live_members.append((r, meta, v))
        # Counting the branches a text is in counts the branches its value is valid for only when
        # no branch takes keys in any order (additional keys) and any two branches list their
        # common keys in the same order: the text of a value in one branch's order is then in
        # every branch the value is valid for.
        exactly_one = one_of and not nested and all(not self.obj_built[r]["free"] for r, _m, _v in live_members)
        if exactly_one:
            pos = [{k: i for i, (k, _r, _q) in enumerate(self.obj_built[r]["live"])} for r, _m, _v in live_members]
            for i in range(len(pos)):
                for j in range(i + 1, len(pos)):
                    common = [k for k in pos[i] if k in pos[j]]
                    if sorted(common, key=pos[i].__getitem__) != sorted(common, key=pos[j].__getitem__):
                        exactly_one = False
        if one_of and not exactly_one:
            for i in range(len(live_members)):
                for j in range(i + 1, len(live_members)):
                    a, b = live_members[i][1], live_members[j][1]
                    if not (_excludes(a, b) or _excludes(b, a)
                            or any(k in b["req"] and self.values_disjoint(a, b, k) for k in a["req"])):
                        return None, f"oneOf branches {a['ptr']} and {b['ptr']} may both hold for one object"
        if not live_members:  # no branch admits an object: an unproductive rule (pruned)
            empty = self.fresh("ou")
            self.rules[empty] = [empty]
            return empty, ""
        if len(live_members) == 1:
            return live_members[0][0], ""
        lays = [self.obj_built[r] for r, _m, _v in live_members]
        comma = self.punct(",", True, True)
        colon = self.punct(":", True, True)

        def nxt(lay: dict, c: int) -> int | None:
            if c + 1 <= lay["cap"]:
                return c + 1
            return lay["cap"] if lay["hi"] is None else None

        def moves(m: int, i: int, c: int) -> list[tuple[str, str, Any, tuple[Any, str], tuple[int, int, int]]]:
            lay = lays[m]
            c1 = nxt(lay, c)
            if c1 is None:
                return []
            out = []
            live, stop = lay["live"], lay["stop"]
            j = i
            while j < stop:
                k, r, q = live[j]
                out.append((self.key_lit(k), r, lay["same"][k], lay["src"][k], (m, j + 1, c1)))
                if q:
                    return out
                j += 1
            if lay["free"]:
                for k, r, _q in live:
                    out.append((self.key_lit(k), r, lay["same"][k], lay["src"][k], (m, stop, c1)))
                if lay["okey"] is not None:  # "": the state's additional-key terminal (below)
                    out.append(("", lay["add"], lay["add_same"], lay["add_src"], (m, stop, c1)))
            return out

        def can_end(m: int, i: int, c: int) -> bool:
            lay = lays[m]
            return c >= lay["lo"] and not any(q for _k, _r, q in lay["live"][i:lay["stop"]])

        names: dict[tuple, str] = {}
        todo: list[tuple] = []
        lit_name = {self.key_lit(k): k for lay in lays for k, _r, _q in lay["live"]}

        def state_rule(st: tuple) -> str:
            if len(st) == 1:
                m, i, c = st[0]
                return f"{live_members[m][0]}_{i}_{c}"
            name = names.get(st)
            if name is None:
                name = names[st] = self.fresh("op")
                todo.append(st)
            return name

        start = tuple((m, 0, 0) for m in range(len(live_members)))
        top = self.fresh("ou")
        root = state_rule(start)
        while todo:
            if len(names) > _MAX_PRODUCT_STATES:
                return None, f"the union's key automaton has over {_MAX_PRODUCT_STATES} states"
            st = todo.pop()
            c0 = st[0][2]
            ends = sum(can_end(*x) for x in st)
            alts = [""] if c0 and (ends == 1 if exactly_one else ends >= 1) else []
            by_tok: dict[str, list[tuple[str, Any, tuple[Any, str], tuple[int, int, int]]]] = {}
            adds: list[tuple[int, tuple]] = []  # members taking additional keys here, and that move
            for x in st:
                for tok, r, sk, srcv, nx in moves(*x):
                    if tok == "":
                        adds.append((x[0], (r, sk, srcv, nx)))
                    else:
                        by_tok.setdefault(tok, []).append((r, sk, srcv, nx))
            if adds:
                # A name offered here as a literal is lexed as that literal (Lark's keyword rule), so
                # every member taking additional keys here takes it too (unless it lists or bans it);
                # the state's additional-key terminal excludes the names some member here bans, and
                # a banned name another member takes as additional is offered as its literal.
                banned = sorted({k for m, _mv in adds for k in lays[m]["banned"]})
                offered = {lit_name[t] for t in by_tok if t in lit_name}
                for k in sorted(offered | set(banned)):
                    takers = [mv for m, mv in adds if k not in lays[m]["banned"]
                              and all(k != kk for kk, _r, _q in lays[m]["live"])]
                    if takers:
                        by_tok.setdefault(self.key_lit(k), []).extend(takers)
                try:
                    okey = self.term(_not_keys_regex(banned) if banned else f'"{UNIT}*"', "K")
                except _UnwritableKeys as e:
                    return None, f"the additional keys beside the listed ones: {e}"
                by_tok.setdefault(okey, []).extend(mv for _m, mv in adds)
            for tok, mv in by_tok.items():
                groups: list[tuple[str, Any, tuple[Any, str], list[tuple[int, int, int]]]] = []
                for r, sk, srcv, nx in mv:
                    g = next((g for g in groups if g[0] == r or (sk is not None and g[1] == sk)), None)
                    if g is None:
                        groups.append((r, sk, srcv, [nx]))
                    elif nx not in g[3]:
                        g[3].append(nx)
                for gi in range(len(groups)):
                    for gj in range(gi + 1, len(groups)):
                        if not self.parts_disjoint(self.parts(*groups[gi][2]), self.parts(*groups[gj][2])):
                            return None, (f"two branches give a key ({groups[gi][2][1]} and {groups[gj][2][1]}) "
                                          "overlapping value schemas after the same keys (or numbers, one "
                                          "spelling the start of another: the lexer cannot tell them apart)")
                sep = f"{comma} " if c0 else ""
                for r, _sk, _src, nxs in groups:
                    alts.append(f"{sep}{tok} {colon} {r} {state_rule(tuple(sorted(nxs)))}")
            self.rules[names[st]] = alts
        alts = [f"{self.punct('{', False, True)} {root} {self.punct('}', True, False)}"]
        n_empty = sum(can_end(m, 0, 0) for m in range(len(live_members)))
        if n_empty == 1 if exactly_one else n_empty >= 1:
            alts.insert(0, self.term("\\{" + self.ws + "\\}", "P"))
        self.rules[top] = alts
        self.obj_meta[top] = {"union": live_members, "exactly_one": exactly_one}
        self.info[top] = {"obj": {"union": [(r, v) for r, _m, v in live_members]}}
        return top, ""

    def values_disjoint(self, a: dict, b: dict, k: str) -> bool:
        """No value is valid under both branches' schemas of property ``k``, and their first
        terminals are pairwise disjoint (checked on the automata)."""
        return self.parts_disjoint(self.prop_parts(a, k), self.prop_parts(b, k))

    def prop_parts(self, meta: dict, k: str) -> _Parts:
        """:meth:`parts` of property ``k``'s schema in union branch ``meta``, made once per schema,
        place and nesting depth (a union's branches are compared pairwise, and a union reached by
        many ``$ref`` s is compared at each: made anew each time, flattening them took seconds)."""
        node, ptr = _prop_schema(meta, k)
        key = (id(node), ptr, self.depth)
        hit = self.parts_memo.get(key)
        if hit is None:  # (the node is kept with its parts: its id is not reused while they live)
            hit = self.parts_memo[key] = (node, self.parts(node, ptr))
        return hit[1]

    def parts_disjoint(self, pa: _Parts, pb: _Parts) -> bool:
        """No value is in both, and the first terminals are pairwise disjoint (on the automata); two
        number terminals also never spell a number that starts one of the other's (they stand side
        by side in one lexer context)."""
        if (pa.obj and pb.obj) or (pa.arr and pb.arr) or (pa.lits & pb.lits):
            return False
        if pa.string is not None and pb.string is not None:
            if isinstance(pa.string, _Chunked) or isinstance(pb.string, _Chunked) or \
                    self.overlap(_string_terminal(pa.string), _string_terminal(pb.string)):
                return False
        if pa.number is not None and pb.number is not None and (
                self.overlap(pa.number, pb.number) or self.overlap(f"(?:{pa.number}){_NUMBER_TAIL}", pb.number)
                or self.overlap(f"(?:{pb.number}){_NUMBER_TAIL}", pa.number)):
            # (a number has no end mark: where one terminal's number starts another's, "2" and "2.5",
            # the lexer, as Lark's, takes the first terminal that matches and never reads the other)
            return False
        return True

    def overlap(self, r1: str, r2: str) -> bool:
        """Some string matches both regexes (True where that is too large to decide, and in the
        lenient probe: an overlap only ever widens); kept per pair."""
        if self.probe:
            return True
        hit = self.overlap_memo.get((r1, r2))
        if hit is None:
            try:
                f1, f2 = regex_fsm(r1), regex_fsm(r2)
                hit = not (f1 & f2).empty()
            except Exception:  # noqa: BLE001 - too large to decide: assume they overlap
                hit = True
            self.overlap_memo[(r1, r2)] = hit
        return hit

    def enum_parts(self, node: Any, flat: dict, ptr: str) -> _Parts:
        values = flat["enum"]
        # each value is in its own enum: jsonschema's check of it scans the enum per value (quadratic:
        # seconds for an enum of 10,000 strings), and the values need only the other keywords
        try:
            if isinstance(node, dict) and not isinstance(node, _Internal):  # the user's, under its draft
                v = self.validator.evolve(schema={k: x for k, x in node.items() if k not in ("enum", "const")})
            else:
                v = self.flat_validator({k: x for k, x in flat.items() if k != "enum"})
            spell_ok = None
            if self.draft_class in (jsonschema.Draft3Validator, jsonschema.Draft4Validator):
                # 1.0 is no integer here: a number's spellings (1, 1.0) are kept one by one, each
                # where its own value is valid (enum [1] under type integer: not 1.0; enum [1.0]: 1)
                spell_ok = v.is_valid
                keep = [x for x in values if _is_number(x) or v.is_valid(x)]
            else:
                keep = [x for x in values if v.is_valid(x)]
        except jsonschema.exceptions.RefResolutionError as e:  # pragma: no cover - old jsonschema
            raise InvalidSchemaError(f"cannot resolve a $ref: {e}", pointer=ptr) from None
        except Exception as e:  # noqa: BLE001 - e.g. referencing.exceptions.Unresolvable
            raise InvalidSchemaError(f"cannot check enum values: {type(e).__name__}: {e}", pointer=ptr) from None
        uniq: dict[Any, Any] = {}  # (top-level type, JSON value): first spelling, in order
        for x in keep:
            uniq.setdefault((type(x), _json_key(x)), x)
        return self.literal_parts(list(uniq.values()), ptr, flat["_ptr"].get("enum"), spell_ok)

    def literal_parts(self, values: list[Any], ptr: str, kw_ptr: str | None = None,
                      spell_ok: Callable[[Any], bool] | None = None) -> _Parts:
        """The parts admitting exactly ``values`` (an ``enum`` at ``ptr``, its keyword at ``kw_ptr``);
        ``spell_ok``: a number's spellings are kept only where it holds for the value each one parses
        to (drafts 3 / 4, where ``1.0`` is a float and no integer).

        Strings are one terminal, or, when that terminal would be over gad's budgets for one (an enum
        of thousands of names), several (:func:`_word_chunks`); an enum too large even for those is
        refused at ``kw_ptr`` (``lenient``: any string)."""
        p = _Parts()
        strs: list[str] = []
        spellings: dict[str, str] = {}  # a string's escaped content -> its spelling (json.dumps, unquoted)
        nums: list[str] = []
        objs: list[Any] = []
        arrs: list[Any] = []
        for x in values:
            if x is True:
                p.lits.add("true")
            elif x is False:
                p.lits.add("false")
            elif x is None:
                p.lits.add("null")
            elif isinstance(x, str):
                spelled = json.dumps(x, ensure_ascii=False)[1:-1]
                strs.append(_rx_lit(spelled))
                spellings.setdefault(strs[-1], spelled)
            elif isinstance(x, (int, float)):
                if isinstance(x, float) and not math.isfinite(x):
                    continue
                sp = _number_spellings(x)
                if spell_ok is not None:
                    sp = {t for t in sp if spell_ok(json.loads(t))}
                nums.extend(_rx_lit(s) for s in sorted(sp, key=lambda t: (-len(t), t)))
            elif isinstance(x, dict):
                objs.append(x)
            elif isinstance(x, list):
                arrs.append(x)
        if strs:
            uniq = list(dict.fromkeys(strs))
            p.string = "(?:" + "|".join(uniq) + ")"
            if len(p.string) + 2 > _WORD_CHUNK_STATES:  # (under it, one terminal is within both budgets)
                chunks = _word_chunks([(spellings[e], e) for e in uniq])
                if chunks is None or len(chunks) > _MAX_WORD_CHUNKS:
                    why = (f"its strings need more than {_MAX_WORD_BYTES:,} lexer states together, or one of "
                           f"them (enum / const) is over gad's budgets for one terminal ({MAX_TERMINAL_STATES:,} "
                           f"automaton states, {MAX_REGEX_CHARS:,} characters)"
                           if chunks is None else
                           f"its strings need more than {_MAX_WORD_CHUNKS} terminals of {_WORD_CHUNK_STATES:,} "
                           f"automaton states and {_WORD_CHUNK_CHARS:,} characters (gad's budget for one lexer "
                           "context)")
                    at = kw_ptr or ptr  # (a const is flattened into an enum: named as the user wrote it)
                    kw = "const" if self.names_keyword(at, "const") and not self.names_keyword(at, "enum") else "enum"
                    self.unsupported(at, kw, why)
                    p.string = "*"
                elif len(chunks) > 1:
                    self.word_chunks[p.string] = ["(?:" + "|".join(c) + ")" for c in chunks]
        if nums:
            nums.sort(key=lambda t: -len(t))
            p.number = "(?:" + "|".join(dict.fromkeys(nums)) + ")"
        if objs:
            name = self.fresh("lo")
            self.rules[name] = [" ".join(self.lit_tokens(o)) for o in objs]
            self.info[name] = {"obj": {"lits": objs}}
            p.obj, p.obj_key = name, ("lit", json.dumps(objs, sort_keys=True))
        if arrs:
            name = self.fresh("la")
            self.rules[name] = [" ".join(self.lit_tokens(a)) for a in arrs]
            self.info[name] = {"arr": None}
            p.arr, p.arr_key = name, ("lit", json.dumps(arrs, sort_keys=True))
        for k in ("string", "number", "obj", "arr"):
            p.where[k] = ptr
        return p

    def lit_tokens(self, x: Any) -> list[str]:
        """Terminals spelling the JSON value ``x`` (a literal inside an enum / const)."""
        if isinstance(x, dict):
            if not x:
                return [self.term("\\{" + self.ws + "\\}", "P")]
            toks = [self.punct("{", False, True)]
            for i, (k, v) in enumerate(x.items()):
                if i:
                    toks.append(self.punct(",", True, True))
                toks.append(self.key_lit(k))
                toks.append(self.punct(":", True, True))
                toks.extend(self.lit_tokens(v))
            toks.append(self.punct("}", True, False))
            return toks
        if isinstance(x, list):
            if not x:
                return [self.term("\\[" + self.ws + "\\]", "P")]
            toks = [self.punct("[", False, True)]
            for i, v in enumerate(x):
                if i:
                    toks.append(self.punct(",", True, True))
                toks.extend(self.lit_tokens(v))
            toks.append(self.punct("]", True, False))
            return toks
        if isinstance(x, str):
            return [self.term(_rx_lit(json.dumps(x, ensure_ascii=False)), "S")]
        if x is True or x is False or x is None:
            return [self.term(json.dumps(x), "L")]
        # a number inside a literal equals each of its spellings ({"a": 1} is {"a": 1.0} to enum / const);
        # under drafts 3 / 4 1.0 is a float, which other keywords may tell from 1: as written, then
        if self.draft_class in (jsonschema.Draft3Validator, jsonschema.Draft4Validator):
            sp = sorted({json.dumps(x)} | ({_plain_number(x)} if isinstance(x, float) else set()),
                        key=lambda t: (-len(t), t))
        else:
            sp = sorted(_number_spellings(x), key=lambda t: (-len(t), t))  # (longest first: Lark's scanner)
        return [self.term(_rx_lit(sp[0]) if len(sp) == 1 else "(?:" + "|".join(map(_rx_lit, sp)) + ")", "N")]

    def kind_parts(self, flat: dict, ptr: str) -> _Parts:
        kinds = set(_KINDS)
        if "type" in flat:
            kinds = _type_set(flat["type"])
            if "number" in kinds:
                kinds.add("integer")
        pp = flat["_ptr"]
        for kw, ks in _UNSUPPORTED.items():
            if kw in flat and (ks is None or ks & kinds):
                at = pp.get(kw, ptr)
                self.unsupported(at, kw, (self.not_why.get(at) if kw == "not" else None)
                                 or "not expressible exactly as a grammar")
        if flat.get("uniqueItems") is True and "array" in kinds:
            self.unsupported(pp.get("uniqueItems", ptr), "uniqueItems", "uniqueItems: true is not a context-free "
                             "constraint")
        p = _Parts()
        for k in ("string", "number", "obj", "arr"):
            p.where[k] = ptr
        if "null" in kinds:
            p.lits.add("null")
        if "boolean" in kinds:
            p.lits |= {"true", "false"}
        for v, lit in ((None, "null"), (True, "true"), (False, "false")):
            if any(x is v for x in flat.get("gad:notIn", ())):
                p.lits.discard(lit)
        if "string" in kinds:
            p.string = self.string_content(flat, ptr)
        if "number" in kinds or "integer" in kinds:
            p.number = self.number_regex(flat, ptr, integer="number" not in kinds)
        if "object" in kinds:
            self.object_part(flat, ptr, p)
        if "array" in kinds:
            self.array_part(flat, ptr, p)
        return p

    def string_content(self, flat: dict, ptr: str) -> str | _Chunked | _Meet | None:
        pp = flat["_ptr"]
        lo = flat.get("minLength", 0)
        hi = flat.get("maxLength")
        fmt = flat.get("format")
        pat = flat.get("pattern")
        has_len = lo > 0 or hi is not None
        if hi is not None and lo > hi:
            return None
        if self.probe:
            return "*"
        banned = [x for x in flat.get("gad:notIn", ()) if isinstance(x, str)]
        not_pats = flat.get("gad:notPattern", [])
        if banned or not_pats:  # rewritten nots of an enum / of patterns (_negation): the strings none of these
            places = [(kw, at) for kw, on in (("gad:notIn", banned), ("gad:notPattern", not_pats)) if on
                      for at in [pp.get(kw, ptr)]]
            nots = list(dict.fromkeys(self.rewritten_at(r) or (r, "not")
                                      for kw, at in places
                                      for p in [at, *sorted(self.merged_ptrs.get((at, kw), ()))]
                                      for r in self.real_pointers(p)))

            def refuse(why: str) -> None:  # (each not merged into this string: strict raises at the first)
                for not_ptr, not_kw in nots:
                    self.unsupported(not_ptr, not_kw, why)

            others = {k: v for k, v in flat.items() if k not in ("gad:notIn", "gad:notPattern")}  # (the string's other keywords)
            negs: list[Any] = []
            try:
                if banned:
                    negs.append(_not_keys_regex(banned, quoted=False))
                if not_pats:
                    negs.append(_not_patterns_fsm(not_pats))
            except _UnwritableKeys as e:
                refuse(f"a not of strings: {e}")
                return self.string_content(others, ptr)
            except RegexUnsupported as e:
                refuse(f"a not of a pattern: {e}")
                return self.string_content(others, ptr)
            except AutomatonTooLarge:
                refuse(f"a not of a pattern: the strings it leaves need an automaton of more than "
                       f"{MAX_TERMINAL_STATES:,} states (gad's budget for one terminal)")
                return self.string_content(others, ptr)
            if has_len or fmt is not None or pat is not None:
                rest = self.string_content(others, ptr)
                if rest is None:
                    return None
                if rest == "*":  # (an unknown format; or the keywords dropped, lenient)
                    rest = f"{UNIT}*"
                if not isinstance(rest, str):  # (a chain of chunks or an intersection terminal)
                    refuse("a not of strings beside a length bound over gad's chain limit or an intersection terminal")
                    return rest
                negs.append(rest)
            if len(negs) == 1 and isinstance(negs[0], str):
                out = negs[0]
            else:
                # a short regex written back, else a lookahead terminal (the kept contents less the
                # patterns'), else a long regex (as for two of pattern / length / format below)
                args = [f"{UNIT}*", *negs] if all(not isinstance(x, str) for x in negs) else negs
                ok, rx = _intersect_content(args, quick=True)
                if not ok:
                    kept = [x for x in negs if isinstance(x, str)] or [f"{UNIT}*"]
                    ok, meet = _meet_less(kept, [pattern_regex(p) for p in not_pats]) if not_pats else (False, None)
                    if ok:
                        return meet  # (None: no string is in them)
                    ok, rx = _intersect_content(args)
                if not ok:
                    refuse("a not of strings beside pattern / length / format needs an automaton intersection too "
                           "large to write as one terminal")
                    return self.string_content(others, ptr)
                if rx is None:
                    return None
                out = rx
            return self.not_fitting(out, refuse)
        if fmt is not None and fmt not in FORMATS:
            if fmt in SPEC_FORMATS_REFUSED or (self.draft3 and fmt in _DRAFT3_FORMATS):
                self.unsupported(pp.get("format", ptr), "format", f"the string format {fmt!r} (defined by "
                                 "JSON Schema) is not implemented")
            fmt = None  # not a format the spec defines: an annotation (draft 2020-12 section 7.2)
        n_constraints = sum([has_len, fmt is not None, pat is not None])
        if n_constraints > 1:
            parts: list[str] = []
            try:
                if pat is not None:
                    parts.append(pattern_regex(pat))
            except RegexUnsupported as e:
                self.unsupported(pp.get("pattern", ptr), "pattern", f"{pat!r}: {e}")
                return "*"
            if fmt is not None:
                parts.append(FORMATS[fmt])
            if has_len:
                parts.append(f"(?:{_LEN_UNIT}){{{lo},}}" if hi is None else f"(?:{_LEN_UNIT}){{{lo},{hi}}}")
            if pat is not None and fmt is None:
                star = _class_star(parts[0])
                if star is not None:  # pattern C* or C+ over raw characters: C{lo,hi}
                    cls, at_least = star
                    return self.length_string(cls, max(lo, at_least), hi, pp, ptr)
            # a short regex written back, else the lookahead intersection, else a long regex: checking
            # a long one (re-parsing it, to compare automata) takes seconds and often ends over the budget
            ok, rx = _intersect_content(parts, quick=True)
            if ok:
                return rx
            ok, meet = _meet_of(parts)
            if ok:
                return meet  # (None: the parts have no string in common)
            ok, rx = _intersect_content(parts)
            if ok:
                return rx
            # the pattern stays if there is one, else the format; each keyword left out is named
            why = "a string under two of pattern / length / format needs an automaton intersection too large " \
                  "to write as one terminal"
            if has_len:
                for k, on in (("minLength", lo > 0), ("maxLength", hi is not None)):
                    if on:
                        self.unsupported(pp.get(k, ptr), k, why)
                has_len = False
            if fmt is not None and pat is not None:
                self.unsupported(pp.get("format", ptr), "format", why)
                fmt = None
        if pat is not None:
            try:
                return self.fitting(pattern_regex(pat), pp.get("pattern", ptr), "pattern")
            except RegexUnsupported as e:
                self.unsupported(pp.get("pattern", ptr), "pattern", f"{pat!r}: {e}")
                return "*"
        if fmt is not None:
            return FORMATS[fmt]
        if has_len:
            return self.length_string(_LEN_UNIT, lo, hi, pp, ptr)
        return "*"

    def not_fitting(self, content: str, refuse: Callable[[str], None]) -> str:
        """:meth:`fitting` for a string under rewritten ``not``s, each refused by ``refuse(why)``."""
        why: list[str] = []
        got = self.fitting(content, "", "not", why.append)
        if why:
            refuse(why[0])
        return got

    def fitting(self, content: str, ptr: str, kw: str, report: Callable[[str], None] | None = None) -> str:
        """``content`` when the string terminal it makes (``"content"``) has an automaton within gad's
        state budget (built now, and kept for the grammar's validation: :func:`regex_fsm` caches it),
        else ``"*"`` (any string) after :meth:`unsupported` names ``kw`` at ``ptr``: refused, or dropped
        with ``lenient``, instead of the grammar's refusal naming a line of the generated text
        (``report(why)`` instead, where given)."""
        def refuse(why: str) -> None:
            if report is not None:
                report(why)
            else:
                self.unsupported(ptr, kw, why)

        if self.probe:  # (a terminal is never an empty place to the probe: nothing to build)
            return content
        if len(content) + 2 > MAX_REGEX_CHARS:
            refuse(f"the strings it admits need a regular expression of {len(content) + 2:,} "
                   f"characters, over gad's limit of {MAX_REGEX_CHARS:,} for one terminal")
            return "*"
        try:
            regex_fsm(f'"{content}"')
        except AutomatonTooLarge:
            refuse(f"the strings it admits need an automaton of more than {MAX_TERMINAL_STATES:,} "
                   "states (gad's budget for one terminal)")
            return "*"
        except Exception:  # noqa: BLE001 - anything else is reported by the grammar's validation, as before
            pass
        return content

    def length_string(self, unit: str, lo: int, hi: int | None, pp: dict, ptr: str) -> str | _Chunked | None:
        """Content of ``lo``..``hi`` units, each matching ``unit`` (a chain of chunk terminals over
        :data:`_MAX_LENGTH`)."""
        if hi is not None and lo > hi:
            return None
        if max(lo, hi or 0) > _MAX_LENGTH:
            k = max(_CHUNK, -(-max(lo, hi or 0) // _MAX_CHAIN))
            if k > _MAX_CHUNK:
                kw = "maxLength" if (hi or 0) > _MAX_LENGTH else "minLength"
                self.unsupported(pp.get(kw, ptr), kw, f"a length bound over {_MAX_CHUNK * _MAX_CHAIN} "
                                                      "needs more chunk terminals than gad's budget")
                return "*"
            return _Chunked(lo, hi, k, unit)
        if hi is None:
            return f"(?:{unit}){{{lo},}}"
        return f"(?:{unit}){{{lo},{hi}}}"

    def chunked_string(self, c: _Chunked) -> str:
        """Rule for a JSON string of ``c.lo``..``c.hi`` canonical units, as a chain
        ``s_i -> C s_{i+1} | E_i``: after ``i`` chunks of exactly ``k`` units (terminal ``C``, the
        first one with the opening quote), ``E_i`` is the rest, fewer than ``k`` units (at least
        ``lo - i k``, at most ``hi - i k``), and the closing quote.  ``C`` and ``E_i`` are disjoint
        and at any point at most one of them can still match (``E_i`` needs a quote within
        ``k - 1`` units, ``C`` needs ``k`` units without one), so the split is unique and the
        lexer never has to choose."""
        name = f"ls_{c.lo}_{'inf' if c.hi is None else c.hi}_{c.k}"
        if c.unit != _LEN_UNIT:
            name += "_" + hashlib.sha1(c.unit.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        if name in self.rules:
            return name
        k, lo, hi = c.k, c.lo, c.hi
        unit = f"(?:{c.unit})"
        # chunks needed before the tail can take over (unbounded above: the last rule loops)
        last = (hi // k) if hi is not None else max(1, -(-lo // k))

        def rn(i: int) -> str:
            return name if i == 0 else f"{name}_{i}"

        for i in range(last + 1):
            q = '"' if i == 0 else ""
            a = max(0, lo - i * k)
            b = k - 1 if hi is None else min(k - 1, hi - i * k)
            alts = []
            if a <= b:
                alts.append(self.term(f"{q}{unit}{{{a},{b}}}\"", "S"))
            nxt = rn(i + 1) if hi is not None or i < last else rn(i)
            if hi is None or (i + 1) * k <= hi:
                alts.append(f"{self.term(q + unit + '{' + str(k) + '}', 'S')} {nxt}")
            self.rules[rn(i)] = alts
        return name

    def number_regex(self, flat: dict, ptr: str, integer: bool) -> str | None:
        """The number terminal's regex for ``flat``'s numeric keywords (None: no number is valid).
        One gad cannot build an automaton for (a bound of hundreds of significant digits, such as
        1e308's) is refused at its bound's keyword, or widened to every number by ``lenient``."""
        rx = self._number_regex(flat, ptr, integer)
        if rx is None or rx in (JSON_NUMBER, JSON_INTEGER) or self.probe:
            return rx
        try:
            regex_fsm(rx)  # (cached: the grammar's own check finds it built)
        except Exception:  # noqa: BLE001 - AutomatonTooLarge, RecursionError, interegular's own
            pp = flat["_ptr"]
            # (the bound written with the most digits: the one whose automaton is the large one)
            kw = max((k for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf")
                      if _is_number(flat.get(k))), key=lambda k: len(format(_dec(flat[k]), "f")), default=None) \
                or ("format" if "format" in flat else "type")
            self.unsupported(pp.get(kw, ptr), kw, f"the number automaton for {kw} {clip(repr(flat.get(kw)))} is too "
                                                  "large to build (too many significant digits)")
            return JSON_INTEGER if integer else JSON_NUMBER
        return rx

    def _number_regex(self, flat: dict, ptr: str, integer: bool) -> str | None:
        pp = flat["_ptr"]
        lo: float | None = flat.get("minimum")
        hi: float | None = flat.get("maximum")
        lo_x = hi_x = False
        if "exclusiveMinimum" in flat and not isinstance(flat["exclusiveMinimum"], bool):
            if lo is None or flat["exclusiveMinimum"] >= lo:
                lo, lo_x = flat["exclusiveMinimum"], True
        if "exclusiveMaximum" in flat and not isinstance(flat["exclusiveMaximum"], bool):
            if hi is None or flat["exclusiveMaximum"] <= hi:
                hi, hi_x = flat["exclusiveMaximum"], True
        fmt = flat.get("format")
        if not integer and fmt in _INT_FORMATS:
            return self.int_format_number(flat, ptr)
        if integer and fmt in _INT_FORMATS:
            flo, fhi = _INT_FORMATS[fmt]
            if lo is None or lo < flo:  # (the format's bound is inclusive, whatever the schema's was)
                lo, lo_x = flo, False
            if hi is None or hi > fhi:
                hi, hi_x = fhi, False
        for v, kw in ((lo, "minimum"), (hi, "maximum")):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or (isinstance(v, float) and not math.isfinite(v))):
                raise InvalidSchemaError(f"{kw} must be a finite number, got {v!r}", pointer=pp.get(kw, ptr))
        mult = flat.get("multipleOf")
        if mult is not None and (isinstance(mult, bool) or not isinstance(mult, (int, float)) or not mult > 0
                                 or not math.isfinite(mult)):
            raise InvalidSchemaError(f"multipleOf must be a number > 0, got {mult!r}", pointer=pp.get("multipleOf", ptr))
        if integer:
            ilo = None if lo is None else (math.floor(lo) + 1 if lo_x else math.ceil(lo))
            ihi = None if hi is None else (math.ceil(hi) - 1 if hi_x else math.floor(hi))
            base = _int_range(ilo, ihi)
            if mult is None or base is None or (isinstance(mult, int) and mult == 1) or \
                    (isinstance(mult, float) and mult.is_integer() and mult == 1):
                return base
            return self.number_product([base], mult, pp, ptr, "multipleOf")
        if mult is None:
            if lo is None and hi is None:
                return JSON_NUMBER
            if all(v is None or _whole(v) for v in (lo, hi)):
                return _number_range(lo, lo_x, hi, hi_x)
        parts: list[Any] = [_N_SPELL]
        if lo is not None:
            parts.append(_ge_regex(_dec(lo), lo_x))
        if hi is not None:
            parts.append(_le_regex(_dec(hi), hi_x))
        kw = "multipleOf" if mult is not None else "minimum" if lo is not None and not _whole(lo) \
            else "maximum"
        return self.number_product(parts, mult, pp, ptr, kw)

    def int_format_number(self, flat: dict, ptr: str) -> str | None:
        """A ``number`` under ``format`` int32 / int64 (OpenAPI's formats, asserted as
        :func:`format_checker` does): the format bounds the values written as integers (``7``,
        ``-12``: integers once parsed), not those written with a fraction or an exponent (``7.0``,
        ``1e3``: floats, which the format leaves alone).  The terminal is ``(?:F|I)``, the fractions
        ``F`` first (a match of ``F`` is always longer than one of ``I``, so Python's first match is
        the longest), with ``I`` the integer range whose automaton is built from its bounds
        (:func:`gad.grammar.automata.int_range_union`)."""
        ints = self.number_regex(flat, ptr, integer=True)
        rest = self.number_regex({k: v for k, v in flat.items() if k != "format"}, ptr, integer=False)
        if rest is None:
            fracs = None
        elif rest == JSON_NUMBER:
            fracs = _N_FRACTION
        else:
            ok, fracs = _intersect_content([rest, _N_FRACTION])
            if not ok:
                self.unsupported(flat["_ptr"].get("format", ptr), "format", f"format {flat['format']} on a number "
                                 "beside its other constraints: the automaton is too large to write as one terminal")
                return rest
        if fracs is None or ints is None:
            return fracs if ints is None else ints
        joined = f"(?:{fracs}|{ints})" if int_range_of(ints) is not None else _join_numbers(fracs, ints)
        if joined is None:
            self.unsupported(flat["_ptr"].get("format", ptr), "format", f"format {flat['format']} on a number: "
                             "its fractions and integers together are too large to write as one terminal")
            return rest
        self.float_nums.add(joined)  # (dumps keeps a float's fraction here: the format bounds integers only)
        return joined

    def number_product(self, parts: list[Any], mult: float | None, pp: dict, ptr: str, kw: str) -> str | None:
        """The intersection of number regexes (and of the multiples of ``mult``), as one regex (the
        lenient probe's: the first, wider, not built)."""
        if self.probe:
            return parts[0]
        if mult is not None:
            f = _multiple_fsm(_dec(mult))
            if f is None:
                self.unsupported(pp.get("multipleOf", ptr), "multipleOf", f"multipleOf {mult!r} = a * 10^-d with a "
                                 f"over {_MAX_MULTIPLE} (one automaton state per residue)")
                return parts[0] if len(parts) == 1 else JSON_NUMBER
            parts = parts + [f]
        ok, rx = _intersect_content(parts)
        if not ok:
            key = kw if kw in pp else "exclusive" + kw[:1].upper() + kw[1:] if kw in ("minimum", "maximum") else kw
            self.unsupported(pp.get(key, ptr), kw, "the number constraints' automaton intersection is too large to "
                                                   "write as one terminal")
            return JSON_NUMBER
        return rx

    # --------------------------------------------------------------------- objects / arrays
    def object_part(self, flat: dict, ptr: str, p: _Parts) -> None:
        props = flat.get("properties", {})
        req = list(flat.get("required", []))
        if "additionalProperties" in flat:
            addl = flat["additionalProperties"]
        else:
            addl = not self.strict
        pp = flat["_ptr"]
        pats = self.key_patterns(flat, ptr)
        if pats is None:  # lenient: patternProperties dropped; its keys may then be anything
            pats, addl = [], True
        lo_p, hi_p = self.property_counts(flat, ptr, props, req, addl, pats)
        if lo_p == -1:  # minProperties > maxProperties: no object is valid
            return
        if not props and not req and addl is True and not pats and lo_p == 0 and hi_p is None:
            p.obj, p.obj_any, p.obj_key = self.any_object(), True, "any"
            return
        key = json.dumps([props, req, addl, pp.get("properties", ptr), [(q[0], q[1], q[3]) for q in pats], lo_p, hi_p],
                         sort_keys=True, default=str)
        if key in self.obj_memo:
            p.obj, p.obj_key = self.obj_memo[key], key
            return
        name = self.fresh("o")
        self.obj_memo[key] = name
        self.obj_meta[name] = {"props": props, "req": req, "addl": addl, "pptr": pp.get("properties", ptr), "ptr": ptr,
                               "pats": pats, "minp": lo_p, "maxp": hi_p}
        p.obj, p.obj_key = name, key
        self.info[name] = {"obj": None}
        job = ("obj", name, props, req, addl, pp.get("properties", ptr), ptr, pats, lo_p, hi_p)
        self.obj_jobs[name] = job
        self.work.append(job)

    def property_counts(self, flat: dict, ptr: str, props: dict, req: list, addl: Any,
                        pats: list) -> tuple[int, int | None]:
        """``(minProperties, maxProperties)`` as the object rule counts them, bounds that the other
        keywords already imply removed (``(0, None)``: no count); ``(-1, None)``: no object is valid.

        The grammar counts members.  Listed properties appear at most once each (the schema's
        order); with additional or pattern properties a key may repeat, so a count of members is a
        count of properties only when no key repeats: ``minProperties`` over 1 is then refused
        (two members could be one property), while ``maxProperties`` only narrows the spelling
        (a text repeating a key is refused; the value's own spelling, with each key once, is not).
        """
        pp = flat["_ptr"]
        lo_p, hi_p = flat.get("minProperties", 0), flat.get("maxProperties")
        for v, kw in ((lo_p, "minProperties"), (hi_p, "maxProperties")):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                if isinstance(v, float) and v.is_integer() and v >= 0:
                    continue
                raise InvalidSchemaError(f"{kw} must be a non-negative integer, got {v!r}", pointer=pp.get(kw, ptr))
        lo_p = int(lo_p)
        hi_p = None if hi_p is None else int(hi_p)
        names = set(props) | set(req)
        free = addl is not False or bool(pats)
        if lo_p <= len(set(req)):
            lo_p = 0
        if hi_p is not None and not free and hi_p >= len(names):
            hi_p = None
        if hi_p is not None and lo_p > hi_p:
            return -1, None
        if lo_p > 1 and free:
            self.unsupported(pp.get("minProperties", ptr), "minProperties",
                             f"minProperties {lo_p} with additional or pattern properties: the grammar counts "
                             "members, and a repeated key would count twice")
            lo_p = 0
        if max(lo_p, hi_p or 0) > _MAX_PROPERTY_COUNT:
            kw = "minProperties" if lo_p > _MAX_PROPERTY_COUNT else "maxProperties"
            self.unsupported(pp.get(kw, ptr), kw, f"a property count over {_MAX_PROPERTY_COUNT} needs one grammar "
                                                  "rule per count and position")
            return 0, None
        return lo_p, hi_p

    def key_patterns(self, flat: dict, ptr: str) -> list[tuple[str, Any, str, str]] | None:
        """``patternProperties`` as ``[(pattern, schema, key regex, pointer)]``: the key regex is the
        canonical JSON string (quotes included) in which the pattern finds a match.  Exact when the
        patterns are pairwise disjoint (checked on the automata), so that each key matches at most
        one; otherwise refused (None under ``lenient``)."""
        pats = flat.get("patternProperties")
        if not pats:
            return []
        pptr = flat["_ptr"].get("patternProperties", ptr)
        if not isinstance(pats, dict):
            raise InvalidSchemaError("patternProperties must be an object", pointer=pptr)
        out: list[tuple[str, Any, str, str]] = []
        for pat, sch in pats.items():
            try:
                rx = '"' + pattern_regex(pat) + '"'
            except RegexUnsupported as e:
                self.unsupported(pptr, "patternProperties", f"{pat!r}: {e}")
                return None
            for other, _s, orx, _p in out:
                if self.overlap(rx, orx):
                    self.unsupported(pptr, "patternProperties", f"the patterns {other!r} and {pat!r} match a "
                                     "common key (overlapping patterns need an automaton intersection)")
                    return None
            out.append((pat, sch, rx, _ptr_join(pptr, "patternProperties", pat)))
        return out

    def build_object(self, name: str, props: dict, req: list, addl: Any, pptr: str, ptr: str,
                     pats: list[tuple[str, Any, str, str]], lo_p: int = 0, hi_p: int | None = None) -> None:
        """Rules for an object: ``{name}_{i}_{c}`` derives the rest of the members after the first
        ``i`` listed properties were passed and ``c`` members written (``c`` capped at ``C``, see
        :meth:`property_counts`); at ``i = stop`` the members come in any order (``{name}_f{c}``)."""
        if name in self.obj_built:
            return
        self.obj_built[name] = {}
        fsms = [(regex_fsm(rx), sch, pp_ptr) for _pat, sch, rx, pp_ptr in pats]

        def key_rule(k: str, own: Any, own_ptr: str) -> tuple[str | None, Any]:
            """The value rule of key ``k`` (its own schema and every pattern it matches), and a key
            equal for two keys whose value rules have the same language (None: unknown)."""
            if own_ptr in self.dead_ptrs:  # admits no value (found by an earlier pass's pruning)
                return None, ("schema", "false")
            spelled = json.dumps(k, ensure_ascii=False)
            hits = [(sch, pp_ptr) for f, sch, pp_ptr in fsms if f.accepts(spelled)]
            if not hits:
                r = self.value_rule(own, own_ptr) if own is not False else None
                return r, ("schema", json.dumps(own, sort_keys=True, default=str))
            node = _Internal(allOf=([] if own is True else [own]) + [sch for sch, _p in hits])
            node.src_ptrs = ([] if own is True else [own_ptr]) + [p for _s, p in hits]  # (for refusals)
            r = self.value_rule(node, own_ptr, memo_key=("keyed", own_ptr, _meet_members(own),
                                                         tuple(p for _s, p in hits)))
            return r, None

        entries: list[tuple[str, str | None, bool]] = []
        same: dict[str, Any] = {}
        src: dict[str, tuple[Any, str]] = {}
        for k, s in props.items():
            r, sk = key_rule(k, s, _ptr_join(pptr, "properties", k))
            entries.append((k, r, k in req))
            same[k], src[k] = sk, (s, _ptr_join(pptr, "properties", k))
        for k in req:
            if k not in props:  # a required name that is not listed: its patterns' schemas, else additionalProperties'
                spelled = json.dumps(k, ensure_ascii=False)
                own = True if any(f.accepts(spelled) for f, _s, _p in fsms) else addl
                r, sk = key_rule(k, own, _ptr_join(ptr, "additionalProperties"))
                entries.append((k, r, True))
                same[k], src[k] = sk, (own, _ptr_join(ptr, "additionalProperties"))
        add_rule = None if addl is False else self.value_rule(addl, _ptr_join(ptr, "additionalProperties"))
        if any(r is None and q for _k, r, q in entries):
            self.rules[name] = [name]  # a required property admits no value: no object is valid
            return
        live = [(k, r, q) for k, r, q in entries if r is not None]
        banned = [k for k, r, _q in entries if r is None]  # properties whose schema admits nothing
        # pattern keys: one terminal per pattern (pairwise disjoint), at Lark's default priority so
        # that a listed name it matches is retyped to the name's literal (the keyword rule); keys no
        # pattern matches fall to an additional-key terminal at priority -1, tried after them all
        pat_rules = [None if pp_ptr in self.dead_ptrs else self.value_rule(sch, pp_ptr) for _pat, sch, _rx, pp_ptr in pats]
        # beside patterns, keys that must not be written are taken out of the key terminals by a
        # lookahead difference ("(?!N")...", automata.meet_split): the listed names whose schema admits
        # no value out of every key terminal (a pattern's would take them), the keys of patterns whose
        # schema admits none out of the additional-key terminal
        off_names = "|".join(_rx_lit(json.dumps(k, ensure_ascii=False)[1:-1]) for k in banned) if pats else ""
        off_keys = [rx[1:-1] for (_pat, _s, rx, _p), r in zip(pats, pat_rules, strict=True) if r is None]
        not_names = f'(?!(?:{off_names})")' if pats and banned else ""  # (the name "" alone: off_names is "")
        pat_rxs = ['"' + not_names + rx[1:] if not_names else rx for _pat, _s, rx, _p in pats]
        addl_key = f'"{not_names}' + "".join(f'(?!{k}")' for k in off_keys) + f'{UNIT}*"'
        holder = pats[0][3].rsplit("/", 2)[0] if pats else ptr  # (the object holding patternProperties)
        if (not_names or off_keys) and not _differences_fit(pat_rxs + ([addl_key] if addl is not False else [])):
            if banned:  # (lenient: the names are not banned, as without their listed schemas)
                self.unsupported(pptr, "properties", f"the properties {banned} admit no value; beside "
                                 "patternProperties their names need an automaton difference over gad's budget")
            if addl is not False and off_keys:
                self.unsupported(holder, "patternProperties", "a pattern whose schema admits no value beside "
                                 "additional properties needs an automaton difference over gad's budget")
            pat_rxs = [rx for _pat, _s, rx, _p in pats]
            addl_key = f'"{UNIT}*"'
        pat_items = []
        for rx, r in zip(pat_rxs, pat_rules, strict=True):
            if r is not None and rx.startswith('"(?!') and _matches_nothing(rx):
                r = None  # every key the pattern matches is a listed name admitting no value: none is written
            pat_items.append((self.term(rx, "K"), r))
        free_items = [f"{t} {{colon}} {r}" for t, r in pat_items if r is not None]
        comma = self.punct(",", True, True)
        colon = self.punct(":", True, True)
        n = len(live)
        # With additional properties allowed, the keys after the last required one come in any
        # order, repeats included (the last occurrence is the value, as in Python's json); every
        # listed key is then in each key context, so Lark's keyword rule lexes a listed name as its
        # own terminal and the additional-key terminal never stands for a listed property.
        last_req = max((i for i, (_k, _r, q) in enumerate(live) if q), default=-1)
        okey = None
        if add_rule is not None:
            if pats:
                okey = self.term(addl_key, "K", priority=-1)
            else:
                try:
                    okey = self.term(_not_keys_regex(banned) if banned else f'"{UNIT}*"', "K")
                except _UnwritableKeys as e:  # (lenient: any key, listed ones included)
                    self.unsupported(pptr, "properties", f"the additional keys beside the listed ones: {e}")
                    okey = self.term(f'"{UNIT}*"', "K")
            free_items.append(f"{okey} {{colon}} {add_rule}")
        free_items = [x.replace("{colon}", colon) for x in free_items]
        stop = n if not free_items else last_req + 1
        # member counts: c in 0..cap; with no maxProperties the last one means "cap or more"
        cap = hi_p if hi_p is not None else max(lo_p, 1)

        def nxt(c: int) -> int | None:
            if c + 1 <= cap:
                return c + 1
            return cap if hi_p is None else None

        item = f"{name}_it"
        if free_items:
            self.rules[item] = [f"{self.key_lit(k)} {colon} {r}" for k, r, _q in live] + free_items
            for c in range(cap + 1):
                c1 = nxt(c)
                alts = [""] if c >= lo_p else []
                if c1 is not None:
                    alts.append(f"{comma + ' ' if c else ''}{item} {name}_f{c1}")
                self.rules[f"{name}_f{c}"] = alts
        for i in range(stop, -1, -1):
            for c in range(cap + 1):
                m = f"{name}_{i}_{c}"
                if i == stop:
                    self.rules[m] = [f"{name}_f{c}"] if free_items else ([""] if c >= lo_p else [])
                    continue
                k, r, q = live[i]
                sep = f"{comma} " if c else ""
                c1 = nxt(c)
                alts = [] if c1 is None else [f"{sep}{self.key_lit(k)} {colon} {r} {name}_{i + 1}_{c1}"]
                if not q:
                    alts.append(f"{name}_{i + 1}_{c}")
                self.rules[m] = alts
        # runs of optional properties entered from the object's start or after a required one: a
        # balanced tree instead of the chain above (whose LALR(1) automaton is quadratic in the run)
        runs = self.optional_runs(name, live, stop, comma, colon) if cap == 1 and hi_p is None else {}
        for i, (j, tree) in runs.items():
            self.rules[f"{name}_{i}_0"] = [f"{name}_{j}_0", tree]
            self.rules[f"{name}_{i}_1"] = [f"{name}_{j}_1", f"{comma} {tree}"]
        lb, rb = self.punct("{", False, True), self.punct("}", True, False)
        if last_req >= 0:
            alts = [f"{lb} {name}_0_0 {rb}"]
        else:  # no member is required: "{}" is its own terminal, the braces enclose >= 1 member
            # (else "{" + n blanks, then n blanks + "}" would make a run of 2n)
            alts = [self.term("\\{" + self.ws + "\\}", "P")] if lo_p == 0 else []
            c1 = nxt(0)
            if 0 in runs and not free_items:  # stop == n: every member optional, at least one written
                alts.append(f"{lb} {runs[0][1]} {rb}")
            elif c1 is not None:
                for i in range(stop, -1, -1):
                    ne = [] if i == stop else [f"{self.key_lit(live[i][0])} {colon} {live[i][1]} {name}_{i + 1}_{c1}"]
                    if i == stop and free_items:
                        ne.append(f"{item} {name}_f{c1}")
                    if i < stop:
                        ne.append(f"{name}_ne{i + 1}")
                    self.rules[f"{name}_ne{i}"] = ne
                alts.append(f"{lb} {name}_ne0 {rb}")
        self.rules[name] = alts
        self.info[name] = {"obj": {"order": [k for k, _r, _q in live], "child": {k: r for k, r, _q in entries},
                                   "add": add_rule,
                                   "pats": [(f, r) for (f, _s, _p), (_t, r) in zip(fsms, pat_items, strict=True)]}}
        self.obj_built[name] = {"live": live, "stop": stop, "free": bool(free_items), "cap": cap, "lo": lo_p,
                                "hi": hi_p, "okey": okey, "add": add_rule, "same": same, "src": src,
                                "add_same": ("schema", json.dumps(addl, sort_keys=True, default=str)),
                                "add_src": (addl, _ptr_join(ptr, "additionalProperties")),
                                "plain": not pats, "banned": banned,
                                "pat_rules": [(pp_ptr, r) for (_pat, _s, _rx, pp_ptr), (_t, r) in zip(pats, pat_items, strict=True)]}

    def optional_runs(self, name: str, live: list[tuple[str, Any, bool]], stop: int, comma: str,
                      colon: str) -> dict[int, tuple[int, str]]:
        """Rules for the runs of at least :data:`_TREE_RUN` optional properties that start the fixed
        order or follow a required property (an object without property counts): ``{start: (end,
        rule)}`` (``end``: the position after the run, a required property's or ``stop``), the rule deriving the run's members written as a non-empty ordered subsequence, the last
        followed by the rest of the object (``{name}_{end}_1``: nothing, or ``,`` and more).

        The chain of :meth:`build_object` (``{name}_{i}_c``: member ``i`` or skip it) leaves, after
        each member, a parser state predicting every later member of the run through a chain of
        skips: its LALR(1) automaton has a number of nonterminal transitions quadratic in the run
        (400 optional properties: seconds to build).  A balanced binary tree over the run has
        ``O(n log n)``: a node ``[a, b]`` with halves ``L``, ``R`` writes ``last(a, b) -> last(L) |
        open(L) last(R) | last(R)`` and ``open(a, b) -> open(L) | open(L) open(R) | open(R)``, where
        ``open`` members end in their comma and a ``last`` leaf ends in the rest of the object (a
        leaf, one member, is written in its parent's alternatives, not as a rule of its own).  The
        commas trail their members so that the parser, after a comma, sees the next key before it
        chooses how far up the tree to reduce (with commas leading, LR(1) would have to choose on the
        comma).  The terminals, and so the lexer contexts and masks, are those of the chain.
        """
        def node(kind: str, a: int, b: int, tail: str) -> str:
            """The symbols of node ``[a, b]`` (a leaf's are written in its parent's place)."""
            if a == b:
                k, v, _q = live[a]
                return f"{self.key_lit(k)} {colon} {v} " + (comma if kind == "o" else tail)
            r = f"{name}_{kind}{a}_{b}"
            if r not in self.rules:
                m = (a + b) // 2
                lo, hi = node("o", a, m, tail), node(kind, m + 1, b, tail)
                self.rules[r] = [node(kind, a, m, tail), f"{lo} {hi}", hi]
            return r

        runs: dict[int, tuple[int, str]] = {}
        i = 0
        while i < stop:
            if live[i][2] or (i and not live[i - 1][2]):
                i += 1
                continue
            j = next((x for x in range(i, stop) if live[x][2]), stop)
            if j - i >= _TREE_RUN:
                runs[i] = (j, node("l", i, j - 1, f"{name}_{j}_1"))
            i = j
        return runs

    def key_lit(self, k: str) -> str:
        """A string-literal terminal for the key ``k`` in canonical spelling (Lark's keyword rule
        applies to literals only)."""
        text = json.dumps(k, ensure_ascii=False)
        name = self.keylits.get(text)
        if name is None:
            name = self.content_name("K", text)
            self.keylits[text] = name
            lark_text = text.replace("\\", "\\\\").replace('"', '\\"')
            self.lit_defs.append((name, lark_text))
        return name

    def any_object(self) -> str:
        if "any_obj" not in self.rules:
            self.rules["any_obj"] = []
            v = self.any_value()
            self.info["any_obj"] = {"obj": None}
            okey = self.term(JSON_STRING, "S")
            comma = self.punct(",", True, True)
            colon = self.punct(":", True, True)
            self.rules["any_obj_m"] = [f"{okey} {colon} {v}", f"any_obj_m {comma} {okey} {colon} {v}"]
            self.rules["any_obj"] = [f"{self.punct('{', False, True)} any_obj_m {self.punct('}', True, False)}",
                                     self.term("\\{" + self.ws + "\\}", "P")]
        return "any_obj"

    def any_array(self) -> str:
        if "any_arr" not in self.rules:
            self.rules["any_arr"] = []
            v = self.any_value()
            comma = self.punct(",", True, True)
            self.info["any_arr"] = {"arr": None}
            self.rules["any_arr_m"] = [v, f"any_arr_m {comma} {v}"]
            self.rules["any_arr"] = [f"{self.punct('[', False, True)} any_arr_m {self.punct(']', True, False)}",
                                     self.term("\\[" + self.ws + "\\]", "P")]
        return "any_arr"

    def any_value(self) -> str:
        if "any_value" not in self.rules:
            self.rules["any_value"] = []
            self.memo["any"] = "any_value"
            p = _Parts(string="*", number=JSON_NUMBER, lits={"true", "false", "null"})
            p.obj = self.any_object()
            p.arr = self.any_array()
            self.emit_value("any_value", p)
        return "any_value"

    def array_part(self, flat: dict, ptr: str, p: _Parts) -> None:
        pp = flat["_ptr"]
        prefix: list[Any] = []
        rest: Any = True
        if "prefixItems" in flat:
            prefix = list(flat["prefixItems"])
            rest = flat.get("items", True)
            pre_ptr = pp.get("prefixItems", ptr)
            pre_kw = "prefixItems"
            rest_kw = "items"
        elif isinstance(flat.get("items"), list):
            prefix = list(flat["items"])
            rest = flat.get("additionalItems", True)
            pre_ptr = pp.get("items", ptr)
            pre_kw = "items"
            rest_kw = "additionalItems"
        else:
            rest = flat.get("items", True)
            pre_ptr, pre_kw, rest_kw = ptr, "items", "items"
        lo = flat.get("minItems", 0)
        hi = flat.get("maxItems")
        if not prefix and rest is True and lo == 0 and hi is None:
            p.arr, p.arr_any, p.arr_key = self.any_array(), True, "any"
            return
        key = json.dumps([prefix, rest, lo, hi, pre_ptr], sort_keys=True, default=str)
        if key in self.arr_memo:
            p.arr, p.arr_key = self.arr_memo[key], key
            return
        name = self.fresh("a")
        self.arr_memo[key] = name
        p.arr, p.arr_key = name, key
        self.info[name] = {"arr": None}
        rptr = _ptr_join(pp.get(rest_kw, ptr), rest_kw)
        self.work.append(("arr", name, prefix, rest, lo, hi, pre_ptr, pre_kw, rptr))

    def build_array(self, name: str, prefix: list, rest: Any, lo: int, hi: int | None, pre_ptr: str,
                    pre_kw: str, rptr: str) -> None:
        items = [self.value_rule(s, _ptr_join(pre_ptr, pre_kw, i)) for i, s in enumerate(prefix)]
        rest_rule = None if rest is False else self.value_rule(rest, rptr)
        cap = len(items) if rest_rule is None else None
        for i, r in enumerate(items):
            if r is None:
                cap = i if cap is None else min(cap, i)
                break
        if cap is not None:
            hi = cap if hi is None else min(hi, cap)
        if hi is not None and lo > hi:
            self.rules[name] = [name]
            return
        if hi is not None and hi - max(lo, len(items)) > _MAX_ITEMS_CHAIN:
            self.unsupported(rptr, "maxItems", f"maxItems {hi} needs one grammar rule per position "
                                               f"(over {_MAX_ITEMS_CHAIN})")
            hi = None
        if lo > _MAX_ITEMS_CHAIN:
            self.unsupported(rptr, "minItems", f"minItems {lo} needs one grammar rule per position")
            lo = 0
        comma = self.punct(",", True, True)

        def item(i: int) -> str:
            return items[i] if i < len(items) else rest_rule  # type: ignore[return-value]

        tail_from = max(lo, len(items), 1)
        # L_i: the rest of the array after i items (1 <= i)
        top = hi if hi is not None else tail_from
        for i in range(top, 0, -1):
            li = f"{name}_{i}"
            if hi is None and i == tail_from:
                self.rules[li] = ["", f"{comma} {rest_rule} {li}"] if rest_rule else [""]
                continue
            alts = []
            if i >= lo:
                alts.append("")
            if hi is None or i < hi:
                alts.append(f"{comma} {item(i)} {name}_{i + 1}")
            self.rules[li] = alts
        alts = []
        if hi is None or hi >= 1:
            if item(0) is not None:
                alts.append(f"{self.punct('[', False, True)} {item(0)} {name}_1 {self.punct(']', True, False)}")
        if lo == 0:
            alts.append(self.term("\\[" + self.ws + "\\]", "P"))
        if not alts:
            alts = [name]
        self.rules[name] = alts
        self.info[name] = {"arr": {"items": items, "rest": rest_rule}}

    # ------------------------------------------------------------------------------ driver
    def prune(self) -> None:
        """Drop rules deriving no string (e.g. an object whose required property admits no value)
        and every alternative using one, so that no token can lead into a dead end.

        The productive rules are found by a worklist (linear in the rules' text): an alternative
        waits on its distinct rule symbols (terminals, upper case, are productive), and a rule is
        productive once one of its alternatives waits on none."""
        waiting: dict[str, list[int]] = {}  # rule symbol -> the alternatives (numbered) that use it
        need: list[int] = []  # per alternative: its distinct rule symbols not yet productive
        owner: list[str] = []
        productive: set[str] = set()
        todo: list[str] = []
        for name, alts in self.rules.items():
            for a in alts:
                syms = {sym for sym in a.split() if not sym[:1].isupper()}
                j = len(need)
                need.append(len(syms))
                owner.append(name)
                for sym in syms:
                    waiting.setdefault(sym, []).append(j)
                if not syms and name not in productive:
                    productive.add(name)
                    todo.append(name)
        while todo:
            for j in waiting.get(todo.pop(), ()):
                need[j] -= 1
                if not need[j] and owner[j] not in productive:
                    productive.add(owner[j])
                    todo.append(owner[j])
        j = 0
        kept: dict[str, list[str]] = {}
        for name, alts in self.rules.items():
            if name in productive:
                kept[name] = [a for i, a in enumerate(alts) if not need[j + i]]
            j += len(alts)
        self.rules.clear()
        self.rules.update(kept)

    def _unit_rules(self) -> dict[str, str]:
        """Rules of one alternative of one symbol (``v3: o4``, a property's value rule naming its
        object's), each mapped to the symbol it finally stands for: the text names that symbol in
        their place and leaves them out, which changes no language and spares every later stage
        (reading, the LALR(1) table, the parser's reductions) a rule, its states and its reduction.
        The rule names stay what :attr:`info` is keyed by."""
        direct = {name: alts[0] for name, alts in self.rules.items()
                  if len(alts) == 1 and alts[0] and " " not in alts[0] and alts[0] != name}
        out: dict[str, str] = {}
        for name in direct:
            seen = {name}
            sym = direct[name]
            while sym in direct and sym not in seen:  # a chain (v1: o2 with o2 a unit rule too)
                seen.add(sym)
                sym = direct[sym]
            if sym not in seen:
                out[name] = sym
        return out

    def pruned_keys(self) -> set[str]:
        """Pointers of listed properties and of ``patternProperties`` patterns whose value rule
        :meth:`prune` removed: their keys must not fall to the object's additional-key terminal (a
        listed name is banned from it; a pattern admitting no value is written as one whose schema is
        ``false``), which a new pass with them in ``dead`` does."""
        out: set[str] = set()

        def pruned(r: str | None) -> bool:
            return r is not None and r not in self.rules and not r[:1].isupper()  # (a terminal: productive)

        for lay in self.obj_built.values():
            for k, r, _q in lay.get("live", ()):
                if pruned(r):
                    out.add(lay["src"][k][1])
            out.update(pp_ptr for pp_ptr, r in lay.get("pat_rules", ()) if pruned(r))
        return out

    def run(self) -> str:
        root = self.value_rule(self.root, "")
        while self.work:
            job = self.work.pop()
            if job[0] == "obj":
                self.build_object(*job[1:])
            else:
                self.build_array(*job[1:])
        # value rules created before their object / array body: refresh the dump info
        for inf in self.info.values():
            if "_obj_rule" in inf:
                inf["obj"] = self.info.get(inf["_obj_rule"], {}).get("obj") if inf["_obj_rule"] else None
                inf["arr"] = self.info.get(inf["_arr_rule"], {}).get("arr") if inf["_arr_rule"] else None
        self.prune()
        if root is not None and root not in self.rules:
            root = None
        lines = ["// generated by gad.grammar.json_schema from a JSON Schema (see that module's docstring)"]
        if root is None:
            raise EmptyLanguageError("the schema admits no JSON value", path="<json-schema>")
        else:
            self.root_rule = root
            unit = self._unit_rules()
            top = unit.get(root, root)
            if self.ws:
                lead = self.term(self.ws.replace("*", "+").replace("{0,", "{1,"), "W")
                lines.append(f"start: {lead}? {top} {lead}?")
            else:
                lines.append(f"start: {top}")
        out = {rname: [" ".join([unit.get(sym, sym) for sym in a.split()]) for a in alts] if unit else alts
               for rname, alts in self.rules.items() if rname not in unit}
        reach = {top}  # rules no derivation from the start uses are left out (Lark drops them too)
        todo = [top]
        while todo:
            for a in out.get(todo.pop(), ()):
                for sym in a.split():
                    if sym not in reach and sym in out:
                        reach.add(sym)
                        todo.append(sym)
        used = {sym.rstrip("?") for sym in lines[-1].split()}  # (the start line's symbols)
        for rname, alts in out.items():
            if rname in reach:
                body = "\n    | ".join(alts) if alts else rname
                lines.append(f"{rname}: {body}")
                for a in alts:
                    used.update(a.split())
        for tname, rx in self.term_defs:
            if tname.partition(".")[0] in used:  # (a name may carry a priority: NAME.2)
                rng = int_range_of(rx)
                if rng is not None:  # (read back by note_direct_automata, in any process)
                    lines.append(f"// gad:int-range {rng[0]} {rng[1]}")
                not_keys = _NOT_KEYS.get(rx)
                if not_keys is not None:  # (the same)
                    lines.append("// gad:not-words " + json.dumps({"keys": not_keys[0], "quoted": not_keys[1]}))
                lines.append(f"{tname}: /{lark_regexp(rx)}/")
        n_terms = len(lines)
        for tname, lit in self.lit_defs:
            if tname in used:
                lines.append(f'{tname}: "{lit}"')
        n_terms = sum(1 for tname, _rx in self.term_defs if tname.partition(".")[0] in used) + len(lines) - n_terms
        n_defs = sum(1 for line in lines if not line.startswith("//"))
        if self.n_enum_literals and (n_terms > MAX_TERMINALS or n_defs > MAX_DEFINITIONS):
            raise _EnumLiteralsOver
        if n_terms > MAX_TERMINALS:  # (refused here, where the schema's place can be named, not by the loader)
            ptr, n = _most_properties(self.root)
            err = UnsupportedSchemaError(
                f"the grammar needs {n_terms:,} terminals (each listed property name is one; {n:,} are listed here), "
                f"more than gad's limit of {MAX_TERMINALS:,} for one grammar", pointer=ptr, keyword="properties")
            err.droppable = False  # (lenient has nothing to drop: the names are the schema)
            raise err
        big = _largest_count(self.root) if n_defs > MAX_DEFINITIONS else None
        if big is not None:  # (refused here, at the count that makes the rules, not by the loader)
            ptr, kw, n = big
            err = UnsupportedSchemaError(
                f"the grammar needs {n_defs:,} rule and terminal definitions, more than gad's limit of "
                f"{MAX_DEFINITIONS:,}; a count is written as one rule per value ({kw} {n:,} here, the largest)",
                pointer=ptr, keyword=kw)
            err.droppable = False
            raise err
        text = "\n".join(lines) + "\n"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in a name or a string value gad writes as it is
            ptr, kw = _lone_surrogate_at(self.root)
            err = UnsupportedSchemaError(
                "a lone surrogate code point (U+D800-U+DFFF) in a string gad must write: no UTF-8 text holds "
                "it (write the character it should pair into, or the pair)", pointer=ptr, keyword=kw)
            err.droppable = False
            raise err from None
        return text


def _largest_count(root: Any) -> tuple[str, str, int] | None:
    """``(JSON pointer, keyword, value)`` of the largest ``minItems`` / ``maxItems`` / ``minProperties`` /
    ``maxProperties`` of at least 64 in ``root`` (the grammar writes one rule per count up to it), or
    None where there is none."""
    best: tuple[str, str, int] | None = None
    for kw in ("maxItems", "minItems", "maxProperties", "minProperties"):
        for ptr in _places_holding(root, kw, 10_000):
            node = _walk(root, ptr)[-1][1]
            n = node.get(kw) if isinstance(node, dict) else None
            if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 64 and (best is None or n > best[2]):
                best = (ptr, kw, int(n))
    return best


def _places_holding(root: Any, keyword: str, most: int) -> list[str]:
    """JSON pointers of the schema objects in ``root`` holding ``keyword`` (at most ``most``, in
    document order; values under ``enum`` / ``const`` / ``default`` / ``examples`` are not schemas)."""
    out: list[str] = []
    todo: list[tuple[str, Any]] = [("", root)]
    while todo and len(out) < most:
        ptr, node = todo.pop()
        if isinstance(node, dict):
            if keyword in node:
                out.append(ptr)
            todo.extend((_ptr_join(ptr, k), v) for k, v in reversed(list(node.items()))
                        if k not in ("enum", "const", "default", "examples", "example"))
        elif isinstance(node, list):
            todo.extend((_ptr_join(ptr, i), v) for i, v in reversed(list(enumerate(node))))
    return out


def _lone_surrogate_at(root: Any) -> tuple[str, str]:
    """``(JSON pointer, keyword)`` of the first name or string value in ``root`` holding a lone
    surrogate: a name under ``properties`` / ``dependentRequired`` / ``dependencies``, one in
    ``required``, a string (or a name) inside an ``enum`` / ``const``; ``("", "")`` when none does."""
    def bad(x: Any) -> bool:
        if isinstance(x, str):
            return any(0xD800 <= ord(ch) <= 0xDFFF for ch in x)
        if isinstance(x, dict):
            return any(bad(k) or bad(v) for k, v in x.items())
        if isinstance(x, list):
            return any(bad(v) for v in x)
        return False

    todo: list[tuple[str, Any]] = [("", root)]
    while todo:
        ptr, node = todo.pop()
        if isinstance(node, list):
            todo.extend((_ptr_join(ptr, i), v) for i, v in reversed(list(enumerate(node))))
            continue
        if not isinstance(node, dict):
            continue
        for kw in ("properties", "dependentRequired", "dependencies"):
            if isinstance(node.get(kw), dict) and any(bad(k) for k in node[kw]):
                return ptr, kw
        for kw in ("required", "enum", "const"):
            if kw in node and bad(node[kw]):
                return ptr, kw
        todo.extend((_ptr_join(ptr, k), v) for k, v in reversed(list(node.items()))
                    if k not in ("enum", "const", "default", "examples", "example"))
    return "", ""


def _most_properties(root: Any) -> tuple[str, int]:
    """``(JSON pointer, count)`` of the schema object in ``root`` that lists the most names under
    ``properties`` (the first such in document order; ``("", 0)`` when none does)."""
    best = ("", 0)
    todo: list[tuple[str, Any]] = [("", root)]
    while todo:
        ptr, node = todo.pop()
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict) and len(props) > best[1]:
                best = (ptr, len(props))
            todo.extend((_ptr_join(ptr, k), v) for k, v in reversed(list(node.items()))
                        if k not in ("enum", "const", "default", "examples", "example"))  # (values, not schemas)
        elif isinstance(node, list):
            todo.extend((_ptr_join(ptr, i), v) for i, v in reversed(list(enumerate(node))))
    return best




def _class_star(content: str) -> tuple[str, int] | None:
    """``(class, n)`` when the content regex's language is ``C*`` (n = 0) or ``C+`` (n = 1) for a
    class C of raw characters (no quote, backslash or control: one character is one unit);
    None otherwise (or when its automaton is not small)."""
    try:
        f = regex_fsm(content, 200).reduce()
    except Exception:  # noqa: BLE001 - too large, or not parseable: not of this form
        return None
    live = [s for s in f.states if f.map.get(s)]
    if len(f.states) > 3:
        return None
    alpha = f.alphabet

    def chars(s: Any, t: Any) -> list[tuple[int, int]] | None:
        out: list[tuple[int, int]] = []
        for tr, nx in f.map.get(s, {}).items():
            if nx != t:
                if f.islive(nx):
                    return None
                continue
            for sym in alpha.by_transition[tr]:
                if sym is _anything_else:
                    return None
                out.append((ord(sym), ord(sym)))
        return _norm(out)

    if len(live) == 1 and f.initial in f.finals:  # C*
        s = f.initial
        cs = chars(s, s)
        n = 0
    else:  # C+: initial -C-> q, q -C-> q, q final
        nexts = {nx for nx in f.map.get(f.initial, {}).values() if f.islive(nx)}
        if f.initial in f.finals or len(nexts) != 1:
            return None
        q = next(iter(nexts))
        if q not in f.finals:
            return None
        cs, c2 = chars(f.initial, q), chars(q, q)
        if cs != c2:
            return None
        n = 1
    if not cs or _intersect(cs, _SPECIAL_RANGES):
        return None
    return "[" + _ranges_text(cs) + "]", n

def _meet(f: Any, g: Any) -> Any:
    """A thunk for ``f & g`` (for :func:`budgeted`)."""
    return lambda: f & g


def _inside(f: Any, g: Any) -> bool:
    """``f``'s language lies inside ``g``'s (under the product budget)."""
    return bool(budgeted(lambda: (f - g).empty(), _MAX_PRODUCT_STATES_BUILT))


_NUMBER_TAIL = "[0-9eE+\\-.]+"  # what may follow a number's start inside a number token


def _number_spellings(x: float) -> set[str]:
    """The spellings of the JSON number ``x`` an ``enum`` / ``const`` literal accepts: its ``json.dumps``,
    a float's plain decimal, and for a whole value under 1e16 both ``n`` and ``n.0`` (``-0`` and ``-0.0``
    too for zero), which JSON Schema's equality holds equal."""
    sp = {json.dumps(x)}
    if isinstance(x, float):
        sp.add(_plain_number(x))
    if float(x).is_integer() and abs(x) < 1e16:
        sp |= {str(int(x)), f"{int(x)}.0"}
        if x == 0:
            sp |= {"-0", "-0.0"}
    return sp


def _is_number(x: Any) -> bool:
    """``x`` is a JSON number (an int or a float, not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _matches_nothing(rx: str) -> bool:
    """Terminal regex ``rx`` matches no string (False where its automaton is not built: over the
    budget, which :func:`_differences_fit` has reported)."""
    try:
        return bool(regex_fsm(rx).empty())
    except Exception:  # noqa: BLE001 - over the budget, or not an automaton gad builds
        return False


def _differences_fit(regexes: list[str]) -> bool:
    """Whether every one of the terminal ``regexes`` holding a lookahead difference (``"(?!N")..."``) has
    an automaton within gad's budget for one terminal (built now and kept: :func:`regex_fsm` caches it)."""
    for rx in regexes:
        if rx.startswith('"(?!'):
            try:
                regex_fsm(rx)
            except Exception:  # noqa: BLE001 - over the budget, or not an automaton gad builds
                return False
    return True


def _not_patterns_fsm(patterns: list[str]) -> Any:
    """The automaton of the canonical string contents in which none of ``patterns`` (JSON Schema
    ``pattern`` strings: ECMA-262, a search) finds a match: the contents of :data:`UNIT` characters
    minus each pattern's (:func:`gad.grammar.regex.pattern_regex`), minimised.

    Raises:
        RegexUnsupported: a pattern gad cannot read as a regular language.
        AutomatonTooLarge: over gad's budget for one terminal's automaton."""
    out: Any = regex_fsm(f"{UNIT}*")
    for p in patterns:
        out = minimize(budgeted(functools.partial(out.difference, regex_fsm(pattern_regex(p))), MAX_TERMINAL_STATES))
        if out is None:
            raise AutomatonTooLarge(f"not of {p!r}")
    return out


def _intersect_content(regexes: list[Any], quick: bool = False) -> tuple[bool, str | None]:
    """``(True, rx)``: a content regex for the strings every one of ``regexes`` matches (None: no
    string does); ``(False, None)`` when the intersection's automaton or its regex exceeds gad's
    budgets (``quick``: the smaller budgets of :data:`_QUICK_REGEX_STATES` / ``_CHARS``, where the
    caller has another way to write the intersection).  A regex whose language lies inside all the others is returned as is; otherwise the
    product automaton is written back as a regex (:func:`gad.grammar.automata.fsm_regex`), and
    that regex is re-parsed and checked equivalent to the product, so the result is exact."""
    try:
        fsms = [r if isinstance(r, _FSM) else regex_fsm(r) for r in regexes]
        order = sorted(fsms, key=lambda f: len(f.states))
        both: Any = order[0]
        for f in order[1:]:
            if len(both.states) * len(f.states) > 2 * _MAX_PRODUCT_STATES_BUILT:
                return False, None  # (a cheap bound on the product's size: building it would take long)
            both = minimize(budgeted(_meet(both, f), _MAX_PRODUCT_STATES_BUILT))
            if both is None:
                return False, None
        if both.empty():
            return True, None
        for r, f in zip(regexes, fsms, strict=True):
            if isinstance(r, str) and _inside(f, both):
                return True, r  # f's language is inside every other one
        rx = _write_back(both, fsm_regex, *((_QUICK_REGEX_STATES, _QUICK_REGEX_CHARS) if quick else ()))
        return (rx is not None), rx
    except (AutomatonTooLarge, RecursionError):
        return False, None
    except Exception:  # noqa: BLE001 - interegular refusing a construct: not writable here
        return False, None


def _string_terminals(content: str, most: int) -> list[str]:
    """The terminals of a string value whose content regex is ``content``: one literal terminal per
    string where ``"content"`` is a finite set of at most ``most`` literals (:func:`literal_words`: a
    const, an enum of strings), else the one terminal ``"content"``.

    A context of literals is built by the lexer as their trie (``LexerDFA._build_trie``, ~0.1 ms) or,
    for one, straight from its bytes; the word-set terminal ``"(?:A|B|...)"`` was a word automaton
    built by the compiled product in the first mask that reached it (~0.2-3 ms).  The words are
    prefix-free (each ends at its closing quote), so the literals never compete in the lexer."""
    words = literal_words(f'"{content}"')
    if words is not None and len(words) <= most:
        return [_rx_lit(w) for w in words]
    return [f'"{content}"']


#: an enum of more strings stays one word-set terminal (a context of more than 62 terminals is built
#: by the lexer's Python builder; the rest of the context needs room), and so does each chunk of an
#: enum too large for one terminal (:func:`_word_chunks`)
_ENUM_LITERALS_MAX = 48


class _EnumLiteralsOver(BaseException):
    """The grammar with enums as literal terminals passes gad's limit on terminals or definitions:
    :func:`convert` builds it again with each enum one terminal, as before those literals (a
    BaseException, like :class:`_SplitFirst`: no ``except Exception`` on the way takes it for a
    refusal)."""


def _meet_of(parts: list[str]) -> tuple[bool, _Meet | None]:
    """The string content matching every one of ``parts`` (content regexes) as a lookahead
    intersection terminal (:class:`_Meet`), as :func:`_built_meet` returns it; ``(False, None)``
    also where a part's own automaton is over the budget (:func:`_intersect_content` built them:
    none is built again) or where the two smallest parts' automata multiply to over ten times that
    budget (their product would take seconds to build, in Python)."""
    fsms = [cached_fsm(p) for p in parts]  # (a part whose own automaton is over the budget is not there)
    if any(f is None for f in fsms):
        return False, None
    sizes = sorted(len(f.map) for f in fsms if f is not None)
    if sizes[0] * sizes[1] > 10 * MAX_TERMINAL_STATES:
        return False, None
    return _built_meet(_Meet(tuple(parts[1:] + parts[:1])))  # (the pattern, or the format, read last)


def _meet_less(kept: list[str], less: list[str]) -> tuple[bool, _Meet | None]:
    """The string content matching every one of ``kept`` and none of ``less`` (content regexes) as a
    lookahead terminal (:class:`_Meet`), as :func:`_built_meet` returns it."""
    return _built_meet(_Meet(tuple(kept), tuple(less)))


def _built_meet(meet: _Meet) -> tuple[bool, _Meet | None]:
    """``(True, meet)`` where the terminal's automaton is within gad's budget for one terminal (built
    now, and kept for the lexer: :func:`regex_fsm` caches it), ``(True, None)`` where it matches no
    string (the contents have no string in common: as :func:`_intersect_content` says of an empty
    intersection), ``(False, None)`` where it is over the budget or not an automaton gad builds."""
    try:
        fsm = regex_fsm(meet.terminal())
    except Exception:  # noqa: BLE001 - over the budget, or not an automaton gad builds
        return False, None
    return True, (None if fsm.empty() else meet)


def _join_numbers(a: str, b: str) -> str | None:
    """One number terminal's regex for the union of the regexes ``a`` and ``b``, written so that
    Python's leftmost-first match is the longest one (:func:`gad.grammar.automata.greedy_regex`):
    ``(?:a|b)`` would let Lark's lexer stop at ``2`` in ``2.5`` when ``a`` reads integers, where
    gad's lexer reads the longest match.  The result is re-parsed and checked equivalent to the
    union; None when the union or its regex exceeds gad's budgets."""
    try:
        both = minimize(budgeted(lambda: regex_fsm(a) | regex_fsm(b), _MAX_PRODUCT_STATES_BUILT))
        return None if both is None else _write_back(both, greedy_regex)
    except (AutomatonTooLarge, RecursionError):
        return None


def _write_back(fsm: Any, writer: Callable[[Any, int], str | None], max_states: int = _MAX_PRODUCT_REGEX_STATES,
                max_chars: int = _MAX_PRODUCT_REGEX_CHARS) -> str | None:
    """``fsm`` (a nonempty automaton) as a grouped regex written by ``writer`` (``fsm_regex`` or
    ``greedy_regex``), re-parsed and checked equivalent to ``fsm``; None when it has over
    ``max_states`` states or its regex over ``max_chars`` characters.
    Raises AutomatonTooLarge when the check exceeds the product budget."""
    if len(fsm.states) > max_states:
        return None
    rx = writer(fsm, max_chars)
    if rx is None:
        return None
    rx = f"(?:{rx})"
    if not budgeted(lambda: regex_fsm(rx).equivalent(fsm), _MAX_PRODUCT_STATES_BUILT):  # pragma: no cover
        return None  # (a bug in the writer)
    return rx


def _first_keys(meta: dict) -> list[str] | None:
    """The keys an object rule can write first: its properties up to the first required one (the
    grammar's order); None when it requires none."""
    keys: list[str] = []
    for k in meta["props"]:
        keys.append(k)
        if k in meta["req"]:
            return keys
    for k in meta["req"]:
        return keys + [k]
    return None


def _prop_schema(meta: dict, k: str) -> tuple[Any, str]:
    if k in meta["props"]:
        return meta["props"][k], _ptr_join(meta["pptr"], "properties", k)
    return meta["addl"], _ptr_join(meta["ptr"], "additionalProperties")


def _excludes(a: dict, b: dict) -> bool:
    """Some key ``a`` requires is one ``b`` forbids: no object is valid under both."""
    for k in a["req"]:
        if b["pats"] and k not in b["props"]:
            continue
        if b["props"].get(k, None if b["addl"] is False else True) in (False, None):
            return True
    return False


def _cx(content: str) -> str:
    return ANY_CONTENT if content == "*" else content


def _string_terminal(string: str | _Meet) -> str:
    """The terminal regex of a string part (content regex, ``"*"`` or a :class:`_Meet`)."""
    return string.terminal() if isinstance(string, _Meet) else '"' + _cx(string) + '"'


def _unflatten(flat: dict) -> _Internal:
    """The schema a flattened one means, in gad's reading (2020-12's keywords at its top and in the
    :class:`_Internal` schemas inside; the user's subschemas inside it under their own draft)."""
    out = _Internal((k, v) for k, v in flat.items() if not k.startswith("_") and k not in ("gad:notIn", "gad:notPattern"))
    extra = [_Internal(anyOf=[b for b, _p in br]) if kw != "oneOf" else _Internal(oneOf=[b for b, _p in br])
             for kw, br, _up in flat["_unions"]]
    if "gad:notIn" in flat:
        extra.append(_Internal({"not": _Internal(enum=flat["gad:notIn"])}))
    extra.extend(_Internal({"not": _Internal(pattern=p)}) for p in flat.get("gad:notPattern", ()))
    if extra:
        out["allOf"] = extra
    return out


#: keywords gad writes in its own schemas whose meaning differs in some draft (draft-03 has no
#: ``allOf`` / ``anyOf`` / ``oneOf`` / ``not`` and a boolean ``required``; drafts 03/04 spell the exclusive
#: bounds as booleans)
_GAD_KEYWORDS = ("required", "exclusiveMinimum", "exclusiveMaximum", "allOf", "anyOf", "oneOf", "not")


_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")  # keyword -> {name: schema}
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")  # keyword -> [schema, ...]
_SCHEMA_ONE = ("additionalProperties", "items", "additionalItems", "not", "contains", "propertyNames")


def _gad_spelled(x: Any, cls: Any) -> Any:
    """``x`` as validator class ``cls`` (a draft's, extended by :func:`_gad_validator_class`) reads
    what gad means by it: in each :class:`_Internal` schema (``x`` and those inside it, wherever a
    schema sits) the keywords of :data:`_GAD_KEYWORDS` are renamed ``gad:<keyword>`` (read as
    2020-12 reads them); before 2020-12 a ``prefixItems`` + ``items`` pair is written ``items: [...]``
    + ``additionalItems``, and under drafts 03/04 (no boolean schemas there) an ``items`` schema
    ``true`` is ``{}`` and ``false`` is ``{"gad:never": true}``.  The user's subschemas are left as
    written, for their draft's validator."""
    if not isinstance(x, _Internal):
        return x
    out = _Internal()
    for k, v in x.items():
        if k in _SCHEMA_MAPS and isinstance(v, dict):
            v = {name: _gad_spelled(sub, cls) for name, sub in v.items()}
        elif (k in _SCHEMA_LISTS or k in _SCHEMA_ONE) and isinstance(v, list):
            v = [_gad_spelled(sub, cls) for sub in v]
        elif k in _SCHEMA_ONE:
            v = _gad_spelled(v, cls)
        out["gad:" + k if k in _GAD_KEYWORDS else k] = v
    if "prefixItems" in out and "prefixItems" not in cls.VALIDATORS:
        out["items"], out["additionalItems"] = out.pop("prefixItems"), out.pop("items", True)
    if cls in (jsonschema.Draft3Validator, jsonschema.Draft4Validator) and "items" in out:
        def plain(sub: Any) -> Any:
            return _Internal() if sub is True else _Internal({"gad:never": True}) if sub is False else sub
        out["items"] = [plain(sub) for sub in out["items"]] if isinstance(out["items"], list) else plain(out["items"])
    return out


def _in_gads_schemas(check: Callable[..., Any]) -> Callable[..., Any]:
    """Keyword function ``check`` of a ``gad:<keyword>``, applied only where gad wrote it (an
    :class:`_Internal` schema): in the user's own subschemas such a key is an unknown keyword, an
    annotation, as their validator reads it."""
    def in_gads(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if isinstance(schema, _Internal):
            yield from check(validator, value, instance, schema) or ()
    return in_gads


def _never(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
    """``gad:never``: no value is valid (the ``false`` schema, for drafts without boolean schemas)."""
    yield jsonschema.ValidationError("no value is valid here (a false schema)")


@functools.lru_cache(maxsize=16)
def _gad_validator_class(cls: Any) -> Any:
    """Validator class ``cls`` (a draft's) that also reads ``gad:<keyword>`` (:func:`_gad_spelled`) as
    draft 2020-12 reads ``<keyword>``: it checks the schemas gad writes under a document of any draft.
    Draft-03's ``properties`` also takes the boolean schemas gad writes (``{name: false}``)."""
    v2020 = jsonschema.Draft202012Validator.VALIDATORS
    extra: dict[str, Any] = {"gad:" + k: _in_gads_schemas(v2020[k]) for k in _GAD_KEYWORDS}
    extra["gad:never"] = _in_gads_schemas(_never)
    if cls is jsonschema.Draft3Validator:
        extra["properties"] = _properties_draft3
    return jsonschema.validators.extend(cls, extra)


def _properties_draft3(validator: Any, properties: dict, instance: Any, schema: dict) -> Any:
    """Draft-03's ``properties`` (each present name's value under its schema; a name whose schema says
    ``"required": true`` present), taking boolean schemas as 2020-12 does."""
    if not validator.is_type(instance, "object"):
        return
    for name, sub in properties.items():
        if name in instance:
            yield from validator.descend(instance[name], sub, path=name, schema_path=name)
        elif isinstance(sub, dict) and sub.get("required") is True:
            yield jsonschema.ValidationError(f"{name!r} is a required property")


@functools.lru_cache(maxsize=4096)
def _near_keyword(key: str) -> str | None:
    """The keyword ``key`` is likely a misspelling of (difflib's ratio >= 0.85), or None."""
    near = difflib.get_close_matches(key, _KEYWORDS - _DRAFT3_KEYWORDS, n=1, cutoff=0.85)
    return near[0] if near else None


#: keywords whose meanings are independent of each other's: a schema of several is the allOf of each
_NEGATABLE = frozenset({"type", "required", "not", "anyOf", "allOf", "properties", "pattern"})


_UNRESOLVED = object()  # a $ref gad cannot follow, met while negating (_Gen.resolve_negated)


class _SplitFirst(BaseException):
    """A split ``oneOf`` (at ``pointer``) whose branches as written make no union: :func:`convert`
    starts again and builds it split at once.  (A BaseException: no ``except Exception`` on the way
    may take it for a refusal.)"""

    def __init__(self, pointer: str, first: UnsupportedSchemaError | None = None) -> None:
        super().__init__(pointer)
        self.pointer = pointer
        self.first = first  # the as-written attempt's refusal at a keyword of the user's, if it was one


class _Rewrite(str):
    """The union kind of a keyword gad rewrote into disjoint branches: a ``oneOf`` split into "this
    branch and no other one" (:meth:`_Gen.split_one_of`), ``if`` / ``then`` / ``else`` as "(if and
    then) or (not if and else)" (:meth:`_Gen.conditional`).  It reads as the keyword in messages,
    and the union needs no disjointness check.  A split ``oneOf``'s ``plain`` holds its branches as
    written (with their pointers), which :meth:`_Gen.union_parts` tries first."""

    plain: list[tuple[Any, str]] | None = None


def _is_one_of(kind: str) -> bool:
    """A union of kind ``kind`` must be checked for overlapping branches (a ``oneOf`` not split)."""
    return kind == "oneOf" and not isinstance(kind, _Rewrite)


#: the most alternatives a rewritten ``not`` (a split ``oneOf``: twice that) may spell out (:func:`_alternatives`):
#: De Morgan turns a ``not`` of an ``anyOf`` of ``anyOf``s into a product, whose every branch the
#: converter builds (MaskBench's Handwritten---allany19 nests three levels: 27 pattern intersections)
_MAX_REWRITE_ALTERNATIVES = 16

#: the most alternatives the unions of one schema may multiply out to when one of them is a rewrite
#: (``if`` / ``then`` / ``else``, a split ``oneOf``): six ``if``s in an ``allOf`` (0.4 s), not eight (2.3 s)
_MAX_REWRITE_PRODUCT = 64


def _alternatives(x: Any) -> int:
    """How many alternatives schema ``x`` spells out once its ``anyOf`` (a sum) and ``allOf`` (a
    product) are multiplied out: what a rewrite built of them costs the converter."""
    if not isinstance(x, dict):
        return 1
    n = 1
    for sub in x.get("allOf", ()):
        n *= _alternatives(sub)
    if isinstance(x.get("anyOf"), list):
        n *= max(1, sum(_alternatives(sub) for sub in x["anyOf"]))
    return n


#: the most subschemas one rewritten ``not`` may visit (a ``$defs`` chain under ``properties`` grows as
#: the product of its widths)
_MAX_NEGATION_NODES = 256


def _not_schema(n: Any, resolve: Callable[[str], Any], defined: Callable[[Any], frozenset[str]],
                why: list[str] | None = None) -> Any:
    """:func:`_negation`, or None when it spells out over :data:`_MAX_REWRITE_ALTERNATIVES`
    alternatives or visits over :data:`_MAX_NEGATION_NODES` subschemas (those two reasons appended to
    ``why``, where given)."""
    budget = [_MAX_NEGATION_NODES]
    neg = _negation(n, resolve, budget, frozenset(), defined)
    if neg is None:
        if budget[0] < 0 and why is not None:
            why.append(f"its negation visits over {_MAX_NEGATION_NODES} subschemas (gad's limit)")
        return None
    k = _alternatives(neg)
    if k > _MAX_REWRITE_ALTERNATIVES:
        if why is not None:
            why.append(f"its negation spells out {k:,} alternatives (gad's limit: {_MAX_REWRITE_ALTERNATIVES})")
        return None
    return neg


def _negation(n: Any, resolve: Callable[[str], Any], budget: list[int], refs: frozenset[str],
              defined: Callable[[Any], frozenset[str]]) -> Any:
    """A schema admitting exactly the values ``{"not": n}`` admits, for the shapes gad rewrites, else
    None: ``not: true`` / ``false``; ``not`` of a ``type`` alone (the other types; not where it names
    ``integer`` without ``number``: the numbers with a fraction are no type); ``not`` of ``required``
    alone (an object missing one of the names: ``required`` holds for every value that is not an
    object, so those fail the ``not``); ``not`` of ``anyOf`` / ``allOf`` alone whose branches are such
    shapes (De Morgan: the ``allOf`` / ``anyOf`` of their negations); ``not`` of a ``$ref`` alone (its
    target's, ``resolve(ref)``); ``not`` of ``not`` (the schema itself); ``not`` of ``properties`` whose
    schemas are such shapes (an object with a listed name whose value is outside its schema; beside
    ``additionalProperties`` it is not independent, so not rewritten); ``not`` of several of these
    keywords together (:data:`_NEGATABLE`: the ``anyOf`` of each one's negation); ``not`` of ``{}``
    (false); ``not`` of ``enum`` / ``const`` of strings, ``null``, ``true`` and ``false`` only (the other
    values: written ``not`` of an ``enum`` in gad's own schemas, which :meth:`_Gen.flatten` reads as
    the flat keyword ``gad:notIn``, built by :meth:`_Gen.kind_parts`).  ``$ref`` is followed only as a JSON pointer (``#`` or ``#/...``), not around a cycle
    (``refs``: those being followed), and into no subschema with its own ``$id`` / ``id`` (a new
    base for the refs inside it); ``budget[0]`` counts down the subschemas visited; a user's node
    holds only the keywords its draft defines (``defined(node)``: under draft-04 ``const`` is an
    annotation, so ``not: {"const": "a"}`` is ``not: {}``, false)."""
    budget[0] -= 1
    if budget[0] < 0:
        return None
    if n is True or n is False:
        return not n
    if not isinstance(n, dict) or "$id" in n or isinstance(n.get("id"), str):
        return None
    own = None if isinstance(n, _Internal) else defined(n)  # (a user's node: its draft's keywords only)
    keys = {k for k in n if not _is_annotation(k) and (own is None or k in own)}
    if not keys:
        return False
    if keys == {"type"}:
        t = _type_set(n["type"])
        if "integer" in t and "number" not in t:
            return None
        rest = [k for k in ("object", "array", "string", "number", "boolean", "null") if k not in t]
        return _Internal(type=rest) if rest else False
    if len(keys) == 1 and keys <= {"enum", "const"}:  # of strings / null / true / false: the other values
        vals = n["enum"] if "enum" in n else [n["const"]]
        if not isinstance(vals, list) or not all(v is None or isinstance(v, (bool, str)) for v in vals):
            return None
        return _Internal({"not": _Internal(enum=vals)}) if vals else True
    if keys == {"pattern"} and isinstance(n["pattern"], str):  # the strings it finds no match in
        return _Internal(type="string", **{"not": _Internal(pattern=n["pattern"])})
    req = n.get("required")
    if keys == {"required"} and isinstance(req, list) and req and all(isinstance(r, str) for r in req):
        missing = [_Internal(properties={r: False}) for r in dict.fromkeys(req)]
        return _Internal(type="object", **({"anyOf": missing} if len(missing) > 1 else missing[0]))
    ref = n.get("$ref")
    if keys == {"$ref"} and isinstance(ref, str) and (ref == "#" or ref.startswith("#/")) and ref not in refs:
        target = resolve(ref)
        return None if target is _UNRESOLVED else _negation(target, resolve, budget, refs | {ref}, defined)
    if keys == {"not"}:  # (a union under two nots is left to the union code: De Morgan would multiply it out)
        return n["not"] if _alternatives(n["not"]) == 1 else None
    if keys == {"properties"} and isinstance(n["properties"], dict):  # a listed name with a value outside its schema
        bad = [(k, _negation(sub, resolve, budget, refs, defined)) for k, sub in n["properties"].items()]
        if any(x is None for _k, x in bad):
            return None
        alts = [_Internal(type="object", required=[k], properties={k: x}) for k, x in bad if x is not False]
        return _Internal(anyOf=alts) if len(alts) > 1 else alts[0] if alts else False
    if len(keys) > 1 and keys <= _NEGATABLE:  # independent keywords: not all of them holds
        negs = [_negation(_Internal({k: n[k]}), resolve, budget, refs, defined) for k in sorted(keys)]
        return None if any(x is None for x in negs) else _Internal(anyOf=negs)
    if len(keys) == 1 and keys <= {"anyOf", "allOf"} and isinstance(n[next(iter(keys))], list):
        kw = next(iter(keys))
        negs = [_negation(b, resolve, budget, refs, defined) for b in n[kw]]
        if any(x is None for x in negs):
            return None
        if kw == "anyOf":  # none of the branches
            return _Internal(allOf=negs)
        return _Internal(anyOf=negs) if negs else False  # not all of them (allOf [] is true)
    return None


def _type_set(t: Any) -> set[str]:
    ts = [t] if isinstance(t, str) else list(t)
    out: set[str] = set()
    for x in ts:
        out |= _TYPE_KINDS.get(x, set())
    return out


def _type_meet(a: set[str], b: set[str]) -> set[str]:
    out = a & b
    return out if out or not (a and b) else set()


class _UnwritableKeys(ValueError):
    """Names :func:`_not_keys_regex` does not write: one over :data:`_MAX_NOT_KEY_CHARS` characters
    (a trie that deep nests its regex past Python's recursion limit), or a lone surrogate (no UTF-8)."""


_MAX_NOT_KEY_CHARS = 256


def _not_keys_regex(keys: list[str], quoted: bool = True) -> str:
    """Regex for canonical JSON strings (quotes included; with ``quoted=False`` their content only)
    whose value is none of ``keys`` (memoised: :func:`_not_keys_cached`).

    Written as three tries walked in lockstep (deviate by a raw character / by an escape / stop
    early), so that the automaton has about one state per trie node plus one shared tail.

    Raises:
        _UnwritableKeys: a key over :data:`_MAX_NOT_KEY_CHARS` characters, or not encodable as UTF-8.
    """
    return _not_keys_cached(tuple(keys), quoted)


@functools.lru_cache(maxsize=1024)
def _not_keys_cached(keys: tuple[str, ...], quoted: bool) -> str:
    for k in keys:
        if len(k) > _MAX_NOT_KEY_CHARS:
            raise _UnwritableKeys(f"a name of {len(k):,} characters (gad's limit here: {_MAX_NOT_KEY_CHARS})")
        try:
            k.encode("utf-8")
        except UnicodeEncodeError:
            raise _UnwritableKeys(f"the name {k!r} is not valid Unicode text (a lone surrogate)") from None
    trie: dict = {}
    for k in keys:
        node = trie
        for c in k:
            node = node.setdefault(c, {})
        node["\0end"] = True
    specials = any(c in _SPECIAL_SET for k in keys for c in k)
    close = '"' if quoted else ""
    tail = f"{UNIT}*{close}"

    def kids(node: dict) -> list[str]:
        return [c for c in node if c != "\0end"]

    def alt(xs: list[str], optional: bool = False) -> str:
        if not xs:
            return ""
        body = xs[0] if len(xs) == 1 and not optional else "(?:" + "|".join(xs) + ")"
        return body + ("?" if optional else "")

    def ends(node: dict, xs: list[str]) -> str | None:
        """The alternatives ``xs`` after a trie path to ``node``, with stopping there when it is not a
        key; None: no way on."""
        stop = "\0end" not in node
        if quoted:
            xs = ([close] if stop else []) + xs
            stop = False
        if not xs:
            return "" if stop else None
        return alt(xs, optional=stop)

    if specials:  # rare: one trie, each node with its own way out
        def rx(node: dict) -> str | None:
            chars = kids(node)
            alts = [_rx_lit(_spell(c)) + r for c in chars if (r := rx(node[c])) is not None]
            others = _unit_set(_complement([(ord(c), ord(c)) for c in chars])) if chars else UNIT
            if others:
                alts.append(f"{others}{tail}")
            return ends(node, alts)

        body = rx(trie)
        assert body is not None  # (finitely many keys leave some character out of every trie node)
        return _noted(close + body, keys, quoted)

    def deviate(node: dict) -> str:  # a trie path, then a raw character leaving the trie
        chars = kids(node)
        raw = _complement(_norm([(ord(c), ord(c)) for c in chars] + _SPECIAL_RANGES))
        alts = ["[^" + _ranges_text(_complement(raw)) + "]"]
        alts += [_rx_lit(c) + deviate(node[c]) for c in chars]
        return alt(alts)

    def paths(node: dict) -> str:  # any trie path (possibly empty)
        return alt([_rx_lit(c) + paths(node[c]) for c in kids(node)], optional=True)

    def early(node: dict) -> str | None:  # a trie path that is not a key, then the end
        return ends(node, [_rx_lit(c) + e for c in kids(node) if _has_nonkey(node[c]) and (e := early(node[c])) is not None])

    esc = "\\\\(?:[btnfr\"\\\\]|u00(?:0[0-7bef]|1[0-9a-f]))"
    stop = early(trie)
    written = f'{close}(?:(?:{deviate(trie)}|{paths(trie)}{esc}){tail}' + (f"|{stop})" if stop is not None else ")")
    return _noted(written, keys, quoted)


def _noted(rx: str, keys: Sequence[str], quoted: bool) -> str:
    """``rx`` (:func:`_not_keys_regex`'s), recorded for :func:`gad.grammar.automata.regex_fsm` as the JSON
    strings (their content, unless ``quoted``; a content regex also inside quotes, as a string terminal
    writes it) other than ``keys``, whose automaton it then builds directly; each also as Lark reads
    it back from a ``/.../`` terminal, and for the grammar text's ``// gad:not-words`` line
    (:func:`note_direct_automata` reads it in any process)."""
    words = list(dict.fromkeys(keys))

    def note(text: str, frame: str, close: str) -> None:
        spelled = [close + "".join(map(_spell, k)) + close for k in words]
        for form in (text, eval_escaping(lark_regexp(text))):
            note_not_words(form, frame, spelled)
        with _NOT_KEYS_LOCK:
            _NOT_KEYS[text] = (words, quoted)
            _NOT_KEYS.move_to_end(text)
            while len(_NOT_KEYS) > _NOT_KEYS_SIZE:
                _NOT_KEYS.popitem(last=False)

    if not quoted:
        note(f'"{rx}"', f'"{UNIT}*"', '"')
        note(rx, f"{UNIT}*", "")
    else:
        note(rx, f'"{UNIT}*"', '"')
    return rx


#: the regexps :func:`_not_keys_regex` wrote -> (its keys, quoted), for the grammar text's comment lines
_NOT_KEYS: OrderedDict[str, tuple[list[str], bool]] = OrderedDict()
_NOT_KEYS_SIZE = 4096
_NOT_KEYS_LOCK = threading.Lock()


def _has_nonkey(node: dict) -> bool:
    return "\0end" not in node or any(_has_nonkey(v) for c, v in node.items() if c != "\0end")


def _user_level() -> int:
    """The ``stacklevel`` that points a warning raised in :func:`convert` at the first caller outside
    the gad package (the user's line, whether they called ``convert`` or ``Grammar.from_json_schema``)."""
    frame: types.FrameType | None = sys._getframe(1)  # (convert's frame: stacklevel 1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_GAD_DIR):
        frame, level = frame.f_back, level + 1
    return level


_GAD_DIR = str(Path(__file__).resolve().parents[1]) + os.sep


def _pruned_when_lenient(root: Any, whitespace: str | int, strict: bool, dead: frozenset[str],
                         split: dict[str, UnsupportedSchemaError | None]) -> frozenset[str]:
    """The places (:meth:`_Gen.pruned_keys`) a lenient pass finds empty, for a strict pass that was
    refused before pruning could find them (a union of objects whose branch holds a property that
    admits no value, which banned is exact).  Sound: a lenient grammar is wider place by place, so
    what is empty there is empty in the exact one.  Empty where that pass fails too."""
    for _ in range(8):  # (each oneOf split restarts the pass; a few at most)
        gen = _Gen(root, whitespace, strict, True, dead, split, enum_literals=False)  # (the language: the same)
        gen.probe = True
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gen.run()
        except _SplitFirst as e:
            split = {**split, e.pointer: e.first}
            continue
        except GadError:
            return frozenset()
        return frozenset(gen.pruned_keys())
    return frozenset()


#: the end of a refusal's message (not under ``lenient``): the way round it, in the library's and the CLI's words
LENIENT_HINT = "lenient=True, or --lenient on the command line, drops it with a warning"


def convert(schema: Any, *, whitespace: str | int = "compact", strict: bool = False,
            lenient: bool = False) -> SchemaGrammar:
    """Convert a JSON Schema into Lark grammar text (see the module docstring for the semantics).

    Args:
        schema: a dict / bool, JSON text, or a path (``Path`` or a ``str`` ending in ``.json``).
        whitespace: ``"compact"`` (none), ``"flexible"`` (RFC 8259 white space between tokens) or
            an ``int`` n >= 0 (runs of at most n white-space characters).
        strict: treat an absent ``additionalProperties`` as ``false``.
        lenient: drop keywords gad cannot express, with a ``UserWarning`` listing them, instead of
            raising.
    Returns:
        a :class:`SchemaGrammar` (``.lark_text``, ``.dropped``, ``.dumps(value)``).
    Raises:
        UnsupportedSchemaError: a keyword gad cannot express exactly (not with ``lenient``).
        InvalidSchemaError: the schema cannot be read, or a ``$ref`` does not resolve.
        gad.errors.InvalidArgumentError: a bad ``whitespace`` value, or ``strict`` / ``lenient`` not a bool.
    """
    if not (whitespace in ("compact", "flexible") or (isinstance(whitespace, int) and not isinstance(whitespace, bool)
                                                      and whitespace >= 0)):
        raise InvalidArgumentError(f"whitespace must be 'compact', 'flexible' or an int >= 0, got {whitespace!r}")
    for name, flag in (("strict", strict), ("lenient", lenient)):
        if not isinstance(flag, bool):  # ("no" is truthy: a typo must not flip the meaning)
            raise InvalidArgumentError(f"{name} must be True or False, got {flag!r}")
    with paused_gc():  # (a large schema's build: see gad.gcpause)
        root = load_schema(schema)
        dead: frozenset[str] = frozenset()
        split: dict[str, UnsupportedSchemaError | None] = {}
        enum_literals = True
        while True:  # again, with the properties pruning found empty banned (rare: at most a few passes)
            gen = _Gen(root, whitespace, strict, lenient, dead, split, enum_literals)
            try:
                text = gen.run()
            except _SplitFirst as e:  # again, building that oneOf split at once (one pass per such oneOf)
                split = {**split, e.pointer: e.first}
                continue
            except _EnumLiteralsOver:  # again, each enum one terminal (within the limits where it was)
                enum_literals = False
                continue
            except UnsupportedSchemaError as e:  # (named where the user wrote it)
                more = set() if lenient else _pruned_when_lenient(root, whitespace, strict, dead, split) - dead
                if more:  # the refusal may be one that knowing these empty places lifts: again, with them
                    dead |= more
                    continue
                err = UnsupportedSchemaError(e.reason, pointer=gen.existing_place(gen.real_pointer(e.pointer, e.keyword),
                                                                                  e.keyword), keyword=e.keyword,
                                             hint=LENIENT_HINT if not lenient and e.droppable else "")
                err.droppable = e.droppable
                raise err from None
            more = gen.pruned_keys() - dead
            if not more:
                break
            dead |= more
        if gen.near_misses:
            warnings.warn("JSON Schema keys that are no keyword, ignored as annotations (as validators do): " + "; ".join(
                f"#{p} {k!r} (did you mean {m!r}?)" for (p, k), m in gen.near_misses.items()), SchemaKeywordWarning,
                stacklevel=_user_level())
        gen.dropped = gen.drops()
        if gen.dropped:
            warnings.warn("gad.json_schema dropped constraints it cannot express exactly (lenient=True): "
                          + "; ".join(map(str, gen.dropped)), UserWarning, stacklevel=_user_level())
        return SchemaGrammar(lark_text=text, dropped=tuple(gen.dropped), schema=root, _info=gen.info,
                             _root=gen.root_rule or "", _ws=bool(gen.ws),
                             _float_kind=gen.draft_class in (jsonschema.Draft3Validator, jsonschema.Draft4Validator),
                             _float_nums=frozenset(gen.float_nums))

