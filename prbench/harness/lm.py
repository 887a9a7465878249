"""The ``prbench`` lm-eval model: any registered scorer as an lm-eval ``LM``.

``--model prbench --model_args scorer=<id>,<option>=<value>,...`` picks a scorer (a reward model, a
pairwise judge or a baseline) and its options; options are validated by the scorer's options
dataclass, so a typo is an error with suggestions. lm-eval asks for the "log-likelihood" of each
answer (``[chosen, rejected]`` for every pair); the adapter answers with the reward instead. It
reads the structured row from ``Instance.doc`` (question, profile view, category, domain), sends
every request of the run to the scorer in one batched call (the scorer's batching engine splits it)
and returns the scores in request order. Pairwise judges (tag ``pairwise``) get one comparison per
pair; the chosen answer's result is P(chosen better), the rejected one's 1 - P.

lm-eval's own arguments map to scorer options where the scorer has them: ``--device``
(``cuda:0`` falls back to ``cpu`` without CUDA), ``--batch_size`` (a string; ``auto`` keeps the
scorer's default) and ``pretrained=`` (which also names lm-eval's output folder; for a scorer
without a ``pretrained`` option it is only a label). Under ``accelerate launch`` each process
scores its shard of the pairs and lm-eval gathers the metrics.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import Any

from lm_eval.api.model import LM

from prbench.options import OptionsError, options_to_dict

log = logging.getLogger(__name__)

DEFAULT_SCORER = "embedding-similarity"
REQUIRED_DOC_FIELDS = ("id", "question", "chosen", "rejected", "profile_text", "record_json")


def parse_batch_size(value: Any) -> int | None:
    """lm-eval's ``--batch_size`` (an int or a string such as ``"8"``, ``"auto"``, ``"auto:4"``).

    Returns:
        The batch size, or ``None`` for ``auto`` (the scorer keeps its own default).

    Raises:
        OptionsError: not a positive integer and not ``auto``.
    """
    if value is None:
        return None
    text = str(value).strip().lower()
    if text.startswith("auto"):
        return None
    message = f"batch_size must be a positive integer or 'auto', got {value!r}"
    try:
        size = int(text)
    except ValueError:
        raise OptionsError(message) from None
    if size < 1:
        raise OptionsError(message)
    return size


def resolve_device(device: Any) -> str | None:
    """The device to use: ``cuda...`` falls back to ``cpu`` (with a warning) without CUDA."""
    if device is None or str(device).strip() == "":
        return None
    text = str(device).strip()
    if text.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            log.warning("prbench: device %r asked for but CUDA is not available; using cpu", text)
            return "cpu"
    return text


class PRBenchLM(LM):
    """lm-eval ``LM`` that scores answers with a prbench scorer (model name ``prbench``).

    Args:
        scorer: the scorer id (``embedding-similarity``, ``length``, ``plugin/id``, ...).
        pretrained: the scorer's ``pretrained`` option where it has one; always the run's name in
            lm-eval's output folder.
        batch_size: lm-eval's batch size, passed to the scorer's ``batch_size`` option.
        max_batch_size: passed to the scorer's ``max_batch_size`` option if it has one.
        device: passed to the scorer's ``device`` option (``cuda*`` -> ``cpu`` without CUDA).
        trust_remote_code: passed to the scorer's option of that name if it has one.
        **options: the scorer's own options; ``prbench_*`` keys are left to the tasks.

    Raises:
        prbench.plugins.UnknownComponentError: no such scorer.
        OptionsError: an unknown or invalid option.
    """

    def __init__(
        self,
        scorer: str = DEFAULT_SCORER,
        pretrained: str | None = None,
        batch_size: int | str | None = None,
        max_batch_size: int | None = None,
        device: str | None = None,
        trust_remote_code: bool | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        from prbench.plugins import get_registry

        self._registry = get_registry()
        self.component = self._registry.get("scorer", str(scorer))
        self.pairwise = "pairwise" in self.component.tags
        fields = self._option_fields()
        self._accelerator: Any = None
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        if world > 1:
            import torch
            from accelerate import Accelerator

            # CPU processes need cpu=True, or accelerate sets up no process group (gloo) at all
            cpu = not torch.cuda.is_available() or str(device or "").startswith("cpu")
            self._accelerator = Accelerator(cpu=cpu)
            self._rank = self._accelerator.process_index
            self._world_size = self._accelerator.num_processes
            resolved = str(self._accelerator.device)
        else:
            resolved = resolve_device(device) if "device" in fields else None
        self._device = resolved or "cpu"
        self.label = str(pretrained) if pretrained is not None else None
        self.batch_size = parse_batch_size(batch_size)
        self.max_batch_size = max_batch_size
        # prbench_* keys are task options (lm-eval also hands --model_args to the tasks)
        raw = {k: v for k, v in options.items() if not k.startswith("prbench_")}
        for name, value in (
            ("pretrained", pretrained),
            ("device", resolved),
            ("batch_size", self.batch_size),
            ("max_batch_size", max_batch_size),
            ("trust_remote_code", trust_remote_code),
        ):
            if value is not None and name in fields:
                raw[name] = value
        self.options = self.component.parse_options(raw)
        self._scorer: Any = None
        self.calls = 0
        self.scored = 0

    # -- lm-eval plumbing ----------------------------------------------------------------------

    def _option_fields(self) -> set[str]:
        import dataclasses

        opts = self.component.options
        return {f.name for f in dataclasses.fields(opts)} if opts is not None else set()

    @property
    def device(self) -> str:
        """The device of this process (``cpu`` unless the scorer runs on a GPU)."""
        return self._device

    def all_gather(self, tensor: Any) -> Any:
        """Gather a tensor from every process (lm-eval pads the shards with it)."""
        if self._accelerator is None or self.world_size <= 1:
            return tensor
        return self._accelerator.gather(tensor)

    def gather_object(self, obj: Any, dst: int = 0) -> list[Any] | None:
        """Gather Python objects (per-sample metrics) on rank ``dst``."""
        if self._accelerator is None or self.world_size <= 1:
            return [obj]
        import torch.distributed as dist

        result: list[Any] | None = [None] * self.world_size if self.rank == dst else None
        dist.gather_object(obj=obj, object_gather_list=result, dst=dst)
        return result

    def barrier(self) -> None:
        """Wait for every process."""
        if self._accelerator is not None and self.world_size > 1:
            self._accelerator.wait_for_everyone()

    # -- scoring -------------------------------------------------------------------------------

    @property
    def scorer(self) -> Any:
        """The scorer object, built on first use (a fully cached rerun never builds it)."""
        if self._scorer is None:
            factory = self.component.resolve_factory()
            has_options = self.component.options is not None
            self._scorer = factory(self.options) if has_options else factory()
            method = "compare" if self.pairwise else "score"
            if not callable(getattr(self._scorer, method, None)):
                raise TypeError(
                    f"scorer {self.component.name!r} built a {type(self._scorer).__name__} "
                    f"without a {method}() method"
                )
        return self._scorer

    def _doc(self, inst: Any) -> dict[str, Any]:
        doc = inst.doc
        missing = [f for f in REQUIRED_DOC_FIELDS if not isinstance(doc, dict) or f not in doc]
        if missing:
            raise ValueError(
                f"the prbench model scores personalized_rewardbench-style tasks only: a document "
                f"of task {inst.task_name!r} lacks {missing}"
            )
        return doc

    def _view(self, doc: dict[str, Any], record: dict[str, Any]) -> Any:
        from prbench.profiles.base import ProfileView
        from prbench.records import ProfileItem

        posts = {str(p.get("id")): p for p in record.get("profile", []) if isinstance(p, dict)}
        items = []
        for pid in doc.get("profile_post_ids") or []:
            post = posts.get(str(pid))
            if post is not None:
                extra = {k: v for k, v in post.items() if k not in ("id", "category", "text")}
                items.append(
                    ProfileItem(
                        id=str(post["id"]), category=str(post.get("category", "")),
                        text=str(post.get("text", "")), extra=extra,
                    )
                )
        return ProfileView(
            text=doc["profile_text"],
            items=tuple(items),
            n_tokens=int(doc.get("profile_tokens", 0)),
            builder=str(doc.get("profile_builder", "none")),
        )

    def _which(self, doc: dict[str, Any], inst: Any) -> int:
        """0 for the chosen answer, 1 for the rejected one."""
        continuation = inst.arguments[1]
        for i, key in enumerate(("chosen", "rejected")):
            if continuation == doc[key] or continuation.strip() == doc[key].strip():
                return i
        raise ValueError(
            f"task {inst.task_name!r}, record {doc['id']!r}: the continuation is neither the "
            "chosen nor the rejected answer"
        )

    def _context(self, doc: dict[str, Any]) -> dict[str, Any]:
        record = json.loads(doc["record_json"])
        hidden = None
        if self.component.diagnostic:
            hidden = {
                "narrative": record.get("narrative", ""),
                "rubric_aspects": record.get("rubric_aspects", []),
            }
        return {
            "record_id": str(doc["id"]),
            "question": doc["question"],
            "profile": self._view(doc, record),
            "category": doc.get("category", ""),
            "domain": doc.get("domain", ""),
            "hidden": hidden,
        }

    def _score_pointwise(self, requests: Sequence[Any]) -> list[float]:
        from prbench.scoring.base import ScoreRequest, check_scores

        keys: list[tuple[Any, ...]] = []
        unique: dict[tuple[Any, ...], ScoreRequest] = {}
        for inst in requests:
            doc = self._doc(inst)
            which = self._which(doc, inst)
            key = (inst.task_name, doc["id"], which)
            keys.append(key)
            if key not in unique:
                response = doc["chosen"] if which == 0 else doc["rejected"]
                unique[key] = ScoreRequest(response=response, **self._context(doc))
        batch = list(unique.values())
        scores = check_scores(self.scorer.score(batch), len(batch), self.component.name)
        self.calls += 1
        self.scored += len(batch)
        by_key = dict(zip(unique, scores, strict=True))
        return [by_key[k] for k in keys]

    def _score_pairwise(self, requests: Sequence[Any]) -> list[float]:
        from prbench.scoring.base import PairRequest, check_scores

        sides: list[tuple[tuple[Any, ...], int]] = []
        unique: dict[tuple[Any, ...], PairRequest] = {}
        for inst in requests:
            doc = self._doc(inst)
            key = (inst.task_name, doc["id"])
            sides.append((key, self._which(doc, inst)))
            if key not in unique:
                unique[key] = PairRequest(
                    first=doc["chosen"], second=doc["rejected"], **self._context(doc)
                )
        batch = list(unique.values())
        probs = check_scores(self.scorer.compare(batch), len(batch), self.component.name)
        self.calls += 1
        self.scored += len(batch)
        by_key = dict(zip(unique, probs, strict=True))
        return [by_key[k] if which == 0 else 1.0 - by_key[k] for k, which in sides]

    def loglikelihood(
        self, requests: list[Any], disable_tqdm: bool = False
    ) -> list[tuple[float, bool]]:
        """The reward of each answer (or the judge's probability), in request order."""
        if not requests:
            return []
        scores = (
            self._score_pairwise(requests) if self.pairwise else self._score_pointwise(requests)
        )
        return [(float(s), False) for s in scores]

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        """Not available: a reward model gives no perplexity."""
        raise NotImplementedError(
            "the prbench model scores answers with a reward model; it has no rolling "
            "log-likelihood (perplexity tasks need --model hf)"
        )

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Not available: a reward model does not generate."""
        raise NotImplementedError(
            "the prbench model scores answers with a reward model; it cannot generate text"
        )

    # -- provenance ----------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The scorer, its options and what it did (recorded in results and manifests)."""
        from prbench.harness.manifest import versions
        from prbench.harness.tasks import PROVENANCE

        stats: Any = None
        if self._scorer is not None and callable(getattr(self._scorer, "stats", None)):
            try:
                stats = self._scorer.stats()
            except Exception as exc:  # stats are informative; never lose results over them
                stats = {"error": repr(exc)}
        return {
            "scorer": {
                "id": self.component.name,
                "qualified_id": self.component.qualified_id,
                "plugin": self.component.plugin,
                "options": options_to_dict(self.options),
                "diagnostic": self.component.diagnostic,
                "tags": list(self.component.tags),
                "pairwise": self.pairwise,
                "label": self.label,
                "device": self._device,
                "batch_size": self.batch_size,
                "calls": self.calls,
                "scored": self.scored,
                "built": self._scorer is not None,
                "stats": stats,
            },
            "data": [dict(p) for p in PROVENANCE],
            "plugins": self._registry.provenance(),
            "versions": versions(),
            "rank": self.rank,
            "world_size": self.world_size,
        }

    def get_model_info(self) -> dict[str, Any]:
        """Added by lm-eval to ``results["config"]``: the prbench provenance under ``prbench``."""
        return {"prbench": self.describe()}


__all__ = ["DEFAULT_SCORER", "PRBenchLM", "parse_batch_size", "resolve_device"]
