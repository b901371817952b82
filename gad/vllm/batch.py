"""Engine-side state of the vLLM plug-in: shared compiled grammars, one matcher per request, batched fill.

:class:`GadBatch` follows vLLM's persistent batch through the ``BatchUpdate`` records vLLM hands to
logits processors (``removed``, then ``added``, then ``moved``; see
``vllm.v1.sample.logits_processor.interface``) and rewrites the logits rows of gad requests in
:meth:`GadBatch.apply`:

1. **Sync.**  Each row's matcher is brought level with the row's output-token list (a live reference
   to vLLM's list).  Normally one appended token is accepted.  When the list no longer extends what
   the matcher consumed — a request preempted and recomputed, tokens discarded after a KV-load
   failure, a list replaced — the matcher rolls back to the common prefix and replays the rest.
   Trailing ``-1`` placeholders (async scheduling) are skipped.
2. **Masks.**  One ``(rows, vocab)`` bool buffer (pinned when vLLM pins memory) receives each row's
   cached mask (a row copy, no Python loop over the vocabulary), and one ``masked_fill_`` applies
   ``-inf`` to every disallowed token of every gad row.  EOS is allowed only when the text is a
   sentence of the grammar (the matcher's mask definition).
3. **ASAp.**  For ``method="asap"`` rows, ``T·log Φ̂(u·t)`` is added (one add for all such rows), with
   ``Φ̂`` from :class:`gad.phi.asap.AsapPhi`.  vLLM applies non-argmax-invariant processors *before*
   temperature scaling, so after its division by ``T`` the row is ``log p(t|u)/T + log Φ̂(u·t)``: the
   weights ``p^(1/T)·Φ̂`` that ``gad.sample`` uses (exact ASAp at ``T = 1``; top-k / top-p then act on
   these weights, as in gad).  ``Φ̂`` is learnt from ``log p`` at temperature 1, as in ``gad.sample``.

Requests without gad arguments are never touched: :meth:`apply` returns the tensor as it came when
no row of the batch is a gad row, and otherwise writes gad rows only.

A request's ASAp trie learns when the request leaves the batch (finished, aborted or preempted: a
preempted request is observed again when it finishes, which only tightens the same bounds).  Tries
are keyed by (model, grammar, prompt ids, temperature/top-k/top-p) as in :func:`gad.phi.estimator_identity`
and kept in memory, or saved under ``trie_dir`` (one file per identity) after every finished request.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from gad.engine.compiler import CompiledGrammar
from gad.engine.compiler import compile as gad_compile
from gad.engine.matcher import Matcher
from gad.engine.vocab import Vocabulary
from gad.errors import GadError
from gad.fileio import default_cache_root
from gad.phi.asap import AsapPhi
from gad.phi.registry import estimator_identity
from gad.vllm.requests import GadRequest, error_message, identity_digest, parse_request, settings_of

log = logging.getLogger("gad.vllm")

__all__ = ["GadBatch", "RowState"]


@dataclass
class RowState:
    """One gad request in the persistent batch.

    Attributes:
        req: the parsed request; compiled: its compiled grammar; matcher: its grammar state.
        out: vLLM's output-token list of the request (a live reference: vLLM appends to it).
        prompt: the prompt's token ids (ASAp keys its trie by them), or None.
        temperature: the request's temperature (ASAp scales ``log Φ̂`` by it).
        phi: the shared ASAp estimator of the request's identity, or None (GCD).
        broken: a token the grammar refuses reached the list (something outside gad chose it): the
            row is then restricted to EOS so that it ends.
        extra_eos: EOS tokens seen after the matcher accepted EOS (``ignore_eos`` requests).
    """

    req: GadRequest | None
    compiled: CompiledGrammar | None
    matcher: Matcher | None
    out: list[int]
    prompt: tuple[int, ...] | None
    temperature: float
    phi: AsapPhi | None = None
    phi_path: str | None = None
    broken: bool = False
    extra_eos: int = 0
    phi_ok: bool = True
    max_tokens: int | None = None
    eos: frozenset[int] = field(default_factory=frozenset)


class GadBatch:
    """The gad rows of vLLM's persistent batch (see the module doc).

    Args:
        vocab: the model's vocabulary as gad sees it (``Vocabulary.from_tokenizer(tok, vocab_size=V)``).
        model_id: names the model in ASAp trie identities (vLLM's ``model_config.model``).
        max_rows: vLLM's ``max_num_seqs`` (the mask buffer's height; it grows if exceeded).
        device: where the logits live; pin_memory: pin the host mask buffer (CUDA).
        trie_dir: where ASAp tries are saved (one file per identity); None keeps them in memory.
        cache_dir: compiled-grammar disk cache (``gad.compile``); default a folder per Lark version under
            gad's cache (compiled tables hold Lark objects, which differ between Lark versions).
        trace: a callable receiving one dict per gad row and step (``grammar``, ``prefix``,
            ``allowed`` = SHA-256 of the packed finite-logit bits, ``n_allowed``) — for tests.
        max_compiled, max_tries: LRU sizes of the compiled-grammar and ASAp-estimator caches.

    Attributes:
        rows: batch index -> :class:`RowState` (gad rows only).
        stats: counters — ``steps`` (apply calls with gad rows), ``rows`` (requests seen), ``row_steps``,
            ``replays`` (matcher resyncs after a list shrank or changed), ``broken`` — and seconds
            (``sync_s`` advancing matchers, ``mask_s`` computing / copying masks, ``asap_s`` the
            ``log Φ̂`` rows, ``fill_s`` the masked fill and bias add).
    """

    def __init__(self, vocab: Vocabulary, model_id: str, max_rows: int = 256, device: Any = "cpu",
                 pin_memory: bool = False, trie_dir: str | os.PathLike[str] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None,
                 trace: Callable[[dict[str, Any]], None] | None = None, max_compiled: int = 64,
                 max_tries: int = 32) -> None:
        import lark

        self.vocab = vocab
        self.vocab_size = vocab.size
        self.model_id = model_id
        self.device = torch.device(device)
        self.pin_memory = bool(pin_memory) and self.device.type == "cuda"
        self.trie_dir = Path(trie_dir) if trie_dir else None
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_root() / "vllm" / f"lark-{lark.__version__}"
        self.trace = trace
        self.rows: dict[int, RowState] = {}
        self._compiled: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._phis: OrderedDict[str, tuple[AsapPhi, str | None]] = OrderedDict()
        self._max_compiled = max_compiled
        self._max_tries = max_tries
        self._eos = frozenset(int(e) for e in vocab.eos_ids)
        self._eos_only = np.zeros(self.vocab_size, dtype=bool)
        self._eos_only[sorted(self._eos)] = True
        self._alloc(max(1, int(max_rows)))
        self.stats: dict[str, float] = {"steps": 0, "rows": 0, "row_steps": 0, "replays": 0, "broken": 0,
                                        "sync_s": 0.0, "mask_s": 0.0, "fill_s": 0.0, "asap_s": 0.0}

    # ------------------------------------------------------------------------------- resources
    def _alloc(self, rows: int) -> None:
        self._buf_t = torch.empty((rows, self.vocab_size), dtype=torch.bool, pin_memory=self.pin_memory)
        self._buf = self._buf_t.numpy()

    def compiled_for(self, req: GadRequest) -> CompiledGrammar:
        """The compiled grammar of ``req`` (compiled once, shared by every request with that grammar)."""
        cg = self._compiled.get(req.key)
        if cg is None:
            cg = gad_compile(req.grammar, self.vocab, cache_dir=self.cache_dir)
            self._compiled[req.key] = cg
            while len(self._compiled) > self._max_compiled:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(req.key)
        return cg

    def _estimator(self, cg: CompiledGrammar, prompt: Sequence[int], params: Any) -> tuple[AsapPhi, str | None]:
        ident = estimator_identity(SimpleNamespace(name=self.model_id), cg, prompt, settings_of(params))
        key = identity_digest(ident)
        hit = self._phis.get(key)
        if hit is not None:
            self._phis.move_to_end(key)
            return hit
        path = str(self.trie_dir / f"{key}.trie") if self.trie_dir is not None else None
        if path is not None:
            self.trie_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
        phi = AsapPhi(path, identity=ident, eos_ids=sorted(self._eos), cache=1 << 16,
                      pending=2 * self._buf.shape[0] + 8)
        self._phis[key] = (phi, path)
        while len(self._phis) > self._max_tries:
            old, _ = self._phis.popitem(last=False)[1]
            old.flush()
        return phi, path

    def estimators(self) -> list[AsapPhi]:
        """The ASAp estimators held in memory (most recently used last)."""
        return [p for p, _ in self._phis.values()]

    # ------------------------------------------------------------------------------ batch state
    def new_row(self, params: Any, prompt: Sequence[int] | None, out: list[int]) -> RowState | None:
        """The state of a request joining the batch, or None when it has no gad arguments.

        Raises:
            GadError: the request's gad arguments are invalid (vLLM validates them in the front end
                first, so this only happens when that hook was bypassed).
        """
        req = parse_request(getattr(params, "extra_args", None))
        if req is None:
            return None
        cg = self.compiled_for(req)
        row = RowState(req=req, compiled=cg, matcher=cg.matcher(), out=out,
                       prompt=None if prompt is None else tuple(int(t) for t in prompt),
                       temperature=float(getattr(params, "temperature", 1.0) or 1.0), eos=self._eos,
                       max_tokens=getattr(params, "max_tokens", None))
        if req.method == "asap":
            row.phi, row.phi_path = self._estimator(cg, row.prompt or (), params)
        self.stats["rows"] += 1
        if out and self.trace is not None:  # a request resumed after preemption: its tokens replay
            self.trace({"event": "resume", "grammar": req.key, "n_tokens": len(out)})
        return row

    def update(self, batch_update: Any) -> None:
        """Apply a vLLM ``BatchUpdate`` (or None): removed, then added, then moved rows.

        A row leaves the batch when its index is in ``removed``, when an added request takes its index,
        or when a one-way move ``a -> b`` lands on it (vLLM condenses the batch that way without listing
        ``b`` as removed).
        """
        if batch_update is None:
            return
        for index in batch_update.removed:
            self._finish(self.rows.pop(index, None))
        for index, params, prompt, out in batch_update.added:
            self._finish(self.rows.pop(index, None))
            try:
                row = self.new_row(params, prompt, out)
            except GadError as exc:  # validated in the front end; never take the engine down
                log.error("gad: request at batch row %d cannot be constrained (%s); it may only end",
                          index, error_message(exc))
                row = None
                self.rows[index] = self._dead_row(out)
            if row is not None:
                self.rows[index] = row
        for a, b, direction in batch_update.moved:
            ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
            if ra is not None:
                self.rows[b] = ra
            if getattr(direction, "name", str(direction)).upper().endswith("SWAP"):
                if rb is not None:
                    self.rows[a] = rb
            else:
                # a one-way move fills a hole: vLLM leaves the request that sat at ``b`` out of
                # ``removed`` (it condenses the batch), so it leaves here
                self._finish(rb)

    def _dead_row(self, out: list[int]) -> RowState:
        """A row whose gad arguments failed in the engine: restricted to EOS so that it ends."""
        return RowState(req=None, compiled=None, matcher=None, out=out, prompt=None, temperature=1.0,
                        broken=True, eos=self._eos)

    def _finish(self, row: RowState | None) -> None:
        """A row leaves the batch.  When its request is done (EOS, or ``max_tokens`` reached) its ASAp
        trie learns from what it generated and is saved; a row that leaves for another reason
        (preempted, not scheduled this step, aborted, stopped by a stop string) teaches nothing, so
        that a request resumed later is not counted twice."""
        if row is None or row.phi is None or not row.phi_ok:
            return
        self._sync(row)
        m = row.matcher
        assert m is not None
        finished = m.is_finished()
        if not (finished or (row.max_tokens is not None and len(row.out) >= row.max_tokens)):
            return
        try:
            row.phi.observe(list(m.tokens), finished)
            if row.phi_path is not None:
                row.phi.flush()
        except (GadError, OSError) as exc:  # a trie that cannot be saved must not stop serving
            log.error("gad: ASAp trie update failed: %s", error_message(exc))
        if not any(r.phi is row.phi for r in self.rows.values()):
            # no live request needs the parents' next-token distributions any more (393 kB each)
            pending = getattr(row.phi, "_pending", None)
            if isinstance(pending, dict):
                pending.clear()

    # ---------------------------------------------------------------------------------- stepping
    def _sync(self, row: RowState) -> None:
        """Bring the row's matcher level with its output list (see the module doc, step 1)."""
        out = row.out
        m = row.matcher
        if m is None:
            return
        toks = m.tokens
        n = len(toks)
        end = len(out)
        while end and out[end - 1] < 0:
            end -= 1
        if end >= n and out[:n] == toks:
            k = n
        else:
            k = 0
            lim = min(n, end)
            while k < lim and out[k] == toks[k]:
                k += 1
            m.rollback(n - k)
            row.extra_eos = 0
            row.broken = False
            self.stats["replays"] += 1
        if row.broken:
            return
        for t in out[k + row.extra_eos:end]:
            t = int(t)
            if m.is_finished() and t in row.eos:
                row.extra_eos += 1
                continue
            if not m.accept_token(t):
                row.broken = True
                self.stats["broken"] += 1
                log.warning("gad: token %d is outside the grammar after %d tokens; the request may only end",
                            t, m.num_tokens)
                return

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Constrain the gad rows of ``logits`` in place and return it.

        Args:
            logits: ``(num_reqs, vocab)`` float32 (vLLM's raw logits, before temperature), row ``i`` =
                persistent-batch index ``i``.
        Returns:
            ``logits`` (the same tensor): gad rows with ``-inf`` on disallowed tokens (and ``+T·log Φ̂``
            for ASAp rows); every other row unchanged.
        """
        if not self.rows:
            return logits
        num = logits.shape[0]
        idx = sorted(i for i in self.rows if i < num)
        if not idx:
            return logits
        if len(idx) > self._buf.shape[0]:
            self._alloc(max(len(idx), 2 * self._buf.shape[0]))
        self.stats["steps"] += 1
        width = logits.shape[1]
        vs = self.vocab_size
        if width < vs:
            raise GadError(f"gad: logits have {width} columns, the model's vocabulary {vs}")
        buf = self._buf
        asap: list[int] = []
        rows = [self.rows[i] for i in idx]
        st = self.stats
        t0 = time.perf_counter()
        for row in rows:
            self._sync(row)
        t1 = time.perf_counter()
        for j, row in enumerate(rows):
            m = row.matcher
            if m is None or row.broken or m.is_finished():
                buf[j] = self._eos_only
            else:
                buf[j] = m.mask_view()
                if row.phi is not None and row.phi_ok:
                    asap.append(j)
        n = len(idx)
        t2 = time.perf_counter()
        allowed = self._buf_t[:n]
        if allowed.device != logits.device:
            allowed = allowed.to(logits.device, non_blocking=True)
        contiguous = idx[-1] == n - 1
        index = None if contiguous else torch.tensor(idx, device=logits.device)
        sub = logits[:n, :vs] if index is None else logits[index, :vs]
        bias = self._log_phi(sub, rows, asap, buf) if asap else None
        t3 = time.perf_counter()
        sub.masked_fill_(~allowed, float("-inf"))
        if bias is not None:
            sel = torch.tensor(asap, device=logits.device)
            sub[sel] += bias.to(logits.device)
        if index is not None:
            logits[index, :vs] = sub
        if width > vs:
            logits[torch.tensor(idx, device=logits.device), vs:] = float("-inf")
        t4 = time.perf_counter()
        st["sync_s"] += t1 - t0
        st["mask_s"] += t2 - t1
        st["asap_s"] += t3 - t2
        st["fill_s"] += t4 - t3
        st["row_steps"] += n
        if self.trace is not None:
            self._emit_trace(rows, sub)
        return logits

    def _log_phi(self, sub: torch.Tensor, rows: list[RowState], asap: list[int], buf: np.ndarray) -> torch.Tensor:
        """``T·log Φ̂(u·t)`` for the ASAp rows ``asap`` of ``sub`` (still unmasked): ``(len(asap), vocab)``
        float32, ``-inf`` where ``Φ̂ = 0`` (step 3 of the module doc)."""
        sel = torch.tensor(asap, device=sub.device)
        logp = torch.log_softmax(sub[sel].double(), dim=-1).cpu().numpy()  # nats, temperature 1
        bias = np.zeros((len(asap), sub.shape[1]), dtype=np.float32)
        for r, j in enumerate(asap):
            row = rows[j]
            try:
                phi = row.phi.child_phi(row.matcher.tokens, logp[r], buf[j])  # type: ignore[union-attr]
            except GadError as exc:  # e.g. a replayed prefix whose parent distribution was dropped
                log.warning("gad: ASAp estimate unavailable (%s); this request continues as GCD",
                            error_message(exc))
                row.phi_ok = False
                continue
            with np.errstate(divide="ignore"):
                bias[r] = row.temperature * np.log(phi)
        return torch.from_numpy(bias)

    def _emit_trace(self, rows: list[RowState], after: torch.Tensor) -> None:
        fin = torch.isfinite(after[:, : self.vocab_size]).cpu().numpy()
        for row, f in zip(rows, fin):
            if row.req is None or row.matcher is None:
                continue
            self.trace({"grammar": row.req.key, "method": row.req.method,  # type: ignore[misc]
                        "prefix": list(row.matcher.tokens), "n_allowed": int(f.sum()),
                        "allowed": hashlib.sha256(np.packbits(f).tobytes()).hexdigest()})


def mask_digest(mask: np.ndarray) -> str:
    """SHA-256 of a ``(vocab,)`` bool mask's packed bits (what the trace records as ``allowed``)."""
    return hashlib.sha256(np.packbits(np.asarray(mask, dtype=bool)).tobytes()).hexdigest()


def jsonl_tracer(path: str | os.PathLike[str]) -> Callable[[dict[str, Any]], None]:
    """A trace callable appending one JSON line per record to ``path`` (flushed each line)."""
    f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the engine

    def emit(rec: dict[str, Any]) -> None:
        f.write(json.dumps(rec) + "\n")
        f.flush()

    return emit

