"""``gpo``: scores a response with the fold network that never saw the request's record.

For a request of record ``r`` the context is the posts of the profile view the task shows (up to
the checkpoint's ``context_posts``; none in the question-only condition; a view that renders text
without listing posts gives that text as one point) as preferred points and
``negatives`` embedded posts of the fold's *training* users as dispreferred points (drawn with a
generator seeded by the training seed and the record id, so a record always gets the same ones);
the target is ``(question, response)``. The score is the network's logit for the target.

Record ``r`` is scored by the network of the fold that held ``r`` out. A record the checkpoint
never saw (other data) is scored by the mean of all fold networks (``unseen=ensemble``), none of
which trained on it, or refused (``unseen=error``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.scoring.base import ScoreRequest
from prbench.scoring.cache import fingerprint_of
from prbench_plugin_gpo.context import (
    DISPREFERRED,
    PREFERRED,
    pick_negatives,
    post_text,
    rng_for,
    target_text,
)
from prbench_plugin_gpo.network import Episode, NetConfig, build_network, collate
from prbench_plugin_gpo.plugin import GPOOptions
from prbench_plugin_gpo.train import FORMAT, TrainConfig, make_encoder


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a ``prbench-gpo train`` checkpoint (tensors and plain data only).

    Raises:
        ValueError: the file is not a GPO checkpoint of this format.
    """
    import torch

    try:
        ckpt = torch.load(Path(path).expanduser(), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"gpo: cannot read checkpoint {path}: {exc}") from exc
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise ValueError(f"gpo: {path} is not a {FORMAT} checkpoint (from `prbench-gpo train`)")
    if not ckpt.get("folds"):
        raise ValueError(f"gpo: checkpoint {path} holds no trained fold")
    return ckpt


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class GPOScorer:
    """A trained GPO checkpoint as a pointwise prbench scorer.

    Raises:
        ValueError: an unreadable checkpoint, or an embedder that differs from the one it was
            trained with.
    """

    def __init__(self, options: GPOOptions) -> None:
        from prbench.devices import resolve_device

        self.options = options
        self.path = Path(options.checkpoint).expanduser().resolve()
        self.sha256 = _sha256(self.path)
        ckpt = load_checkpoint(self.path)
        self.config = TrainConfig(**ckpt["config"])
        self.device = resolve_device(options.device)
        self.encoder = make_encoder(
            self.config, device=options.device, batch_size=options.embed_batch_size,
            cache=options.embed_cache, cache_dir=options.embed_cache_dir,
        )
        trained_with = (ckpt.get("embedder") or {}).get("fingerprint")
        now = self.encoder.describe().get("fingerprint")
        if trained_with and now and trained_with != now:
            raise ValueError(
                f"gpo: the checkpoint was trained on embeddings of {trained_with!r}, but "
                f"{self.config.embedder!r} resolves to {now!r} here; its scores would be "
                "meaningless"
            )
        net_config = NetConfig(**ckpt["net"])
        self.nets: dict[int, Any] = {}
        self.allowed: dict[int, set[str]] = {}
        self.fold_of: dict[str, int] = {}
        for f in ckpt["folds"]:
            net = build_network(net_config)
            net.load_state_dict(f["state_dict"])
            self.nets[f["fold"]] = net.to(self.device).eval()
            self.allowed[f["fold"]] = set(f["train_users"])
            self.fold_of.update({rid: f["fold"] for rid in f["eval_ids"]})
        self.users: dict[str, str] = dict(ckpt["users"])
        self.pool_owners: list[str] = list(ckpt["pool_owners"])
        self.pool = ckpt["pool_vectors"].numpy()
        self.summary = {
            "folds": len(self.nets), "n_records": len(self.users),
            "config": ckpt["config"], "embedder": ckpt.get("embedder"), "data": ckpt.get("data"),
        }
        self._counts = {"requests": 0, "by_fold_network": 0, "unseen_ensemble": 0}

    def _folds_for(self, record_id: str) -> list[int]:
        if record_id in self.fold_of:
            fold = self.fold_of[record_id]
            if fold not in self.nets:
                raise ValueError(f"gpo: record {record_id!r} belongs to fold {fold}, which this "
                                 "checkpoint did not train")
            self._counts["by_fold_network"] += 1
            return [fold]
        if self.options.unseen == "error":
            raise ValueError(f"gpo: record {record_id!r} is not in the checkpoint's training data "
                             "(unseen=error)")
        self._counts["unseen_ensemble"] += 1
        return sorted(self.nets)

    def _context_texts(self, request: ScoreRequest) -> list[str]:
        """The preferred context of a request: its view's posts (or its text, if it has none)."""
        items = request.profile.items[: self.config.context_posts]
        if items:
            return [post_text(i) for i in items]
        if request.profile.text.strip() and self.config.context_posts:
            return [request.profile.text]  # a builder that renders text without posts
        return []

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One logit per request, in request order (independent of batching)."""
        import numpy as np
        import torch

        requests = list(requests)
        if not requests:
            return []
        self._counts["requests"] += len(requests)
        posts = [self._context_texts(r) for r in requests]
        texts = [t for p in posts for t in p] + [target_text(r.question, r.response)
                                                  for r in requests]
        own = np.asarray(self.encoder.encode(texts), dtype=np.float32).reshape(len(texts), -1)
        n_posts = sum(len(p) for p in posts)
        vectors = np.concatenate([self.pool, own], axis=0)
        offset = len(self.pool)
        jobs: dict[int, list[tuple[int, Episode]]] = {}
        start = 0
        for i, (r, p) in enumerate(zip(requests, posts, strict=True)):
            rows = list(range(offset + start, offset + start + len(p)))
            start += len(p)
            user = self.users.get(r.record_id, r.record_id)
            for fold in self._folds_for(r.record_id):
                rng = rng_for(self.config.seed, "score", r.record_id)
                neg = pick_negatives(self.pool_owners, self.allowed[fold], user,
                                     self.config.negatives, rng)
                jobs.setdefault(fold, []).append((i, Episode(
                    ctx=rows + neg,
                    ctx_labels=[PREFERRED] * len(rows) + [DISPREFERRED] * len(neg),
                    targets=[offset + n_posts + i],
                )))
        total = np.zeros(len(requests), dtype=np.float64)
        count = np.zeros(len(requests), dtype=np.float64)
        step = self.options.batch_size
        for fold, items in sorted(jobs.items()):
            for s in range(0, len(items), step):
                chunk = items[s : s + step]
                with torch.inference_mode():
                    logits = self.nets[fold](*collate([e for _, e in chunk], vectors, self.device))
                for (i, _), value in zip(chunk, logits[:, 0].cpu().tolist(), strict=True):
                    total[i] += value
                    count[i] += 1
        return [float(x) for x in total / count]

    def fingerprint(self) -> str:
        """Hash of the checkpoint file, the embedder and the unseen-record policy."""
        return fingerprint_of({
            "component": "gpo", "checkpoint_sha256": self.sha256,
            "embedder": self.encoder.describe(), "unseen": self.options.unseen,
        })

    def describe(self) -> dict[str, Any]:
        """Checkpoint, its training settings and folds, embedder and counts (for the manifest)."""
        from prbench.options import options_to_dict

        return {
            "component": "gpo", "checkpoint": str(self.path), "checkpoint_sha256": self.sha256,
            "device": self.device, "options": options_to_dict(self.options),
            "embedder_now": self.encoder.describe(), **self.summary, "counts": dict(self._counts),
        }
