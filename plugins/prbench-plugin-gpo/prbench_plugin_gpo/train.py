"""Meta-training of GPO with k-fold over users, and the ``prbench-gpo`` command.

Two modes, chosen explicitly:

- ``prbench-gpo train --train FILE``: one network meta-trained across the users of a file of
  labelled per-user preferences (:mod:`prbench_plugin_gpo.train_prefs`); evaluated on other users.
- ``prbench-gpo train --data DATA --folds K``: k-fold over the users of the evaluated data itself,
  described below (labelled "trained on benchmark pairs, k-fold" everywhere it is reported).

``prbench-gpo train --data sample --folds 5 --out gpo.pt`` embeds every profile post and every
(question, answer) option once (through prbench's on-disk embedding cache), then trains one
network per fold:
fold ``i``'s network sees only the records of users outside fold ``i`` -- their posts as context,
their chosen/rejected answers as targets, other *training* users' posts as dispreferred context.
Each step samples ``batch_users`` training users, a random number of their posts (0 to
``context_posts``: the neural process learns from contexts of every size, including the empty
one of the no-profile condition) and ``negatives`` posts of other training users; the loss is the
config's objective (:mod:`prbench_plugin_gpo.optimise`: Bradley-Terry for ``small``, GPO's
Gaussian objective for ``paper``).

The checkpoint (one ``torch.save`` file) holds the training settings, the embedder description,
each fold's network with the record ids it was trained on and the ids it must score, and the
embedded posts used as dispreferred context at scoring time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbench_plugin_gpo.checkpoint import FORMAT, load_checkpoint, summary
from prbench_plugin_gpo.config import PRESET_FIELDS, TrainConfig, make_config, make_encoder
from prbench_plugin_gpo.context import (
    DISPREFERRED,
    PREFERRED,
    assign_folds,
    pick_negatives,
    post_text,
    rng_for,
    target_text,
    user_key,
)
from prbench_plugin_gpo.errors import GPOError
from prbench_plugin_gpo.network import Episode, collate
from prbench_plugin_gpo.optimise import Embed, fit, net_config, new_network, pair_loss
from prbench_plugin_gpo.prefs import content_sha256, digest
from prbench_plugin_gpo.train_prefs import train_on_preferences

if TYPE_CHECKING:

    from prbench.api import Record

@dataclasses.dataclass
class _Pool:
    """Deduplicated posts: owner user key and text, in first-seen order."""

    owners: list[str] = dataclasses.field(default_factory=list)
    texts: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def of(cls, records: Sequence[Record]) -> _Pool:
        pool, seen = cls(), set()
        for r in records:
            key = user_key(r)
            for item in r.profile:
                text = post_text(item)
                if (key, text) not in seen:
                    seen.add((key, text))
                    pool.owners.append(key)
                    pool.texts.append(text)
        return pool


def train_fold(
    train_records: Sequence[Record], config: TrainConfig, fold: int, embed: Embed,
    device: str = "cpu", progress: bool = True,
) -> tuple[dict[str, Any], list[float]]:
    """Meta-train one network on ``train_records`` only; returns its state dict and losses.

    Nothing but ``train_records`` (and the config) reaches the network: the context pool, the
    targets and the sampling all come from them.
    """
    import numpy as np
    import torch

    keys = [user_key(r) for r in train_records]
    pool = _Pool.of(train_records)
    targets = [target_text(r.question, a) for r in train_records for a in (r.chosen, r.rejected)]
    vectors = np.asarray(embed(pool.texts + targets), dtype=np.float32)
    n_pool = len(pool.texts)
    own: dict[str, list[int]] = {}
    for i, owner in enumerate(pool.owners):
        own.setdefault(owner, []).append(i)
    allowed = set(keys)
    net = new_network(config, vectors.shape[1], fold, device)
    rng = rng_for(config.seed, "train", fold)

    def step_loss() -> Any:
        users = rng.choice(len(train_records), size=min(config.batch_users, len(keys)),
                           replace=False)
        episodes = []
        for u in sorted(int(x) for x in users):
            mine = own.get(keys[u], [])
            k = int(rng.integers(0, min(len(mine), config.context_posts) + 1))
            pos = sorted(int(x) for x in rng.choice(mine, size=k, replace=False)) if k else []
            neg = pick_negatives(pool.owners, allowed, keys[u], config.negatives, rng)
            episodes.append(Episode(
                ctx=pos + neg, ctx_labels=[PREFERRED] * len(pos) + [DISPREFERRED] * len(neg),
                targets=[n_pool + 2 * u, n_pool + 2 * u + 1],
            ))
        batch = collate(episodes, vectors, device)
        return pair_loss(net, batch, torch.ones(len(episodes), dtype=torch.long,
                                                device=device), config)

    return fit(net, config, step_loss, desc=f"gpo fold {fold}", progress=progress)


def train_gpo(
    records: Sequence[Record], config: TrainConfig, embed: Embed, *, device: str = "cpu",
    progress: bool = True, only_folds: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Train every fold's network; returns the checkpoint dictionary.

    Args:
        records: the training data (every record is evaluated by exactly one fold).
        config: the training settings.
        embed: texts -> float32 vectors (an Encoder's ``encode``).
        device: torch device of the network.
        progress: show a progress bar per fold.
        only_folds: train only these folds (tests); the others are left out of the checkpoint.

    Raises:
        ValueError: duplicate record ids, or fewer users than folds.
    """
    from collections import Counter

    import numpy as np
    import torch

    dup = sorted(i for i, n in Counter(r.id for r in records).items() if n > 1)
    if dup:
        raise ValueError(f"duplicate record ids in the training data: {dup[:5]}")
    keys = {r.id: user_key(r) for r in records}
    fold_of = assign_folds(keys.values(), config.folds, config.seed)
    folds = []
    for fold in range(config.folds):
        if only_folds is not None and fold not in only_folds:
            continue
        train = [r for r in records if fold_of[keys[r.id]] != fold]
        state, losses = train_fold(train, config, fold, embed, device=device, progress=progress)
        folds.append({
            "fold": fold,
            "eval_ids": [r.id for r in records if fold_of[keys[r.id]] == fold],
            "train_ids": [r.id for r in train],
            "train_users": sorted({keys[r.id] for r in train}),
            "final_loss": float(np.mean(losses[-10:])),
            "first_loss": losses[0],
            "state_dict": state,
        })
    pool = _Pool.of(records)
    pool_vectors = np.asarray(embed(pool.texts or ["(no posts)"]), dtype=np.float32)
    dim = int(pool_vectors.shape[1])
    if not pool.texts:
        pool_vectors = pool_vectors[:0]
    return {
        "format": FORMAT,
        "mode": "kfold",
        "config": dataclasses.asdict(config),
        "net": dataclasses.asdict(net_config(config, dim)),
        "users": keys,
        # which answer is the chosen one, by digest: read by the context-swap diagnostic only
        "pair_digests": {r.id: [digest(r.chosen), digest(r.rejected)] for r in records},
        "folds": folds,
        "pool_owners": pool.owners,
        "pool_vectors": torch.from_numpy(pool_vectors),
    }


