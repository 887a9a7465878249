"""The ``prbench`` lm-eval model: any registered scorer as an lm-eval ``LM``.

``--model prbench --model_args scorer=<id>,<option>=<value>,...`` picks a scorer (a reward model, a
pairwise judge or a baseline) and its options; options are validated by the scorer's options
dataclass, so a typo is an error with suggestions. lm-eval asks for the "log-likelihood" of each
answer (``[chosen, rejected]`` for every pair); the adapter answers with the reward instead. It
reads the structured row from ``Instance.doc`` (question, profile view, category, domain), first
building the profiles of exactly the rows requested (one builder call for all of them; none for a
scorer registered with ``reads_profile=False``, see :mod:`prbench.profiles.lazy`), sends
every request of the run through the scorer's runtime (:mod:`prbench.scoring.runtime`: dedup,
persistent score cache, chunks, out-of-memory back-off, stats) and returns the scores in request
order. Pairwise judges (tag ``pairwise``) get one comparison per pair; the chosen answer's result is
P(chosen better), the rejected one's 1 - P. The runtime's options (``cache``, ``cache_path``,
``chunk_size``, ``progress``) are taken from ``--model_args`` for every scorer; ``describe()`` of
the runtime is recorded in the results and the manifest, and the scorer is closed when the process
ends (or on :meth:`PRBenchLM.close`).

lm-eval's own arguments map to scorer options where the scorer has them: ``--device``
(``cuda:0`` falls back to ``cpu`` without CUDA; warned only when ``--device`` was given, since
lm-eval passes ``cuda:0`` when it is not), ``--batch_size`` (a string; ``auto`` keeps the
scorer's default) and ``pretrained=`` (which also names lm-eval's output folder; for a scorer
without a ``pretrained`` option it is only a label). Under ``accelerate launch`` (or ``torchrun``)
each process builds the profiles of and scores only its shard of the pairs, on its own device,
and rank 0 gathers them into the files one process would write
(:mod:`prbench.harness.data_parallel`).
"""

from __future__ import annotations

import atexit
import json
import logging
import sys
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval.api.model import LM

from prbench.devices import lm_eval_default_device
from prbench.harness.scored import Scored
from prbench.options import options_to_dict
from prbench.scoring.spec import DEFAULT_SCORER, ScorerSpec, parse_batch_size, resolve_scorer

log = logging.getLogger(__name__)

#: said once per run under ``--apply_chat_template`` (see :meth:`PRBenchLM.apply_chat_template`)
CHAT_TEMPLATE_NOTE = (
    "prbench: note: --apply_chat_template changes nothing for the prbench model: a scorer gets "
    "the structured request, and a chat reward model always applies its own chat template to "
    "[user: question (+ profile), assistant: answer]"
)
REQUIRED_DOC_FIELDS = ("id", "question", "chosen", "rejected", "profile_text", "record_ref")


_OPEN: weakref.WeakSet[PRBenchLM] = weakref.WeakSet()


def close_open_models() -> None:
    """Close every :class:`PRBenchLM` still open (run at interpreter exit)."""
    for lm in list(_OPEN):
        try:
            lm.close()
        except Exception as exc:  # at exit: report, never mask the run's own outcome
            log.warning("prbench: closing scorer %r failed: %r", lm.component.name, exc)


