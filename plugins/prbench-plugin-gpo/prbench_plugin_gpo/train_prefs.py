"""Meta-training on a file of labelled per-user preferences (``prbench-gpo train --train FILE``).

This is GPO's own setting: every training user has several labelled pairs. Each step samples
``batch_users`` users; for each, a seeded shuffle of the user's pairs is cut into a **context**
(the first ``m`` pairs, ``m`` drawn from 1 to ``min(context_pairs, n - 1)``: each pair gives a
preferred point, its chosen answer, and a dispreferred point, its rejected answer) and **targets**
(the other pairs' answers). The loss is the config's objective over the target pairs
(:func:`prbench_plugin_gpo.optimise.pair_loss`: Bradley-Terry for ``small``, averaged over every
target pair of the batch; GPO's Gaussian objective for ``paper``).

One network is trained on all users of the file; none of the users it will be evaluated on may be
among them (the scorer checks user ids, normalised, and the pairs' content hashes stored in the
checkpoint, and refuses). At scoring time a user's context is that user's
``preferences`` and the targets are the held-out answers (:mod:`prbench_plugin_gpo.prefs`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prbench.api import Pref
from prbench_plugin_gpo.checkpoint import FORMAT
from prbench_plugin_gpo.config import TrainConfig
from prbench_plugin_gpo.context import DISPREFERRED, PREFERRED, rng_for, target_text
from prbench_plugin_gpo.network import Episode, collate
from prbench_plugin_gpo.optimise import Embed, fit, net_config, new_network, pair_loss
from prbench_plugin_gpo.prefs import pair_hashes, require_preferences, user_pairs

if TYPE_CHECKING:
    from prbench.api import Record


def pair_episode(pairs: Sequence[Pref], rows: dict[str, int], context: Sequence[int],
                 targets: Sequence[int]) -> Episode:
    """An episode whose context is the ``context`` pairs and whose targets are the ``targets``.

    Args:
        pairs: a user's labelled pairs.
        rows: option text -> its row in the embedding matrix.
        context: indices of the context pairs (chosen: preferred; rejected: dispreferred).
        targets: indices of the target pairs (targets ``2k`` chosen, ``2k + 1`` rejected).
    """
    ctx, labels, tgt = [], [], []
    for i in context:
        p = pairs[i]
        ctx += [rows[target_text(p.question, p.chosen)], rows[target_text(p.question, p.rejected)]]
        labels += [PREFERRED, DISPREFERRED]
    for i in targets:
        p = pairs[i]
        tgt += [rows[target_text(p.question, p.chosen)], rows[target_text(p.question, p.rejected)]]
    return Episode(ctx=ctx, ctx_labels=labels, targets=tgt)


def train_on_preferences(
    records: Sequence[Record], config: TrainConfig, embed: Embed, *, source: str = "train file",
    device: str = "cpu", progress: bool = True,
) -> dict[str, Any]:
    """Meta-train one network across the users of a preference file; returns the checkpoint.

    Raises:
        ValueError: a record without ``preferences``, a user with fewer than 2 labelled pairs
            (no context and target to cut), or fewer than 2 users.
    """
    import numpy as np
    import torch

    require_preferences(records, source)
    by_user = user_pairs(records, held_out=True)
    few = sorted(u for u, ps in by_user.items() if len(ps) < 2)
    if few:
        raise ValueError(f"{source}: user(s) {', '.join(map(repr, few[:10]))} have fewer than 2 "
                         "labelled pairs; GPO needs a context and a target per training user")
    if len(by_user) < 2:
        raise ValueError(f"{source}: {len(by_user)} user; meta-training needs at least 2 users")
    users = sorted(by_user)
    texts = sorted({target_text(p.question, a) for ps in by_user.values() for p in ps
                    for a in (p.chosen, p.rejected)})
    rows = {t: i for i, t in enumerate(texts)}
    vectors = np.asarray(embed(texts), dtype=np.float32)
    net = new_network(config, vectors.shape[1], 0, device)
    rng = rng_for(config.seed, "train-prefs")

    def step_loss() -> Any:
        picked = rng.choice(len(users), size=min(config.batch_users, len(users)), replace=False)
        episodes = []
        for u in sorted(int(x) for x in picked):
            pairs = by_user[users[u]]
            order = [int(i) for i in rng.permutation(len(pairs))]
            m = int(rng.integers(1, min(config.context_pairs, len(pairs) - 1) + 1))
            episodes.append(pair_episode(pairs, rows, order[:m], order[m:]))
        n_pairs = torch.tensor([len(e.targets) // 2 for e in episodes], device=device)
        return pair_loss(net, collate(episodes, vectors, device), n_pairs, config)

    state, losses = fit(net, config, step_loss, desc="gpo (train file)", progress=progress)
    dim = int(vectors.shape[1])
    return {
        "format": FORMAT,
        "mode": "train-file",
        "config": dataclasses.asdict(config),
        "net": dataclasses.asdict(net_config(config, dim)),
        "users": {},
        "pair_digests": {},
        "train_users": users,
        # content hashes of every training pair: the scorer refuses evaluated pairs among them
        "train_pair_hashes": sorted(pair_hashes(p for ps in by_user.values() for p in ps)),
        "n_train_pairs": sum(len(ps) for ps in by_user.values()),
        "folds": [{
            "fold": 0, "train_ids": [r.id for r in records], "eval_ids": [],
            "train_users": users, "first_loss": losses[0],
            "final_loss": float(np.mean(losses[-10:])), "state_dict": state,
        }],
        "pool_owners": [],
        "pool_vectors": torch.zeros((0, dim), dtype=torch.float32),
    }