def _optional(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return None if text.strip().lower() in ("", "none") else kind(text)

    parse.__name__ = kind.__name__
    return parse


def _flag_bool(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value in ("true", "1", "yes")


#: Options that may be ``none`` on the command line, and the boolean ones.
_TYPES: dict[str, Callable[[str], Any]] = {
    "revision": _optional(str), "max_length": _optional(int), "trust_remote_code": _flag_bool,
}
#: Flags whose default depends on the mode or the named config (``None`` = not given).
_UNSET = {"folds", *PRESET_FIELDS}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="prbench-gpo", description="Train GPO for prbench.")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="meta-train GPO on a preference file (--train) or k-fold "
                                     "over the users of the evaluated data (--data, --folds)")
    source = t.add_mutually_exclusive_group(required=True)
    source.add_argument("--train", help="labelled per-user preferences (records with a "
                                        "`preferences` field): train one network on its users")
    source.add_argument("--data", help="the evaluated records (a file, a folder, 'sample' or a "
                                       "hub id): k-fold over their users; needs --folds")
    t.add_argument("--out", required=True, help="the checkpoint file to write (.pt)")
    defaults = TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        kind = _TYPES.get(f.name) or {int: int, float: float}.get(
            type(getattr(defaults, f.name)), str)
        unset = f.name in _UNSET
        shown = "--config's value" if f.name in PRESET_FIELDS else getattr(defaults, f.name)
        t.add_argument(flag, type=kind, default=None if unset else getattr(defaults, f.name),
                       dest=f.name, help="(required with --data)" if f.name == "folds"
                       else f"(default: {shown})")
    t.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    t.add_argument("--embed-batch-size", type=int, default=32)
    t.add_argument("--embed-cache-dir", default=None, help="default: the prbench cache")
    t.add_argument("--no-embed-cache", action="store_true", help="do not use the embedding cache")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")
    i = sub.add_parser("info", help="print a checkpoint's settings and folds (no weights)")
    i.add_argument("checkpoint")
    return p


