"""``gpo``: scores a response with a network that never trained on the request's user.

**Checkpoints trained with ``--train``** (labelled preferences of other users): the context of a
request is the labelled pairs of its user, read from ``preferences_data`` (the user's
``preferences``, at most the checkpoint's ``context_pairs``, in file order: each chosen answer a
preferred point, each rejected one a dispreferred point); the target is ``(question,
response)``. The evaluated users must not be training users of the checkpoint (refused unless
``allow_user_overlap=true``), and a user's context must not contain the pair being scored.

**k-fold checkpoints** (``--data --folds K``): for a request of record ``r`` the context is the
posts of the profile view the task shows (up to the checkpoint's ``context_posts``; none in the
question-only condition; a view that renders text without listing posts gives that text as one
point) as preferred points and ``negatives`` embedded posts of the fold's *training* users as
dispreferred points (drawn with a generator seeded by the training seed and the record id, so a
record always gets the same ones);
the target is ``(question, response)``. The score is the network's logit for the target.

Record ``r`` is scored by the network of the fold that held ``r`` out. A record the checkpoint
never saw (other data) is scored by the mean of all fold networks (``unseen=ensemble``), none of
which trained on it, or refused (``unseen=error``).

``stats()`` adds the context-swap diagnostic (:mod:`prbench_plugin_gpo.swap`) and how the
checkpoint was trained, as ``diagnostics`` lines that ``prbench eval`` prints under its summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.api import Pref, ScoreRequest, fingerprint_of
from prbench_plugin_gpo.checkpoint import file_sha256, load_checkpoint, trained_on
from prbench_plugin_gpo.config import TrainConfig, make_encoder
from prbench_plugin_gpo.context import (
    DISPREFERRED,
    PREFERRED,
    pick_negatives,
    post_text,
    rng_for,
    target_text,
    user_key,
)
from prbench_plugin_gpo.errors import GPOError
from prbench_plugin_gpo.network import Episode, NetConfig, build_network, collate
from prbench_plugin_gpo.plugin import GPOOptions
from prbench_plugin_gpo.prefs import (
    digest,
    normalise_id,
    overlap_error,
    pair_hashes,
    user_pairs,
)
from prbench_plugin_gpo.swap import ContextSwap, Unit


class GPOScorer:
    """A trained GPO checkpoint as a pointwise prbench scorer.

    Raises:
        ValueError: an unreadable checkpoint, an embedder that differs from the one it was
            trained with, or (``--train`` checkpoints) missing ``preferences_data`` or evaluated
            users that were training users.
    """

    def __init__(self, options: GPOOptions) -> None:
        from prbench.api import resolve_device

        self.options = options
        self.path = Path(options.checkpoint).expanduser().resolve()
        self.sha256 = file_sha256(self.path)
        ckpt = load_checkpoint(self.path)
        self.mode: str = ckpt.get("mode", "kfold")
        self.config = TrainConfig(**ckpt["config"])
        if options.config != "any" and options.config != self.config.config:
            raise GPOError(f"gpo: config={options.config} asked for, but the checkpoint was "
                           f"trained with config={self.config.config} (prbench-gpo train "
                           f"--config {options.config})")
        if self.config.trust_remote_code and not options.trust_remote_code:
            raise GPOError(f"gpo: the checkpoint's embedder {self.config.model!r} runs code "
                           "shipped with the model; pass trust_remote_code=true if you trust it")
        self.device = resolve_device(options.device)
        self.encoder = make_encoder(
            self.config, device=options.device, batch_size=options.embed_batch_size,
            cache=options.embed_cache, cache_dir=options.embed_cache_dir,
        )
        trained_with = (ckpt.get("embedder") or {}).get("fingerprint")
        now = self.encoder.describe().get("fingerprint")
        if trained_with and now and trained_with != now:
            raise GPOError(
                f"gpo: the checkpoint was trained on embeddings of {trained_with!r}, but "
                f"{self.config.model!r} resolves to {now!r} here; its scores would be "
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
        self.labels: dict[str, tuple[str, str]] = {
            rid: (c, r) for rid, (c, r) in (ckpt.get("pair_digests") or {}).items()}
        self.trained_on = trained_on(ckpt)
        self.overlap: list[str] = []
        self.shared_pairs = 0
        self.trained_records: list[str] = []
        self.contexts: dict[str, list[Pref]] = {}
        if self.mode == "train-file":
            self._load_preferences(sorted(ckpt.get("train_users") or []),
                                   set(ckpt["folds"][0]["train_ids"]),
                                   set(ckpt.get("train_pair_hashes") or []))
        elif options.preferences_data:
            raise GPOError("gpo: preferences_data is for checkpoints trained on labelled "
                           "preferences (prbench-gpo train --train); this one was trained "
                           "k-fold on profile posts")
        self.summary = {
            "mode": self.mode, "trained_on": self.trained_on, "folds": len(self.nets),
            "n_records": len(self.users), "config": ckpt["config"],
            "embedder": ckpt.get("embedder"), "data": ckpt.get("data"),
            "user_overlap": self.overlap, "trained_records": self.trained_records,
            "shared_training_pairs": self.shared_pairs,
        }
        self._counts = {"requests": 0, "by_fold_network": 0, "unseen_ensemble": 0,
                        "by_train_file_network": 0}
        self.swap = ContextSwap(seed=options.swap_seed, resamples=options.swap_resamples)

    def _load_preferences(self, train_users: list[str], train_ids: set[str],
                          train_pairs: set[str]) -> None:
        """Each evaluated record's user and context from ``preferences_data``; refuse overlap.

        Overlap is checked on normalised user ids (:func:`~prbench_plugin_gpo.prefs.normalise_id`)
        and on the content of every evaluated pair (the users' ``preferences`` and the held-out
        pairs) against the training pairs' hashes.
        """
        from prbench.api import load_records

        source = self.options.preferences_data
        if not source:
            raise GPOError(f"gpo: the checkpoint was {self.trained_on}; pass "
                           "preferences_data=<the evaluated records with their users' "
                           "`preferences`> to give each user's context")
        records = load_records(source)
        self.users = {r.id: user_key(r) for r in records}
        by_user = user_pairs(records, held_out=False)
        empty = sorted(u for u in set(self.users.values()) if not by_user.get(u))
        if empty:
            raise GPOError(f"gpo: {source}: user(s) {', '.join(map(repr, empty[:10]))} have no "
                           "labelled `preferences`, so GPO has no context for them")
        self.contexts = by_user
        self.labels = {r.id: (digest(r.chosen), digest(r.rejected)) for r in records}
        evaluated = pair_hashes([p for ps in by_user.values() for p in ps]) | pair_hashes(
            Pref(r.question, r.chosen, r.rejected) for r in records)
        self.shared_pairs = len(evaluated & train_pairs)
        message = overlap_error(sorted(set(self.users.values())), train_users, source,
                                self.shared_pairs)
        if message:
            if not self.options.allow_user_overlap:
                raise GPOError(message)
            train = {normalise_id(u) for u in train_users}
            self.overlap = sorted(u for u in set(self.users.values()) if normalise_id(u) in train)
            # records of the train file itself: their held-out pairs were training targets
            self.trained_records = sorted(set(self.users) & train_ids)

    def _folds_for(self, record_id: str) -> list[int]:
        if self.mode == "train-file":
            self._counts["by_train_file_network"] += 1
            return [0]
        if record_id in self.fold_of:
            fold = self.fold_of[record_id]
            if fold not in self.nets:
                raise GPOError(f"gpo: record {record_id!r} belongs to fold {fold}, which this "
                               "checkpoint did not train")
            self._counts["by_fold_network"] += 1
            return [fold]
        if self.options.unseen == "error":
            raise GPOError(f"gpo: record {record_id!r} is not in the checkpoint's training data "
                           "(unseen=error)")
        self._counts["unseen_ensemble"] += 1
        return sorted(self.nets)

    def _context(self, request: ScoreRequest) -> tuple[list[str], list[int], str]:
        """(the user's own context texts, their labels, the swap group) of a request."""
        if self.mode == "train-file":
            user = self.users.get(request.record_id)
            if user is None:
                raise GPOError(f"gpo: record {request.record_id!r} is not in preferences_data "
                               f"({self.options.preferences_data}), so its user has no context")
            pairs = self.contexts[user][: self.config.context_pairs]
            target = request.response.strip()
            for p in pairs:
                if p.question.strip() == request.question.strip() and target in (
                        p.chosen.strip(), p.rejected.strip()):
                    raise GPOError(f"gpo: the preferences of user {user!r} (record "
                                   f"{request.record_id!r}) contain the pair being scored")
            texts = [target_text(p.question, a) for p in pairs for a in (p.chosen, p.rejected)]
            return texts, [PREFERRED, DISPREFERRED] * len(pairs), "preferences"
        group = f"profile {request.profile.builder or 'none'}"
        items = request.profile.items[: self.config.context_posts]
        if items:
            return [post_text(i) for i in items], [PREFERRED] * len(items), group
        if request.profile.text.strip() and self.config.context_posts:
            return [request.profile.text], [PREFERRED], group  # text without listed posts
        return [], [], group

    def _run(self, fold: int, episodes: list[Episode], vectors: Any) -> list[list[float]]:
        """Logits of one fold's network for each episode (in chunks of ``batch_size``)."""
        import torch

        out: list[list[float]] = []
        step = self.options.batch_size
        for s in range(0, len(episodes), step):
            with torch.inference_mode():
                logits = self.nets[fold](*collate(episodes[s : s + step], vectors, self.device))
            out += logits.cpu().tolist()
        return out

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One logit per request, in request order (independent of batching)."""
        import numpy as np

        requests = list(requests)
        if not requests:
            return []
        self._counts["requests"] += len(requests)
        contexts = [self._context(r) for r in requests]
        texts = [t for c in contexts for t in c[0]] + [target_text(r.question, r.response)
                                                        for r in requests]
        own = np.asarray(self.encoder.encode(texts), dtype=np.float32).reshape(len(texts), -1)
        n_ctx = sum(len(c[0]) for c in contexts)
        vectors = np.concatenate([self.pool.reshape(-1, own.shape[1]), own], axis=0)
        offset = len(self.pool)
        jobs: dict[int, list[tuple[int, Episode]]] = {}
        seen: list[tuple[list[int], dict[int, list[int]]]] = []
        start = 0
        for i, (r, (ctx_texts, ctx_labels, _)) in enumerate(zip(requests, contexts, strict=True)):
            rows = list(range(offset + start, offset + start + len(ctx_texts)))
            start += len(ctx_texts)
            user = self.users.get(r.record_id, r.record_id)
            negatives: dict[int, list[int]] = {}
            for fold in self._folds_for(r.record_id):
                neg: list[int] = []
                if self.mode != "train-file":
                    rng = rng_for(self.config.seed, "score", r.record_id)
                    neg = pick_negatives(self.pool_owners, self.allowed[fold], user,
                                         self.config.negatives, rng)
                negatives[fold] = neg
                jobs.setdefault(fold, []).append((i, Episode(
                    ctx=rows + neg, ctx_labels=ctx_labels + [DISPREFERRED] * len(neg),
                    targets=[offset + n_ctx + i],
                )))
            seen.append((rows, negatives))
        total = np.zeros(len(requests), dtype=np.float64)
        count = np.zeros(len(requests), dtype=np.float64)
        for fold, items in sorted(jobs.items()):
            logits = self._run(fold, [e for _, e in items], vectors)
            for (i, _), values in zip(items, logits, strict=True):
                total[i] += values[0]
                count[i] += 1
        scores = [float(x) for x in total / count]
        if self.options.context_swap:
            for i, (r, (rows, negatives)) in enumerate(zip(requests, seen, strict=True)):
                unit = Unit(user=self.users.get(r.record_id, r.record_id), folds=list(negatives),
                            own_x=vectors[rows], own_y=contexts[i][1],
                            fixed={f: (vectors[n], [DISPREFERRED] * len(n))
                                   for f, n in negatives.items()})
                self.swap.add(contexts[i][2], r.record_id, unit, digest(r.response),
                              vectors[offset + n_ctx + i], scores[i])
        return scores

    def stats(self) -> dict[str, Any]:
        """How the checkpoint was trained and the context-swap diagnostic, with summary lines.

        ``diagnostics`` holds the lines ``prbench eval`` prints under its summary.
        """
        swap = self.swap.compute(self.labels, self._run) if self.options.context_swap else []
        lines = [f"gpo: {self.trained_on}"]
        if self.overlap or self.shared_pairs:
            lines.append(f"gpo: WARNING {len(self.overlap)} evaluated user(s) were training "
                         f"users, {self.shared_pairs} evaluated pair(s) were training pairs "
                         "(allow_user_overlap=true)" + (
                             f"; {len(self.trained_records)} evaluated record(s) were training "
                             "records, their pairs trained on" if self.trained_records else ""))
        lines += [d["line"] for d in swap]
        return {"trained_on": self.trained_on, "context_swap": swap, "diagnostics": lines,
                "counts": dict(self._counts)}

    def fingerprint(self) -> str:
        """Hash of the checkpoint file, the embedder, the unseen-record policy and the contexts."""
        return fingerprint_of({
            "component": "gpo", "checkpoint_sha256": self.sha256,
            "embedder": self.encoder.describe(), "unseen": self.options.unseen,
            "contexts": {u: [[p.question, p.chosen, p.rejected] for p in ps]
                         for u, ps in sorted(self.contexts.items())},
            "users": self.users if self.mode == "train-file" else None,
        })

    def describe(self) -> dict[str, Any]:
        """Checkpoint, how it was trained, its folds, embedder and counts (for the manifest)."""
        from prbench.api import options_to_dict

        return {
            "component": "gpo", "checkpoint": str(self.path), "checkpoint_sha256": self.sha256,
            "device": self.device, "options": options_to_dict(self.options),
            "embedder_now": self.encoder.describe(), **self.summary, "counts": dict(self._counts),
        }
