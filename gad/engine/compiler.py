"""Compile a grammar against a vocabulary: the build-once half of the mask engine.

``compile(grammar, tokenizer)`` returns a :class:`CompiledGrammar` holding

* the LALR(1) parse table of the grammar (from Lark), as plain dicts;
* one byte-level lexer automaton per contextual-lexer context (:mod:`gad.lexer`);
* the vocabulary as a padded byte matrix ``(vocab, max_len)`` uint8;
* lazily built, cached **token walks**: for a lexer context and automaton state, the result of
  running every token's bytes through the automaton at once (numpy over the vocabulary) — which
  tokens stay inside the current lexeme (and in which state), and which close it (with which
  terminal, at which byte).  A walk's continuation after a closed lexeme depends only on the next
  lexer context, so walks form a static tree that every mask computation reuses;
* an LRU cache of packed (bit) masks keyed by the full matcher state (parser stack, lexer state).

Per-request state lives in :class:`gad.matcher.Matcher` (``compiled.matcher()``).

The compiled tables can be saved to disk (``cache_dir``), keyed by the grammar's hash, the
vocabulary's fingerprint and the engine version, so that a second compile of the same pair is fast.
Cache files hold data only (numpy arrays + a JSON header, :mod:`gad.engine.cachefile`), never code.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import Any, cast

import lark
import numpy as np

from gad.engine import cachefile, kernels
from gad.engine.lexer import DEAD, START, LexerDFA, TerminalAutomaton, lark_context_terminals, universe_index
from gad.engine.matcher import Matcher
from gad.engine.vocab import Vocabulary
from gad.errors import GadError, InvalidArgumentError
from gad.fileio import default_cache_root
from gad.gcpause import paused_gc
from gad.grammar.automata import literal_text
from gad.grammar.loader import Grammar
from gad.grammar.tables import ParserTables

_INTEREGULAR = _dist_version("interegular")
CACHE_FORMAT = 5  # 5: data-only files (gad.engine.cachefile), no pickle


def _code_version() -> str:
    """Hash of the engine's source and of the parser / automaton libraries' versions: a compile cache
    written by other code (another gad, or a venv with another Lark, as vLLM's) is never reused."""
    h = hashlib.sha256(f"{CACHE_FORMAT}|lark {lark.__version__}|interegular {_INTEREGULAR}".encode())
    here = Path(__file__).parent
    grammar = here.parent / "grammar"  # what builds the automata and the LALR tables a cache file stores
    for mod in (here / "lexer.py", here / "compiler.py", here / "cachefile.py", grammar / "automata.py",
                grammar / "lalr_table.py", grammar / "plain_bnf.py", grammar / "tables.py"):
        h.update(mod.read_bytes())
    return h.hexdigest()[:16]
Stack = int  # id of an interned parser stack (see CompiledGrammar.push)

# token walks: a root walk with at most this many candidate tokens (first byte live) walks them
# without looking for a reference walk to derive it from; a walk of at most FEW_WALK_TOKENS tokens
# steps them one by one (measured on MaskBench, SmolLM2: below these, numpy's per-call cost dominates)
FEW_ROOT_TOKENS = 256
FEW_WALK_TOKENS = 24
# a root walk with at most TRIE_ROOT_TOKENS candidates first searches the byte trie, giving up past
# TRIE_WALK_BUDGET live nodes
TRIE_ROOT_TOKENS = 8192
TRIE_WALK_BUDGET = 256
# with the compiled walks, a root walk in a context of finitely many strings (LexerDFA.finite) of at
# most this many automaton states searches the trie first
TRIE_FINITE_STATES = 256
# a walk node with at most this many end tokens has them checked one by one when a mask is filled
SMALL_FILL_TOKENS = 8
# a fork's child walk over at most SUFFIX_MEMO_TOKENS tokens keeps its allowed tokens per the top LR
# states of the parser stack it is filled at (CompiledGrammar._suffix_fill): first the top
# SUFFIX_FIRST_DEPTH states, doubled on each read below them, given up past SUFFIX_MAX_DEPTH
SUFFIX_MEMO_TOKENS = 4096
SUFFIX_FIRST_DEPTH = 2
SUFFIX_MAX_DEPTH = 16
# the LR "state" of the sentinel stack under a suffix: in no parse-table row and no context map (both
# dicts: _ParseTable.actions, CompiledGrammar.state_ctx), so reading it raises KeyError
TRUNCATED = -7
# the bytes of plain text inside a JSON string (printable ASCII less the quote and the backslash): a
# state that every one of them moves alike, again and again, walks the tokens made of them by their
# length alone (CompiledGrammar._uniform_walk)
PLAIN_BYTES = bytes(b for b in range(0x20, 0x7F) if b not in b'"\\')
_PLAIN_TABLE = np.zeros(256, dtype=bool)
_PLAIN_TABLE[list(PLAIN_BYTES)] = True
UNIFORM_MAX_FORKS = 2  # forks a uniform chain may pass (CompiledGrammar._uniform_walk)
# a wide walk derived from another with at most this many tokens changed is an overlay on it
# (WalkNode.base): its fill then costs a gather and a scatter of these tokens on top of the base's
OVERLAY_MAX_TOKENS = 4096
# unpacked (bool) masks kept beside the packed LRU (CompiledGrammar.mask_for)
BOOL_MASKS = 32


@dataclass
class WalkNode:
    """Result of running a token subset through one lexer automaton from one state.

    Attributes:
        sparse_tok, sparse_state: ``(n,)`` int32 ids of the tokens whose bytes end inside the current
            lexeme and the automaton state each of them ends in, or None for a wide node kept dense
            only (:meth:`dense_only`); read both through :attr:`end_tok` / :attr:`end_state`.
        groups: fork id -> ``(token ids, byte offsets)`` of tokens that pass a fork of the automaton
            (a state where the lexeme may close) before their last byte; the offset (> 0) is where
            the next lexeme would start.  The same tokens also go on in the current lexeme.
        children: ``(fork id, next context id) -> WalkNode`` built on first use.
        dense_end: ``(vocab,)`` int32 end states (0 = not ending here), built on first use for large sets.
        end_states: ``(k,)`` the distinct end states (or a superset), and ``dense_any``: ``(vocab,)``
            bool, the tokens ending here (both built with ``dense_end``): where every end state can still close as an
            allowed terminal — inside a string, all of them — the mask takes ``dense_any`` whole.
        n_dense: the number of end tokens of a dense-only node.
        plan: what :meth:`CompiledGrammar._fill` reads, made on first use and never saved: the end
            tokens as ``(id, state)`` pairs when at most :data:`SMALL_FILL_TOKENS` (else None), and
            per fork ``(fork id, terminal name or None if ignored, token ids, offsets)`` (no guard, read
            from the automaton's forks when a child walk is made: a frozenset would keep the tuples
            tracked by Python's cyclic collector, visited at every collection).
        by_state: the end tokens of a large node grouped by end state, made on first use and never
            saved: ``(states (k,) int32, starts (k + 1,) int64, token ids (n,) int32)``.
        base, over_tok, over_state: an *overlay* node (a wide walk derived from another,
            :meth:`CompiledGrammar._patched`) keeps no end arrays of its own: its ends are ``base``'s
            (a wide node with dense arrays, never itself an overlay) except for the tokens
            ``over_tok`` ``(k,)`` int32 (ascending, distinct), which end in ``over_state`` ``(k,)``
            int32 instead (0: not ending here); ``n_dense`` counts its ends, ``end_states`` holds a
            superset of their states.  A derived walk then costs no copy of the vocabulary-wide
            arrays (192 KB for SmolLM2), and its mask fill reuses the base's.
        codes, by_code: a wide walk translated from another automaton's (:meth:`CompiledGrammar._term_walk`)
            keeps the stored walk's ``(vocab,)`` int32 codes (shared, 0: no end) and its own
            ``(codes,)`` int32 state per code: :attr:`dense_end` is ``by_code[codes]``, made only when
            a mask fill or a derivation needs it (most fills take :attr:`dense_any`, shared too).
    """

    sparse_tok: np.ndarray | None
    sparse_state: np.ndarray | None
    groups: dict[int, tuple[np.ndarray, np.ndarray]]
    children: dict[tuple[int, int], WalkNode]
    dense_end: np.ndarray | None = None
    end_states: np.ndarray | None = None
    dense_any: np.ndarray | None = None
    n_dense: int = 0
    plan: tuple | None = None
    by_state: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    base: WalkNode | None = None
    over_tok: np.ndarray | None = None
    over_state: np.ndarray | None = None
    codes: np.ndarray | None = None
    by_code: np.ndarray | None = None

    @property
    def end_tok(self) -> np.ndarray:
        """``(n,)`` int32 ids of the tokens ending inside the lexeme, ascending for root walks (of a
        dense-only node: made anew from :attr:`dense_end` on each read)."""
        if self.sparse_tok is not None:
            return self.sparse_tok
        return np.flatnonzero(self.dense_ends()).astype(np.int32)

    @end_tok.setter
    def end_tok(self, value: np.ndarray) -> None:
        self.sparse_tok = value

    @property
    def end_state(self) -> np.ndarray:
        """``(n,)`` int32 end state of each of :attr:`end_tok` (of a dense-only node: made anew)."""
        if self.sparse_state is not None:
            return self.sparse_state
        dense = self.dense_ends()
        return dense[dense != DEAD]

    @end_state.setter
    def end_state(self, value: np.ndarray) -> None:
        self.sparse_state = value

    @property
    def n_end(self) -> int:
        """The number of end tokens."""
        return self.sparse_tok.size if self.sparse_tok is not None else self.n_dense

    def dense_ends(self) -> np.ndarray:
        """``(vocab,)`` int32 end state by token id (0: not ending here) of a dense-only node: its
        :attr:`dense_end`, or an overlay's made anew from its base's (a copy, not kept).

        Raises:
            AssertionError: a node with sparse ends only."""
        if self.base is not None:
            assert self.over_tok is not None and self.over_state is not None
            dense = self.base.dense_ends().copy()
            dense[self.over_tok] = self.over_state
            return dense
        if self.dense_end is None and self.codes is not None:
            assert self.by_code is not None
            self.dense_end = self.by_code[self.codes]
        assert self.dense_end is not None
        return self.dense_end

    def ends_of(self, tok: np.ndarray) -> np.ndarray:
        """The end states ``(k,)`` int32 (0: none) of tokens ``tok`` ``(k,)`` of a dense-only node that is
        no overlay, without making :attr:`dense_end` of a translated walk."""
        if self.dense_end is None and self.codes is not None:
            assert self.by_code is not None
            return self.by_code[self.codes[tok]]
        return self.dense_ends()[tok]

    def dense_only(self) -> WalkNode:
        """Drop the sparse end arrays of a node whose dense ones are made (``dense_end``, ``end_states``
        and ``dense_any``): a wide walk's new arrays are its first mask's cost, mostly in page faults
        on memory it keeps (~3.5 µs per 4 KB page here), and the mask fill reads the dense ones.
        Returns ``self``."""
        if (self.sparse_tok is not None and self.dense_end is not None and self.end_states is not None
                and self.dense_any is not None):
            self.n_dense = self.sparse_tok.size
            self.sparse_tok = self.sparse_state = None
        return self

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("plan", "by_state")}
        if self.codes is not None and self.by_code is not None:  # stored with its own end states: a cache
            state["dense_end"] = self.by_code[self.codes]  # file would hold the shared codes once per node
            state["codes"] = state["by_code"] = None
        return state


class _ParseTable:
    """LALR(1) action/goto table read from Lark's (shift = ('s', state), reduce = ('r', n, origin))."""

    def __init__(self, pt: Any, start: str) -> None:
        from lark.parsers.lalr_analysis import Shift

        self.start_state: int = pt.start_states[start]
        self.end_state: int = pt.end_states[start]
        self.actions: dict[int, dict[str, tuple]] = {}
        longest = 0
        for s, acts in pt.states.items():
            d: dict[str, tuple] = {}
            for sym, (act, arg) in acts.items():
                if act is Shift:
                    d[sym] = ("s", arg)
                else:
                    d[sym] = ("r", len(arg.expansion), arg.origin.name)
                    longest = max(longest, len(arg.expansion))
            self.actions[s] = d
        self.longest_rule = longest  # the most states a reduction pops


