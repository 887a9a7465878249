"""Meta-training of GPO with k-fold over users, and the ``prbench-gpo`` command.

``prbench-gpo train --data sample --out gpo.pt`` embeds every profile post and every (question,
answer) option once (through prbench's on-disk embedding cache), then trains one network per fold:
fold ``i``'s network sees only the records of users outside fold ``i`` -- their posts as context,
their chosen/rejected answers as targets, other *training* users' posts as dispreferred context.
Each step samples ``batch_users`` training users, a random number of their posts (0 to
``context_posts``: the neural process learns from contexts of every size, including the empty
one of the no-profile condition) and ``negatives`` posts of other training users; the loss is the
Bradley-Terry loss ``-log sigmoid(s(chosen) - s(rejected))``.

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
from prbench_plugin_gpo.network import Episode, NetConfig, build_network, collate

if TYPE_CHECKING:
    import numpy as np

    from prbench.records import Record

#: Checkpoint format tag (bumped when the layout changes).
FORMAT = "prbench-gpo/1"

Embed = Callable[[Sequence[str]], "np.ndarray"]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that decides the trained weights (stored in the checkpoint)."""

    folds: int = 5
    steps: int = 300
    batch_users: int = 8
    context_posts: int = 10
    negatives: int = 10
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    lr: float = 1e-3
    weight_decay: float = 0.01
    seed: int = 0
    embedder: str = "minilm"
    encoder: str = "transformers-mean"
    revision: str | None = None
    max_length: int | None = 256

    def __post_init__(self) -> None:
        for name in ("steps", "batch_users", "d_model", "layers", "heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.context_posts < 0 or self.negatives < 0:
            raise ValueError("context_posts and negatives must be >= 0")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")


def make_encoder(config: TrainConfig, *, device: str = "auto", batch_size: int = 32,
                 cache: bool = True, cache_dir: str | None = None) -> Any:
    """The prbench :class:`~prbench.profiles.embed.Encoder` the config names (mean pooling)."""
    from prbench.profiles.embed import Encoder, EncoderSpec

    spec = EncoderSpec(model=config.embedder, encoder=config.encoder,  # type: ignore[arg-type]
                       revision=config.revision, max_length=config.max_length)
    return Encoder(spec, device=device, batch_size=batch_size, cache=cache, cache_dir=cache_dir)


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

    from prbench.progress import progress_bar

    keys = [user_key(r) for r in train_records]
    pool = _Pool.of(train_records)
    targets = [target_text(r.question, a) for r in train_records for a in (r.chosen, r.rejected)]
    vectors = np.asarray(embed(pool.texts + targets), dtype=np.float32)
    n_pool = len(pool.texts)
    own: dict[str, list[int]] = {}
    for i, owner in enumerate(pool.owners):
        own.setdefault(owner, []).append(i)
    allowed = set(keys)
    torch.manual_seed(int(rng_for(config.seed, "init", fold).integers(2**31)))
    net = build_network(NetConfig(vectors.shape[1], config.d_model, config.layers, config.heads))
    net.to(device).train()
    opt = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    rng = rng_for(config.seed, "train", fold)
    losses: list[float] = []
    bar = progress_bar(config.steps, desc=f"gpo fold {fold}", unit="step", enabled=progress)
    try:
        for _ in range(config.steps):
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
            logits = net(*collate(episodes, vectors, device))
            loss = torch.nn.functional.softplus(logits[:, 1] - logits[:, 0]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    finally:
        bar.close()
    state = {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
    return state, losses


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
        "config": dataclasses.asdict(config),
        "net": dataclasses.asdict(NetConfig(dim, config.d_model, config.layers, config.heads)),
        "users": keys,
        "folds": folds,
        "pool_owners": pool.owners,
        "pool_vectors": torch.from_numpy(pool_vectors),
    }


def _optional(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return None if text.strip().lower() in ("", "none") else kind(text)

    parse.__name__ = kind.__name__
    return parse


#: Options that may be ``none`` on the command line.
_TYPES = {"revision": _optional(str), "max_length": _optional(int)}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="prbench-gpo", description="Train GPO for prbench.")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="meta-train one network per fold of users; write a checkpoint")
    t.add_argument("--data", required=True, help="records: a file, a folder, 'sample' or a hub id")
    t.add_argument("--out", required=True, help="the checkpoint file to write (.pt)")
    defaults = TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        kind = _TYPES.get(f.name) or {int: int, float: float}.get(
            type(getattr(defaults, f.name)), str)
        t.add_argument(flag, type=kind, default=getattr(defaults, f.name), dest=f.name,
                       help=f"(default: {getattr(defaults, f.name)})")
    t.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    t.add_argument("--embed-batch-size", type=int, default=32)
    t.add_argument("--embed-cache-dir", default=None, help="default: the prbench cache")
    t.add_argument("--no-embed-cache", action="store_true", help="do not use the embedding cache")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")
    i = sub.add_parser("info", help="print a checkpoint's settings and folds (no weights)")
    i.add_argument("checkpoint")
    return p


def _config_from(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)})


def summary(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint without weights (what ``prbench-gpo info`` prints)."""
    return {
        "format": checkpoint["format"], "config": checkpoint["config"], "net": checkpoint["net"],
        "embedder": checkpoint.get("embedder"), "data": checkpoint.get("data"),
        "folds": [{k: v for k, v in f.items() if k != "state_dict"} | {
            "n_train": len(f["train_ids"]), "n_eval": len(f["eval_ids"])}
            for f in checkpoint["folds"]],
        "n_pool_posts": len(checkpoint["pool_owners"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """The ``prbench-gpo`` command."""
    args = _parser().parse_args(argv)
    if args.command == "info":
        from prbench_plugin_gpo.scorer import load_checkpoint

        info = summary(load_checkpoint(args.checkpoint))
        for f in info["folds"]:
            f.pop("train_ids"), f.pop("eval_ids"), f.pop("train_users")
        print(json.dumps(info, indent=2))
        return 0
    import torch

    from prbench.devices import resolve_device
    from prbench.progress import disable_progress
    from prbench.records import file_hashes, is_hub_id, load_records

    if args.no_progress:
        disable_progress()
    try:
        config = _config_from(args)
        records = load_records(args.data)
    except ValueError as exc:
        print(f"prbench-gpo: {exc}", file=sys.stderr)
        return 2
    device = resolve_device(args.device)
    encoder = make_encoder(config, device=device, batch_size=args.embed_batch_size,
                           cache=not args.no_embed_cache, cache_dir=args.embed_cache_dir)
    checkpoint = train_gpo(records, config, encoder.encode, device=device)
    checkpoint["embedder"] = encoder.describe()
    checkpoint["data"] = {
        "source": args.data, "n_records": len(records),
        "files": {} if is_hub_id(args.data) else file_hashes(args.data),
    }
    out = Path(args.out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, out)
    info = summary(checkpoint)
    print(json.dumps({
        "checkpoint": str(out), "records": len(records), "folds": [
            {"fold": f["fold"], "n_train": f["n_train"], "n_eval": f["n_eval"],
             "first_loss": round(f["first_loss"], 4), "final_loss": round(f["final_loss"], 4)}
            for f in info["folds"]],
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
