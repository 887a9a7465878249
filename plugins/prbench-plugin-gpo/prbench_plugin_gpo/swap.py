"""The context-swap diagnostic: does the network use the user at all?

Every pair the scorer scored is scored again with **another user's context**, and the accuracy
with the user's own context is compared with the accuracy with the swapped one, pair by pair. A
network that ignores its context scores the same either way (a drop of 0); a network that reads
the user loses accuracy when given someone else.

- The partner of each user is fixed by a seeded derangement of the evaluated users (a seeded
  shuffle, each user paired with the next one, the last with the first): never the user's own
  context, the same partner on every run.
- Only the *user's* part of the context is swapped (the preferred posts in k-fold mode, every
  labelled pair in ``--train`` mode); the dispreferred posts of other users drawn for the record
  in k-fold mode stay as they were. The partner's context is the one of its first record (by id)
  in the same task condition.
- Each pair keeps the network(s) that scored it (its fold's, or the ensemble).
- The drop and its interval come from :func:`prbench.api.compare_paired` (paired bootstrap
  over pairs, exact McNemar test); outcomes are strict
  (:func:`prbench.metrics.pair_outcome`).

Only pairs whose two answers were scored in this run are counted (answers read from the score
cache never reach the scorer); which answer is the chosen one comes from label digests
(``record_id -> (digest(chosen), digest(rejected))``), never from the scores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prbench_plugin_gpo.context import rng_for
from prbench_plugin_gpo.network import Episode

if TYPE_CHECKING:
    import numpy as np


@dataclasses.dataclass
class Unit:
    """What the scorer saw of one record under one task condition.

    Attributes:
        user: the record's user.
        folds: the networks that scored it (their mean is the score).
        own_x, own_y: the user's own context points (vectors, labels).
        fixed: per fold, the context points that do not belong to the user (vectors, labels;
            kept when swapping).
        answers: answer digest -> (target vector, score with the own context).
    """

    user: str
    folds: list[int]
    own_x: np.ndarray
    own_y: list[int]
    fixed: dict[int, tuple[np.ndarray, list[int]]]
    answers: dict[str, tuple[np.ndarray, float]] = dataclasses.field(default_factory=dict)


def derangement(users: Sequence[str], seed: int, group: str) -> dict[str, str]:
    """Each user's partner: a seeded shuffle, each paired with the next (never itself).

    Raises:
        ValueError: fewer than 2 users.
    """
    unique = sorted(set(users))
    if len(unique) < 2:
        raise ValueError("a context swap needs at least 2 users")
    order = [unique[int(i)] for i in rng_for(seed, "context-swap", group).permutation(len(unique))]
    return {u: order[(i + 1) % len(order)] for i, u in enumerate(order)}


class ContextSwap:
    """Collects what the scorer saw and computes the diagnostic per task condition.

    Args:
        seed: seeds the derangement and the bootstrap.
        resamples: bootstrap resamples.
    """

    def __init__(self, seed: int = 0, resamples: int = 2000) -> None:
        self.seed = seed
        self.resamples = resamples
        self.units: dict[tuple[str, str], Unit] = {}

    def add(self, group: str, record_id: str, unit: Unit, answer: str, vector: np.ndarray,
            score: float) -> None:
        """Record one scored answer (``answer`` is its digest) of ``record_id`` in ``group``."""
        kept = self.units.setdefault((group, record_id), unit)
        kept.answers[answer] = (vector, float(score))

    def compute(
        self, labels: Mapping[str, Sequence[str]],
        run: Callable[[int, list[Episode], np.ndarray], list[list[float]]],
    ) -> list[dict[str, Any]]:
        """The diagnostic of each group, as JSON-ready dicts with a ``line`` for the summary.

        Args:
            labels: record id -> (digest of the chosen answer, digest of the rejected one).
            run: ``run(fold, episodes, vectors)`` -> the fold network's logits per episode.
        """
        import numpy as np

        from prbench.api import compare_paired, pair_outcome

        out = []
        for group in sorted({g for g, _ in self.units}):
            complete = {
                rid: u for (g, rid), u in sorted(self.units.items())
                if g == group and rid in labels and all(d in u.answers for d in labels[rid][:2])
            }
            users = sorted({u.user for u in complete.values()})
            result: dict[str, Any] = {"group": group, "n_pairs": len(complete),
                                      "n_users": len(users)}
            if len(users) < 2:
                result["skipped"] = "needs pairs of at least 2 users scored in this run"
                result["line"] = f"gpo context-swap [{group}]: not computed ({result['skipped']})"
                out.append(result)
                continue
            partner = derangement(users, self.seed, group)
            donor = {}
            for u in complete.values():  # sorted by record id: a user's first record
                donor.setdefault(u.user, u)
            rows: list[np.ndarray] = []
            start = 0
            jobs: dict[int, list[tuple[str, Episode]]] = {}
            for rid, u in complete.items():
                d = donor[partner[u.user]]
                answers = [u.answers[a][0][None] for a in labels[rid][:2]]
                for fold in u.folds:
                    fixed_x, fixed_y = u.fixed[fold]
                    block = [d.own_x, fixed_x, *answers]
                    rows.append(np.concatenate([b.reshape(-1, u.own_x.shape[-1]) for b in block]))
                    n_ctx = len(d.own_y) + len(fixed_y)
                    jobs.setdefault(fold, []).append((rid, Episode(
                        ctx=list(range(start, start + n_ctx)),
                        ctx_labels=list(d.own_y) + list(fixed_y),
                        targets=[start + n_ctx, start + n_ctx + 1])))
                    start += len(rows[-1])
            vectors = np.concatenate(rows).astype(np.float32)
            swapped: dict[str, list[float]] = {rid: [0.0, 0.0] for rid in complete}
            for fold, items in sorted(jobs.items()):
                logits = run(fold, [e for _, e in items], vectors)
                for (rid, _), (c, r) in zip(items, logits, strict=True):
                    n = len(complete[rid].folds)
                    swapped[rid][0] += c / n
                    swapped[rid][1] += r / n
            own_out, swap_out = {}, {}
            for rid, u in complete.items():
                chosen, rejected = (u.answers[a][1] for a in labels[rid][:2])
                own_out[rid] = pair_outcome(chosen, rejected).correct
                swap_out[rid] = pair_outcome(*swapped[rid]).correct
            cmp = compare_paired(own_out, swap_out, resamples=self.resamples, seed=self.seed)
            drop = cmp.diff
            pct = round(drop.confidence * 100)
            result.update({
                "acc_own": cmp.a, "acc_swapped": cmp.b, "drop": drop.as_dict(),
                "only_own_right": cmp.only_a, "only_swapped_right": cmp.only_b,
                "p_mcnemar": cmp.p_mcnemar, "seed": self.seed,
                "line": (
                    f"gpo context-swap [{group}]: acc {cmp.a:.3f} with the user's own context, "
                    f"{cmp.b:.3f} with another user's ({len(complete)} pairs, {len(users)} users, "
                    f"seeded derangement); drop {drop.value:+.3f}, {pct}% CI "
                    f"[{drop.low:+.3f}, {drop.high:+.3f}] (paired bootstrap, {drop.resamples} "
                    f"resamples, seed {drop.seed}); McNemar p={cmp.p_mcnemar:.3g}"
                ),
            })
            out.append(result)
        return out


__all__ = ["ContextSwap", "Unit", "derangement"]
