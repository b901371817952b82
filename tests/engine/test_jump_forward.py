"""Jump-forward: ``Matcher.forced_bytes`` / ``Matcher.forced_tokens`` against brute force.

* The oracle tries all 256 next bytes with ``accept_bytes`` on forks of the matcher, keeps the byte
  when exactly one survives and the text is not complete, and repeats: ``forced_bytes`` (vectorised
  over the lexer automaton's rows) must return the same string at every prefix tried — on json.lark,
  on a JSON Schema grammar with required keys (whose keys and ``":`` / ``,"`` come out forced), on
  sql.lark and on random grammars (hypothesis), where Lark itself also checks that every completion
  it parses starts with the forced string.
* ``forced_tokens``: every token is allowed by the mask at its step, and the tokens spell a prefix of
  the forced bytes (the SmolLM2 tokenizer's own encoding when given, else greedy longest match).
* Finished and complete states force nothing.
"""

from __future__ import annotations

import itertools
import re

import lark
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gad
from gad.engine.compiler import CompiledGrammar
from gad.engine.protocols import ForcedTextMatcher
from gad.engine.vocab import Vocabulary
from gad.errors import InvalidArgumentError
from gad.testing.strategies import lark_grammars, longest_match_consistent


def oracle_forced(m, max_bytes: int = 64) -> bytes:
    """Brute force: all 256 bytes through ``accept_bytes`` on forks, byte after byte."""
    if m.is_finished():
        return b""
    m = m.fork()
    out = bytearray()
    while len(out) < max_bytes and not m.is_accepting():
        ok = [b for b in range(256) if m.fork().accept_bytes(bytes((b,)))]
        if len(ok) != 1:
            break
        assert m.accept_bytes(bytes(ok))
        out += bytes(ok)
    return bytes(out)


def check_prefixes(cg, text: bytes, max_bytes: int = 64) -> list[bytes]:
    """forced_bytes == oracle at every byte prefix of ``text`` (which the grammar must accept)."""
    m = cg.matcher()
    seen = []
    for i in range(len(text) + 1):
        got = m.forced_bytes(max_bytes)
        assert got == oracle_forced(m, max_bytes), (text[:i], got)
        assert text[i:].startswith(got) or m.is_accepting(), (text[:i], got)  # the text itself agrees
        seen.append(got)
        if i < len(text):
            assert m.accept_bytes(text[i:i + 1]), text[: i + 1]
    return seen


def check_tokens(m, tokenizer=None, max_bytes: int = 64) -> list[int]:
    """forced_tokens: each token allowed by the mask at its step; they spell a prefix of forced_bytes."""
    forced = m.forced_bytes(max_bytes)
    toks = m.forced_tokens(max_bytes, tokenizer)
    probe = m.fork()
    for t in toks:
        assert probe.mask()[t], t
        assert probe.accept_token(t)
    spelled = m.compiled.vocab.decode(toks)
    assert forced.startswith(spelled)
    assert len(m.tokens) == len(probe.tokens) - len(toks)  # the matcher itself did not move
    return toks


