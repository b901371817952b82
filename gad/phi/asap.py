"""ASAp: adaptive sampling with approximate expected futures (BRIEF §3.3).

Park et al., "Grammar-Aligned Decoding", NeurIPS 2024, arXiv 2405.21047.

The estimator keeps a trie over the token prefixes sampled so far.  A node ``u`` stores only what
sampling needs:

* ``M(u) = Σ_t p(t|u) · mask(u)[t]`` — the allowed next-token mass (EOS included when allowed),
  its EOS part ``E(u)`` and the number of allowed non-EOS tokens with ``p > 0``, recorded the first
  time the sampler asks for ``Φ̂`` at ``u``;
* for every *visited* child ``c = u·t``: ``p(t|u)`` and ``Φ̂(u·t)`` (the child's own node);
* running sums over visited children: ``V(u) = Σ p(c|u)`` and ``S(u) = Σ p(c|u) Φ̂(u·c)``.

Unexplored allowed children count ``Φ̂ = 1``, masked children ``0``, an allowed EOS ``1``.  After each
sample the path is walked leaf → root and ``Φ̂(u) = (M(u) − V(u)) + S(u)``, which equals
``Σ_t p(t|u) Φ̂(u·t) = M(u) − Σ_{visited c} p(c|u)(1 − Φ̂(u·c))`` (BRIEF §3.3) and costs O(1) per
node, so one update costs O(sample length).

Numerics: the brief's form ``M − Σ p(1 − Φ̂)`` cancels catastrophically when a child's ``Φ̂`` is tiny
(a forced chain of unlikely tokens gives ``M − p + pΦ̂`` = 0 in float64), so the unexplored mass
``M − V`` and the explored mass ``S`` are kept apart: once every allowed child is visited the unexplored
mass is exactly ``E(u)``, and ``S`` is re-summed over the children (O(children)) whenever it has fallen
below half of its value at the last re-sum — S only decreases, so that happens at most ~log2 of its
dynamic range times per node, and between re-sums the running update's rounding error stays within
a few ulps (a fixed 10^-8 cancellation threshold let the error grow by 10^8 per update on forced
chains of improbable tokens, leaving Φ̂ above the true sum of its children for good).  Values below
float64's range (≈ 10^-308, i.e. a grammatical mass under e^-709) underflow to 0.  ``Φ̂`` never
increases (each update only lowers children) and converges to the exact ``Φ`` once every node reachable
with positive probability has been visited.

No vocabulary-sized array is stored per node: the trie is a struct of flat ``array`` columns
(``parent``, ``token``, ``p``, ``phi``, ``mass``, ``eos``, ``nallow``, ``vsum``, ``ssum``, a visited-child
count and a first-child / next-sibling list) plus one ``dict`` from ``(node, token)`` to the child
index — about 200 bytes per node (see ``benchmarks/bench_asap.py``).

**Batching.**  ``Φ̂`` only changes in :meth:`AsapPhi.observe`, which the sampler calls after each batch,
so every sample of a batch of ``B`` is drawn with the estimates as they stood when the batch started.
``B = 1`` is exactly the paper's sequential algorithm.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from filelock import FileLock, Timeout

from gad.engine import cachefile
from gad.errors import InvalidArgumentError, TrieFormatError
from gad.phi.base import PhiEstimator
from gad.phi.trie import PhiTrie
from gad.phi.trie_io import check_identity, load_trie, save_trie, trie_header


def _stamp(path: str) -> tuple[Any, ...]:
    """(inode, size, mtime ns, the header's write id) of a trie file: changes whenever another process
    replaces it (the write id even when the inode is reused within the file system's time granularity;
    an unreadable header gives a stamp equal to no other, so the file is re-read and its error raised)."""
    st = os.stat(path)
    try:
        wid = trie_header(path).get("write_id")
    except (OSError, TrieFormatError):
        wid = object()
    return st.st_ino, st.st_size, st.st_mtime_ns, wid


class AsapPhi(PhiEstimator):
    """The ASAp Φ estimator (Park et al., NeurIPS 2024, arXiv 2405.21047; BRIEF §3.3).

    Args:
        trie: an in-memory :class:`PhiTrie`, a path (loaded if the file exists, written by
            :meth:`flush`), or None for a fresh in-memory trie.
        identity: what the estimates are conditioned on (model id, grammar hash, prompt hash,
            decoding settings, vocabulary size); a trie bound to a different identity is refused.
        eos_ids: EOS token ids (never stored as trie nodes: ``Φ̂(u·EOS) = 1``).
        cache: how many recent prefix → node lookups to keep.
        pending: how many parents' next-token distributions (one ``(vocab,)`` copy each) to keep until
            their sampled child is created; must exceed the batch size (memory: at most
            ``pending × vocab × 8`` bytes).

    Raises:
        TrieMismatchError: ``trie`` was built for another model, grammar, prompt or setting.
        TrieFormatError: ``trie`` is a path to a truncated / corrupted / unknown-version file.
    """

    name = "asap"

    def __init__(self, trie: PhiTrie | str | os.PathLike[str] | None = None, *,
                 identity: dict[str, Any] | None = None, eos_ids: Sequence[int] = (),
                 cache: int = 4096, pending: int = 128) -> None:

        self.path: str | None = None
        self._stamp: tuple[Any, ...] | None = None  # the trie file as this process last saw it
        self.identity = dict(identity or {})
        if trie is None:
            self.trie = PhiTrie(self.identity)
        elif isinstance(trie, PhiTrie):
            if trie.identity:
                check_identity(trie.identity, self.identity, where="in-memory trie")
            else:
                trie.identity = dict(self.identity)
            self.trie = trie
        elif isinstance(trie, (str, os.PathLike)):
            self.path = os.fspath(trie)
            if os.path.isdir(self.path):
                raise InvalidArgumentError(f"trie: {self.path} is a directory, not a trie file")
            # temp files of this trie left by killed runs (``.<name>.pid<N>.…``, see gad.fileio)
            cachefile.clean_stale_temps(os.path.dirname(os.path.abspath(self.path)),
                                        prefix=f".{os.path.basename(self.path)}.pid")
            if os.path.exists(self.path):
                # the stamp must be that of the version read: another run may replace the file while it
                # is read (its samples would be overwritten at the next flush); read until it holds still
                for _ in range(100):
                    before = _stamp(self.path)
                    self.trie = load_trie(self.path, expected=self.identity)
                    self._stamp = _stamp(self.path)
                    if self._stamp == before:
                        break
            else:
                self.trie = PhiTrie(self.identity)
        else:
            raise InvalidArgumentError(f"trie must be a PhiTrie, a path or None, got {type(trie).__name__}")
        self.eos = frozenset(int(e) for e in eos_ids)
        self._eos_arr = np.asarray(sorted(self.eos), dtype=np.int64)
        self._cap = max(64, int(cache))
        self._pending_cap = max(8, int(pending))
        self._recent: dict[tuple[int, ...], int] = {}
        self._pending: dict[int, np.ndarray] = {}
        self._synced = self.trie.samples  # samples already in the file (learnt here or merged from it)
        self.merged_samples = 0  # samples other processes added to the file, merged in by flush()

    # --- PhiEstimator ---------------------------------------------------------------------------

    def child_phi(self, prefix: Sequence[int], logp: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``Φ̂(prefix·t)`` for every token: ``(vocab,)`` float64 in ``[0, 1]``.

        ``mask`` as float, with every visited child overwritten by its current ``Φ̂``.  Also expands the
        node of ``prefix`` (records ``M``) and keeps a copy of ``log p(·|prefix)`` until
        the chosen child is created (a bounded LRU of ``pending`` entries).

        Args:
            prefix: ids generated after the prompt.
            logp: ``log p(·|prefix)``, ``(vocab,)`` float64, nats, whole vocabulary, temperature 1.
            mask: ``(vocab,)`` bool grammar mask at ``prefix``.
        Raises:
            InvalidArgumentError: shapes disagree, or ``prefix``'s parent was never expanded by
                ``child_phi`` (its ``p(t|u)`` is unknown).
        """
        logp = np.asarray(logp)
        mask = np.asarray(mask, dtype=bool)
        if logp.shape != mask.shape or logp.ndim != 1:
            raise InvalidArgumentError(f"logp {logp.shape} and mask {mask.shape} must both be (vocab,)")
        key = tuple(map(int, prefix))
        node = self._node_for(key)
        trie = self.trie
        if math.isnan(trie.mass[node]):
            pv = np.exp(logp[mask])
            pe = np.exp(logp[self._eos_arr[mask[self._eos_arr]]])
            trie.expand(node, float(pv.sum()), float(pe.sum()),
                        int(np.count_nonzero(pv > 0)) - int(np.count_nonzero(pe > 0)))
        self._remember(self._pending, node, logp.copy(), self._pending_cap)
        out = mask.astype(np.float64)
        phi, tok = trie.phi, trie.token
        for c in trie.children(node):
            t = tok[c]
            if mask[t]:
                out[t] = phi[c]
        return out

    def observe(self, tokens: Sequence[int], finished: bool) -> None:
        """Learn from one sample: walk its path leaf → root, O(1) per node (EOS is not a node)."""
        trie = self.trie
        nodes = [0]
        u = 0
        for t in tokens:
            t = int(t)
            if t in self.eos:
                break
            u = trie.child(u, t)
            if u < 0:
                break
            nodes.append(u)
        trie.update_path(nodes)
        trie.samples += 1

    def flush(self) -> None:
        """Persist the trie when it was given as a path, merging what other processes saved meanwhile.

        Under an exclusive lock (``filelock`` on ``<path>.lock``), the file is re-read if it changed since
        this process last read or wrote it, its prefixes are merged into this trie (:meth:`PhiTrie.merge`;
        its sample count plus the samples learnt here since the last flush), and the result is written
        atomically (temp file + fsync + rename).  The merged trie equals, node by node, one trie that
        learnt from all the samples of all the processes (Φ̂ depends only on the set of visited prefixes,
        see :meth:`PhiTrie.recompute`).  Safe to call repeatedly (checkpoints).

        Raises:
            OSError: the folder is missing or not writable, or the lock cannot be taken (the in-memory
                trie is kept; the message names the trie file, not a temporary one).
            TrieFormatError / TrieMismatchError: the file was replaced by something else meanwhile.
        """
        if self.path is None:
            return
        self.trie.repair()  # (a node creation an interrupt cut short, while sampling: undone)
        path = self.path
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(2, "folder does not exist", folder)
        try:
            lock = FileLock(path + ".lock", timeout=600)
            with lock:
                new_here = self.trie.samples - self._synced
                if os.path.exists(path) and _stamp(path) != self._stamp:
                    disk = load_trie(path, expected=self.identity)
                    self.trie.merge(disk)
                    self.merged_samples += max(disk.samples - self._synced, 0)
                    self.trie.samples = disk.samples + new_here
                else:
                    self.trie.recompute()
                self._recent.clear()
                save_trie(self.trie, path)
                self._stamp = _stamp(path)
                self._synced = self.trie.samples
        except Timeout as exc:
            raise OSError(f"{path}: another process holds the trie's lock ({path}.lock) for over 600 s") from exc
        except OSError as exc:
            if isinstance(exc, PermissionError) or exc.filename not in (None, path):
                raise OSError(exc.errno, exc.strerror or str(exc), path) from None
            raise

    # --- internals -----------------------------------------------------------------------------

    def _remember(self, d: dict, key: Any, value: Any, cap: int | None = None) -> None:
        d.pop(key, None)
        d[key] = value
        if len(d) > (cap or self._cap):
            del d[next(iter(d))]

    def _node_for(self, key: tuple[int, ...]) -> int:
        node = self._recent.get(key)
        if node is not None:
            return node
        if not key:
            node = 0
        else:
            parent = self._recent.get(key[:-1])
            if parent is None:
                parent = self.trie.node_of(key[:-1])
            if parent < 0:
                raise InvalidArgumentError(
                    f"ASAp: child_phi was never called at the parent of a prefix of length {len(key)}")
            t = key[-1]
            node = self.trie.child(parent, t)
            if node < 0:
                pend = self._pending.get(parent)
                if pend is None:
                    raise InvalidArgumentError(
                        "ASAp: p(t|u) of a new child is unknown; call child_phi at the parent first "
                        "(or raise the estimator's cache above 4 x batch size)")
                node = self.trie.add_child(parent, t, math.exp(float(pend[t])))
        self._remember(self._recent, key, node)
        return node
