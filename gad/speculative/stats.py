"""Acceptance logs and statistics for speculative decoding (tree study, arXiv 2604.14682).

A decoder logs one :class:`AcceptanceRecord` per verified draft node (and, optionally, one per bonus
token); :func:`summarize` turns a log into per-domain statistics, :func:`format_table` prints them and
:func:`write_plot` draws acceptance against depth and against target entropy.  Also here: the shipped
domain prompt sets (:func:`load_prompts`) and a small command line::

    python -m gad.speculative.stats LOG.jsonl [--by domain] [--plot acceptance.png]

Conventions
-----------
* ``step`` identifies a verification step (one target forward pass); it must be unique within a
  group (``by``) — a run-wide counter is simplest.  ``depth`` is 1-based (the first drafted token has
  depth 1).  In a tree, ``accepted`` means "on the accepted path".
* A node at depth ``d`` was *reached* iff ``d = 1`` or the step's accepted path has length ``≥ d − 1``
  (exact for chains and for greedy trees, whose accepted nodes form one path).  Acceptance rates and
  α(d) are over reached nodes; nodes logged past the first rejection of a chain are not counted.
* Accepted length of a step = the length ``L`` of its accepted path (largest ``L`` with accepted nodes at
  every depth ``1..L``).  ``mean_accepted`` excludes the bonus token; ``mean_accepted_with_bonus`` adds the
  step's bonus records (``bonus=True``: the token the target itself emits at the end of a step — after a
  full acceptance, and also the correction token after a rejection if the decoder logs it so).  Bonus
  records are excluded from every node statistic.
"""

from __future__ import annotations

import argparse
import json
import math
import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from gad.errors import InvalidArgumentError
from gad.speculative.certificates import TreeCoverage, certificate, kl, tree_certificate
from gad.speculative.rules import AcceptRule, check_distribution, entropy, parse_rule

__all__ = ["AcceptanceRecord", "AcceptanceSummary", "summarize", "format_table", "write_plot",
           "write_records", "read_records", "spearman_rho", "main"]



@dataclass(frozen=True)
class AcceptanceRecord:
    """One verified draft node (or one bonus token) of a speculative run.

    Attributes:
        domain: prompt domain (``code``, ``math``, ``logic``, ``chat``, ``json``, ``sql``, …).
        step: verification-step id (unique within the group summarised).
        depth: 1-based draft position / tree depth (int ≥ 1).
        token: drafted token id.
        accepted: whether the target accepted the node (on the accepted path, for trees).
        entropy: target entropy ``H(p̃)`` at the node, nats (NaN if not logged).
        margin: ``p̃_(1) − p̃_(2)`` (NaN if not logged).
        kl: ``KL(p̃ ‖ q̃)`` in nats (NaN if not logged).
        certificate: the rule's certificate ``C_p`` in nats (:mod:`gad.speculative.certificates`; NaN if
            none, e.g. the lossless rule).
        certified: ``kl < certificate``; computed when left as None (False if either is NaN).
        bonus: True for the target's own token at the end of a step (not a drafted node).
    """

    domain: str
    step: int
    depth: int
    token: int
    accepted: bool
    entropy: float = math.nan
    margin: float = math.nan
    kl: float = math.nan
    certificate: float = math.nan
    certified: bool | None = None
    bonus: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.depth, bool) or not isinstance(self.depth, (int, np.integer)) or self.depth < 1:
            raise InvalidArgumentError(f"depth: must be an int ≥ 1, got {self.depth!r}")
        if isinstance(self.step, bool) or not isinstance(self.step, (int, np.integer)):
            raise InvalidArgumentError(f"step: must be an int, got {self.step!r}")
        if self.certified is None:
            cert = bool(self.kl < self.certificate) if not (math.isnan(self.kl) or math.isnan(self.certificate)) \
                else False
            object.__setattr__(self, "certified", cert)

    @classmethod
    def from_distributions(cls, domain: str, step: int, depth: int, token: int, accepted: bool,
                           p: object, q: object | None = None, rule: object | None = None,
                           bonus: bool = False) -> AcceptanceRecord:
        """Build a record from the target ``p̃`` and drafter ``q`` rows (``(vocab,)`` float64 each).

        Computes entropy (nats), margin ``p_(1) − p_(2)``, ``KL(p‖q)`` (NaN without ``q``) and the rule's
        certificate (:func:`gad.speculative.certificates.certificate`; NaN for ``None`` or the lossless
        rule).  ``rule`` may be an :class:`~gad.speculative.rules.AcceptRule`, a spec string, or a
        :class:`~gad.speculative.certificates.TreeCoverage` (greedy-tree coverage:
        :func:`~gad.speculative.certificates.tree_certificate`, for the children of the node where ``p``
        and ``q`` were taken).

        Raises:
            InvalidArgumentError: invalid distributions, rule text or depth.
        """

        pa = check_distribution(p)
        srt = np.sort(pa)[::-1]
        margin = float(srt[0] - srt[1]) if srt.size > 1 else float(srt[0])
        div = kl(pa, q) if q is not None else math.nan
        r = parse_rule(rule) if isinstance(rule, str) else rule
        if isinstance(r, TreeCoverage):
            cert = tree_certificate(pa, r.m)
        else:
            cert = certificate(pa, r) if isinstance(r, AcceptRule) else math.nan
        return cls(domain=domain, step=step, depth=depth, token=int(token), accepted=bool(accepted),
                   entropy=entropy(pa), margin=margin, kl=div, certificate=cert, bonus=bonus)

    @property
    def has_certificate(self) -> bool:
        """True iff both ``kl`` and ``certificate`` were logged (not NaN)."""
        return not (math.isnan(self.kl) or math.isnan(self.certificate))