# ------------------------------------------------------------------------------ real grammars
@pytest.fixture(scope="module")
def vocab(smollm2_tokenizer) -> Vocabulary:
    return Vocabulary.from_tokenizer(smollm2_tokenizer)


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "active": {"type": "boolean"},
        "role": {"enum": ["admin", "user", "guest"]},
        "city": {"const": "Zug"},
    },
    "required": ["name", "age", "active", "role", "city"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def schema_cg(vocab):
    # built lazily (no warm(): walks and masks on demand); gad.compile warms every automaton state
    g = gad.Grammar.from_json_schema(SCHEMA)
    return CompiledGrammar(g.lark, vocab, g)


def test_schema_keys_and_punctuation_are_forced(schema_cg, smollm2_tokenizer) -> None:
    doc = b'{"name":"Bo","age":41,"active":true,"role":"user","city":"Zug"}'
    seen = check_prefixes(schema_cg, doc)
    at = {doc[:i]: f for i, f in enumerate(seen)}
    assert at[b""] == b'{"name":"'
    assert at[b'{"name":"Bo'] == b""  # the string may go on or close
    assert at[b'{"name":"Bo"'] == b',"age":'
    assert at[b'{"name":"Bo","age":41'] == b""  # more digits, or the comma
    assert at[b'{"name":"Bo","age":41,'] == b'"active":'
    assert at[b'{"name":"Bo","age":41,"active":t'] == b'rue,"role":"'
    assert at[b'{"name":"Bo","age":41,"active":true,"role":"u'] == b'ser","city":"Zug"}'
    assert at[doc] == b""  # complete
    # the same documents, token by token with the tokenizer's own spelling
    m = schema_cg.matcher()
    toks = check_tokens(m, smollm2_tokenizer)
    assert toks == smollm2_tokenizer.encode('{"name":"', add_special_tokens=False)
    greedy = check_tokens(m)
    assert schema_cg.vocab.decode(greedy) == b'{"name":"'
    assert m.accept_bytes(b'{"name":"Bo","age":41,"active":true,"role":"u')
    toks = check_tokens(m, smollm2_tokenizer)
    assert schema_cg.vocab.decode(toks) == b'ser","city":"Zug"}'
    assert m.accept_tokens(toks) == len(toks) and m.is_accepting()
    assert m.forced_bytes() == b"" and m.forced_tokens(tokenizer=smollm2_tokenizer) == []
    eos = schema_cg.eos_ids[0]
    assert m.accept_token(eos) and m.is_finished()
    assert m.forced_bytes() == b"" and m.forced_tokens() == []


def test_max_bytes_and_argument_errors(schema_cg, smollm2_tokenizer) -> None:
    m = schema_cg.matcher()
    assert m.forced_bytes(3) == b'{"n'
    assert m.forced_bytes(0) == b"" and m.forced_tokens(0) == []
    assert schema_cg.vocab.decode(m.forced_tokens(3, smollm2_tokenizer)) in (b"", b"{", b'{"', b'{"n')
    with pytest.raises(InvalidArgumentError):
        m.forced_bytes(-1)
    with pytest.raises(InvalidArgumentError):
        m.forced_bytes(2.5)  # type: ignore[arg-type]
    assert isinstance(m, ForcedTextMatcher)


def test_json_lark_against_the_oracle(vocab, tmp_path_factory, smollm2_tokenizer) -> None:
    cg = gad.compile(gad.Grammar.builtin("json"), vocab, cache_dir=tmp_path_factory.mktemp("c"))
    doc = '{"a": [true, false, null, -1.5e3, "é\\u00e9"], "b": {}}'.encode()
    seen = check_prefixes(cg, doc)
    at = {doc[:i]: f for i, f in enumerate(seen)}
    assert at[b'{"a": [t'] == b"rue"
    assert at[b'{"a": [true, f'] == b"alse"
    assert at[b'{"a": [true, false, n'] == b"ull"
    assert at[b'{"a": [true, false, null, -1.5e3, "\xc3\xa9\\u'] == b""  # four hex digits, any
    assert at[b""] == b""  # white space or any value
    assert at[b'{"a": [true, false, null, -1.5e3, "\xc3'] == b""  # inside "é": any continuation byte
    m = cg.matcher()
    assert m.accept_bytes(b"[fa")
    assert check_tokens(m, smollm2_tokenizer) and m.compiled.vocab.decode(m.forced_tokens()) == b"lse"


def test_sql_lark_against_the_oracle(vocab, tmp_path_factory) -> None:
    cg = gad.compile(gad.Grammar.builtin("sql"), vocab, cache_dir=tmp_path_factory.mktemp("c"))
    q = b"SELECT count(*) FROM head WHERE age > 56;"
    seen = check_prefixes(cg, q)
    # sql.lark's keywords are case-insensitive: each letter has two spellings, nothing is forced
    assert seen[3] == b""  # after "SEL"
    m = cg.matcher()
    assert m.accept_bytes(b"SELECT count(*) FROM head WHERE age > 56;   ")
    assert m.forced_bytes() == b""  # complete


def test_case_sensitive_keywords_are_forced() -> None:
    text = 'start: "select" NAME "from" NAME ";"\nNAME: /[a-z]+/\n%ignore " "\n'
    parser = lark.Lark(text, parser="lalr", lexer="contextual")
    cg = CompiledGrammar(parser, Vocabulary.from_strings(["s", "sel", "select", "l", "ect", " ", "a", "from", ";"])).warm()
    seen = check_prefixes(cg, b"select a from b;")
    assert seen[1] == b"elect"  # after "s"; then a space or a NAME
    assert seen[8] == b""  # after "select a": more name, white space, or "from"
    assert seen[10] == b"rom"  # after "select a f": only the keyword is expected here
    m = cg.matcher()
    assert m.accept_bytes(b"se")
    toks = check_tokens(m)
    assert [cg.vocab.tokens[t] for t in toks] == [b"l", b"ect"]


def test_utf8_characters_are_forced_byte_by_byte() -> None:
    # (a non-ASCII literal in a schema makes the lexer automata large: tested on a small grammar)
    text = 'start: "{" STR ":" "Zürich" "}"\nSTR: /"[a-z]*"/\n'
    parser = lark.Lark(text, parser="lalr", lexer="contextual")
    cg = CompiledGrammar(parser, Vocabulary.from_strings(["{", '"', "a", "ü", '":', "Z", "rich", "ü".encode()[:1],
                                                          "ü".encode()[1:], "}"]))
    doc = '{"a":Zürich}'.encode()
    seen = check_prefixes(cg, doc)
    assert seen[doc.index(b":")] == ':Zürich}'.encode()
    i = doc.index("ü".encode()) + 1  # inside the two-byte character: its continuation byte, then the rest
    assert seen[i] == b"\xbcrich}"
    m = cg.matcher()
    assert m.accept_bytes(doc[:i])
    toks = check_tokens(m)
    assert [cg.vocab.tokens[t] for t in toks] == ["ü".encode()[1:], b"rich", b"}"]
    m = cg.matcher()
    assert m.accept_bytes(b'{"a":')
    assert [cg.vocab.tokens[t] for t in check_tokens(m)] == [b"Z", "ü".encode(), b"rich", b"}"]


def test_multi_hypothesis_state() -> None:
    # after "xxy" two readings are alive: X closed and Y begun, or Z going on; both need "wz"
    text = "start: X Y | Z\nX: /xx/\nY: /ywz/\nZ: /xxywz+q/\n"
    parser = lark.Lark(text, parser="lalr", lexer="contextual")
    cg = CompiledGrammar(parser, Vocabulary.from_strings(["x", "y", "w", "z", "q", "wz"])).warm()
    m = cg.matcher()
    assert m.accept_bytes(b"xxy")
    assert m.state[0] < 0  # a set of hypotheses
    assert m.forced_bytes() == oracle_forced(m) == b"wz"  # then "xxywz" is complete: stop
    assert cg.vocab.decode(check_tokens(m)) == b"wz"
    check_prefixes(cg, b"xxywzzq")
    check_prefixes(cg, b"xxywz")


def test_finite_language_stand_in_has_no_jump_forward() -> None:
    from gad.testing.finite import TextLanguage

    lang = TextLanguage(Vocabulary.from_strings(["a", "b"]), {"ab"})
    assert not isinstance(lang.matcher(), ForcedTextMatcher)


# ------------------------------------------------------------------------------ random grammars
_ATOMS = ["a", "b", "c", "[ab]", "[bc]", "[abc]", "ä"]
_ALPHA = ["a", "b", "c", "ä"]
_grammar = lark_grammars(_ALPHA, _ATOMS, max_literal=4)


def _lark_parses(parser: lark.Lark, s: str) -> bool:
    try:
        parser.parse(s)
        return True
    except lark.exceptions.LarkError:
        return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_grammar, st.integers(0, 2**31 - 1))