atexit.register(close_open_models)


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
        **options: the scorer's own options and the runtime's (``cache``, ``cache_path``,
            ``chunk_size``, ``progress``); ``prbench_*`` keys are left to the tasks.

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
        given: dict[str, Any] = {"scorer": scorer, **options}
        for name, value in (("pretrained", pretrained), ("trust_remote_code", trust_remote_code)):
            if value is not None:
                given[name] = value
        from prbench.harness import data_parallel

        accelerator = data_parallel.start(device)  # under accelerate launch / torchrun
        spec = resolve_scorer(
            given, device=None if accelerator is not None else device,
            device_explicit=device is not None and not lm_eval_default_device(device),
            batch_size=batch_size, max_batch_size=max_batch_size,
        )
        self._start(spec, accelerator)

    @classmethod
    def from_spec(cls, spec: ScorerSpec, *, write_out: bool = False) -> PRBenchLM:
        """The model of a resolved scorer (``prbench eval``: the options are parsed once).

        Args:
            spec: the scorer, resolved (:func:`prbench.scoring.spec.resolve_scorer`).
            write_out: print, for each task, what the scorer gets for its first document
                (``prbench eval --write_out``; :mod:`prbench.harness.writeout`).
        """
        from prbench.harness import data_parallel

        lm = cls.__new__(cls)
        LM.__init__(lm)
        lm._start(spec, data_parallel.start(spec.device), write_out=write_out)
        return lm

    def _start(self, spec: ScorerSpec, accelerator: Any, *, write_out: bool = False) -> None:
        from prbench.harness import data_parallel
        from prbench.plugins import get_registry

        self._registry = get_registry()
        self._accelerator = accelerator
        if accelerator is not None:  # a replicated scorer: this process's rank and device
            self._rank = accelerator.process_index
            self._world_size = accelerator.num_processes
            spec = spec.with_device(data_parallel.process_device(accelerator))
        self.spec = spec
        self.component = spec.component
        self.pairwise = spec.pairwise
        self._device = spec.device
        self.label = spec.label
        self.batch_size = spec.batch_size
        self.max_batch_size = spec.max_batch_size
        self.runtime_options = spec.runtime_options
        self.options = spec.options
        self._runtime: Any = None
        self._closed = False
        self.calls = 0
        self.scored = 0
        #: requests lm-eval repeated as padding in this process (trimmed at the next barrier)
        self._padded: list[Any] = []
        #: what every process did (rank 0, after lm-eval gathered the metrics)
        self._shards: list[dict[str, Any]] | None = None
        #: tasks whose first document is still to be written out (``write_out``)
        self._write_out = write_out
        self._written_out: set[str] = set()
        _OPEN.add(self)
        from prbench.profiles.lazy import store

        # rows' profiles are built here, for the rows scored (not in doc_to_text), in the store
        # of the run this model belongs to
        self._profile_store = store()
        self._profile_store.consumers.add(self)
        self._chat_note_given = False

    @classmethod
    def create_from_arg_obj(
        cls, arg_dict: dict[str, Any], additional_config: dict[str, Any] | None = None
    ) -> PRBenchLM:
        """Build from ``--model_args`` plus lm-eval's ``device``/``batch_size`` arguments.

        This is how plain ``lm_eval --model prbench`` builds the model (``prbench eval`` uses
        :meth:`from_spec`). lm-eval passes its own ``--device``/``--batch_size`` (with defaults
        such as ``cuda:0``) beside the model arguments; a key given in ``--model_args``
        (``device=cpu``) wins over them. Under the ``lm_eval`` command prbench has already handed
        lm-eval the ``--model_args`` as one JSON object of the user's text
        (:func:`prbench.harness.eval_options.json_flag_argv`), so each value is read by its
        option's declared type only.
        """
        given = additional_config or {}
        extra = {k: v for k, v in given.items() if v is not None and k not in arg_dict}
        lm = cls(**arg_dict, **extra)
        from prbench.harness import lm_eval_compat

        lm_eval_compat.plain_run_started(lm)
        return lm

    @classmethod
    def create_from_arg_string(
        cls, arg_string: str, additional_config: dict[str, Any] | None = None
    ) -> PRBenchLM:
        """As :meth:`create_from_arg_obj`, from ``"key=value,..."`` (read by prbench's parser)."""
        from prbench.harness.eval_options import unquoted
        from prbench.options import parse_kv_string

        args = {k: unquoted(v) for k, v in parse_kv_string(arg_string).items()}
        return cls.create_from_arg_obj(args, additional_config)

    # -- lm-eval plumbing ----------------------------------------------------------------------

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
        """Gather Python objects on rank ``dst``, in one process's document order.

        lm-eval gathers its logged samples and per-pair metric lists with this; they come back
        in document order (:func:`prbench.harness.data_parallel.merge_gathered`), so the files
        and metrics of N processes are those of one. Every call also gathers what each process
        scored and built (:meth:`_shard_info`) for rank 0's provenance.
        """
        if self._accelerator is None or self.world_size <= 1:
            return [obj]
        import torch.distributed as dist

        from prbench.harness import data_parallel, profile_rows

        parts: list[Any] | None = [None] * self.world_size if self.rank == dst else None
        dist.gather_object(obj=obj, object_gather_list=parts, dst=dst)
        infos: list[Any] | None = [None] * self.world_size if self.rank == dst else None
        dist.gather_object(obj=self._shard_info(), object_gather_list=infos, dst=dst)
        if parts is None or infos is None:
            return None
        self._shards = [dict(info) for info in infos]
        for info in self._shards:
            if info["rank"] != self.rank:
                profile_rows.note_peer_profiles(info.pop("profiles"))
            else:
                info.pop("profiles")
        return data_parallel.merge_gathered(parts)

    def barrier(self) -> None:
        """Wait for every process.

        lm-eval calls it right after storing the responses of a request type; the responses it
        stored for its padding copies are dropped first
        (:func:`prbench.harness.data_parallel.trim_padding`).
        """
        from prbench.harness.data_parallel import trim_padding

        trim_padding(self._padded)
        self._padded = []
        if self._accelerator is not None and self.world_size > 1:
            self._accelerator.wait_for_everyone()

    def _shard_info(self) -> dict[str, Any]:
        """What this process did: counts, runtime and scorer stats, profiles built or skipped."""
        from prbench.profiles import lazy

        described = self._runtime.describe() if self._runtime is not None else {}
        return {
            "rank": self.rank,
            "device": self._device,
            "calls": self.calls,
            "scored": self.scored,
            "stats": described.get("stats"),
            "scorer_stats": described.get("scorer_stats"),
            "profiles": lazy.store().statuses(),
        }

    # -- scoring -------------------------------------------------------------------------------

    @property
    def runtime(self) -> Any:
        """The scorer in its :class:`prbench.scoring.runtime.ScorerRuntime`, built on first use."""
        if self._runtime is None:
            if self._closed:
                raise RuntimeError(f"the prbench model ({self.component.name!r}) is closed")
            self._runtime = self.spec.build()
        return self._runtime

    @property
    def scorer(self) -> Any:
        """The scorer object (built with its runtime on first use)."""
        return self.runtime.scorer

    def close(self) -> None:
        """Close the runtime: its score cache and the scorer's ``close()`` (idempotent)."""
        self._closed = True
        _OPEN.discard(self)
        self._profile_store.consumers.discard(self)
        if self._runtime is not None:
            self._runtime.close()

    def _doc(self, inst: Any) -> dict[str, Any]:
        doc = inst.doc
        missing = [f for f in REQUIRED_DOC_FIELDS if not isinstance(doc, dict) or f not in doc]
        if missing:
            raise ValueError(
                f"the prbench model scores personalized_rewardbench-style tasks only: a document "
                f"of task {inst.task_name!r} lacks {missing}"
            )
        return doc

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

    def _prepare_profiles(self, requests: Sequence[Any]) -> None:
        """Build the pending profiles of every requested row at once (or mark them not built).

        One builder call per profile condition for all the rows of this call, so an embedding
        model sees large batches; nothing is built for a scorer registered with
        ``reads_profile=False``.
        """
        from prbench.harness.profile_rows import prepare_profiles

        docs = list({id(inst.doc): self._doc(inst) for inst in requests}.values())
        prepare_profiles(docs, build=self.component.reads_profile)

    def _context(self, doc: dict[str, Any]) -> dict[str, Any]:
        from prbench.harness.profile_rows import row_view

        hidden = None
        if self.component.diagnostic:
            from prbench.harness.record_store import record_json

            record = json.loads(record_json(str(doc["record_ref"])))
            hidden = {
                "narrative": record.get("narrative", ""),
                "rubric_aspects": record.get("rubric_aspects", []),
            }
        return {
            "record_id": str(doc["id"]),
            "question": doc["question"],
            "profile": row_view(doc, build=self.component.reads_profile),
            "category": doc.get("category", ""),
            "domain": doc.get("domain", ""),
            "hidden": hidden,
        }

    def _score_pointwise(self, requests: Sequence[Any]) -> list[Scored]:
        from prbench.scoring.base import ScoreRequest

        self._prepare_profiles(requests)
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
        scores = self.runtime.score(batch)  # checked by the runtime: one real number each
        # why an answer has no score travels with its result (prbench.harness.scored)
        extras = [e if isinstance(e, Mapping) and isinstance(e.get("invalid"), str) else None
                  for e in self.runtime.extras(batch)]
        # the input each answer was scored from (prbench.scoring.inputs), for the samples file
        inputs = self.runtime.inputs(batch)
        self.calls += 1
        self.scored += len(batch)
        by_key = {}
        for k, s, e, given in zip(unique, scores, extras, inputs, strict=True):
            carried: dict[str, Any] = {"invalid": e["invalid"]} if e else {}
            if given is not None:
                carried["input"] = given
            by_key[k] = Scored(s, carried or None)
        return [by_key[k] for k in keys]

    def _score_pairwise(self, requests: Sequence[Any]) -> list[Scored]:
        from prbench.scoring.base import PairRequest

        self._prepare_profiles(requests)
        sides: list[tuple[tuple[Any, ...], int]] = []
        unique: dict[tuple[Any, ...], PairRequest] = {}
        for inst in requests:
            doc = self._doc(inst)
            key = (inst.task_name, doc["id"])
            sides.append((key, self._which(doc, inst)))
            if key not in unique:
                position = doc.get("domain_position")
                unique[key] = PairRequest(
                    first=doc["chosen"], second=doc["rejected"], **self._context(doc),
                    domain_position=position if isinstance(position, int) else None,
                )
        batch = list(unique.values())
        probs = self.runtime.compare(batch)  # checked by the runtime
        # the judge's per-order verdicts (the runtime's request extras; chosen = the pair's
        # first answer) travel with the chosen answer's result to the task's both-order metrics
        outcomes = dict(zip(unique, self.runtime.extras(batch), strict=True))
        # the messages of each order asked, with the replies (prbench.scoring.inputs), go the
        # same way
        inputs = dict(zip(unique, self.runtime.inputs(batch), strict=True))
        self.calls += 1
        self.scored += len(batch)
        by_key = dict(zip(unique, probs, strict=True))
        out = []
        for k, which in sides:
            carried: dict[str, Any] = {}
            if which == 0 and isinstance(outcomes[k], Mapping):
                carried["orders"] = dict(outcomes[k])
            if which == 0 and inputs[k] is not None:
                carried["input"] = inputs[k]
            out.append(Scored(by_key[k] if which == 0 else 1.0 - by_key[k], carried or None))
        return out

    def loglikelihood(
        self, requests: list[Any], disable_tqdm: bool = False
    ) -> list[Scored]:
        """The reward of each answer (or the judge's probability), in request order.

        Each is a :class:`~prbench.harness.scored.Scored`: lm-eval's ``(value, is_greedy)``
        pair carrying what the scorer said of the answer to the task's ``process_results``.
        """
        if not requests:
            return []
        if self.world_size > 1:
            from prbench.harness.data_parallel import padding

            self._padded.extend(padding(requests))
        self._write_out_first(requests)
        return self._score_pairwise(requests) if self.pairwise else self._score_pointwise(requests)

    def _write_out_first(self, requests: Sequence[Any]) -> None:
        """``write_out``: each task's first document as the scorer gets it, once (stderr)."""
        if not self._write_out:
            return
        from prbench.harness.writeout import is_prbench_doc, render

        for inst in requests:
            name = str(inst.task_name)
            if inst.doc_id == 0 and name not in self._written_out and is_prbench_doc(inst.doc):
                self._written_out.add(name)
                sys.stderr.write(render(name, inst.doc, self) + "\n")

    # -- lm-eval's --apply_chat_template -------------------------------------------------------

    @property
    def tokenizer_name(self) -> str:
        """What lm-eval keys its request cache on under ``--apply_chat_template``: the scorer."""
        return "prbench-" + self.component.qualified_id.replace("/", "__")

    def chat_template(self, chat_template: bool | str = False) -> str:
        """No lm-eval chat template: each scorer builds its own input (recorded as ``""``)."""
        return ""

    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        """The prompt text unchanged: ``--apply_chat_template`` does not change what is scored.

        A prbench scorer never reads lm-eval's prompt: it gets the structured request, and a chat
        reward model always renders ``[user: question (+ profile), assistant: answer]`` with its
        own chat template (``hf-classifier``'s ``chat_template`` option overrides it). The flag
        is accepted and said so once on standard error; the logged prompt stays the plain text.
        """
        if not self._chat_note_given:
            self._chat_note_given = True
            print(CHAT_TEMPLATE_NOTE, file=sys.stderr)
        return "".join(str(m.get("content", "")) for m in chat_history)

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
        """The scorer, its options and what it did (recorded in results and manifests).

        ``scorer.runtime`` is the runtime's :meth:`~prbench.scoring.runtime.ScorerRuntime.describe`
        (fingerprint, cache, chunk size, run stats, the scorer's own ``describe()``), ``None``
        when nothing was scored; ``scorer.stats`` is the scorer's own ``stats()`` if it has one.
        """
        from prbench.harness.manifest import versions
        from prbench.harness.profile_rows import PROVENANCE, refresh_provenance

        refresh_provenance()
        runtime = self._runtime.describe() if self._runtime is not None else None
        stats = (runtime or {}).get("scorer_stats")
        calls, scored, ranks = self.calls, self.scored, None
        if self._shards is not None:  # rank 0 of a data parallel run: the whole run's counts
            from prbench.harness.data_parallel import merge_stats

            calls = sum(int(s["calls"]) for s in self._shards)
            scored = sum(int(s["scored"]) for s in self._shards)
            ranks = self._shards
            if runtime is not None:
                runtime["stats"] = merge_stats([s["stats"] for s in self._shards])
        return {
            "scorer": {
                "id": self.component.name,
                "qualified_id": self.component.qualified_id,
                "plugin": self.component.plugin,
                "options": options_to_dict(self.options),
                "diagnostic": self.component.diagnostic,
                "reads_profile": self.component.reads_profile,
                "tags": list(self.component.tags),
                "pairwise": self.pairwise,
                "label": self.label,
                "device": self._device,
                "batch_size": self.batch_size,
                "calls": calls,
                "scored": scored,
                "built": self._runtime is not None,
                "stats": stats,
                "runtime": runtime,
                "ranks": ranks,
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


__all__ = [
    "CHAT_TEMPLATE_NOTE",
    "DEFAULT_SCORER",
    "PRBenchLM",
    "close_open_models",
    "parse_batch_size",
]