@dataclass
class AcceptanceSummary:
    """Statistics of one group (domain) of an acceptance log; see the module docstring for conventions.

    Attributes:
        n_steps: verification steps; n_nodes: drafted nodes logged; n_reached / n_accepted: reached and
        accepted nodes.  acceptance_rate = n_accepted / n_reached (NaN if none reached).
        mean_accepted / mean_accepted_with_bonus: mean tokens per verification step without / with the
        bonus token.  depth_profile: α(d) = P(accepted | reached, depth d), ``{d: α}``; depth_counts: reached
        nodes per depth.  spearman_rho: Spearman ρ(entropy, accepted) over reached nodes (NaN if undefined).
        certified_share_of_accepted: fraction of accepted levels with KL < certificate;
        accepted_share_of_certified: fraction of certified levels accepted (both over reached levels that
        logged a certificate; NaN if there are none).  A level is a (step, depth): one node in a chain,
        the siblings of a tree level (they share the parent's p̃, q and certificate; accepted when one of
        them is).  mean_entropy in nats.
    """

    n_steps: int
    n_nodes: int
    n_reached: int
    n_accepted: int
    acceptance_rate: float
    mean_accepted: float
    mean_accepted_with_bonus: float
    depth_profile: dict[int, float] = field(default_factory=dict)
    depth_counts: dict[int, int] = field(default_factory=dict)
    spearman_rho: float = math.nan
    certified_share_of_accepted: float = math.nan
    accepted_share_of_certified: float = math.nan
    mean_entropy: float = math.nan


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (scipy.stats.spearmanr) of two equal-length sequences.

    NaN pairs are dropped; returns NaN (no warning) with fewer than 2 pairs or a constant input.
    """
    from scipy.stats import spearmanr

    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    ok = ~(np.isnan(xa) | np.isnan(ya))
    xa, ya = xa[ok], ya[ok]
    if xa.size < 2 or np.all(xa == xa[0]) or np.all(ya == ya[0]):
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = spearmanr(xa, ya).statistic
    return float(rho)


def _accepted_path_length(nodes: list[AcceptanceRecord]) -> int:
    depths = {r.depth for r in nodes if r.accepted}
    length = 0
    while length + 1 in depths:
        length += 1
    return length


def _ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def _summarize_group(records: list[AcceptanceRecord]) -> AcceptanceSummary:
    steps: dict[int, list[AcceptanceRecord]] = defaultdict(list)
    for r in records:
        steps[int(r.step)].append(r)
    reached: list[AcceptanceRecord] = []
    lengths: list[int] = []
    lengths_bonus: list[int] = []
    for nodes in steps.values():
        drafted = [r for r in nodes if not r.bonus]
        length = _accepted_path_length(drafted)
        lengths.append(length)
        lengths_bonus.append(length + sum(1 for r in nodes if r.bonus))
        reached.extend(r for r in drafted if r.depth <= length + 1)
    n_nodes = sum(1 for r in records if not r.bonus)
    n_acc = sum(1 for r in reached if r.accepted)
    by_depth: dict[int, list[bool]] = defaultdict(list)
    for r in reached:
        by_depth[int(r.depth)].append(bool(r.accepted))
    profile = {d: float(np.mean(v)) for d, v in sorted(by_depth.items())}
    counts = {d: len(v) for d, v in sorted(by_depth.items())}
    ent = [r.entropy for r in reached]
    rho = spearman_rho(ent, [float(r.accepted) for r in reached])
    # certificates are per level (step, depth): one node in a chain, the m siblings of a tree level, which
    # share their parent's p̃, q and certificate; a level is accepted when one of its nodes is
    levels: dict[tuple[int, int], list[AcceptanceRecord]] = defaultdict(list)
    for r in reached:
        if r.has_certificate:
            levels[(int(r.step), int(r.depth))].append(r)
    acc_c = [any(r.accepted for r in lv) for lv in levels.values()]
    cert_c = [any(r.certified for r in lv) for lv in levels.values()]
    finite_ent = [e for e in ent if not math.isnan(e)]
    return AcceptanceSummary(
        n_steps=len(steps), n_nodes=n_nodes, n_reached=len(reached), n_accepted=n_acc,
        acceptance_rate=_ratio(n_acc, len(reached)),
        mean_accepted=float(np.mean(lengths)) if lengths else math.nan,
        mean_accepted_with_bonus=float(np.mean(lengths_bonus)) if lengths_bonus else math.nan,
        depth_profile=profile, depth_counts=counts, spearman_rho=rho,
        certified_share_of_accepted=_ratio(sum(c for a, c in zip(acc_c, cert_c, strict=True) if a), sum(acc_c)),
        accepted_share_of_certified=_ratio(sum(a for a, c in zip(acc_c, cert_c, strict=True) if c), sum(cert_c)),
        mean_entropy=float(np.mean(finite_ent)) if finite_ent else math.nan,
    )


_FIELDS = {f.name for f in fields(AcceptanceRecord)}


def summarize(records: Iterable[AcceptanceRecord], by: str | None = "domain") -> dict[str, AcceptanceSummary]:
    """Per-group acceptance statistics (tree study, arXiv 2604.14682).

    Args:
        records: acceptance log.
        by: record attribute to group on (default ``"domain"``); None puts everything under ``"all"``.
    Returns:
        ``{group: AcceptanceSummary}`` sorted by group name.
    Raises:
        InvalidArgumentError: ``by`` is not an :class:`AcceptanceRecord` field, or a record is not one.
    """
    if by is not None and by not in _FIELDS:
        raise InvalidArgumentError(f"by: {by!r} is not an AcceptanceRecord field")
    groups: dict[str, list[AcceptanceRecord]] = defaultdict(list)
    for r in records:
        if not isinstance(r, AcceptanceRecord):
            raise InvalidArgumentError(f"records: expected AcceptanceRecord, got {type(r).__name__}")
        groups["all" if by is None else str(getattr(r, by))].append(r)
    return {g: _summarize_group(groups[g]) for g in sorted(groups)}


def _fmt(x: float, spec: str = ".3f") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def format_table(summary: dict[str, AcceptanceSummary], max_depth: int = 5) -> str:
    """Plain-text table, one row per group: steps, reached nodes, rate, mean length without / with the
    bonus token, ρ(entropy, acceptance), certified shares and α(1..max_depth)."""
    depths = list(range(1, max_depth + 1))
    head = ["group", "steps", "nodes", "rate", "len", "len+bonus", "rho(H,acc)", "cert|acc", "acc|cert"]
    head += [f"a({d})" for d in depths]
    rows = [head]
    for g, s in summary.items():
        row = [g, str(s.n_steps), str(s.n_reached), _fmt(s.acceptance_rate), _fmt(s.mean_accepted, ".2f"),
               _fmt(s.mean_accepted_with_bonus, ".2f"), _fmt(s.spearman_rho, "+.3f"),
               _fmt(s.certified_share_of_accepted), _fmt(s.accepted_share_of_certified)]
        row += [_fmt(s.depth_profile.get(d, math.nan)) for d in depths]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    notes = ("rate/a(d): accepted / reached nodes; len: accepted drafted tokens per verification step "
             "(bonus excluded); len+bonus: plus the target's bonus token")
    return "\n".join(lines) + "\n" + notes


def write_plot(records: Iterable[AcceptanceRecord], path: str | Path, by: str = "domain",
               entropy_bins: int = 8) -> Path:
    """Write a PNG (matplotlib, Agg): left α(d) vs depth per group; right acceptance rate vs target
    entropy (nats, quantile bins of reached nodes) per group.  Returns the path written.

    Raises:
        InvalidArgumentError: ``entropy_bins < 1`` or a bad ``by``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if entropy_bins < 1:
        raise InvalidArgumentError(f"entropy_bins: must be ≥ 1, got {entropy_bins}")
    recs = list(records)
    summary = summarize(recs, by=by)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for g, s in summary.items():
        if s.depth_profile:
            ax1.plot(list(s.depth_profile), list(s.depth_profile.values()), marker="o", label=g)
        grp = [r for r in recs if not r.bonus and str(getattr(r, by)) == g]
        length = {st: _accepted_path_length([r for r in grp if r.step == st]) for st in {r.step for r in grp}}
        pts = [(r.entropy, float(r.accepted)) for r in grp
               if r.depth <= length[r.step] + 1 and not math.isnan(r.entropy)]
        if len(pts) >= 2:
            e = np.array([x for x, _ in pts])
            a = np.array([y for _, y in pts])
            edges = np.unique(np.quantile(e, np.linspace(0, 1, entropy_bins + 1)))
            if edges.size >= 2:
                idx = np.clip(np.searchsorted(edges, e, side="right") - 1, 0, edges.size - 2)
                xs = [float(e[idx == i].mean()) for i in range(edges.size - 1) if np.any(idx == i)]
                ys = [float(a[idx == i].mean()) for i in range(edges.size - 1) if np.any(idx == i)]
                ax2.plot(xs, ys, marker="o", label=f"{g} (ρ={_fmt(s.spearman_rho, '+.2f')})")
    ax1.set(xlabel="depth d", ylabel="α(d) = P(accept | reached)", title="acceptance vs depth", ylim=(0, 1.05))
    ax2.set(xlabel="target entropy H (nats)", ylabel="acceptance rate", title="acceptance vs entropy",
            ylim=(0, 1.05))
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# --- record I/O -----------------------------------------------------------------------------------