def test_random_grammars(g, seed: int) -> None:
    text, terms = g
    for kind, body in terms:
        if kind == "re":
            assume(re.fullmatch(body, "") is None)  # Lark refuses zero-width terminals
            assume(longest_match_consistent(body, _ALPHA, 4))  # gad's documented rule: a terminal's longest match
    try:
        parser = lark.Lark(text, parser="lalr", lexer="contextual")
    except lark.exceptions.LarkError:
        assume(False)
    cg = CompiledGrammar(parser, Vocabulary.from_strings(["a", "b", "c", "ä", "ab", "bc", "ä".encode()[:1]])).warm()
    rng = np.random.default_rng(seed)
    m = cg.matcher()
    completions = ["".join(p) for k in range(5) for p in itertools.product(_ALPHA, repeat=k)]
    prefix = b""
    for _ in range(6):
        got = m.forced_bytes()
        assert got == oracle_forced(m), (text, prefix)
        check_tokens(m)
        if got:  # Lark: every sentence that extends the prefix goes on with the forced bytes
            for c in completions:
                try:
                    s = (prefix + c.encode()).decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if _lark_parses(parser, s):
                    assert c.encode().startswith(got), (text, prefix, c)
        nxt = [b for b in range(256) if m.fork().accept_bytes(bytes((b,)))]
        if not nxt:
            break
        b = bytes((int(rng.choice(nxt)),))
        assert m.accept_bytes(b)
        prefix += b