class CompiledGrammar:
    """A grammar compiled against a vocabulary (build once, share across requests).

    Attributes:
        grammar: the source grammar (``gad.Grammar`` or a Lark object).
        grammar_sha256: the grammar's identity (:attr:`gad.grammar.Grammar.sha256`; keys every cache).
        vocab: the :class:`gad.vocab.Vocabulary`; ``vocab_size`` its size; ``eos_ids`` its EOS ids.
    """

    def __init__(self, lark_obj: Any, vocab: Vocabulary, grammar: Any = None, start: str = "start",
                 mask_cache_size: int = 2048, share: bool = False) -> None:
        """``lark_obj``: the grammar's :class:`gad.grammar.tables.ParserTables`, or a ``lark.Lark`` parser
        (``parser="lalr"``, ``lexer="contextual"``) to read them from.

        Raises:
            InvalidArgumentError: ``lark_obj`` is a Lark parser of another kind."""
        tables = _tables(lark_obj, start)
        self.grammar = grammar if grammar is not None else lark_obj
        self.grammar_sha256 = _grammar_hash(grammar, tables)
        self.vocab = vocab
        self.vocab_size = vocab.size
        self.eos_ids = tuple(vocab.eos_ids)
        self._eos = np.asarray(self.eos_ids, dtype=np.int64)
        self.table = _ParseTable(tables.parse_table, start)
        self._build_contexts(tables)
        self._build_vocab_matrix()
        self._roots: dict[tuple[int, int], WalkNode] = {}
        # parser stacks are interned as a tree (graph-structured stack): id -> (parent id, LR state),
        # so that a matcher state is two ints and deep nesting costs O(1) per token
        self._stk_parent: list[int] = [-1]
        self._stk_state: list[int] = [self.table.start_state]
        self._stk_index: dict[tuple[int, int], int] = {(-1, self.table.start_state): 0}
        self._feed_memo: dict[tuple[Stack, str], Stack | None] = {}
        # sets of lexing hypotheses, interned: matcher state (-1 - i, 0) stands for _multi[i]
        self._multi: list[tuple[tuple[Stack, int], ...]] = []
        self._multi_index: dict[tuple[tuple[Stack, int], ...], int] = {}
        self._close_memo: dict[tuple[Stack, int], tuple[Stack, int] | None] = {}
        self._allowed_memo: dict[Stack, int] = {}
        self._shift_memo: dict[tuple[Stack, int], int] = {}  # (parent, LR state) -> shiftable terminals
        self._local_memo: dict[tuple[int, int], int] = {}  # (context, parse-table bits) -> context bits
        self._groups_memo: dict[int, tuple[int, list[tuple[tuple, int]]]] = {}
        self._ok_memo: dict[tuple[int, int], tuple[int, np.ndarray, bytes]] = {}  # never saved
        self._masks: OrderedDict[tuple[Stack, int], np.ndarray] = OrderedDict()
        self.mask_cache_size = mask_cache_size
        self._dense_min = max(64, vocab.size // 8)  # token sets larger than this use dense arrays
        self.stats = {"mask_hits": 0, "mask_misses": 0, "walks": 0}
        # share=True: lexer automata and their token walks come from (and go to) a process-wide store
        # keyed by the context's terminals, so that grammars made per request reuse what an earlier
        # one built (a JSON string or number context is walked once per process, not per schema)
        self._share = share

    # ---------------------------------------------------------------------------------- building
    def _build_contexts(self, tables: ParserTables) -> None:
        ignore = set(tables.ignore)
        ctx_of_lexer: dict[int, int] = {}
        ctx_of_sig: dict[tuple[str, ...], int] = {}
        self._ctx_specs: list[tuple[list, dict[int, list[int]], list[bool], int]] = []
        self.state_ctx: dict[int, int] = {}
        for state, scanned in tables.contexts.items():
            # parser states whose lexers hold the same terminals share one context (and its walks)
            cid = ctx_of_lexer.get(id(scanned))
            if cid is None:
                sig = tuple(t.name for t in scanned)
                cid = ctx_of_sig.get(sig)
                if cid is not None:
                    ctx_of_lexer[id(scanned)] = cid
            if cid is None:
                terms, unless, n_main, ignored = lark_context_terminals(scanned, tables.g_regex_flags, ignore)
                cid = len(self._ctx_specs)
                ctx_of_sig[sig] = cid
                ctx_of_lexer[id(scanned)] = cid
                self._ctx_specs.append((terms, unless, ignored, n_main))
            self.state_ctx[state] = cid
        self._automata: dict[str, TerminalAutomaton] = {}
        self._dfas: list[LexerDFA | None] = [None] * len(self._ctx_specs)
        rep = self._context_cover()
        if rep:
            self.state_ctx = {state: rep.get(cid, cid) for state, cid in self.state_ctx.items()}

    def _context_cover(self) -> dict[int, int]:
        """Contexts served by a larger context's automaton: ``{cid: covering cid}``.

        An object whose properties come in a fixed order leaves one context per position holding
        the keys still allowed (42, 41, ..., 1 keys: a lexer automaton per suffix, quadratic in the
        keys).  Context ``C`` may use the automaton of ``D`` (``C``'s terminals a subset of ``D``'s,
        in the same order) when the terminals ``D`` adds are *inert* for ``C``: literals that no
        terminal of ``C`` can confuse with -- no string of one is a prefix of a string of the other
        (:func:`_inert`).  Then Lark's first-match scanner over ``D`` and over ``C`` read the same
        lexeme wherever either reads one of ``C``'s terminals (an added literal can neither match
        first, nor cut, nor be alive when a terminal of ``C`` closes, so it never enters a guard),
        and a lexeme of an added literal is one the parser cannot shift in ``C``'s states: masks
        and steps drop it as they drop every terminal the parser refuses (``allowed_bits``,
        ``feed``).  Only contexts without keyword rules ("unless") or ``%ignore`` terminals are
        merged; the largest covering context is taken, so a family of suffixes shares one
        automaton and its token walks.
        """
        specs = self._ctx_specs
        cand = [cid for cid, (terms, unless, ignore, n_main) in enumerate(specs)
                if terms and not unless and not any(ignore)]
        if len(cand) < 2:
            return {}
        cand.sort(key=lambda c: -len(specs[c][0]))
        names = {c: [t.name for t in specs[c][0]] for c in cand}
        lits = {c: [_literal_of(t) for t in specs[c][0]] for c in cand}
        index = {c: _LiteralIndex(lits[c], specs[c][0]) for c in cand}
        by_term: dict[str, list[int]] = {}
        out: dict[int, int] = {}
        for c in cand:
            mine = names[c]
            cover = None
            for r in by_term.get(mine[0], ()):
                rn = names[r]
                pos = {n: i for i, n in enumerate(rn)}
                idx = [pos.get(n, -1) for n in mine]
                if len(rn) <= len(mine) or min(idx) < 0 or idx != sorted(idx):
                    continue
                have = set(idx)
                extra = [lits[r][i] for i in range(len(rn)) if i not in have]
                words = [x for x in extra if x is not None]
                if len(words) < len(extra):
                    continue
                if index[c].inert(words, self):
                    cover = r
                    break
            if cover is None:
                for n in mine:
                    by_term.setdefault(n, []).append(c)
            else:
                out[c] = cover
        return out

    def ctx(self, cid: int) -> LexerDFA:
        """The lexer automaton of context ``cid`` (built on first use)."""
        dfa = self._dfas[cid]
        if dfa is None:
            terms, unless, ignore, n_main = self._ctx_specs[cid]
            universe = self._universe()
            autos = [self._automaton(t) for t in terms]
            if self._share:
                dfa = _shared_dfa(autos, ignore, unless, n_main, universe,
                                  lambda: LexerDFA(autos, ignore, unless, n_main, universe))
            else:
                dfa = LexerDFA(autos, ignore, unless, n_main, universe)
            self._dfas[cid] = dfa
        return dfa

    def _child_key(self, fid: int, ncid: int) -> tuple[int, int]:
        """Key of a walk's child: (fork, next context) — the next context's automaton's serial number
        when automata are shared across grammars (context ids are per grammar)."""
        if self._share:
            return fid, self.ctx(ncid).serial
        return fid, ncid

    def _automaton(self, t: Any) -> TerminalAutomaton:
        a = self._automata.get(t.name)
        if a is None:
            a = TerminalAutomaton.build(t.name, t.pattern.to_regexp())
            self._automata[t.name] = a
        return a

    def _universe(self) -> list[TerminalAutomaton]:
        """Every terminal of every context (a guard carried into a context may hold any of them)."""
        uni = self.__dict__.get("_uni_list")
        if uni is None:
            seen: dict[str, Any] = {}
            for terms, *_ in self._ctx_specs:
                for t in terms:
                    seen.setdefault(t.name, t)
            uni = self._uni_list = [self._automaton(t) for t in seen.values()]
        return uni

    def _build_vocab_matrix(self) -> None:
        key = (self.vocab.fingerprint(), self.eos_ids)
        hit = _VOCAB_TABLES.get(key)
        if hit is None:
            hit = _VOCAB_TABLES[key] = self._vocab_tables()
            while len(_VOCAB_TABLES) > 4:
                _VOCAB_TABLES.pop(next(iter(_VOCAB_TABLES)))
        (self._bytes, self._lens, self._content, self._first, self._first_hist, self._by_first,
         self._first_off) = hit

    def _vocab_tables(self) -> tuple:
        """The vocabulary's byte tables (read-only, shared by every grammar compiled against it)."""
        toks = self.vocab.tokens
        eos = set(self.eos_ids)
        lens = np.array([0 if (t is None or i in eos) else len(t) for i, t in enumerate(toks)], dtype=np.int32)
        width = int(lens.max()) if lens.size else 0
        mat = np.zeros((len(toks), max(width, 1)), dtype=np.uint8)
        for i, t in enumerate(toks):
            if lens[i]:
                mat[i, : lens[i]] = np.frombuffer(cast(bytes, t), dtype=np.uint8)
        content = np.nonzero(lens > 0)[0].astype(np.int32)
        first = mat[content, 0]  # (n_content,) uint8: each content token's first byte
        first_hist = np.bincount(first, minlength=256).astype(np.int64)  # (256,) content tokens per first byte
        # content tokens grouped by first byte: those of byte b are by_first[first_off[b]:first_off[b + 1]]
        by_first = content[np.argsort(first, kind="stable")]
        first_off = np.concatenate([[0], np.cumsum(first_hist)]).astype(np.int64)
        for a in (mat, lens, content, first, first_hist, by_first, first_off):
            a.setflags(write=False)
        return mat, lens, content, first, first_hist, by_first, first_off

    def warm(self, all_roots: bool | None = None) -> CompiledGrammar:
        """Build every lexer automaton and the token walk from each context's start state.

        ``all_roots``: also walk from every automaton state, and from the empty lexeme under the guard
        of every fork in each context that can follow (where a mask goes when a lexeme closes at a
        token's end), so that no later mask walks the whole vocabulary (≈2-5 ms per state on 49k
        tokens); default: when the grammar's automata have at most 1,000 states in all (JSON: ~330;
        the keyword-heavy SQL grammar: ~3,300 stays lazy).
        """
        used = sorted(set(self.state_ctx.values()))  # (less the contexts another one covers)
        if all_roots is None:
            all_roots = sum(self.ctx(c).n_states for c in used) <= 1000
        after: dict[str, list[int]] = {}
        changed = True
        while changed:  # walks add the guarded start states of later contexts: walk those too
            changed = False
            for cid in used:
                dfa = self.ctx(cid)
                for d in range(START, dfa.n_states if all_roots else START + 1):
                    if (cid, d) in self._roots:
                        continue
                    changed = True
                    node = self.root(cid, d)
                    if all_roots:
                        self._warm_children(cid, node, depth=2)
                        fid = dfa.fork_list[d]
                        if fid >= 0:  # a lexeme closing at a token's end: the next one's start
                            w, guard = dfa.forks[fid]
                            name = dfa.names[w]
                            if name not in after:
                                after[name] = self._contexts_after(name)
                            for ncid in [cid] if dfa.ignore[w] else after[name]:
                                self.ctx(ncid).start_for(guard)
        return self

    def build_automata(self) -> CompiledGrammar:
        """Build the lexer automaton of every context the parser can reach now, and no token walk
        (``gad.compile(..., warm="automata")``): the first mask of a new lexer context then walks
        tokens only.  Automata shared across grammars (``share=True``) are taken from the process-wide
        store when another grammar built them.  A compiled build's key index (which the start states a
        guard adds extend) is made here too, not in the first mask that needs it (its rows need not be:
        scalar steps read the table, :meth:`LexerDFA.flat_view`).  Returns ``self``."""
        for cid in sorted(set(self.state_ctx.values())):
            dfa = self.ctx(cid)
            dfa._index  # noqa: B018 - made on first use (LexerDFA.__getattr__)
        return self

    def _warm_children(self, cid: int, node: WalkNode, depth: int) -> None:
        """Walk ahead the tokens that close a lexeme mid-token, for every context that can follow."""
        if depth == 0:
            return
        dfa = self.ctx(cid)
        for fid, (tok, off) in node.groups.items():
            w, guard = dfa.forks[fid]
            nctx = [cid] if dfa.ignore[w] else self._contexts_after(dfa.names[w])
            for ncid in nctx:
                ck = self._child_key(fid, ncid)
                child = node.children.get(ck)
                if child is None:
                    child = self._walk(ncid, self.ctx(ncid).start_for(guard), tok, off)
                    node.children[ck] = child
                self._warm_children(ncid, child, depth - 1)

    def _contexts_after(self, term: str) -> list[int]:
        """Lexer contexts of the LR states entered by shifting ``term``."""
        states = {a[1] for acts in self.table.actions.values() for t, a in acts.items()
                  if t == term and a[0] == "s"}
        return sorted({self.state_ctx[s] for s in states if s in self.state_ctx})

    # ------------------------------------------------------------------------------------ parser
    def push(self, parent: Stack, state: int) -> Stack:
        """The interned stack ``parent`` + ``state``."""
        key = (parent, state)
        r = self._stk_index.get(key)
        if r is None:
            r = len(self._stk_state)
            self._stk_index[key] = r
            self._stk_parent.append(parent)
            self._stk_state.append(state)
        return r

    def top(self, stack: Stack) -> int:
        """The LR state on top of ``stack``."""
        return self._stk_state[stack]

    def stack_states(self, stack: Stack) -> list[int]:
        """The LR states of ``stack``, bottom first."""
        out = []
        while stack >= 0:
            out.append(self._stk_state[stack])
            stack = self._stk_parent[stack]
        return out[::-1]

    def feed(self, stack: Stack, term: str) -> Stack | None:
        """Parser stack after shifting terminal ``term`` (reductions first); None if it is an error."""
        out = self._feed_memo.get((stack, term), -2)
        return self._feed_new(stack, term) if out == -2 else out

    def _feed_new(self, stack: Stack, term: str) -> Stack | None:
        """:meth:`feed` of a pair not in its memo: only the stack after the shift is interned, not one
        per reduction (:meth:`_scratch_shift`)."""
        out: Stack | None = None
        shift = self._scratch_shift(stack, term)
        if shift is not None:
            s, extra, q = shift
            for x in extra:
                s = self.push(s, x)
            out = self.push(s, q)
        self._feed_memo[(stack, term)] = out
        return out

    def _scratch_shift(self, stack: Stack, term: str) -> tuple[Stack, list[int], int] | None:
        """Run the parser's reductions for ``term`` from ``stack`` on a scratch top of stack, interning
        nothing: ``(s, extra, q)`` — the interned stack ``s`` the reductions popped down to, the LR
        states ``extra`` their gotos put above it, and the state shifting ``term`` enters — or None if
        the parser cannot shift ``term``."""
        s, extra, act = self._scratch_run(stack, term, -1)
        return None if act is None else (s, extra, act[1])

    def _scratch_run(self, stack: Stack, term: str, stop: int) -> tuple[Stack, list[int], tuple | None]:
        """Reduce for lookahead ``term`` from ``stack`` on a scratch top of stack until the top is LR
        state ``stop`` or the action is not a reduction: ``(s, extra, action)`` as in
        :meth:`_scratch_shift`, ``action`` the shift met or None (an error, or ``stop`` reached)."""
        actions, parent, states = self.table.actions, self._stk_parent, self._stk_state
        s = stack
        extra: list[int] = []  # LR states above ``s``, not interned
        while True:
            top = extra[-1] if extra else states[s]
            if top == stop:
                return s, extra, None
            act = actions[top].get(term)
            if act is None or act[0] == "s":
                return s, extra, act
            k = act[1]
            while k and extra:
                extra.pop()
                k -= 1
            for _ in range(k):
                s = parent[s]
            extra.append(actions[extra[-1] if extra else states[s]][act[2]][1])

    def accepts_end(self, stack: Stack) -> bool:
        """Does the parser accept end of input from ``stack``?  (Its reductions on a scratch top of
        stack, :meth:`_scratch_run`: nothing is interned.)"""
        end = self.table.end_state
        s, extra, _ = self._scratch_run(stack, "$END", end)
        return (extra[-1] if extra else self._stk_state[s]) == end

    def allowed_bits(self, stack: Stack) -> int:
        """Bit set of the terminals (ids of the stack's lexer context) the parser can shift next."""
        r = self._allowed_memo.get(stack)
        if r is None:
            cid = self.state_ctx[self._stk_state[stack]]
            names = self._shiftable(stack, 0)
            key = (cid, names)
            r = self._local_memo.get(key)
            if r is None:
                dfa = self.ctx(cid)
                tbit = self._lr_tbit()
                r = 0
                for i, name in enumerate(dfa.names):
                    b = tbit.get(name)
                    if b is not None and not dfa.ignore[i] and names >> b & 1:
                        r |= 1 << i
                self._local_memo[key] = r
            self._allowed_memo[stack] = r
        return r

    def _shiftable(self, stack: Stack, depth: int) -> int:
        """Bit set (:meth:`_lr_tbit` ids) of the terminals the parser can shift from ``stack``, after
        their reductions: :meth:`_shiftable_top` of its top state over its parent."""
        return self._shiftable_top(self._stk_parent[stack], self._stk_state[stack], depth)

    def _shiftable_top(self, parent: Stack, q: int, depth: int) -> int:
        """:meth:`_shiftable` of the stack ``parent`` + LR state ``q``, which need not be interned.

        The terminals of one reduction share the stack it leads to, so: the shifts of ``q``, plus,
        per distinct reduction, the terminals that reduce by it among those shiftable from the
        reduced stack — again an interned parent plus a goto state, so nothing is interned (deep
        nesting keeps one stack per token); memoised by (parent, state).  A reduction of an empty
        rule pushes onto ``q`` itself, which is then interned; past 32 chained reductions (a
        right-recursive rule closing) each terminal is probed on its own (:meth:`_can_shift`)."""
        key = (parent, q)
        r = self._shift_memo.get(key)
        if r is not None:
            return r
        shifts, reductions = self._lr_groups(q)
        r = shifts
        actions = self.table.actions
        for act, bits in reductions:
            k = act[1]
            if depth >= 32:
                here = self.push(parent, q)
                for name, b in self._lr_tbit().items():
                    if bits >> b & 1 and self._can_shift(here, name):
                        r |= 1 << b
                continue
            if k == 0:
                base = self.push(parent, q)
            else:
                base = parent
                for _ in range(k - 1):
                    base = self._stk_parent[base]
            goto = actions[self._stk_state[base]][act[2]][1]
            r |= self._shiftable_top(base, goto, depth + 1) & bits
        self._shift_memo[key] = r
        return r

    def _lr_tbit(self) -> dict[str, int]:
        """A bit per terminal of the lexer contexts (the ids of :meth:`_shiftable`'s bit sets): every
        terminal the parser can shift in an LR state is in that state's context (Lark's contextual
        lexer), so other symbols of the parse table (rules, ``$END``) need none."""
        t = self.__dict__.get("_tbit")
        if t is None:
            names = dict.fromkeys(term.name for terms, *_ in self._ctx_specs for term in terms)
            t = self._tbit = {n: i for i, n in enumerate(names)}
        return t

    def _lr_groups(self, q: int) -> tuple[int, list[tuple[tuple, int]]]:
        """(shifted terminals, [(reduction, terminals reduced by it)]) of LR state ``q``, as bit sets."""
        g = self._groups_memo.get(q)
        if g is None:
            tbit = self._lr_tbit()
            shifts = 0
            red: dict[tuple, int] = {}
            for sym, act in self.table.actions[q].items():
                b = tbit.get(sym)
                if b is None:
                    continue  # a nonterminal (goto)
                if act[0] == "s":
                    shifts |= 1 << b
                else:
                    red[act] = red.get(act, 0) | 1 << b
            g = self._groups_memo[q] = (shifts, list(red.items()))
        return g

    def _can_shift(self, stack: Stack, term: str) -> bool:
        """Can the parser shift ``term`` from ``stack`` (after its reductions)?  Interns nothing
        (:meth:`_scratch_shift`; probing every terminal of a context used to intern one stack per
        terminal per token)."""
        return self._scratch_shift(stack, term) is not None

    # ------------------------------------------------------------------ per-request stack memory
    # Interned stacks, their memos and the masks keyed by them grow with every new parser state a
    # request reaches (100,000 nested brackets held 1.2 GB).  They are dropped when the last matcher
    # of this compiled grammar goes and the table has grown past STACK_RESET_MIN stacks: walks,
    # lexer automata and the ok-state memos (stack-independent) are kept.
    STACK_RESET_MIN = 100_000

    def _matcher_born(self) -> None:
        self._n_matchers = getattr(self, "_n_matchers", 0) + 1

    def _matcher_gone(self) -> None:
        self._n_matchers = getattr(self, "_n_matchers", 1) - 1
        if self._n_matchers <= 0 and len(self._stk_state) > self.STACK_RESET_MIN:
            self.reset_stacks()

    def reset_stacks(self) -> None:
        """Forget every interned parser stack but the initial one, with the memos and masks keyed
        by them.  Only valid while no matcher of this grammar is alive (states they hold would name
        other stacks); called automatically when the last one goes."""
        self._stk_parent = [-1]
        self._stk_state = [self.table.start_state]
        self._stk_index = {(-1, self.table.start_state): 0}
        self._feed_memo = {}
        self._allowed_memo = {}
        self._shift_memo = {}
        self._multi = []
        self._multi_index = {}
        self._close_memo = {}
        self._masks = OrderedDict()
        self.__dict__.pop("_bool_masks", None)
        self.__dict__.pop("_suffix_memo", None)  # (not keyed by stacks, but grown by them: freed too)
        self.stats["stack_resets"] = self.stats.get("stack_resets", 0) + 1

    def ok_states(self, cid: int, bits: int) -> np.ndarray:
        """``(n_states,)`` bool of context ``cid``: states whose lexeme can close as a terminal in
        ``bits`` (or an ignored one); recomputed when the context's automaton has grown."""
        return self._ok_entry(cid, bits)[1]

    def _ok_entry(self, cid: int, bits: int) -> tuple[int, np.ndarray, bytes]:
        """``(n_states, ok, ok as bytes)`` of :meth:`ok_states`: the bytes are for reading a few states
        (a bytes item costs less than a numpy scalar)."""
        key = (cid, bits)
        r = self._ok_memo.get(key)
        n = self.ctx(cid).n_states
        if r is None or r[0] != n:
            ok = self.ctx(cid).ok_states(bits)
            r = self._ok_memo[key] = (n, ok, ok.tobytes())
        return r

    # ----------------------------------------------------------------------------- token walks
    def root(self, cid: int, d: int) -> WalkNode:
        """The walk of every content token from state ``d`` of context ``cid``."""
        key = (cid, d)
        node = self._roots.get(key)
        if node is None:
            if self._share:
                dfa = self.ctx(cid)
                fp = (self.vocab.fingerprint(), self.eos_ids)
                skey = (*fp, d)
                node = dfa.shared_walks.get(skey)
                if node is None:
                    node = dfa.shared_walks[skey] = self._root_walk(cid, d)
                    dfa.walked.setdefault(fp, []).append(d)
                    _shared_grew(dfa, _walk_nbytes(node))
            else:
                node = self._root_walk(cid, d)
            self._roots[key] = node
        return node

    def _root_walk(self, cid: int, d: int) -> WalkNode:
        """:meth:`_walk` over all content tokens from offset 0 (the whole vocabulary: :meth:`_level_walk`).

        Tokens whose first byte is dead from ``d`` take no part (no end state, no fork); when they
        are most of the vocabulary (inside a key, a keyword, a number), only the others are walked:
        with the compiled walks, by one walk of the trie below the live first bytes; in numpy, by a
        depth-first search of the trie or a walk of those tokens, after looking for a reference state
        to derive the walk from."""
        dfa = self.ctx(cid)
        if d != START and dfa.is_start[d]:
            return self._derived_root_walk(cid, d, START)
        first_ok = dfa.table[d] != DEAD  # (256,)
        n_cand = int(self._first_hist[first_ok].sum())
        if kernels.ENABLED and n_cand * 4 < self._content.size:
            # compiled: the trie below the live first bytes, in less time than finding a reference;
            # inside a key or punctuation (finitely many strings), a search of the few live trie
            # nodes costs less still
            if dfa.n_states <= TRIE_FINITE_STATES and dfa.finite():
                node = self._trie_walk(dfa, d, TRIE_WALK_BUDGET)
                if node is not None:
                    return node
            return self._level_walk(dfa, d)
        ref = None
        if n_cand > FEW_ROOT_TOKENS:  # below: walking the candidates costs less than finding a reference
            ref = self._reference_root(cid, d, min(n_cand, self._content.size // 4))
        if ref is not None:
            return self._derived_root_walk(cid, d, ref)
        if n_cand <= TRIE_ROOT_TOKENS:
            node = self._trie_walk(dfa, d, TRIE_WALK_BUDGET)
            if node is not None:
                return node
        if n_cand * 4 >= self._content.size:  # wide: from another automaton's walk, or a projection's
            node = self._term_walk(dfa, d)
            if node is not None:
                return node
            proj = self._projection(cid, d, first_ok)
            if proj is not None:
                self.stats["projections"] = self.stats.get("projections", 0) + 1
                return self._derived_root_walk(cid, d, proj)
            node = self._uniform_walk(cid, d) or self._level_walk(dfa, d)
            self._keep_term_walk(dfa, d, node)
            return node
        cand = self._first_tokens(first_ok)
        node = self._walk(cid, d, cand, np.zeros(cand.size, dtype=np.int32))
        srt = np.argsort(node.end_tok, kind="stable")
        node.end_tok, node.end_state = node.end_tok[srt], node.end_state[srt]
        return node

    def _term_walk(self, dfa: LexerDFA, d: int) -> WalkNode | None:
        """The root walk from ``d`` translated from another automaton's, when ``d`` reads one terminal
        alone (:func:`_one_terminal`) and a walk from the same terminal state is in the process-wide
        store (:data:`_TERM_WALKS`): inside a string, every schema's automaton walks alike."""
        one = _one_terminal(dfa, d)
        if one is None:
            return None
        i, local = one
        t = dfa.terms[i]
        hit = _TERM_WALKS.get(self._term_key(dfa, i, local))
        if hit is None:
            return None
        ends, keys, groups = hit
        n = len(dfa.terms)
        ids = dfa.states_of([_solo_key(n, i, st, i if matched else -1, pend) for st, matched, pend in keys])
        if None in ids:
            return None
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for gstates, tok, off in groups:
            fid = dfa._fork_index.get((i, frozenset((t.name, g) for g in gstates)))
            if fid is None:
                return None
            out[fid] = (tok, off)
        self.stats["term_walks"] = self.stats.get("term_walks", 0) + 1
        states = np.asarray(ids, dtype=np.int32)
        if ends[0] == "sparse":  # (end tokens, their state codes)
            return WalkNode(ends[1], states[ends[2]], out, {})
        by_code = np.empty(states.size + 1, dtype=np.int32)
        by_code[0], by_code[1:] = DEAD, states
        if ends[0] == "chain":  # a uniform walk's: the shared length codes, the walked tokens over them
            _, codes, chain_codes, live, n_chain, over_tok, over_codes, count = ends
            base = WalkNode(None, None, {}, {}, codes=codes, by_code=by_code[chain_codes], end_states=states,
                            dense_any=live, n_dense=n_chain)
            return WalkNode(None, None, out, {}, base=base, over_tok=over_tok, over_state=by_code[over_codes],
                            end_states=states, n_dense=count)
        # dense: the stored walk's end state by token id (0: no end) and its code + 1 per such state,
        # which tokens end, how many; the stored states are this walk's codes
        _, src, src_code, live, count = ends
        return WalkNode(None, None, out, {}, codes=src, by_code=by_code[src_code], end_states=states, dense_any=live,
                        n_dense=count)

    def _keep_term_walk(self, dfa: LexerDFA, d: int, node: WalkNode) -> None:
        """Store ``node`` (the root walk from ``d``) in terminal-local terms for :meth:`_term_walk`."""
        one = _one_terminal(dfa, d)
        chain = node.base if node.base is not None and node.base.codes is not None else None
        if one is None or (node.base is not None and chain is None):
            return
        i, local = one
        wide = node.sparse_tok is None and node.n_end > self._dense_min and (chain is not None or node.dense_any is not None)
        if chain is not None:  # a uniform walk: the chain's states and the walked tokens'
            assert chain.by_code is not None and node.over_state is not None
            end_state = np.concatenate([chain.by_code, node.over_state])
        else:
            end_state = node.dense_ends() if wide else node.end_state
        assert end_state is not None
        if wide and chain is None and node.end_states is not None:
            # a whole-vocabulary walk's distinct end states, ascending (kernels.walk_vocabulary; equal
            # to the bincount's below on every such walk of a MaskBench --step 8 run): no pass over
            # the vocabulary-wide array (~0.2 ms)
            states = node.end_states
        else:
            states = np.flatnonzero(np.bincount(end_state, minlength=1)) if end_state.size else end_state
            if wide:
                states = states[states != DEAD]
        keys = []
        for k in dfa.keys_of(states.tolist()):
            main, best, _, pend = cast(tuple, k)
            keys.append((main[i], best == i, pend))
        lut = np.zeros(max(int(states.max()) + 1, 1) if states.size else 1, dtype=np.int32)
        lut[states] = np.arange(states.size, dtype=np.int32)
        groups = [(tuple(sorted(g for _, g in dfa.forks[f][1])), tok, off) for f, (tok, off) in node.groups.items()]
        if chain is not None:  # the chain's states and the walked tokens' as codes + 1 (0: none)
            assert chain.codes is not None and chain.by_code is not None and node.over_tok is not None
            lut += 1
            lut[DEAD] = 0
            ends: tuple = ("chain", chain.codes, lut[chain.by_code], chain.dense_any, chain.n_end, node.over_tok,
                           lut[node.over_state], node.n_end)
        elif wide:  # the node's own end state per token (shared: no vocabulary-wide gather into a new
            # array, ~0.1-1 ms with its page faults) and each state's code + 1, 0 where no token ends;
            # the node's bool array shared too
            lut += 1
            lut[DEAD] = 0
            ends = ("dense", end_state, lut, node.dense_any, node.n_end)
        else:
            ends = ("sparse", node.end_tok, lut[end_state])
        _TERM_WALKS[self._term_key(dfa, i, local)] = (ends, keys, groups)
        while len(_TERM_WALKS) > TERM_WALK_LIMIT:
            _TERM_WALKS.pop(next(iter(_TERM_WALKS)))

    def _term_key(self, dfa: LexerDFA, i: int, local: tuple) -> tuple:
        """The :data:`_TERM_WALKS` key of terminal ``i`` of ``dfa`` alone in local state ``local``."""
        return self.vocab.fingerprint(), self.eos_ids, dfa.terms[i].regexp, dfa.explicit_nonascii, local

    def _projection(self, cid: int, d: int, first_ok: np.ndarray) -> int | None:
        """A state of context ``cid`` reading one of ``d``'s terminals alone (the others dropped), whose
        walk is at hand (walked here, or in :data:`_TERM_WALKS`) and differs from ``d``'s on the fewest
        tokens' first bytes: inside an object's key, the any-string terminal's state without the
        literal keys, from which :meth:`_derived_root_walk` derives ``d``'s walk.  None if there is none."""
        dfa = self.ctx(cid)
        main, best, guard, pend = cast(tuple, dfa.key(d))
        if guard:
            return None
        alive = [j for j, st in enumerate(main) if st >= 0]
        if len(alive) < 2:
            return None
        n = len(main)
        row = dfa.table[d]
        best_ref, best_cost = None, None
        for j in alive:
            if best not in (-1, j) or j >= dfa.n_main:
                continue
            p = dfa.state_of(_solo_key(n, j, main[j], best, pend))
            if p is None:
                continue
            at_hand = (cid, p) in self._roots or self._term_key(dfa, j, (main[j], best == j, pend)) in _TERM_WALKS
            # tokens walked anew from d: those whose first byte leads d elsewhere than p (a walk not at
            # hand costs a whole-vocabulary walk first: it then serves every state of this kind)
            cost = int(self._first_hist[(dfa.table[p] != row) & first_ok].sum()) + (0 if at_hand else self._content.size // 8)
            if best_cost is None or cost < best_cost:
                best_ref, best_cost = p, cost
        return best_ref if best_cost is not None and best_cost < self._content.size // 4 else None

    def _uniform_walk(self, cid: int, d: int) -> WalkNode | None:
        """The root walk from ``d`` when every byte of :data:`PLAIN_BYTES` moves ``d`` to one state, and
        that state likewise, as far as the longest plain token reaches, with at most
        :data:`UNIFORM_MAX_FORKS` forks on the way (inside a JSON string of bounded length: a counter;
        a fork where a long string's chunk terminal may close): a plain token of ``k`` bytes then ends
        in the ``k``-th state of that chain, whatever its bytes, those longer than a fork's offset pass
        it (less those whose next byte fires its guard), and only the other tokens (3% of SmolLM2's)
        are walked (:meth:`_walk`).  None when ``d`` is not such a state.  The same node as
        :meth:`_level_walk` (tested in ``tests/engine/test_fast_paths.py``), without walking the
        vocabulary's trie (~0.9 ms for 49k tokens inside a string on MaskBench's machine)."""
        dfa = self.ctx(cid)
        uni = dfa.uniform_successor(PLAIN_BYTES)
        pt = self._trie().plain()
        chain = [d]
        s = d
        forks = dfa.fork_list
        passed: list[tuple[int, int]] = []  # (offset, fork) where a lexeme may close inside a plain token
        for k in range(1, pt.longest + 1):
            s = int(uni[s])
            if s < 0:  # the plain bytes part ways here
                return None
            if s == DEAD:
                break
            if k < pt.longest and forks[s] >= 0:
                if len(passed) == UNIFORM_MAX_FORKS:  # (a lexeme closing anywhere: the trie walk is cheaper)
                    return None
                passed.append((k, forks[s]))
            chain.append(s)
        if len(chain) == 1:  # no plain token starts from d: no gain over the walk of the others
            return None
        ends = np.zeros(pt.longest + 2, dtype=np.int32)  # by length; DEAD past the chain and for the others
        ends[: len(chain)] = chain
        rest = self._walk(cid, d, pt.others, np.zeros(pt.others.size, dtype=np.int32))
        groups = rest.groups
        if passed:
            groups = dict(groups)
            for k, f in passed:
                # the plain tokens longer than k bytes pass the fork at offset k, unless their byte there
                # fires its guard
                longer = pt.by_len[pt.len_start[k + 1]:]
                ok = dfa.fork_ok_byte[f]
                # (a guard that fires on no byte, as a string chunk's: every longer token passes, no
                # gather of their bytes at k, ~80 us for the 30k tokens longer than a few bytes)
                tok = longer if ok.all() else longer[ok[self._bytes[longer, k]]]
                if tok.size:
                    off = np.full(tok.size, k, dtype=np.int32)
                    if f in groups:
                        tok, off = np.concatenate([groups[f][0], tok]), np.concatenate([groups[f][1], off])
                    groups[f] = (tok, off)
        node = _chain_node(pt, ends, len(chain) - 1, rest.end_tok, rest.end_state, self._dense_min)
        node.groups, node.children = groups, rest.children
        return node

    def _level_walk(self, dfa: LexerDFA, d: int) -> WalkNode:
        """The walk of every content token from state ``d``: compiled (:func:`gad.engine.kernels.walk_vocabulary`,
        the trie below the first bytes live from ``d``), else down the vocabulary's byte trie one
        depth at a time (:class:`_TrieLevels`: one numpy pass per depth over the distinct prefixes),
        the few tokens longer than the walked depths then one by one (:meth:`_walk_scalar`).

        Same result as :meth:`_walk` over the content tokens: the tokens ending inside the lexeme,
        sorted by id, with their states, and per fork the tokens passing it before their last byte,
        with the next lexeme's offset, unless that byte already fires the fork's guard."""
        self.stats["walks"] += 1
        tr = self._trie()
        if kernels.ENABLED:  # compiled: one pass over the trie's nodes, one over the tokens
            end_tok, end_state, dense, end_states, groups, n_end = kernels.walk_vocabulary(
                dfa, d, tr.nodes(self.vocab_size), self._dense_min)
            if dense is not None:  # what _fill reads (no sparse arrays)
                return WalkNode(None, None, groups, {}, dense_end=dense, end_states=end_states,
                                dense_any=dense != DEAD, n_dense=n_end)
            return WalkNode(end_tok, end_state, groups, {})
        lv = tr.levels(self.vocab.tokens)
        flat, fork_id = dfa.flat_table, dfa.fork_id
        st = np.empty(lv.n_nodes + 1, dtype=np.int32)  # each node's state (the last entry: scratch)
        b_i: list[np.ndarray] = []
        b_p: list[int] = []
        b_w: list[np.ndarray] = []
        at = 0
        for p in range(lv.depth):
            byte = lv.byte[p]
            hi = at + byte.size
            cur = st[at:hi]
            if p:
                np.left_shift(st.take(lv.parent[p]), 8, out=cur)
                cur += byte
            else:
                np.add(byte, d << 8, out=cur)
            flat.take(cur, out=cur)
            cont = lv.cont[p]
            if cont.size:
                f = fork_id.take(cur.take(cont))
                hit = np.flatnonzero(f >= 0)
                if hit.size:
                    lo, up = lv.cont_lo[p][hit], lv.cont_hi[p][hit]
                    cnt = up - lo
                    total = int(cnt.sum())
                    # the positions lo..up-1 of every hit node, in one array
                    pos = np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
                    b_i.append(pos)
                    b_p.append(p + 1)
                    b_w.append(np.repeat(f[hit], cnt))
            at = hi
        groups = self._groups(dfa, tr.ids_np, b_i, b_p, b_w)
        st[lv.n_nodes] = DEAD
        ends = st.take(lv.id_node)  # (content,) by token id: end state or DEAD
        if lv.long_ids:
            starts = st.take(lv.long_node)
            live = np.flatnonzero(starts != DEAD).tolist()
            if live:
                ids = [lv.long_ids[i] for i in live]
                rest_t, rest_s, rest_g = self._walk_scalar(dfa, starts[live].tolist(), ids, [lv.depth] * len(ids),
                                                           [lv.run_from[i] for i in live])
                ends[np.searchsorted(lv.ids_sorted, rest_t)] = rest_s
                _add_groups(groups, rest_g, tr.ids_np.dtype)
        # the tokens ending inside the lexeme (state not DEAD), sorted by id
        keep = np.flatnonzero(ends != DEAD)
        return WalkNode(lv.ids_sorted[keep], ends[keep], groups, {})

    def _trie(self) -> _VocabTrie:
        """The vocabulary's content tokens in byte order (:class:`_VocabTrie`, one per process and vocabulary)."""
        key = (self.vocab.fingerprint(), self.eos_ids)
        tr = _TRIES.get(key)
        if tr is None:
            tr = _TRIES[key] = _VocabTrie(self._bytes, self._lens, self._content, self.vocab.tokens)
            while len(_TRIES) > 4:
                _TRIES.pop(next(iter(_TRIES)))
        return tr

    def _trie_walk(self, dfa: LexerDFA, d: int, budget: int) -> WalkNode | None:
        """The root walk from state ``d`` as a depth-first search of the vocabulary's byte trie that
        follows only live bytes: its cost is the number of trie nodes still alive (a few dozen inside
        a key or a keyword), not the number of tokens sharing a first byte.  Returns None once more
        than ``budget`` nodes have been visited (the numpy walk is cheaper there).

        Same result as :meth:`_walk` over the content tokens: the tokens ending inside the lexeme
        (sorted by id) with their states, and per fork the tokens passing it before their last byte,
        with the next lexeme's offset, unless that byte already fires the fork's guard."""
        tr = self._trie()
        end_t: list[int] = []
        end_s: list[int] = []
        grp: dict[int, list[tuple[int, int, int]]] = {}
        if self._trie_search(dfa, [(0, len(tr.ids), 0, d)], budget, end_t, end_s, grp) < 0:
            return None
        order = np.argsort(np.asarray(end_t, dtype=np.int32), kind="stable")
        return WalkNode(np.asarray(end_t, dtype=np.int32)[order], np.asarray(end_s, dtype=np.int32)[order],
                        self._trie_groups(dfa, grp), {})

    def _trie_search(self, dfa: LexerDFA, todo: list[tuple[int, int, int, int]], budget: int,
                     end_t: list[int], end_s: list[int], grp: dict[int, list[tuple[int, int, int]]]) -> int:
        """Depth-first walk of the trie nodes below ``todo``'s ``(lo, hi, k, state)`` items (a range of
        tokens sharing a prefix of ``k`` bytes, read into ``state``), appending the tokens that end
        (``end_t``, ``end_s``) and the ranges that pass a fork (``grp``: fork -> ``(lo, hi, offset)``).
        Returns the number of nodes visited, or -1 past ``budget``."""
        tr = self._trie()
        if kernels.ENABLED:  # the loop below, compiled (same order, same lists)
            got = kernels.trie_search(tr.cols_np, tr.lens_np, tr.ids_np, dfa.table, dfa.fork_id, todo, budget)
            if got is None:
                return -1
            for kind, x0, x1, x2, x3 in got[1].tolist():
                if kind == 0:
                    end_t.append(x0)
                    end_s.append(x1)
                else:
                    grp.setdefault(x0, []).append((x1, x2, x3))
            return got[0]
        cols, lens, ids = tr.cols, tr.lens, tr.ids
        forks = dfa.fork_list
        seen = 0
        while todo:
            lo, hi, k, s = todo.pop()
            col = cols[k]
            row = dfa_live_moves(dfa, s)
            spans = []
            if len(row) <= 8:
                for b in row:
                    a = bisect_left(col, b, lo, hi)
                    if a < hi and col[a] == b:
                        spans.append((b, a, bisect_right(col, b, a, hi)))
            else:
                a = lo
                while a < hi:
                    b = col[a]
                    z = bisect_right(col, b, a, hi)
                    if b in row:
                        spans.append((b, a, z))
                    a = z
            for b, a, z in spans:
                seen += 1
                if seen > budget:
                    return -1
                ns = row[b]
                while a < z and lens[a] == k + 1:  # the token(s: a vocabulary may repeat one) equal to this prefix
                    end_t.append(ids[a])
                    end_s.append(ns)
                    a += 1
                if a < z:
                    f = forks[ns]
                    if f >= 0:
                        grp.setdefault(f, []).append((a, z, k + 1))
                    todo.append((a, z, k + 1, ns))
        return seen

    def _trie_groups(self, dfa: LexerDFA, grp: dict[int, list[tuple[int, int, int]]]
                     ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """:meth:`_trie_search`'s fork ranges as token and offset arrays, without the tokens whose
        next byte fires the fork's guard."""
        tr = self._trie()
        groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for f in sorted(grp):
            ok_byte = dfa.fork_ok_byte[f]
            ts, os_ = [], []
            for a, z, off in grp[f]:
                t = tr.ids_np[a:z][ok_byte[tr.cols_np[off, a:z]]]
                if t.size:
                    ts.append(t)
                    os_.append(np.full(t.size, off, dtype=np.int32))
            if ts:
                groups[f] = (np.concatenate(ts), np.concatenate(os_))
        return groups

    def _trie_derived(self, cid: int, d: int, ref: int, budget: int) -> WalkNode | None:
        """The root walk from ``d`` derived from the root walk from ``ref`` by walking the byte trie in
        lockstep from both states and visiting only the nodes where they differ: below a node where
        both reach the same state, every token has the reference's ends and forks.

        Per differing node (prefix ``p`` of ``k`` bytes): the token equal to ``p`` ends in ``d``'s
        state; the tokens going on pass ``d``'s fork at offset ``k`` instead of the reference's; where
        ``d`` dies and the reference does not, those tokens lose the reference's ends and its forks at
        offsets ``>= k``; where the reference dies and ``d`` does not, they are walked (trie search).
        Returns None past ``budget`` visited nodes (then :meth:`_derived_root_walk` walks the tokens
        whose first byte differs)."""
        dfa = self.ctx(cid)
        base = self.root(cid, ref)
        tr = self._trie()
        cols, lens, ids = tr.cols, tr.lens, tr.ids
        view, forks, table = dfa.flat_view(), dfa.fork_list, dfa.table
        fixes: list[tuple[int, int]] = []  # (token, its end state from d): replaces the reference's
        cuts: list[tuple[int, int, int]] = []  # (lo, hi, k): the reference's ends and forks at >= k go
        unforks: list[tuple[int, int, int, int]] = []  # (fork, lo, hi, k): its entries at offset k go
        end_t: list[int] = []
        end_s: list[int] = []
        grp: dict[int, list[tuple[int, int, int]]] = {}
        fresh: list[tuple[int, int, int, int]] = []
        todo = [(0, len(ids), 0, d, ref)]
        seen = 0
        if kernels.ENABLED:  # the loop below, compiled (same order, same lists)
            got = kernels.lockstep(tr.cols_np, tr.lens_np, tr.ids_np, table, dfa.fork_id, d, ref, budget)
            if got is None:
                return None
            seen, rows_out = got
            for kind, x0, x1, x2, x3 in rows_out.tolist():
                if kind == 0:
                    fixes.append((x0, x1))
                elif kind == 1:
                    cuts.append((x0, x1, x2))
                elif kind == 2:
                    unforks.append((x0, x1, x2, x3))
                elif kind == 3:
                    grp.setdefault(x0, []).append((x1, x2, x3))
                else:
                    fresh.append((x0, x1, x2, x3))
            todo = []
        while todo:
            lo, hi, k, s, r = todo.pop()
            col = cols[k]
            s8, r8 = s << 8, r << 8
            spans = []
            if hi - lo <= 48:  # few tokens: their bytes at k are the children to compare
                a = lo
                while a < hi:
                    b = col[a]
                    z = bisect_right(col, b, a, hi)
                    if view[s8 | b] != view[r8 | b]:
                        spans.append((b, a, z))
                    a = z
            else:
                for b in np.flatnonzero(table[s] != table[r]).tolist():
                    a = bisect_left(col, b, lo, hi)
                    if a < hi and col[a] == b:
                        spans.append((b, a, bisect_right(col, b, a, hi)))
            for b, a, z in spans:
                seen += 1
                if seen > budget:
                    return None
                ns, nr = view[s8 | b], view[r8 | b]
                if ns == DEAD:
                    cuts.append((a, z, k + 1))
                    continue
                if nr == DEAD:  # none of these is in the reference's walk from here on
                    fresh.append((a, z, k, s))
                    continue
                while a < z and lens[a] == k + 1:
                    fixes.append((ids[a], ns))
                    a += 1
                if a < z:
                    fs, fr = forks[ns], forks[nr]
                    if fs != fr:
                        if fr >= 0:
                            unforks.append((fr, a, z, k + 1))
                        if fs >= 0:
                            grp.setdefault(fs, []).append((a, z, k + 1))
                    todo.append((a, z, k + 1, ns, nr))
        if fresh:
            # each range re-entered from its parent's state: the search reads byte k of the range
            # (the parent's range cut to this byte: the search enters its one child span)
            if self._trie_search(dfa, fresh, budget - seen, end_t, end_s, grp) < 0:
                return None
        # ends: the reference's (sorted by id), the fixed tokens' states set in place (each is among
        # them: the reference's state there is live), less the cut ranges' tokens, plus the walked ones
        fix_t = np.asarray([t for t, _ in fixes], dtype=np.int32)
        fix_s = np.asarray([st for _, st in fixes], dtype=np.int32)
        drop = np.concatenate([tr.ids_np[a:z] for a, z, _ in cuts]) if cuts else None
        add_t = np.asarray(end_t, dtype=np.int32)
        add_s = np.asarray(end_s, dtype=np.int32)
        node = self._patched(base, fix_t, fix_s, drop, add_t, add_s)
        # forks: the reference's entries, less those cut or unforked, plus d's own
        cut_at = None
        if cuts:
            cut_at = np.full(self.vocab_size, 1 << 15, dtype=np.int32)
            for a, z, k1 in cuts:
                cut_at[tr.ids_np[a:z]] = k1
        groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        same: set[int] = set()
        for fid, (t, o) in base.groups.items():
            sel = None
            if cut_at is not None:
                sel = o < cut_at[t]
            for f, a, z, k1 in unforks:
                if f == fid:
                    lp = tr.lex_pos[t]
                    gone = (o == k1) & (lp >= a) & (lp < z)
                    sel = ~gone if sel is None else sel & ~gone
            if sel is None or sel.all():
                groups[fid] = (t, o)
                same.add(fid)
            elif sel.any():
                groups[fid] = (t[sel], o[sel])
        node.groups = groups
        node.children = _join_groups(base, groups, same, self._trie_groups(dfa, grp))
        return node

    def _patched(self, base: WalkNode, fix_t: np.ndarray, fix_s: np.ndarray, drop: np.ndarray | None,
                 add_t: np.ndarray, add_s: np.ndarray) -> WalkNode:
        """A node whose ends are ``base``'s, with tokens ``fix_t`` ``(f,)`` (among them) ending in states
        ``fix_s`` instead, tokens ``drop`` gone and tokens ``add_t`` (not among those left) added, ending
        in ``add_s``, all int32; no groups or children.  A narrow base's sparse arrays are patched
        (:func:`_patched_sparse`); a wide one gives an overlay node on it (on its base, if it is an
        overlay itself: :class:`WalkNode`), unless the result is narrow (then sparse) or the changes
        pass :data:`OVERLAY_MAX_TOKENS` (then a patched copy of the dense arrays)."""
        if base.n_end <= self._dense_min:
            return WalkNode(*_patched_sparse(base.end_tok, base.end_state, fix_t, fix_s, drop, add_t, add_s), {}, {})
        root = base.base if base.base is not None else base
        self._densify(root)
        assert root.end_states is not None and root.dense_any is not None
        prior = None
        if base.base is not None:
            assert base.over_tok is not None and base.over_state is not None
            prior = (base.over_tok, base.over_state)
        n_new = fix_t.size + add_t.size + (drop.size if drop is not None else 0)
        if kernels.ENABLED:  # the merge below and the root's end states compared, in one compiled call
            translated = root.dense_end is None and root.codes is not None
            tok, new, delta, added = kernels.patch_ends(
                prior[0] if prior else None, prior[1] if prior else None, fix_t, fix_s, drop, add_t, add_s,
                root.codes if translated else None, root.by_code if translated else None,
                None if translated else root.dense_end)
            n = root.n_end + delta
        elif n_new <= 64:  # few (the usual case): merged in a dict, in order, the last change of a token winning
            ch: dict[int, int] = dict(zip(fix_t.tolist(), fix_s.tolist()))
            if drop is not None:
                ch.update(dict.fromkeys(drop.tolist(), DEAD))
            ch.update(zip(add_t.tolist(), add_s.tolist()))
            keys = sorted(ch)
            tok = np.asarray(keys, dtype=np.int32)
            new = np.asarray([ch[t] for t in keys], dtype=np.int32)
            added = new
            if prior is not None:  # onto the base's own changes (ascending): replaced in place or added
                at = np.searchsorted(prior[0], tok)
                hit = at < prior[0].size
                hit[hit] = prior[0][at[hit]] == tok[hit]
                merged = prior[1].copy()
                merged[at[hit]] = new[hit]
                miss = ~hit
                if miss.any():
                    t = np.concatenate([prior[0], tok[miss]])
                    order = np.argsort(t, kind="stable")
                    tok, new = t[order], np.concatenate([merged, new[miss]])[order]
                else:
                    tok, new = prior[0], merged
        else:
            parts_t, parts_s = [fix_t], [fix_s]
            if prior:
                parts_t.insert(0, prior[0])
                parts_s.insert(0, prior[1])
            if drop is not None:
                parts_t.append(drop.astype(np.int32, copy=False))
                parts_s.append(np.full(drop.size, DEAD, dtype=np.int32))
            parts_t.append(add_t)
            parts_s.append(add_s)
            t, st = np.concatenate(parts_t), np.concatenate(parts_s)
            tok, last = np.unique(t[::-1], return_index=True)  # each token's last change wins
            tok, new = tok.astype(np.int32, copy=False), st[::-1][last]
            added = new
        if not kernels.ENABLED:
            was = root.ends_of(tok)
            changed = new != was
            if not changed.all():
                tok, new, was = tok[changed], new[changed], was[changed]
            n = root.n_end - int(np.count_nonzero(was)) + int(np.count_nonzero(new))
        if n > self._dense_min and tok.size <= OVERLAY_MAX_TOKENS:
            # the end states: a superset (repeats do no harm), the base's and those this call adds
            assert base.end_states is not None
            states = np.concatenate([base.end_states, added[added != DEAD]]) if added.size else base.end_states
            if states.size > 2 * root.end_states.size + 64:
                states = np.unique(states)
            return WalkNode(None, None, {}, {}, base=root, over_tok=tok, over_state=new, end_states=states, n_dense=n)
        dense = root.dense_ends().copy()
        dense[tok] = new
        if n <= self._dense_min:
            keep = np.flatnonzero(dense).astype(np.int32)
            return WalkNode(keep, dense[keep], {}, {})
        node = WalkNode(None, None, {}, {}, dense_end=dense, n_dense=n)
        node.end_states = np.flatnonzero(np.bincount(dense)[DEAD + 1:]).astype(np.int32) + (DEAD + 1)
        node.dense_any = dense != DEAD
        return node

    def _first_tokens(self, first_ok: np.ndarray) -> np.ndarray:
        """``(n,)`` ids of the content tokens whose first byte is allowed by ``first_ok`` ``(256,)`` bool,
        grouped by first byte (slices of the by-first-byte order, no pass over the vocabulary)."""
        bs = np.flatnonzero(first_ok)
        off = self._first_off
        if bs.size == 1:
            return self._by_first[off[bs[0]]:off[bs[0] + 1]]
        if bs.size > 32:
            return self._content[first_ok[self._first]]
        parts = [self._by_first[off[b]:off[b + 1]] for b in bs.tolist()]
        return np.concatenate(parts) if parts else self._by_first[:0]

    def _reference_root(self, cid: int, d: int, budget: int) -> int | None:
        """A state of context ``cid`` whose root walk is built and from which :meth:`_derived_root_walk`
        derives ``d``'s walking fewer than ``budget`` tokens (those whose first byte leads ``d``
        elsewhere than it leads the reference); the cheapest of the last 256 walked, or None.

        Inside a keyword or a key of an object, where a NAME or any string may also go on, most
        first bytes leave only the general terminal alive, the same state from either prefix."""
        dfa = self.ctx(cid)
        cands: list[int] = []
        if self._share:
            walked = dfa.walked.get((self.vocab.fingerprint(), self.eos_ids), [])
            cands = [s for s in walked[:-258:-1] if s != d][:256]
        else:
            for c, s in reversed(self._roots):
                if c == cid and s != d:
                    cands.append(s)
                    if len(cands) >= 256:
                        break
        if not cands:
            return None
        if kernels.ENABLED:
            return kernels.cheapest_reference(dfa.table, cands, d, self._first_hist, budget)
        row = dfa.table[d]
        # tokens to walk from ``d`` per reference: first byte live from ``d`` and leading elsewhere
        # (a bool matrix times float64 counts: exact below 2**53, and no int64 copy of the matrix)
        differs = dfa.table.take(cands, axis=0) != row  # (n_cands, 256)
        cost = differs @ np.where(row != DEAD, self._first_hist, 0).astype(np.float64)
        best = int(np.argmin(cost))
        return cands[best] if cost[best] < budget else None

    def _derived_root_walk(self, cid: int, d: int, ref: int) -> WalkNode:
        """The root walk from ``d``, derived from the root walk from state ``ref`` of the same context.

        A token whose first byte leads ``d`` where it leads ``ref`` walks the same states from there
        on: its ends and forks are ``ref``'s.  Only the tokens whose first byte leads elsewhere (and
        is not dead from ``d``) are walked.  Used for the empty lexeme under a guard (``ref`` = START:
        the guard died on most bytes, or never mattered) and for a state with a reference from
        :meth:`_reference_root`.  Forks none of the walked tokens join keep ``ref``'s token sets, so
        their child walks are shared."""
        dfa = self.ctx(cid)
        base = self.root(cid, ref)
        differs = dfa.table[d] != dfa.table[ref]  # (256,) bool
        if not differs.any():  # every first byte leads both states alike: the same walk (shared)
            return base
        node = self._trie_derived(cid, d, ref, TRIE_WALK_BUDGET)
        if node is not None:
            return node
        # tokens whose first byte leads elsewhere: out of the reference's sets; walked anew if live
        gone = self._first_tokens(differs)
        keep_tok = np.ones(self.vocab_size, dtype=bool)
        keep_tok[gone] = False
        extra = self._first_tokens(differs & (dfa.table[d] != DEAD))
        part = self._walk(cid, d, extra, np.zeros(extra.size, dtype=np.int32)) if extra.size else None
        none = np.zeros(0, dtype=np.int32)
        part_t, part_s = (part.end_tok, part.end_state) if part is not None else (none, none)
        node = self._patched(base, none, none, gone, part_t, part_s)  # (the walked tokens are among the gone ones)
        groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        same: set[int] = set()
        for fid, (t, o) in base.groups.items():
            sel = keep_tok[t]
            if sel.all():
                groups[fid] = (t, o)
                same.add(fid)
            elif sel.any():
                groups[fid] = (t[sel], o[sel])
        node.groups = groups
        node.children = _join_groups(base, groups, same, part.groups if part is not None else {})
        return node

    def _groups(self, dfa: LexerDFA, toks: np.ndarray, b_i: list[np.ndarray], b_p: list,
                b_w: list[np.ndarray]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Fork id -> (token ids, offsets of the next lexeme) of tokens whose lexeme may close inside
        them, without those whose next byte already fires the fork's guard."""
        if not b_i:
            return {}
        bi = np.concatenate(b_i)
        bp = np.concatenate([np.full(a.size, p, dtype=np.int32) if np.isscalar(p) else p
                             for a, p in zip(b_i, b_p)]).astype(np.int32)
        bw = np.concatenate(b_w)
        tk = toks[bi]
        # the next lexeme's first byte may already fire the fork's guard: those entries go
        keep = dfa.fork_ok[bw, self._bytes[tk, bp]]
        if not keep.all():
            bw, tk, bp = bw[keep], tk[keep], bp[keep]
        return kernels.split_by_fork(bw, tk, bp, len(dfa.forks))

    def _walk(self, cid: int, d: int, tok: np.ndarray, off: np.ndarray) -> WalkNode:
        """Run tokens ``tok`` ``(n,)`` int (starting at byte offsets ``off`` ``(n,)``) through context
        ``cid`` from state ``d``: numpy over the tokens, one byte position per pass; a few tokens
        (:data:`FEW_WALK_TOKENS`) step one by one on the automaton's scalar rows instead (a pass
        costs ~15 numpy calls whatever its width)."""
        self.stats["walks"] += 1
        dfa = self.ctx(cid)
        if tok.size <= FEW_WALK_TOKENS:
            return self._walk_few(dfa, d, tok, off)
        if kernels.ENABLED:  # compiled: each token byte by byte
            end_tok, end_state, groups = kernels.walk_tokens(dfa, d, self._bytes, self._lens, tok, off)
            return WalkNode(end_tok, end_state, groups, {})
        table, fork_id = dfa.table, dfa.fork_id
        lens = self._lens[tok]
        st = np.full(tok.size, d, dtype=np.int32)
        idx = np.arange(tok.size)
        end_parts: list[np.ndarray] = []
        end_states: list[np.ndarray] = []
        b_idx: list[np.ndarray] = []
        b_pos: list[np.ndarray] = []
        b_win: list[np.ndarray] = []
        pos = 0
        while idx.size:
            col = off[idx] + pos
            nxt = table[st[idx], self._bytes[tok[idx], col]]
            live = nxt != DEAD
            if not live.all():
                idx, nxt, col = idx[live], nxt[live], col[live]
            st[idx] = nxt
            fin = lens[idx] == col + 1
            if fin.any():
                end_parts.append(idx[fin])
                end_states.append(nxt[fin])
                rest = ~fin
                idx, nxt, col = idx[rest], nxt[rest], col[rest]
            f = fork_id[nxt]
            at = f >= 0
            if at.any():
                b_idx.append(idx[at])
                b_pos.append(col[at] + 1)
                b_win.append(f[at])
            pos += 1
            if 0 < idx.size <= FEW_WALK_TOKENS:  # the few left: on the scalar rows from here
                rest_t, rest_s, rest_g = self._walk_scalar(dfa, nxt.tolist(), tok[idx].tolist(), (col + 1).tolist())
                break
        else:
            rest_t, rest_s, rest_g = [], [], {}
        end_i = np.concatenate(end_parts) if end_parts else np.zeros(0, dtype=np.int64)
        end_s = np.concatenate(end_states) if end_states else np.zeros(0, dtype=np.int32)
        groups = self._groups(dfa, tok, b_idx, b_pos, b_win)
        _add_groups(groups, rest_g, tok.dtype)
        end_tok = tok[end_i].astype(np.int32)
        if rest_t:
            end_tok = np.concatenate([end_tok, np.asarray(rest_t, dtype=np.int32)])
            end_s = np.concatenate([end_s, np.asarray(rest_s, dtype=np.int32)])
        return WalkNode(end_tok, end_s.astype(np.int32), groups, {})

    def _walk_few(self, dfa: LexerDFA, d: int, tok: np.ndarray, off: np.ndarray) -> WalkNode:
        """:meth:`_walk` of a few tokens, one byte at a time on the rows (the same result: the tokens
        ending inside the lexeme with their states, and per fork the tokens passing it before their
        last byte with the next lexeme's offset, unless that byte already fires the fork's guard)."""
        end_t, end_s, grp = self._walk_scalar(dfa, [d] * tok.size, tok.tolist(), off.tolist())
        groups = {f: (np.asarray(ts, dtype=tok.dtype), np.asarray(os_, dtype=np.int32))
                  for f, (ts, os_) in sorted(grp.items())}
        return WalkNode(np.asarray(end_t, dtype=np.int32), np.asarray(end_s, dtype=np.int32), groups, {})

    def _walk_scalar(self, dfa: LexerDFA, starts: list[int], toks: list[int], offs: list[int],
                     runs: list[int] | None = None
                     ) -> tuple[list[int], list[int], dict[int, tuple[list[int], list[int]]]]:
        """Step each token ``toks[i]`` from state ``starts[i]`` at byte ``offs[i]`` on the automaton's rows
        (:meth:`LexerDFA.flat_view`):
        (ending tokens, their states, fork -> (tokens, next-lexeme offsets)).

        ``runs[i]`` (optional): from which byte on token ``i`` repeats its last byte; once the rest is
        that byte and it leaves a fork-free state unchanged, the token ends there without stepping on
        (a run of spaces inside a string)."""
        view, forks, ok_byte = dfa.flat_view(), dfa.fork_list, dfa.fork_ok_byte
        tokens = self.vocab.tokens
        end_t: list[int] = []
        end_s: list[int] = []
        grp: dict[int, tuple[list[int], list[int]]] = {}
        for k, (s, t, o) in enumerate(zip(starts, toks, offs)):
            data = cast(bytes, tokens[t])
            last = len(data) - 1
            run = runs[k] if runs is not None else last + 1  # (past the end: never skip)
            rb = data[-1]
            for p in range(o, last + 1):
                s = view[(s << 8) | data[p]]
                if s == DEAD:
                    break
                if p == last:
                    end_t.append(t)
                    end_s.append(s)
                    break
                f = forks[s]
                if f >= 0:
                    if ok_byte[f][data[p + 1]]:
                        g = grp.get(f)
                        if g is None:
                            g = grp[f] = ([], [])
                        g[0].append(t)
                        g[1].append(p + 1)
                elif p + 1 >= run and view[(s << 8) | rb] == s:  # the rest is rb again and again: s stays
                    end_t.append(t)
                    end_s.append(s)
                    break
        return end_t, end_s, grp

    # ------------------------------------------------------------------------------------ masks
    def mask_bits(self, stack: Stack, d: int) -> np.ndarray:
        """The exact next-token mask at matcher state ``(stack, d)``, packed: ``(4 * ceil(vocab / 32),)``
        uint8 (read-only), token ``i`` allowed iff bit ``i % 8`` of byte ``i // 8`` is set (numpy's
        ``packbits(..., bitorder="little")``); read as little-endian int32 words it is the bitmask
        layout of xgrammar, llguidance and vLLM (bit ``i % 32`` of word ``i // 32``).  Padding bits are 0.

        EOS ids are set iff the prefix is a complete sentence.  Cached (LRU, ``mask_cache_size``
        entries) by state.  A negative ``stack`` names a set of lexing hypotheses (:meth:`step_bytes`);
        its mask is their union.  The walk tree is filled into a pooled ``(vocab,)`` bool scratch
        buffer and packed: a cached mask is 6 KB for SmolLM2 instead of 48 KB, and a mask never seen
        before allocates no fresh ``(vocab,)`` array (whose page faults cost 5-40 µs here).
        """
        key = (stack, d)
        b = self._masks.get(key)
        if b is not None:
            self._masks.move_to_end(key)
            self.stats["mask_hits"] += 1
            return b
        self.stats["mask_misses"] += 1
        if stack < 0:
            b = np.zeros(self._mask_nbytes, dtype=np.uint8)
            for hs, hd in self._multi[-1 - stack]:
                b |= self.mask_bits(hs, hd)
        else:
            cid = self.state_ctx[self._stk_state[stack]]
            dfa = self.ctx(cid)
            pool: list[np.ndarray] = self.__dict__.setdefault("_scratch_bufs", [])
            buf = pool.pop() if pool else np.zeros(self.vocab_size, dtype=bool)  # all False
            try:
                self._fill(buf, stack, cid, self.root(cid, d))
                if self.is_complete(stack, d):
                    buf[self._eos] = True
                b = self._pack(buf)
            finally:
                buf.fill(False)
                pool.append(buf)
            fid = dfa.fork_list[d]
            if fid >= 0:  # the lexeme may also close here: every token then starts the next one
                alt = self._after_close(stack, dfa, fid)
                if alt is not None:
                    b |= self.mask_bits(*alt)
        b.setflags(write=False)
        self._masks[key] = b
        if len(self._masks) > self.mask_cache_size:
            self._masks.popitem(last=False)
        return b

    @property
    def _mask_nbytes(self) -> int:
        """Bytes of a packed mask: whole int32 words, ``4 * ceil(vocab / 32)``."""
        return 4 * -(-self.vocab_size // 32)

    def _pack(self, m: np.ndarray) -> np.ndarray:
        """``(vocab,)`` bool -> the packed layout of :meth:`mask_bits` (a new writable array)."""
        b = np.packbits(m, bitorder="little")
        if b.size != self._mask_nbytes:
            b = np.concatenate([b, np.zeros(self._mask_nbytes - b.size, dtype=np.uint8)])
        return b

    def mask_for(self, stack: Stack, d: int) -> np.ndarray:
        """:meth:`mask_bits` unpacked: ``(vocab,)`` bool (read-only).

        The last :data:`BOOL_MASKS` unpacked masks are kept (fewer if ``mask_cache_size`` is smaller),
        so asking twice at one state unpacks once."""
        key = (stack, d)
        cache: OrderedDict[tuple[Stack, int], np.ndarray] | None = self.__dict__.get("_bool_masks")
        if cache is None:
            cache = OrderedDict()
            self._bool_masks = cache
        m = cache.get(key)
        if m is not None:
            cache.move_to_end(key)
            return m
        m = np.unpackbits(self.mask_bits(stack, d), count=self.vocab_size, bitorder="little").view(bool)
        m.setflags(write=False)
        cache[key] = m
        if len(cache) > min(BOOL_MASKS, self.mask_cache_size):
            cache.popitem(last=False)
        return m

    def _after_close(self, stack: Stack, dfa: LexerDFA, fid: int) -> tuple[Stack, int] | None:
        """The state after closing the lexeme at fork ``fid``: the parser fed with the winner (the
        same stack for an ignored one) and the next context's empty lexeme under the fork's guard;
        None if the parser cannot shift the winner."""
        w, guard = dfa.forks[fid]
        ns = stack if dfa.ignore[w] else self.feed(stack, dfa.names[w])
        if ns is None:
            return None
        return ns, self.ctx(self.state_ctx[self._stk_state[ns]]).start_for(guard)

    def _fill(self, m: np.ndarray, stack: Stack, cid: int, node: WalkNode) -> None:
        """OR into ``m`` ``(vocab,)`` bool the tokens of walk ``node`` (context ``cid``) allowed at parser
        stack ``stack``: those ending inside a lexeme that can still close as a terminal the parser can
        shift, and, through each fork the parser can take, the same of the fork's child walk (walked on
        first use).  Iterative over the walk tree; a node's forks are read from :attr:`WalkNode.plan`
        (made on first use) and its few end tokens are checked one by one (a compiled call costs more)."""
        hits: list[int] = []
        todo = [(stack, cid, node)]
        feed_memo, allowed_memo, ok_memo = self._feed_memo, self._allowed_memo, self._ok_memo
        stk_state, state_ctx, dfas, share = self._stk_state, self.state_ctx, self._dfas, self._share
        while todo:
            stack, cid, node = todo.pop()
            plan = node.plan
            if plan is None:
                plan = self._plan(node, dfas[cid] or self.ctx(cid))
            n_end, small, groups = plan
            if n_end:
                bits = allowed_memo.get(stack)
                if bits is None:
                    bits = self.allowed_bits(stack)
                okp = ok_memo.get((cid, bits))
                if okp is None or okp[0] != (dfas[cid] or self.ctx(cid)).n_states:
                    okp = self._ok_entry(cid, bits)
                if small is not None:
                    okb = okp[2]
                    hits.extend([t for t, s in small if okb[s]])
                else:
                    self._fill_ends(m, okp[1], node)
            for fid, term, tok, off in groups:
                if term is None:  # an ignored lexeme closes: same parser stack
                    nstack: Stack = stack
                else:
                    fed = feed_memo.get((stack, term), -2)
                    if fed == -2:
                        fed = self._feed_new(stack, term)
                    if fed is None:
                        continue
                    nstack = fed
                ncid = state_ctx[stk_state[nstack]]
                ck = (fid, (dfas[ncid] or self.ctx(ncid)).serial) if share else (fid, ncid)  # _child_key
                child = node.children.get(ck)
                if child is None:
                    guard = (dfas[cid] or self.ctx(cid)).forks[fid][1]
                    child = self._walk(ncid, self.ctx(ncid).start_for(guard), tok, off)
                    node.children[ck] = child
                if child.groups and tok.size <= SUFFIX_MEMO_TOKENS:  # (a leaf costs a memo what it saves)
                    got = self._suffix_fill(nstack, ncid, child, tok)
                    if got is not None:
                        hits.extend(got)
                        continue
                todo.append((nstack, ncid, child))
        if hits:
            m[hits] = True

    def _suffix_fill(self, stack: Stack, cid: int, node: WalkNode, tok: np.ndarray) -> list[int] | None:
        """The tokens of child walk ``node`` (over tokens ``tok``, context ``cid``) allowed at ``stack``,
        from a memo keyed by ``node`` and the LR states on top of ``stack``; None where the memo does not
        serve (the caller fills the walk itself).

        Exact: a miss fills the walk at a *suffix* of the stack — its top ``depth`` states over a
        sentinel (:data:`TRUNCATED`) that raises KeyError when the parser reads it — so a result is
        kept only when it depends on those states alone; on a read below them the node's depth doubles
        (up to :data:`SUFFIX_MAX_DEPTH`, then the node is filled plainly).  A walk reached through a
        repeated terminal (a token of 64 dashes: 64 unary minuses) is then filled once per suffix,
        not once per stack."""
        memo: dict[int, list[Any]] | None = self.__dict__.get("_suffix_memo")
        if memo is None:
            memo = {}
            self._suffix_memo = memo
        entry = memo.get(id(node))
        if entry is None:  # a first fill is plain: most walks of a grammar made per request are filled once
            memo[id(node)] = [SUFFIX_FIRST_DEPTH, {}, node]  # (held: its id is not reused while the entry lives)
            return None
        depth = entry[0]
        if not depth:
            return None
        states, parent = self._stk_state, self._stk_parent
        top: list[int] = []
        s = stack
        while s >= 0 and len(top) < depth:
            top.append(states[s])
            s = parent[s]
        key = tuple(top)
        got = entry[1].get(key)
        if got is not None:
            self.stats["suffix_hits"] = self.stats.get("suffix_hits", 0) + 1
            return got
        if TRUNCATED in key:  # a suffix already (inside another suffix's fill): no memo here
            return None
        t = self._truncated_base()
        for q in reversed(top):
            t = self.push(t, q)
        pool: list[np.ndarray] = self.__dict__.setdefault("_scratch_bufs", [])
        buf = pool.pop() if pool else np.zeros(self.vocab_size, dtype=bool)  # all False: only ``tok`` is set
        try:
            self._fill(buf, t, cid, node)
            got = entry[1][key] = tok[buf[tok]].tolist()
        except KeyError:  # the parser read below the suffix
            entry[0] = depth * 2 if depth * 2 <= SUFFIX_MAX_DEPTH else 0
            got = None
        buf.fill(False)  # (a fill of a child walk sets only ``tok``; cleared whole all the same: ~1 µs)
        pool.append(buf)
        return got

    def _truncated_base(self) -> Stack:
        """The sentinel stack under a suffix: :data:`TRUNCATED` states, one more than the longest rule,
        so that no reduction pops past it unread."""
        longest = getattr(self.table, "longest_rule", None)
        if longest is None:  # (a table from a cache written before it was kept)
            longest = self.table.longest_rule = max(
                (a[1] for acts in self.table.actions.values() for a in acts.values() if a[0] == "r"), default=0)
        s = -1
        for _ in range(longest + 1):
            s = self.push(s, TRUNCATED)
        return s

    def _plan(self, node: WalkNode, dfa: LexerDFA) -> tuple:
        """:attr:`WalkNode.plan` of ``node`` (a walk of ``dfa``), made and kept."""
        small = None
        if 0 < node.n_end <= SMALL_FILL_TOKENS:
            small = tuple(zip(node.end_tok.tolist(), node.end_state.tolist()))
        groups = []
        for fid, (tok, off) in node.groups.items():
            w = dfa.forks[fid][0]
            groups.append((fid, None if dfa.ignore[w] else dfa.names[w], tok, off))
        node.plan = (node.n_end, small, tuple(groups))
        return node.plan

    def _densify(self, node: WalkNode) -> None:
        """Give wide ``node`` its dense arrays (``dense_end``, ``dense_any``, ``end_states``) if it lacks
        any, and drop its sparse ones (:meth:`WalkNode.dense_only`)."""
        if node.base is not None:  # an overlay: its base's arrays serve (_fill_ends)
            return
        if (node.dense_end is None and node.codes is None) or node.end_states is None or node.dense_any is None:
            node.dense_end, node.dense_any, node.end_states = kernels.densify(
                node.end_tok, node.end_state, self.vocab_size)
        node.dense_only()

    def _fill_ends(self, m: np.ndarray, ok: np.ndarray, node: WalkNode) -> None:
        """OR into ``m`` the end tokens of ``node`` whose end state is in ``ok`` ``(n_states,)`` bool."""
        if node.n_end > self._dense_min:
            # an overlay fills its base's ends, then sets its own tokens as they were before that, or
            # ending in an allowed state
            root = node.base if node.base is not None else node
            self._densify(root)
            assert root.end_states is not None and root.dense_any is not None
            assert node.end_states is not None
            ok_end = ok[node.end_states]  # (a superset of the end states of the base's tokens and its own)
            if not ok_end.any():
                return
            over = node.over_tok if node.base is not None else None
            before = m[over] if over is not None else None
            if ok_end.all():
                m |= root.dense_any
            else:
                if kernels.ENABLED:
                    if root.by_state is None:
                        root.by_state = kernels.group_by_state(root.end_tok, root.end_state)
                    kernels.fill_by_state(m, ok, *root.by_state)
                else:
                    m |= ok[root.dense_ends()]
            if over is not None and before is not None and over.size:
                assert node.over_state is not None
                m[over] = before | (ok[node.over_state] & (node.over_state != DEAD))
        elif kernels.ENABLED:
            kernels.fill(m, ok, node.end_tok, node.end_state)
        else:
            m[node.end_tok[ok[node.end_state]]] = True

    # ----------------------------------------------------------------------- scalar transitions
    def hypotheses(self, stack: Stack, d: int) -> list[tuple[Stack, int]]:
        """The lexing hypotheses ``(stack, state)`` a matcher state stands for (itself unless
        ``stack`` is negative, the id of an interned set)."""
        return list(self._multi[-1 - stack]) if stack < 0 else [(stack, d)]

    def _state_of(self, hyps: list[tuple[Stack, int]]) -> tuple[Stack, int]:
        if len(hyps) == 1:
            return hyps[0]
        key = tuple(sorted(hyps))
        i = self._multi_index.get(key)
        if i is None:
            i = len(self._multi)
            self._multi.append(key)
            self._multi_index[key] = i
        return -1 - i, 0

    def step_bytes(self, stack: Stack, d: int, data: bytes) -> tuple[Stack, int] | None:
        """Advance state ``(stack, d)`` over ``data`` with the same semantics as the masks.

        Every lexing hypothesis still alive is carried: at a fork the lexeme both closes (the next
        one starts under the fork's guard) and goes on.  Returns the new state (a negative stack when
        several hypotheses survive), or None when ``data`` makes the prefix non-viable.
        """
        if stack >= 0:  # one hypothesis: the plain automaton walk while only one survives
            dfa = self.ctx(self.state_ctx[self._stk_state[stack]])
            view, forks = dfa.flat_view(), dfa.fork_list
            for i, b in enumerate(data):
                nd = view[(d << 8) | b]
                fid = forks[d]
                if fid >= 0:
                    alt = self._close_at(stack, dfa, fid)
                    if alt is not None:
                        adfa = self.ctx(self.state_ctx[self._stk_state[alt[0]]])
                        ad = adfa.flat_view()[(alt[1] << 8) | b]
                        if ad != DEAD:
                            if nd != DEAD:
                                return self._step_multi([(stack, nd), (alt[0], ad)], data[i + 1:])
                            stack, nd, dfa = alt[0], ad, adfa
                            view, forks = dfa.flat_view(), dfa.fork_list
                if nd == DEAD:
                    return None
                d = nd
            return (stack, d) if self._viable(stack, d) else None
        return self._step_multi(self.hypotheses(stack, d), data)

    def _close_at(self, stack: Stack, dfa: LexerDFA, fid: int) -> tuple[Stack, int] | None:
        """:meth:`_after_close`, memoised by (stack, fork) (the stack fixes the context)."""
        key = (stack, fid)
        try:
            return self._close_memo[key]
        except KeyError:
            r = self._close_memo[key] = self._after_close(stack, dfa, fid)
            return r

    def _step_multi(self, hyps: list[tuple[Stack, int]], data: bytes) -> tuple[Stack, int] | None:
        for b in data:
            nxt: dict[tuple[Stack, int], None] = {}
            for hs, hd in hyps:
                dfa = self.ctx(self.state_ctx[self._stk_state[hs]])
                nd = dfa.flat_view()[(hd << 8) | b]
                if nd != DEAD:
                    nxt[(hs, nd)] = None
                fid = dfa.fork_list[hd]
                if fid >= 0:
                    alt = self._close_at(hs, dfa, fid)
                    if alt is not None:
                        ndfa = self.ctx(self.state_ctx[self._stk_state[alt[0]]])
                        nd = ndfa.flat_view()[(alt[1] << 8) | b]
                        if nd != DEAD:
                            nxt[(alt[0], nd)] = None
            if not nxt:
                return None
            hyps = list(nxt)
        alive = [h for h in hyps if self._viable(*h)]
        if not alive:
            return None
        return self._state_of(alive)

    def next_bytes(self, stack: Stack, d: int) -> np.ndarray:
        """``(256,)`` bool: byte values ``b`` with ``step_bytes(stack, d, bytes([b])) is not None``.

        Vectorised over the 256 bytes with the lexer automaton's transition-table rows: per lexing
        hypothesis, the bytes that go on in the open lexeme and those that start the next one after
        the lexeme closes at a fork, each kept where the new state stays viable (the same test as
        :meth:`step_bytes`).  Jump-forward (:meth:`gad.engine.matcher.Matcher.forced_bytes`) uses it.
        """
        out = np.zeros(256, dtype=bool)
        for hs, hd in self.hypotheses(stack, d):
            dfa = self.ctx(self.state_ctx[self._stk_state[hs]])
            fid = dfa.fork_list[hd]
            alt = self._close_at(hs, dfa, fid) if fid >= 0 else None
            for s, st in [(hs, hd)] + ([alt] if alt is not None else []):
                cid = self.state_ctx[self._stk_state[s]]
                row = self.ctx(cid).table[st]
                out |= self.ok_states(cid, self.allowed_bits(s))[row] | self.ctx(cid).is_start[row]
        return out

    def _viable(self, stack: Stack, d: int) -> bool:
        dfa = self.ctx(self.state_ctx[self._stk_state[stack]])
        if dfa.is_start[d]:
            return True
        return bool(dfa.reach[d] & (self.allowed_bits(stack) | dfa.ignore_bits))

    def is_complete(self, stack: Stack, d: int) -> bool:
        """Is the text read so far a sentence of the grammar (end of input allowed here)?"""
        if stack < 0:
            return any(self.is_complete(hs, hd) for hs, hd in self._multi[-1 - stack])
        dfa = self.ctx(self.state_ctx[self._stk_state[stack]])
        if dfa.is_start[d]:
            return self.accepts_end(stack)
        fid = dfa.fork_list[d]
        if fid < 0:
            return False
        alt = self._after_close(stack, dfa, fid)
        return alt is not None and self.accepts_end(alt[0])

    @property
    def initial_state(self) -> tuple[Stack, int]:
        """The matcher state before any token: ``(stack id 0 = [start state], START)``."""
        return 0, START

    def matcher(self):
        """A fresh per-request :class:`gad.engine.matcher.Matcher`."""
        return Matcher(self)


# ----------------------------------------------------------------------------------- front door
def _tables_of(grammar: Any) -> tuple[ParserTables, Any, str]:
    """(parser tables, grammar object, start symbol) for a gad.Grammar, a Lark object or a path."""
    if isinstance(grammar, lark.Lark):
        return _tables(grammar, grammar.options.start[0]), grammar, grammar.options.start[0]
    if isinstance(grammar, Grammar):
        return grammar.tables, grammar, grammar.start
    if isinstance(grammar, (str, os.PathLike)):
        p = Path(grammar)
        g = Grammar.from_file(p) if p.suffix in (".lark", ".ebnf", ".gbnf") else Grammar.from_string(str(grammar))
        return g.tables, g, g.start
    raise InvalidArgumentError(f"grammar must be a gad.Grammar, a lark.Lark or a path, got {type(grammar).__name__}")


def _tables(obj: Any, start: str) -> ParserTables:
    """``obj`` itself if it is :class:`ParserTables`, else those of ``obj``, a ``lark.Lark`` parser.

    Raises:
        InvalidArgumentError: ``obj`` is not an LALR parser with a contextual lexer."""
    if isinstance(obj, ParserTables):
        return obj
    opts = getattr(obj, "options", None)
    if getattr(opts, "use_bytes", False):
        raise InvalidArgumentError("gad cannot read a Lark grammar built with use_bytes=True: Lark then matches "
                                   "terminals on bytes ('.' is one byte), gad on UTF-8 characters; build it "
                                   "without use_bytes")
    if getattr(opts, "lexer_callbacks", None):
        raise InvalidArgumentError("gad cannot read a Lark grammar with lexer_callbacks: a callback may change a "
                                   "token's type, which no automaton over the text knows; build the parser for "
                                   "gad without them")
    if getattr(opts, "postlex", None) is not None:
        raise InvalidArgumentError("gad cannot read a Lark grammar with a postlexer (postlex=, e.g. an Indenter): "
                                   "the tokens it inserts are not in the text, so no automaton over the text "
                                   "gives the parser's terminals")
    try:
        return ParserTables.from_lark(obj, start)
    except AttributeError:
        raise InvalidArgumentError("gad needs a Lark grammar built with parser='lalr', lexer='contextual'") from None


def _grammar_hash(grammar: Any, tables: ParserTables) -> str:
    h = getattr(grammar, "sha256", None)
    if h:
        return str(h)
    # a lark.Lark parser: its text alone does not say what options made of it (g_regex_flags, start,
    # maybe_placeholders, edited terminals), so the identity is what the engine reads
    terms = [(t.name, t.pattern.type, t.pattern.value, sorted(t.pattern.flags), t.priority) for t in tables.terminals]
    rules = [(str(r.origin), [str(x) for x in r.expansion], r.options.priority) for r in tables.rules]
    ident = repr((tables.source, terms, sorted(tables.ignore), tables.g_regex_flags, rules))
    return hashlib.sha256(ident.encode()).hexdigest()


def default_cache_dir() -> Path:
    """The compile cache's root: ``$GAD_CACHE_DIR`` (``~`` expanded; empty means unset) or ``~/.cache/gad``."""
    return default_cache_root()


def compile(grammar: Any, tokenizer: Any, cache_dir: str | os.PathLike | None | bool = None,
            vocab_size: int | None = None, eos_ids: Sequence[int] | None = None,
            warm: bool | str | None = None) -> CompiledGrammar:
    """Compile ``grammar`` against ``tokenizer``'s vocabulary.

    Args:
        grammar: a ``gad.Grammar``, a ``lark.Lark`` (``parser='lalr', lexer='contextual'``) or a path.
        tokenizer: a Hugging Face tokenizer or a :class:`gad.vocab.Vocabulary`.
        cache_dir: where compiled tables are cached (default ``$GAD_CACHE_DIR`` or ``~/.cache/gad``);
            ``False`` disables the disk cache and the in-process cache (a fresh object every call).
            Otherwise a grammar already compiled against the same vocabulary in this process is
            returned as the same object (its warm walks and masks are shared).
        vocab_size, eos_ids: passed to :meth:`Vocabulary.from_tokenizer` for HF tokenizers.
        warm: ``True``: build every lexer automaton and the token walks from their start states now
            (:meth:`CompiledGrammar.warm`) and write the disk cache (build once: grammar files and
            shipped grammars); ``"automata"``: build every lexer automaton now
            (:meth:`CompiledGrammar.build_automata`) and the token walks on the first mask that needs
            them, writing no cache file (serve per request); ``False``: build both on the first mask
            that needs them (the fastest first mask, then slower first visits of new lexer contexts).
            Default (None): ``"automata"`` for grammars made per request (``Grammar.from_json_schema``,
            ``from_pydantic``, ``from_regex``), ``True`` otherwise.  Masks are the same either way.
            On MaskBench (``benchmarks/bench_schema.py --gad-warm``), ``"automata"`` against ``False``:
            time to first mask p50 +0.3-0.9 ms (~4 against ~3.5 ms), per-mask p99 ~30-40% lower; a
            schema of many contexts (many enums, many objects) pays several ms more at compile and
            gets it back over its masks.
    Returns:
        a :class:`CompiledGrammar`; ``.matcher()`` gives per-request state.
    Raises:
        gad.errors.GrammarError subclasses for bad grammars; TokenizerError for unusable vocabularies;
        InvalidArgumentError for a ``warm`` other than None, True, False or ``"automata"``.
    """
    if warm not in (None, True, False, "automata"):
        raise InvalidArgumentError(f"warm must be None, True, False or 'automata', not {warm!r}")
    with paused_gc():  # (the tables, the automata: see gad.gcpause)
        return _compile(grammar, tokenizer, cache_dir, vocab_size, eos_ids, warm)


def _compile(grammar: Any, tokenizer: Any, cache_dir: str | os.PathLike | None | bool, vocab_size: int | None,
             eos_ids: Sequence[int] | None, warm: bool | str | None) -> CompiledGrammar:
    """:func:`compile`, its arguments checked."""
    tables, gobj, start = _tables_of(grammar)
    vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size=vocab_size, eos_ids=eos_ids)
    if warm is None:
        warm = "automata" if getattr(gobj, "per_request", False) else True
    memo_key = (_grammar_hash(gobj, tables), start, vocab.fingerprint())
    hit = _MEMO.get(memo_key) if cache_dir is not False else None
    if hit is not None:
        return hit.build_automata() if warm == "automata" else hit
    if warm == "automata":
        cg = _compile_uncached(tables, gobj, start, vocab, cache_dir, False).build_automata()
    else:
        cg = _compile_uncached(tables, gobj, start, vocab, cache_dir, bool(warm))
    if cache_dir is not False:
        _MEMO[memo_key] = cg
    while len(_MEMO) > 8:
        _MEMO.pop(next(iter(_MEMO)))
    return cg


# lexer automata shared by the lazily compiled grammars of this process (CompiledGrammar(share=True)),
# by context signature, least recently used first; each holds its token walks (``shared_walks``).
# Kept while there are at most SHARED_DFA_LIMIT of them and their tables and root walks hold at most
# SHARED_DFA_BYTES (most are a few KB: punctuation, keys; a string's walks are ~0.2-0.4 MB each).
# Evicting only costs a later grammar a rebuild: its own grammars keep the automaton.
SHARED_DFA_LIMIT = 4096
SHARED_DFA_BYTES = 128 << 20
_SHARED_DFAS: OrderedDict[tuple, LexerDFA] = OrderedDict()
_SHARED_BYTES = [0]  # what the stored automata hold, by _shared_bytes / _walk_nbytes
_DFA_SERIAL = itertools.count(1)


def _literal_of(t: Any) -> str | None:
    """The one string terminal ``t`` (a Lark ``TerminalDef``) matches, or None (a regex, or flags)."""
    pat = t.pattern
    if pat.flags:
        return None
    if pat.type == "str":
        return str(pat.value)
    return literal_text(pat.value)


class _LiteralIndex:
    """A context's terminals for :meth:`CompiledGrammar._context_cover`'s inertness test: its
    literals in a set and sorted (prefix look-ups in ``O(len(x) + log n)`` instead of a pass over
    them: an object's fixed-order key contexts are ``n`` suffixes of ``n`` keys, so the pairwise
    test was cubic in ``n``), and its other terminals, whose automata are walked."""

    def __init__(self, lits: list[str | None], terms: list[Any]) -> None:
        self.words = {w for w in lits if w is not None}
        self.sorted = sorted(self.words)
        self.lengths = sorted({len(w) for w in self.words})
        self.others = [t for w, t in zip(lits, terms, strict=True) if w is None]

    def inert(self, xs: list[str], cg: CompiledGrammar) -> bool:
        """Every literal of ``xs`` is inert for every terminal here (:func:`_inert`)."""
        for x in xs:
            if any(x[:n] in self.words for n in self.lengths if n <= len(x)):
                return False  # a literal here is a prefix of x (or x itself)
            k = bisect_left(self.sorted, x)
            if k < len(self.sorted) and self.sorted[k].startswith(x):
                return False  # x is a prefix of a literal here
            if not all(_inert(x, None, cg, t) for t in self.others):
                return False
        return True


def _inert(x: str, lit: str | None, cg: CompiledGrammar, t: Any) -> bool:
    """No string of terminal ``t`` (its literal ``lit``, or its automaton) is a prefix of the literal
    ``x`` or has ``x`` as a prefix (:meth:`CompiledGrammar._context_cover`)."""
    if lit is not None:
        return not (x.startswith(lit) or lit.startswith(x))
    a = cg._automaton(t)
    st: Any = a.fsm.initial
    for ch in x:
        st = a.step(st, ch)
        if st < 0:
            return True
        if st in a.fsm.finals:
            return False  # a prefix of x (or x) is a string of t
    return False  # x is a prefix of a string of t (st is live)


def _shared_dfa(terms: list[TerminalAutomaton], ignore: list[bool], unless: dict[int, list[int]], n_main: int,
                universe: list[TerminalAutomaton], build: Any) -> LexerDFA:
    """The process-wide automaton of a context with these terminals (built by ``build()`` on a miss).

    The key holds each terminal's name and regexp, in Lark's order, the ignore flags, the keyword
    ("unless") map and whether any terminal of the grammar names non-ASCII characters (which fixes
    how partial UTF-8 characters are read).  Guards name terminals of other contexts, so a grammar
    whose terminal of some name has another regexp than the one the shared automaton knows gets a
    private automaton instead."""
    _, explicit = universe_index(universe)
    key = (tuple((t.name, t.regexp) for t in terms), tuple(ignore),
           tuple(sorted((k, tuple(v)) for k, v in unless.items())), n_main, explicit)
    dfa = _SHARED_DFAS.get(key)
    if dfa is not None:
        if any(dfa._uni.get(a.name, a.regexp) != a.regexp for a in universe):
            private = build()
            private.serial = next(_DFA_SERIAL)
            return private
        for a in universe:
            dfa._uni.setdefault(a.name, a.regexp)
        _SHARED_DFAS.move_to_end(key)
        return dfa
    dfa = build()
    dfa.serial = next(_DFA_SERIAL)
    _SHARED_DFAS[key] = dfa
    dfa.shared_key = key
    _shared_grew(dfa, dfa.table.nbytes + dfa.fork_ok.nbytes)
    return dfa


def _shared_grew(dfa: LexerDFA, nbytes: int) -> None:
    """Count ``nbytes`` more held by ``dfa`` (its tables, or a root walk it keeps) while it is in the
    shared store, then evict the least recently used automata other than ``dfa`` while the store is
    over :data:`SHARED_DFA_LIMIT` automata or :data:`SHARED_DFA_BYTES` bytes."""
    key = dfa.shared_key
    if key is None or _SHARED_DFAS.get(key) is not dfa:  # (evicted, or private: not counted)
        return
    dfa.shared_bytes += nbytes
    _SHARED_BYTES[0] += nbytes
    while len(_SHARED_DFAS) > 1 and (len(_SHARED_DFAS) > SHARED_DFA_LIMIT or _SHARED_BYTES[0] > SHARED_DFA_BYTES):
        old_key, old = _SHARED_DFAS.popitem(last=False)  # (one step: no iterator another thread could upset)
        if old is dfa:  # (the least recently used itself: kept, first in line)
            _SHARED_DFAS[old_key] = old
            _SHARED_DFAS.move_to_end(old_key, last=False)
            break
        _SHARED_BYTES[0] -= old.shared_bytes
        old.shared_bytes = 0
        old.shared_key = None


def _walk_nbytes(node: WalkNode) -> int:
    """About the bytes of the arrays root walk ``node`` holds itself when made: not its children's
    (made later), nor its base's (an overlay's base is another state's walk, or a uniform walk's chain
    of a few KB), nor a translated walk's codes and token set (held by :data:`_TERM_WALKS`)."""
    shared = ("codes", "dense_any") if node.codes is not None else ()
    total = sum(v.nbytes for k, v in node.__dict__.items() if isinstance(v, np.ndarray) and k not in shared)
    for tok, off in node.groups.values():
        total += tok.nbytes + off.nbytes
    return total


def _patched_sparse(end_tok: np.ndarray, end_state: np.ndarray, fix_t: np.ndarray, fix_s: np.ndarray,
                    drop: np.ndarray | None, add_t: np.ndarray, add_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """End tokens ``end_tok`` ``(n,)`` int32 (ascending) and their states, with tokens ``fix_t`` (among
    them) ending in ``fix_s`` instead, tokens ``drop`` gone and tokens ``add_t`` (not among them) added
    in states ``add_s``: ``(tokens ascending, states)``."""
    if fix_t.size:
        end_state = end_state.copy()
        end_state[np.searchsorted(end_tok, fix_t)] = fix_s
    if drop is not None and end_tok.size:
        at = np.searchsorted(end_tok, drop)
        at = at[(at < end_tok.size) & (end_tok[np.minimum(at, end_tok.size - 1)] == drop)]
        if at.size:
            keep = np.ones(end_tok.size, dtype=bool)
            keep[at] = False
            end_tok, end_state = end_tok[keep], end_state[keep]
    if add_t.size:
        end_tok = np.concatenate([end_tok, add_t])
        end_state = np.concatenate([end_state, add_s])
        srt = np.argsort(end_tok, kind="stable")
        end_tok, end_state = end_tok[srt], end_state[srt]
    return end_tok, end_state


def _add_groups(groups: dict[int, tuple[np.ndarray, np.ndarray]],
                more: dict[int, tuple[list[int], list[int]]], dtype: Any) -> None:
    """Append a scalar walk's fork entries ``more`` (fork -> (tokens, offsets) as lists; tokens as
    ``dtype``) to a vectorised walk's ``groups`` (in place)."""
    for fid, (ts, os_) in sorted(more.items()):
        t_a, o_a = np.asarray(ts, dtype=dtype), np.asarray(os_, dtype=np.int32)
        if fid in groups:
            groups[fid] = (np.concatenate([groups[fid][0], t_a]), np.concatenate([groups[fid][1], o_a]))
        else:
            groups[fid] = (t_a, o_a)


def _chain_node(pt: _PlainTokens, ends: np.ndarray, length: int, rest_tok: np.ndarray, rest_state: np.ndarray,
                dense_min: int) -> WalkNode:
    """The end tokens of a uniform root walk (:meth:`CompiledGrammar._uniform_walk`), no groups: a plain
    token of ``k`` bytes ends in ``ends[k]`` ``(longest + 2,)`` int32 (the chain of states; DEAD past
    ``length`` bytes and for the other tokens), each walked token ``rest_tok`` ``(r,)`` int32 (none of
    them plain) in ``rest_state``.  Wide: an overlay (:class:`WalkNode`) of the walked tokens on a node
    of the plain tokens' shared length codes, whose ``dense_any`` is shared by every chain of that
    length: no array over the vocabulary is made.  Narrow: sparse, ascending."""
    n_plain = int(pt.len_start[length + 1])  # the plain tokens of at most ``length`` bytes
    live = rest_state != DEAD
    order = np.argsort(rest_tok[live], kind="stable")
    rest_tok, rest_state = rest_tok[live][order].astype(np.int32), rest_state[live][order].astype(np.int32)
    n_end = n_plain + rest_tok.size
    if n_end > dense_min:
        states = np.unique(np.concatenate([ends[1:length + 1], rest_state]))  # (read by every fill)
        base = WalkNode(None, None, {}, {}, codes=pt.len_code, by_code=ends, end_states=states,
                        dense_any=pt.live_upto(length), n_dense=n_plain)
        return WalkNode(None, None, {}, {}, base=base, over_tok=rest_tok, over_state=rest_state,
                        end_states=states, n_dense=n_end)
    plain = pt.by_len[:n_plain]
    tok = np.concatenate([plain, rest_tok])
    st = np.concatenate([ends[pt.len_code[plain]], rest_state])
    order = np.argsort(tok, kind="stable")
    return WalkNode(tok[order], st[order], {}, {})


def _join_groups(base: WalkNode, groups: dict[int, tuple[np.ndarray, np.ndarray]], same: set[int],
                 extra: dict[int, tuple[np.ndarray, np.ndarray]]) -> dict[tuple[int, int], WalkNode]:
    """Add a derived walk's own fork entries ``extra`` to ``groups`` (the reference's, filtered; in
    place), and return the reference's child walks still valid: those of the forks in ``same`` (whose
    token sets are the reference's) that ``extra`` left alone."""
    for fid, (t, o) in extra.items():
        if fid in groups:
            same.discard(fid)
            groups[fid] = (np.concatenate([groups[fid][0], t]), np.concatenate([groups[fid][1], o]))
        else:
            groups[fid] = (t, o)
    return {k: v for k, v in base.children.items() if k[0] in same}


class _VocabTrie:
    """A vocabulary's content tokens sorted by their bytes: the tokens sharing a prefix of length ``k``
    are a contiguous range, split by the byte at column ``k`` (sorted within the range), so that a trie
    node is a range and its children are found by bisection (:meth:`CompiledGrammar._trie_walk`).

    Attributes:
        ids: token ids in byte order (list; ``ids_np`` the same as ``(n,)`` int32).
        lens: their lengths in bytes (list; ``lens_np`` the same as ``(n,)`` int64).
        cols: ``cols[k]`` the bytes at position ``k`` of every token (0 past its end), a ``bytes`` of
            length ``n`` (``cols_np`` the same as ``(width + 1, n)`` uint8).
        lex_pos: ``(vocab,)`` int32 each token's position in the order (-1: not a content token).
    """

    def __init__(self, mat: np.ndarray, lens: np.ndarray, content: np.ndarray,
                 tokens: Sequence[bytes | None]) -> None:
        rows = mat[content]
        keys = [cast(bytes, tokens[i]) for i in content.tolist()]
        order = np.asarray(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)
        self.ids_np = content[order].astype(np.int32)
        self.ids: list[int] = self.ids_np.tolist()
        self.lens: list[int] = lens[self.ids_np].tolist()
        self.lens_np = np.asarray(self.lens, dtype=np.int64)
        cols = np.zeros((mat.shape[1] + 1, order.size), dtype=np.uint8)
        cols[: mat.shape[1]] = rows[order].T
        self.cols_np = cols
        self.cols: list[bytes] = [c.tobytes() for c in cols]
        self.lex_pos = np.full(mat.shape[0], -1, dtype=np.int32)  # (vocab,) position in the order, -1: none
        self.lex_pos[self.ids_np] = np.arange(order.size, dtype=np.int32)
        self._levels: _TrieLevels | None = None
        self._nodes: kernels.TrieNodes | None = None
        self._plain: _PlainTokens | None = None

    def nodes(self, vocab_size: int) -> kernels.TrieNodes:
        """The trie node by node for the compiled walks (:class:`gad.engine.kernels.TrieNodes`), built on first use."""
        if self._nodes is None:
            self._nodes = kernels.TrieNodes(self.ids_np, np.asarray(self.lens, dtype=np.int64), self.cols_np, vocab_size)
        return self._nodes

    def plain(self) -> _PlainTokens:
        """The content tokens split by :data:`PLAIN_BYTES` (:class:`_PlainTokens`, built on first use)."""
        if self._plain is None:
            self._plain = _PlainTokens(self)
        return self._plain

    def levels(self, tokens: Sequence[bytes | None]) -> _TrieLevels:
        """The trie by depth (:class:`_TrieLevels`; ``tokens``: the vocabulary's bytes by id), built on first use."""
        if self._levels is None:
            self._levels = _TrieLevels(self, tokens)
        return self._levels


# a walk of the whole vocabulary goes level by level down the byte trie up to the first level with at
# most this many nodes; the few longer tokens then step one by one (SmolLM2: 18 levels, 99,786 of the
# trie's ~100k nodes; 104 of its 49k tokens are longer)
TAIL_NODES = 64


class _PlainTokens:
    """A vocabulary's content tokens made of :data:`PLAIN_BYTES` alone (97% of SmolLM2's: text without a
    quote, backslash or control byte, ASCII), for :meth:`CompiledGrammar._uniform_walk`.

    Attributes:
        longest: the longest plain token's length in bytes.
        len_code: ``(vocab,)`` intp each plain token's length, ``longest + 1`` for every other id.
        others: ``(q,)`` int32 the other content tokens' ids, sorted.
        by_len: ``(p,)`` int32 the plain tokens' ids by length (then id), and ``len_start``
            ``(longest + 2,)`` intp where each length starts: those longer than ``k`` bytes are
            ``by_len[len_start[k + 1]:]``.
    """

    def __init__(self, trie: _VocabTrie) -> None:
        n = trie.lex_pos.size
        tl = np.asarray(trie.lens, dtype=np.intp)  # in the trie's order
        width = int(tl.max()) if tl.size else 0
        # every byte of the token plain, or past its end (cols: the bytes at each position, trie order)
        ok = (_PLAIN_TABLE[trie.cols_np[:width]] | (np.arange(width)[:, None] >= tl[None, :])).all(axis=0)
        plain = np.zeros(n, dtype=bool)
        plain[trie.ids_np] = ok
        lens = np.zeros(n, dtype=np.intp)
        lens[trie.ids_np] = tl
        self.longest = int(lens[plain].max()) if plain.any() else 0
        self.len_code = np.where(plain, lens, self.longest + 1)
        counts = np.bincount(lens[plain], minlength=self.longest + 1)
        self.others = np.sort(trie.ids_np[~plain[trie.ids_np]])
        ids = np.flatnonzero(plain)
        self.by_len = ids[np.argsort(lens[ids], kind="stable")].astype(np.int32)
        self.by_len.setflags(write=False)  # (a uniform walk's fork groups are views of it)
        self.len_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.intp)
        self._upto: dict[int, np.ndarray] = {}

    def live_upto(self, length: int) -> np.ndarray:
        """``(vocab,)`` bool: the plain tokens of at most ``length`` bytes (kept: a chain of that length
        ends exactly those, whatever its states)."""
        r = self._upto.get(length)
        if r is None:
            r = self._upto[length] = self.len_code <= length
            r.setflags(write=False)
        return r


class _TrieLevels:
    """The vocabulary's byte trie stored by depth, for a walk of every content token at once with one
    numpy pass per depth over the trie's *nodes* (distinct prefixes: 100k for SmolLM2's 332k token
    bytes), not over the tokens.

    Tokens are taken in the byte order of :class:`_VocabTrie` (positions ``0..n-1``), where the
    tokens below a node (those that have its prefix) are a contiguous range.  Node ``j`` of depth
    ``p`` (a prefix of ``p + 1`` bytes) is global node ``j`` plus the number of nodes above depth ``p``.

    Attributes:
        depth: the number of depths walked level by level (up to and including the first with at
            most :data:`TAIL_NODES` nodes, or to the longest token).
        byte: ``depth`` arrays ``(n_p,)`` int32, each node's last byte.
        parent: ``depth`` arrays ``(n_p,)`` int32, the global index of each node's parent (depth 0:
            unused, the walk's start state is the parent).
        cont: ``depth`` arrays ``(c_p,)`` int32, the nodes (local index) with tokens below them that
            are longer than the prefix, with ``cont_lo`` / ``cont_hi`` ``(c_p,)`` int64 their range
            of such tokens (positions): a lexeme closing at the node's state passes those tokens.
        ids_sorted: ``(content,)`` int32 the content tokens by id, and ``id_node`` ``(content,)`` int64
            the global node where each ends (``n_nodes``, a scratch entry, for the longer ones).
        long_ids: the tokens longer than ``depth`` bytes (by id), ``long_node`` ``(l,)`` int64 their
            node at depth ``depth - 1`` (the scalar walk takes over at byte ``depth``), and
            ``run_from`` from which byte on each repeats its last byte.
        n_nodes: global nodes in the walked depths.
    """

    def __init__(self, trie: _VocabTrie, tokens: Sequence[bytes | None]) -> None:
        lens = np.asarray(trie.lens, dtype=np.int64)
        cols = trie.cols_np  # (width + 1, n) uint8, bytes past a token's end are 0
        n = lens.size
        lcp = kernels.shared_prefix_lengths(lens, cols)  # bytes token i shares with token i - 1
        width = int(lens.max()) if n else 0
        self.byte: list[np.ndarray] = []
        self.parent: list[np.ndarray] = []
        self.cont: list[np.ndarray] = []
        self.cont_lo: list[np.ndarray] = []
        self.cont_hi: list[np.ndarray] = []
        node_of = np.full(n, -1, dtype=np.int64)  # each token's global node at the previous depth
        end_node = np.full(n, -1, dtype=np.int64)
        off = 0
        depth = 0
        while depth < width:
            alive = np.flatnonzero(lens > depth)  # positions of tokens of more than `depth` bytes
            is_first = (alive == 0) | (lcp[alive] <= depth)  # the first token of a node (a new prefix)
            first_at = np.flatnonzero(is_first)
            starts = alive[first_at]
            n_p = starts.size
            local = np.cumsum(is_first) - 1  # each alive token's node
            self.byte.append(cols[depth, starts].astype(np.int32))
            self.parent.append(node_of[starts].astype(np.int32))
            hi = alive[np.append(first_at[1:], alive.size) - 1] + 1  # past each node's last token
            is_end = lens[alive] == depth + 1  # the tokens that are their node's prefix
            exact = np.bincount(local[is_end], minlength=n_p)
            has = starts + exact < hi
            self.cont.append(np.flatnonzero(has).astype(np.int32))
            self.cont_lo.append((starts + exact)[has])
            self.cont_hi.append(hi[has])
            node_of[alive] = off + local
            ends = alive[is_end]
            end_node[ends] = node_of[ends]
            off += n_p
            depth += 1
            if n_p <= TAIL_NODES:
                break
        self.depth = depth
        self.n_nodes = off
        # content tokens by id, each with its end node (the longer ones: the scratch entry n_nodes)
        by_id = np.argsort(trie.ids_np, kind="stable")
        self.ids_sorted = trie.ids_np[by_id]
        is_long = lens[by_id] > depth
        self.id_node = np.where(is_long, off, end_node[by_id])
        long = by_id[is_long]  # the longer tokens (positions in byte order), by id
        self.long_node = node_of[long]
        self.long_ids: list[int] = trie.ids_np[long].tolist()
        # from which byte on each longer token repeats its last byte (runs of spaces, dashes, ...)
        self.run_from: list[int] = []
        for data in (cast(bytes, tokens[t]) for t in self.long_ids):
            k = len(data) - 1
            while k > 0 and data[k - 1] == data[-1]:
                k -= 1
            self.run_from.append(k)


def dfa_live_moves(dfa: LexerDFA, s: int) -> dict[int, int]:
    """The bytes that do not kill state ``s`` of ``dfa``, ascending, and the state each leads to
    (memoised on the automaton, whose states never change; for an automaton of at most
    :data:`LIVE_MOVES_AT_ONCE` states, every state's at once: one pass over its table)."""
    memo: dict[int, dict[int, int]] = dfa.__dict__.setdefault("_live_moves", {})
    r = memo.get(s)
    if r is None:
        n = dfa.n_states
        if n <= LIVE_MOVES_AT_ONCE:
            at, byte = np.nonzero(dfa.table)
            nxt = dfa.table[at, byte].tolist()
            cuts = np.searchsorted(at, np.arange(n + 1)).tolist()
            byte_l = byte.tolist()
            for q in range(n):
                memo[q] = dict(zip(byte_l[cuts[q]:cuts[q + 1]], nxt[cuts[q]:cuts[q + 1]]))
            r = memo[s]
        else:
            row = dfa.table[s]
            live = np.flatnonzero(row)
            r = memo[s] = dict(zip(live.tolist(), row[live].tolist()))
    return r


LIVE_MOVES_AT_ONCE = 128


_TRIES: dict[tuple[str, tuple[int, ...]], _VocabTrie] = {}

# root walks of states reading one terminal alone, in that terminal's terms (its automaton state,
# whether it has matched, the partial UTF-8 character), shared by every automaton of the process:
# (vocabulary, EOS ids, regexp, explicit non-ASCII, local state) ->
# (ends, codes' local states, [(fork guard's states, tokens, offsets)]), the ends either sparse: (end
# tokens, their state codes), or, for a wide walk, dense: ((vocab,) the stored walk's end state by
# token, 0 where none ends (its own array, shared); each such state's code + 1; (vocab,) bool the tokens
# that end; how many), or a uniform walk's chain (see _keep_term_walk)
TERM_WALK_LIMIT = 128
_TERM_WALKS: dict[tuple, tuple] = {}


def _solo_key(n: int, i: int, st: int, best: int, pend: tuple) -> tuple:
    """The key of the lexer state of ``n`` terminals where terminal ``i`` alone is alive, in automaton
    state ``st``, with first matched terminal ``best`` (-1 or ``i``), no guard, partial character ``pend``."""
    return tuple(st if j == i else -1 for j in range(n)), best, frozenset(), pend


def _one_terminal(dfa: LexerDFA, d: int) -> tuple[int, tuple] | None:
    """``(terminal index, its local state)`` when state ``d`` of ``dfa`` reads one terminal alone —
    no other terminal alive (so no keyword retyping: its targets are dead), no guard, no other
    terminal having matched first, and one the scanner tries (index below ``n_main``) — so that its
    walk depends on that terminal's automaton only; else None."""
    key = dfa.key(d)
    if key is None:
        return None
    main, best, guard, pend = key
    if guard:
        return None
    alive = [j for j, st in enumerate(main) if st >= 0]
    if len(alive) != 1:
        return None
    i = alive[0]
    if best not in (-1, i) or i >= dfa.n_main:  # (a keyword target past n_main never wins alone)
        return None
    return i, (main[i], best == i, pend)

# the byte tables of the vocabularies compiled against in this process, by (fingerprint, EOS ids)
_VOCAB_TABLES: dict[tuple[str, tuple[int, ...]], tuple] = {}

# compiled grammars already built in this process (their warm walks and mask caches are reused)
_MEMO: dict[tuple[str, str, str], CompiledGrammar] = {}


def _cache_identity(key: str, tables: ParserTables, gobj: Any, start: str, vocab: Vocabulary) -> dict[str, Any]:
    """What a compile-cache file must have been built for (checked field by field before use)."""
    return {"key": key, "grammar_sha256": _grammar_hash(gobj, tables), "start": start,
            "vocab_fingerprint": vocab.fingerprint(), "vocab_size": vocab.size, "engine": _code_version()}


def _cache_classes() -> dict[str, type]:
    """The only classes a compile-cache file may instantiate (their attributes are set, nothing is called)."""
    return {"WalkNode": WalkNode, "_ParseTable": _ParseTable, "LexerDFA": LexerDFA}


def _cache_external(tables: ParserTables) -> tuple[Any, Any]:
    """(encode, resolve) for the objects a cache file names instead of storing: Lark terminals (by name,
    from the grammar being compiled) and terminal automata (rebuilt from their name and regexp)."""
    terms = {t.name: t for t in tables.terminals}
    autos: dict[tuple[str, str], TerminalAutomaton] = {}

    def encode(v: Any) -> list | None:
        if isinstance(v, lark.lexer.TerminalDef):
            return ["lark-terminal", v.name]
        if isinstance(v, TerminalAutomaton):
            return ["automaton", v.name, v.regexp]
        return None

    def resolve(x: list) -> Any:
        if len(x) == 2 and x[0] == "lark-terminal" and x[1] in terms:
            return terms[x[1]]
        if len(x) == 3 and x[0] == "automaton" and isinstance(x[1], str) and isinstance(x[2], str):
            a = autos.get((x[1], x[2]))
            if a is None:
                a = autos[(x[1], x[2])] = TerminalAutomaton.build(x[1], x[2])
            return a
        raise cachefile.CacheFileError("unknown external reference")

    return encode, resolve


def _compile_uncached(tables: ParserTables, gobj: Any, start: str, vocab: Vocabulary,
                      cache_dir: str | os.PathLike | None | bool, warm: bool = True) -> CompiledGrammar:
    """Compile, reading / writing the disk cache (a data-only file: :mod:`gad.engine.cachefile`).

    A cache file is used only when its header names this very key, grammar sha256, start symbol,
    vocabulary fingerprint and engine version and its content decodes to a complete compiled grammar;
    anything else (foreign, corrupt, older format — including the pickle files of earlier gad versions) is rebuilt and
    replaced.  An unsafe cache folder (see :func:`gad.engine.cachefile.folder_is_unsafe`) is neither
    read nor written, with one :class:`gad.errors.UnsafeCacheWarning`.  ``warm=False``: no file is
    read or written (nothing heavy is built up front).
    """
    path: Path | None = None
    ident: dict[str, Any] = {}
    if not warm:
        return CompiledGrammar(tables, vocab, gobj, start, share=True)
    if cache_dir is not False:
        base = Path(cache_dir) if isinstance(cache_dir, (str, os.PathLike)) and str(cache_dir) else default_cache_dir()
        folder = base / "compiled"
        if cachefile.warn_if_unsafe(folder, "compile cache"):
            folder = None  # type: ignore[assignment]
        else:
            key = hashlib.sha256(f"{_code_version()}|{_grammar_hash(gobj, tables)}|{start}|{vocab.fingerprint()}"
                                 .encode()).hexdigest()[:32]
            path = folder / f"{key}.npz"
            ident = _cache_identity(key, tables, gobj, start, vocab)
            _tidy_cache_folder(folder)
        if path is not None and path.is_file():
            cg = _load_cached(path, ident, tables, gobj, vocab)
            if cg is not None:
                return cg
    cg = CompiledGrammar(tables, vocab, gobj, start).warm()
    if path is not None:
        save_compiled(cg, path, ident, tables)
    return cg


def _tidy_cache_folder(folder: Path) -> None:
    """Remove temp files of killed runs and the pickle files of older gad versions (never read)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    cachefile.clean_stale_temps(folder, entries=entries)
    for ent in entries:
        if ent.name.endswith(".pkl") and not ent.name.startswith("."):
            try:
                os.unlink(ent.path)
            except OSError:
                pass


def _load_cached(path: Path, ident: dict[str, Any], tables: ParserTables, gobj: Any,
                 vocab: Vocabulary) -> CompiledGrammar | None:
    """The compiled grammar in cache file ``path``, or None when it is not exactly what ``ident`` says."""
    _, resolve = _cache_external(tables)
    try:
        state = cachefile.load(path, ident, _cache_classes(), resolve)
    except (cachefile.CacheFileError, OSError, GadError):
        return None
    if not isinstance(state, dict) or not _STATE_KEYS <= state.keys() or state.get("vocab_size") != vocab.size:
        return None
    cg = CompiledGrammar.__new__(CompiledGrammar)
    cg.__dict__.update(state)
    cg.grammar = gobj
    cg.grammar_sha256 = _grammar_hash(gobj, tables)
    cg.vocab = vocab
    return cg


# attributes every CompiledGrammar has after __init__ (besides grammar / vocab): a cache file
# missing any of them is not used
_STATE_KEYS = frozenset({
    "vocab_size", "eos_ids", "_eos", "table", "_ctx_specs", "state_ctx", "_automata", "_dfas",
    "_bytes", "_lens", "_content", "_first", "_first_hist", "_by_first", "_first_off", "_roots",
    "_stk_parent",
    "_stk_state", "_stk_index", "_feed_memo", "_multi", "_multi_index", "_close_memo", "_allowed_memo", "_shift_memo", "_local_memo", "_groups_memo",
    "_ok_memo", "_masks", "mask_cache_size", "_dense_min", "stats", "_share"})


def save_compiled(cg: CompiledGrammar, path: Path, identity: dict[str, Any], tables: ParserTables) -> bool:
    """Write the compiled tables to ``path`` as a data-only cache file (atomic: temp file + rename).

    Returns False (and writes nothing) when the folder cannot be written or the tables hold something
    the data-only format cannot represent; the compile itself is unaffected.
    """
    # the live-matcher count belongs to this process: a loaded grammar starts with none
    state = {k: v for k, v in cg.__dict__.items() if k not in ("grammar", "vocab", "grammar_sha256", "_n_matchers")}
    state["_masks"] = OrderedDict()
    state["_ok_memo"] = {}  # per-state bits, quick to remake (and bytes, which the format does not take)
    state.pop("_suffix_memo", None)  # keyed by walk nodes: remade on use
    state.pop("_scratch_bufs", None)
    state.pop("_bool_masks", None)
    encode, _ = _cache_external(tables)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        cachefile.save(path, identity, state, _cache_classes(), encode)
    except (OSError, cachefile.Unencodable):
        return False
    return True