def _config_from(args: argparse.Namespace) -> TrainConfig:
    """The config the flags ask for (k-fold needs an explicit ``--folds``; ``--train`` has none).

    Raises:
        ValueError: a missing or misplaced ``--folds``, or a setting ``--config paper`` fixes.
    """
    if args.data is not None and args.folds is None:
        raise ValueError("--data trains k-fold over the users of the evaluated data, which must "
                         "be asked for explicitly: add --folds K (or train on other users' "
                         "labelled preferences with --train FILE)")
    if args.train is not None and args.folds is not None:
        raise ValueError("--folds is for --data (k-fold over the evaluated users); --train "
                         "trains one network on the users of the train file")
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)
             if f.name != "config"}
    return make_config(args.config, **given)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``prbench-gpo`` command."""
    args = _parser().parse_args(argv)
    if args.command == "info":
        try:
            info = summary(load_checkpoint(args.checkpoint))
        except GPOError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for f in info["folds"]:
            f.pop("train_ids"), f.pop("eval_ids"), f.pop("train_users")
        print(json.dumps(info, indent=2))
        return 0
    import torch

    from prbench.api import (
        ModelUnavailableError,
        disable_progress,
        file_hashes,
        load_records,
        resolve_device,
    )

    if args.no_progress:
        disable_progress()
    source = args.train if args.train is not None else args.data
    try:
        config = _config_from(args)
        records = load_records(source)
        device = resolve_device(args.device)
        encoder = make_encoder(config, device=device, batch_size=args.embed_batch_size,
                               cache=not args.no_embed_cache, cache_dir=args.embed_cache_dir)
        if args.train is not None:
            checkpoint = train_on_preferences(records, config, encoder.encode, source=source,
                                              device=device)
        else:
            checkpoint = train_gpo(records, config, encoder.encode, device=device)
    except (ValueError, OSError, ModelUnavailableError) as exc:
        print(f"error: prbench-gpo: {exc}", file=sys.stderr)
        return 2
    files = file_hashes(source)  # {} for a hub id
    checkpoint["embedder"] = encoder.describe()
    checkpoint["data"] = {"source": source, "n_records": len(records), "files": files,
                          "sha256": content_sha256(files) if files else None}
    out = Path(args.out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, out)
    info = summary(checkpoint)
    print(json.dumps({
        "checkpoint": str(out), "records": len(records), "trained_on": info["trained_on"],
        "folds": [
            {"fold": f["fold"], "n_train": f["n_train"], "n_eval": f["n_eval"],
             "first_loss": round(f["first_loss"], 4), "final_loss": round(f["final_loss"], 4)}
            for f in info["folds"]],
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