def write_records(records: Iterable[AcceptanceRecord], path: str | Path) -> None:
    """Write records as JSON lines (NaN written as null)."""
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            d = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(r).items()}
            fh.write(json.dumps(d) + "\n")


def read_records(path: str | Path) -> list[AcceptanceRecord]:
    """Read records written by :func:`write_records` (null → NaN).

    Raises:
        InvalidArgumentError: a line is not a JSON object with the record's fields (names ``path:line``).
    """
    out = []
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                for k in ("entropy", "margin", "kl", "certificate"):
                    if d.get(k) is None:
                        d[k] = math.nan
                out.append(AcceptanceRecord(**d))
            except (json.JSONDecodeError, TypeError, InvalidArgumentError) as exc:
                raise InvalidArgumentError(f"{path}:{i}: not an acceptance record ({exc})") from None
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gad.speculative.stats LOG.jsonl [--by FIELD] [--plot PNG]``: print the table."""
    ap = argparse.ArgumentParser(prog="python -m gad.speculative.stats", description=main.__doc__)
    ap.add_argument("log", help="acceptance log (JSON lines written by write_records)")
    ap.add_argument("--by", default="domain")
    ap.add_argument("--plot", default=None, help="write acceptance-vs-depth/entropy plot here (PNG)")
    ap.add_argument("--max-depth", type=int, default=5)
    args = ap.parse_args(argv)
    recs = read_records(args.log)
    print(format_table(summarize(recs, by=args.by), max_depth=args.max_depth))
    if args.plot:
        print(f"plot written to {write_plot(recs, args.plot, by=args.by)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
