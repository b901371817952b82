"""The speculative decoding loop under a grammar: draft under the mask, verify against p̃ (BRIEF §4).

Per step (chain mode):

1. the drafter proposes ``d_1 … d_k`` on a fork of the matcher (:mod:`gad.speculative.drafters`);
2. the target scores ``pending · d_1 … d_k`` in **one** ``session.extend`` call (KV cache reused;
   ``pending`` is the token emitted by the previous step, not yet fed);
3. the matcher is advanced along the draft; ``p̃_i ∝ p(·|u·d_<i) · mask · Φ̂(u·d_<i·t)`` with Φ̂ from
   the estimator's ``child_phi``;
4. :func:`gad.speculative.verify.verify_chain` accepts a prefix and emits one more token
   (residual / argmax correction, or the bonus token);
5. rejected positions are rolled back in the matcher (``matcher.rollback``) and in the target's KV
   cache (``session.rollback``).

With ``estimator=IndicatorPhi()`` the output law is the GCD-projected law μ_proj; with the exact Φ it
is μ* (Q*); with ASAp it is the law of ASAp with the trie as it stands (the trie learns from each
finished sample through ``estimator.observe``).  Under the lossless rule the output law equals
non-speculative sampling from the same p̃ (Leviathan et al. 2022, arXiv 2211.17192; Chen et al. 2023,
arXiv 2302.01318; Φ-reweighting: Future Validity, arXiv 2605.07698).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gad.engine.protocols import TokenConstraint
from gad.errors import InvalidArgumentError, TokenRejectedError
from gad.models.base import LanguageModel
from gad.phi.base import IndicatorPhi, PhiEstimator
from gad.phi.registry import make_estimator
from gad.sampling.rng import Rng, as_rng
from gad.speculative.drafters import Drafter, make_drafter
from gad.speculative.stats import AcceptanceRecord
from gad.speculative.tree import parse_tree, tree_sample_one
from gad.speculative.verify import parse_accept, tilted, verify_chain
from gad.types import Sample

_STEP_BASE = 1_000_000  # acceptance-log step ids: sample j uses j * _STEP_BASE + its step number


def _estimator(estimator: PhiEstimator | str | None, lm: LanguageModel, compiled: TokenConstraint,
               prompt_ids: Sequence[int]) -> PhiEstimator:
    if estimator is None:
        return IndicatorPhi()
    if isinstance(estimator, str):
        return make_estimator(estimator, lm, compiled, prompt_ids)
    if not isinstance(estimator, PhiEstimator):
        raise InvalidArgumentError(f"estimator must be a PhiEstimator or a name, got {estimator!r}")
    return estimator


def _rule_name(accept: Any) -> str:
    if accept is None:
        return "lossless"
    return accept if isinstance(accept, str) else getattr(accept, "name", type(accept).__name__)


def speculative_sample(lm: LanguageModel, compiled: TokenConstraint, prompt_ids: Sequence[int], n: int = 1,
                       seed: int | None | Rng = None, max_new_tokens: int = 256,
                       drafter: Any = "forced", draft_k: int = 4, tree: tuple[int, int] | None = None,
                       accept: Any = "lossless", estimator: Any = None, log: bool = False,
                       domain: str | None = None) -> list[Sample]:
    """Draw ``n`` samples with grammar-faithful speculative decoding.

    Args:
        lm: the target :class:`gad.lm.LanguageModel`.
        compiled: a compiled grammar (``.matcher()``, ``.eos_ids``, ``.vocab``).
        prompt_ids: prompt token ids.
        n: number of samples (>= 1).
        seed: int / None, or an :class:`~gad.speculative.verify.Rng` (tests enumerate with one).
        max_new_tokens: budget per sample, EOS included; a sample that hits it has ``finished=False``.
        drafter: a :class:`~gad.speculative.drafters.Drafter`, a draft LanguageModel, or a name
            (``self[:L]``, ``forced``, ``ngram[:N]``, a draft model path).
        draft_k: tokens drafted per step (>= 1).
        tree: ``(m, d)`` for greedy tree decoding (branching ``m``, depth ``d``; see
            :mod:`gad.speculative.tree`); then ``accept`` must be greedy and ``draft_k`` is unused.
        accept: ``"lossless"`` or a relaxed rule (``greedy``, ``additive:δ``, ``multiplicative:α``,
            ``topm:m``, ``typical:ε,δ``; parsed by ``gad.speculative.rules.parse_rule``).
        estimator: Φ̂ source (:class:`gad.phi.base.PhiEstimator` or a name); default
            :class:`~gad.phi.base.IndicatorPhi` (mask only = GCD law μ_proj).
        log: keep per-position acceptance records in ``stats["log"]``.
        domain: label copied into the log records.
    Returns:
        ``n`` :class:`gad.results.Sample` with ``stats``: ``target_passes`` (target forward passes),
        ``drafted``, ``accepted`` (draft tokens), ``steps`` (verification steps), ``bonus`` (steps whose
        draft was accepted whole), ``tokens`` (generated, EOS included), ``passes_per_token``.
    Raises:
        InvalidArgumentError: ``n < 1``, ``draft_k < 1``, ``max_new_tokens < 1``, a bad ``tree``, an
            unknown drafter / rule / estimator.
    """
    if n < 1:
        raise InvalidArgumentError(f"n must be >= 1, got {n}")
    if draft_k < 1:
        raise InvalidArgumentError(f"draft_k must be >= 1, got {draft_k}")
    if max_new_tokens < 1:
        raise InvalidArgumentError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    rng = as_rng(seed)
    est = _estimator(estimator, lm, compiled, prompt_ids)
    dr = make_drafter(drafter, lm, draft_k)
    rule = parse_accept(accept)
    rname = _rule_name(accept)
    eos = tuple(int(e) for e in compiled.eos_ids)
    if tree is not None:

        m_branch, depth = parse_tree(tree)
        if rule is not None and not _is_greedy(rule):
            raise InvalidArgumentError(f"tree decoding is greedy; accept={accept!r} is not supported with tree")
    out: list[Sample] = []
    for j in range(n):
        if tree is not None:
            s = tree_sample_one(lm, compiled, list(prompt_ids), dr, m_branch, depth, est, max_new_tokens,
                                eos, log=log, domain=domain, step_base=j * _STEP_BASE)
        else:
            s = sample_one(lm, compiled, list(prompt_ids), dr, draft_k, rule, est, rng, max_new_tokens,
                           eos, log=log, domain=domain, step_base=j * _STEP_BASE)
        s.method = f"spec-{est.name}"
        s.stats.update(drafter=dr.name, rule="greedy-tree" if tree is not None else rname,
                       draft_k=draft_k if tree is None else None, tree=list(tree) if tree is not None else None)
        est.observe(s.token_ids + ([s.eos_id] if s.finished and s.eos_id is not None else []), s.finished)
        out.append(s)
    return out


def _is_greedy(rule: Any) -> bool:
    name = str(getattr(rule, "name", "") or getattr(rule, "kind", "")).lower()
    return name in ("greedy", "strict", "strict-greedy", "strict_greedy")


def log_records(res: Any, q: np.ndarray, rule: Any, domain: str | None, step: int) -> list[Any]:
    """Acceptance-log rows (:class:`gad.speculative.stats.AcceptanceRecord`) of one verification step.

    One row per verified draft position (entropy, margin, ``KL(p̃‖q)``, the rule's certificate), plus one
    ``bonus=True`` row for the target's own token that ends the step (correction or bonus token).
    """

    rows = []
    for r in res.records:
        i = r.depth - 1
        rows.append(AcceptanceRecord.from_distributions(
            domain or "", step, r.depth, r.token, r.accepted, res.targets[i], q[i],
            rule if rule is not None else None))
    if res.next_token is not None:
        rows.append(AcceptanceRecord(domain=domain or "", step=step, depth=res.n_accepted + 1,
                                     token=int(res.next_token), accepted=True, bonus=True))
    return rows


class ChainDecoder:
    """State of one speculative sample in chain mode: matcher, target session, generated ids.

    Invariant between steps: the matcher has consumed ``gen``; the target session has been fed
    ``gen`` minus ``pending`` (the last emitted token, fed with the next draft); ``cur`` is
    ``log p(· | gen)`` when nothing is pending.  :meth:`step` runs one draft/verify/rollback step.
    """

    def __init__(self, lm: LanguageModel, compiled: TokenConstraint, prompt: list[int], drafter: Drafter, k: int,
                 rule: Any, est: PhiEstimator, rng: Rng, max_new_tokens: int, eos: tuple[int, ...],
                 log: bool = False, domain: str | None = None, step_base: int = 0) -> None:
        self.step_base = step_base
        self.lm, self.compiled, self.prompt, self.drafter = lm, compiled, prompt, drafter
        self.k, self.rule, self.est, self.rng = k, rule, est, rng
        self.max_new_tokens, self.eos, self.log, self.domain = max_new_tokens, eos, log, domain
        self.m = compiled.matcher()
        self.sess = lm.session(prompt)
        drafter.reset()
        self.gen: list[int] = []
        self.pending: list[int] = []
        self.cur: np.ndarray = np.asarray(self.sess.logprobs())[0]
        self.passes = 1
        self.logprob = 0.0
        self.finished = False
        self.done = False
        self.eos_id: int | None = None
        self.drafted = self.accepted = self.steps = self.bonus = 0
        self.records: list[Any] = []

    def step(self, draft_override: tuple[list[int], np.ndarray] | None = None) -> bool:
        """One step; returns False when the sample is complete (EOS, budget or dead end).

        ``draft_override``: ``(tokens, q)`` to verify instead of asking the drafter (tests).
        """
        if self.done or len(self.gen) >= self.max_new_tokens:
            self.done = True
            return False
        m, sess, eos, gen = self.m, self.sess, self.eos, self.gen
        room = self.max_new_tokens - len(gen)
        kk = min(self.k, room - 1)
        draft: list[int] = []
        q = np.zeros((0, 0))
        masks: Any = None
        if draft_override is not None:
            draft, q = [int(t) for t in draft_override[0]][: max(kk, 0)], np.asarray(draft_override[1])
            q = q[: len(draft)]
        elif kk > 0:
            draft, q = self.drafter.propose(m.fork(), self.prompt + gen, kk, self.rng)
            draft = [int(t) for t in draft]
            masks = self.drafter.last_masks
        feed = draft[:-1] if draft and draft[-1] in eos else list(draft)
        to_feed = self.pending + feed
        rows = np.asarray(sess.extend(to_feed)) if to_feed else None
        if to_feed:
            self.passes += 1
        base = len(self.pending)
        cur = self.cur
        self.pending = []

        def lp_at(i: int) -> np.ndarray:
            j = base + i - 1
            return cur if j < 0 or rows is None else rows[j]

        # advance the matcher along the draft (masks from the drafter when it kept them)
        if masks is None or len(masks) != len(draft):
            masks = []
            fed_m = 0
            for t in draft:
                masks.append(np.asarray(m.mask(), dtype=bool))
                if t in eos:
                    break
                if not m.accept_token(t):
                    m.rollback(fed_m)
                    sess.rollback(len(to_feed))
                    raise TokenRejectedError(f"draft token {t} is not allowed by the grammar here")
                fed_m += 1
        else:
            fed_m = m.accept_tokens(feed) if feed else 0
            if fed_m != len(feed):
                m.rollback(fed_m)
                sess.rollback(len(to_feed))
                raise TokenRejectedError(f"drafter {self.drafter.name} proposed a masked token in {feed}")

        def target_at(i: int) -> np.ndarray | None:
            mask = masks[i] if i < len(draft) else np.asarray(m.mask(), dtype=bool)
            lp = lp_at(i)
            phi = self.est.child_phi(gen + draft[:i], lp, mask)
            return tilted(lp, mask, phi)

        res = verify_chain(target_at, draft, q, self.rule, self.rng, eos, log=self.log)
        a = res.n_accepted
        self.steps += 1
        self.drafted += len(draft)
        self.accepted += a
        self.bonus += int(res.bonus and len(draft) > 0)
        if self.log:
            self.records.extend(log_records(res, q, self.rule, self.domain, self.step_base + self.steps))
        # roll back what was rejected: matcher and target KV cache
        n_back = len(feed) - min(a, len(feed))
        if n_back:
            m.rollback(n_back)
            sess.rollback(n_back)
        for i in range(a):
            self.logprob += float(lp_at(i)[draft[i]])
        if a and draft[a - 1] in eos:
            gen.extend(draft[: a - 1])
            self.finished, self.eos_id, self.done = True, draft[a - 1], True
            return False
        gen.extend(draft[:a])
        nt = res.next_token
        if nt is None:  # no allowed token with positive target weight: a dead end
            self.done = True
            return False
        t = nt
        self.logprob += float(lp_at(a)[t])
        if t in eos:
            self.finished, self.eos_id, self.done = True, t, True
            return False
        if not m.accept_token(t):
            raise TokenRejectedError(f"verifier emitted token {t} that the matcher rejects")
        gen.append(t)
        self.pending = [t]
        return len(gen) < self.max_new_tokens

    def result(self) -> Sample:
        """The :class:`gad.results.Sample` of the (finished or truncated) run."""
        text = self.compiled.vocab.decode(self.gen).decode("utf-8", errors="replace")
        n_tok = len(self.gen) + int(self.finished)
        stats: dict[str, Any] = dict(
            target_passes=self.passes, drafted=self.drafted, accepted=self.accepted, steps=self.steps,
            bonus=self.bonus, tokens=n_tok, passes_per_token=self.passes / max(1, n_tok),
            draft_passes=getattr(self.drafter, "passes", None))
        if self.log:
            stats["log"] = self.records
        return Sample(text=text, token_ids=list(self.gen), logprob=self.logprob, finished=self.finished,
                      eos_id=self.eos_id if self.finished else None, stats=stats)


def sample_one(lm: LanguageModel, compiled: TokenConstraint, prompt: list[int], drafter: Drafter, k: int, rule: Any,
               est: PhiEstimator, rng: Rng, max_new_tokens: int, eos: tuple[int, ...],
               log: bool = False, domain: str | None = None, step_base: int = 0) -> Sample:
    """One speculative sample (chain mode); see :func:`speculative_sample` and the module docstring."""
    dec = ChainDecoder(lm, compiled, prompt, drafter, k, rule, est, rng, max_new_tokens, eos, log, domain,
                       step_base)
    while dec.step():
        pass
    return dec.result()
