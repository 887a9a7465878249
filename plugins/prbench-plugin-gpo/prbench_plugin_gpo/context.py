"""How a user's context and the target options are built, and how users are split into folds.

Personalized RewardBench has one labelled pair per user, so GPO's "group's labelled preferences"
cannot come from pairs. A user's context is built from the profile instead:

- **preferred** context points (label 1): the user's own posts (category and text);
- **dispreferred** context points (label 0): posts written by *other training users*, drawn with
  a seeded generator (never posts of a user being evaluated).

The **targets** are (question, answer) options: when meta-training, a training user's chosen
answer (should be preferred) and rejected answer; when scoring, the response in the request.

Users are split into ``k`` folds by a seeded hash of the user key (the record's ``user_id`` field
when the data has one, else its ``id`` -- the benchmark has one record per user). Fold ``i``'s
network is meta-trained only on the records of the other folds; a record of fold ``i`` is scored
only by that network.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from prbench.api import seeded_unit, stable_hash

if TYPE_CHECKING:
    import numpy as np

    from prbench.api import ProfileItem, Record

#: Context labels fed to the network (index into its label embedding).
DISPREFERRED, PREFERRED, TARGET = 0, 1, 2


def post_text(item: ProfileItem) -> str:
    """The text embedded for one profile post."""
    return f"[{item.category}] {item.text}" if item.category else item.text


def target_text(question: str, answer: str) -> str:
    """The text embedded for one (prompt, answer) option."""
    return f"Question: {question}\n\nAnswer: {answer}"


def user_key(record: Record) -> str:
    """The user a record belongs to: its ``user_id`` field, else its id.

    The rule is prbench's (:attr:`prbench.api.Record.user`; ``prbench validate`` checks
    the field).
    """
    return record.user


def assign_folds(keys: Iterable[str], folds: int, seed: int) -> dict[str, int]:
    """Fold of each user key: keys sorted by a seeded hash, then dealt round-robin.

    Raises:
        ValueError: fewer users than folds, or fewer than 2 folds.
    """
    unique = sorted(set(keys), key=lambda k: (seeded_unit("gpo-fold", seed, k), k))
    if folds < 2:
        raise ValueError(f"folds must be at least 2 (k-fold over users), got {folds}")
    if len(unique) < folds:
        raise ValueError(f"{len(unique)} users cannot be split into {folds} folds")
    return {k: i % folds for i, k in enumerate(unique)}


def rng_for(seed: int, *parts: object) -> np.random.Generator:
    """A numpy generator that depends only on ``seed`` and ``parts``."""
    import numpy as np

    return np.random.default_rng(int(stable_hash("gpo", seed, *parts)[:16], 16))


def pick_negatives(
    pool_owners: Sequence[str], allowed: set[str], exclude: str, n: int, rng: np.random.Generator
) -> list[int]:
    """Indices of ``n`` pool posts (fewer if the pool is smaller) owned by allowed other users."""
    candidates = [i for i, owner in enumerate(pool_owners) if owner in allowed and owner != exclude]
    if not candidates or n <= 0:
        return []
    take = min(n, len(candidates))
    return sorted(int(i) for i in rng.choice(candidates, size=take, replace=False))
