"""Online RL with a prbench scorer as the reward: TRL's GRPO or RLOO, evaluated before and after.

The policy (any Hugging Face causal LM folder or hub id, or a GGUF file inside one) is trained on
the benchmark's questions: each prompt is the Best-of-N policy prompt (question + the user's
profile view, answer under 100 words; :func:`prbench.downstream.policy.policy_chat`). Every group
of sampled completions is scored in one batched call of the shared scorer runtime (dedup, cache),
which sees the record's question, profile view, category and domain — the reward function gets
them from the dataset columns TRL passes through.

Before and after training the policy answers the evaluation questions greedily and each answer is
scored by the reward scorer and by a judge scorer: ``oracle-rubric`` by default (works offline,
DIAGNOSTIC: it reads the hidden rubric), or ``rubric-judge`` with a model (0/1/2 per gold rubric
aspect, reported on a 0-1 scale). A judge that cannot read an answer gives ``nan``; those are
counted, not averaged.

Checkpoints go to ``output_dir/checkpoint-*`` (TRL's), the final policy to ``output_dir/final``,
and the results to ``output_dir/rl_results.json``.

TRL 1.16 has GRPO and RLOO; PPO was removed after trl 1.12 (``trl.experimental.ppo``), and it
needs a reward *model* module rather than a reward function, so it is not offered here: for PPO
use verl or OpenRLHF with ``prbench serve``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.downstream.rl_config import RLConfig
from prbench.downstream.rl_policy import check_policy, load_policy, plain_copy
from prbench.profiles.base import ProfileView
from prbench.records import Record
from prbench.scoring.base import ScoreRequest
from prbench.strict_json import write_json


def completion_text(completion: Any) -> str:
    """The text of a TRL completion (a string, or a list of chat messages)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, Mapping))
    raise TypeError(f"unexpected completion type {type(completion).__name__}")


class ScorerReward:
    """A TRL reward function backed by a prbench scorer (one batched, cached call per group).

    Public (``prbench.api.ScorerReward``): what ``prbench rl`` passes to TRL, for a training
    script of your own. Build it with :meth:`for_records`, give the trainer a dataset with a
    ``prompt`` column (e.g. :func:`prbench.downstream.policy.policy_chat`) and a ``record_id``
    column, and pass ``reward_funcs=[reward]``::

        reward = ScorerReward.for_records("length", load_records("sample"))
        trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset, ...)

    TRL calls it with ``prompts``, ``completions`` and every dataset column as keyword lists; the
    ``record_id`` column finds the record and its profile view.

    Args:
        runtime: the scorer runtime (:func:`prbench.scoring.spec.build_runtime`).
        records: the records, by id.
        views: the profile view of each record, by id.
        diagnostic: pass the hidden rubric to the scorer (diagnostic scorers only).
    """

    __name__ = "prbench_reward"  # TRL names the logged reward after it

    def __init__(self, runtime: Any, records: Mapping[str, Record],
                 views: Mapping[str, ProfileView], *, diagnostic: bool = False) -> None:
        self.runtime = runtime
        self.records = records
        self.views = views
        self.diagnostic = diagnostic
        self.calls = 0

    @classmethod
    def for_records(cls, scorer: str, records: Sequence[Record], *,
                    scorer_options: Mapping[str, Any] | None = None, profile: str = "none",
                    profile_options: Mapping[str, Any] | None = None) -> ScorerReward:
        """The reward of a registered pointwise scorer over ``records``.

        Args:
            scorer: the scorer id (``length``, ``hf-classifier``, ``plugin/id``, ...).
            records: the records the prompts come from (their ids are the ``record_id`` column).
            scorer_options: the scorer's options, runtime options (``cache_path=``, ...)
                included, as in ``--model_args``.
            profile: the profile builder the scorer sees the user's posts through.
            profile_options: its options.

        Raises:
            prbench.plugins.UnknownComponentError: no such scorer or builder.
            OptionsError: bad options, or a pairwise scorer (a reward is one score per answer).
        """
        from prbench.options import OptionsError
        from prbench.plugins import get_registry
        from prbench.scoring.spec import build_runtime

        component = get_registry().get("scorer", scorer)
        if "pairwise" in component.tags:
            raise OptionsError(f"scorer {scorer!r} is pairwise; a reward needs a pointwise scorer "
                               "(one score per answer; `prbench scorers` marks them)")
        runtime = build_runtime(component.qualified_id, scorer_options)
        by_id = {r.id: r for r in records}
        views = dict(zip(by_id, build_views(list(by_id.values()), profile, profile_options),
                         strict=True))
        return cls(runtime, by_id, views, diagnostic=component.diagnostic)

    def requests(self, record_ids: Sequence[str], texts: Sequence[str]) -> list[ScoreRequest]:
        """Score requests for answers to the given records."""
        out = []
        for rid, text in zip(record_ids, texts, strict=True):
            r = self.records[rid]
            out.append(ScoreRequest(
                record_id=r.id, question=r.question, response=text, profile=self.views[rid],
                category=r.category, domain=r.domain,
                hidden=r.hidden() if self.diagnostic else None,
            ))
        return out

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 record_id: Sequence[str] | None = None, **kwargs: Any) -> list[float]:
        """One reward per completion, in order."""
        if record_id is None:
            raise ValueError("the training dataset has no 'record_id' column")
        self.calls += 1
        texts = [completion_text(c) for c in completions]
        return list(self.runtime.score(self.requests(record_id, texts)))


def build_views(records: Sequence[Record], builder: str,
                options: Mapping[str, Any] | None = None) -> list[ProfileView]:
    """Profile views of ``records`` from a registered profile builder."""
    from prbench.plugins import get_registry
    from prbench.profiles.base import build_views as checked

    built = get_registry().build("profile-builder", builder, dict(options or {}))
    return checked(built, records, f"profile builder {builder!r}")


def _mean(values: Sequence[float]) -> float | None:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.fmean(finite) if finite else None


def evaluate_policy(
    model: str, gguf_file: str, records: Sequence[Record], views: Sequence[ProfileView],
    reward: ScorerReward, judge: Any, config: RLConfig, *, label: str,
    judge_diagnostic: bool = True,
) -> dict[str, Any]:
    """Greedy answers of the policy at ``model``, scored by the reward and the judge."""
    from prbench.downstream.policy import PolicyOptions, policy_chat
    from prbench.judges.common import generate_in_batches, resolve_backend

    options = PolicyOptions(backend="hf", model=model, gguf_file=gguf_file, temperature=0.0,
                            top_p=1.0, max_new_tokens=config.eval_max_new_tokens,
                            seed=config.seed, cache_dir="", device="auto",
                            trust_remote_code=config.trust_remote_code)
    backend = resolve_backend(options, None, f"rl eval ({label})")
    chats = [policy_chat(r.question, v) for r, v in zip(records, views, strict=True)]
    answers = [a.strip() for a in
               generate_in_batches(backend, chats, options.generation_config(), 8)]
    requests = reward.requests([r.id for r in records], answers)
    rewards = [float(x) for x in reward.runtime.score(requests)]
    out: dict[str, Any] = {"n": len(records), "mean_reward": _mean(rewards)}
    quality: list[float] = []
    if judge is not None:
        judged = [
            dataclasses.replace(q, hidden=records[i].hidden() if judge_diagnostic else None)
            for i, q in enumerate(requests)
        ]
        quality = [float(x) for x in judge.score(judged)]
        out["mean_quality"] = _mean(quality)
        out["judge_failures"] = sum(1 for q in quality if math.isnan(q))
    out["items"] = [
        {"record_id": r.id, "answer": a, "reward": rw,
         **({"quality": None if math.isnan(quality[i]) else quality[i]} if quality else {})}
        for i, (r, a, rw) in enumerate(zip(records, answers, rewards, strict=True))
    ]
    return out


def train_args(config: RLConfig) -> Any:
    """The TRL config (GRPOConfig / RLOOConfig) for ``config``."""
    from prbench.progress import progress_enabled

    common: dict[str, Any] = {
        "output_dir": config.output_dir,
        "num_generations": config.num_generations,
        "per_device_train_batch_size": config.num_generations * config.prompts_per_step,
        "gradient_accumulation_steps": 1,
        "max_completion_length": config.max_completion_length,
        "learning_rate": config.learning_rate,
        "beta": config.beta,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "max_steps": config.max_steps,
        "num_train_epochs": config.epochs,
        "seed": config.seed,
        "data_seed": config.seed,
        "save_steps": config.save_steps,
        "logging_steps": 1,
        "report_to": "none",
        "disable_tqdm": not progress_enabled(config.progress),
        "bf16": False,
        "use_vllm": False,
    }
    if config.algorithm == "grpo":
        from trl import GRPOConfig as Config
    else:
        from trl import RLOOConfig as Config
    fields = {f.name for f in dataclasses.fields(Config)}
    # TRL turns checkpointing on by default; newer transformers call it activation_checkpointing
    name = ("activation_checkpointing" if "activation_checkpointing" in fields
            else "gradient_checkpointing")
    common[name] = config.gradient_checkpointing
    common["dataloader_pin_memory"] = _has_cuda()  # pinning without a GPU only warns
    return Config(**common)


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def run_rl(
    config: RLConfig,
    train_records: Sequence[Record],
    eval_records: Sequence[Record],
    *,
    profile: str = "none",
    profile_options: Mapping[str, Any] | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Evaluate, train with TRL, evaluate again; write and return the results.

    Raises:
        ValueError: bad settings, or the judge/scorer is pairwise.
        OptionsError: the policy cannot load (e.g. it needs ``trust_remote_code``).
        ImportError: trl is not installed (the ``rl`` extra).
    """
    from datasets import Dataset
    from transformers import set_seed

    from prbench.downstream.policy import policy_chat
    from prbench.downstream.rl_progress import RewardCurve, step_lines_enabled, trainer_callback
    from prbench.plugins import get_registry
    from prbench.scoring.spec import build_runtime

    clock = PhaseClock()
    check_policy(config)  # before any data, model or output folder
    set_seed(config.seed)
    out_dir = Path(config.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    all_records = {r.id: r for r in [*train_records, *eval_records]}
    ordered = list(all_records.values())
    with clock("profiles"):
        built_views = build_views(ordered, profile, profile_options)
    views = dict(zip(all_records, built_views, strict=True))
    registry = get_registry()
    scorer = registry.get("scorer", config.scorer)  # resolved once; the qualified id from here on
    judge_component = registry.get("scorer", config.judge) if config.judge else None
    rt = build_runtime(scorer.qualified_id, config.scorer_options, progress=config.progress)
    judge = None
    judge_diag = judge_component is not None and judge_component.diagnostic
    try:
        if rt.pairwise:
            raise ValueError(f"scorer {config.scorer!r} is pairwise; RL needs a pointwise reward")
        reward = ScorerReward(rt, all_records, views, diagnostic=scorer.diagnostic)
        if judge_component is not None:
            judge = build_runtime(
                judge_component.qualified_id, config.judge_options, progress=config.progress
            )
            if judge.pairwise:
                raise ValueError(f"judge {config.judge!r} is pairwise; use a pointwise judge")
        eval_views = [views[r.id] for r in eval_records]
        with clock("load_policy"):
            model, tokenizer = load_policy(config)
        with clock("eval_before"), plain_copy(config, model, tokenizer, out_dir) as start:
            before = evaluate_policy(start, "", eval_records, eval_views, reward, judge, config,
                                     label="before", judge_diagnostic=judge_diag)
        dataset = Dataset.from_list([
            {"prompt": policy_chat(r.question, views[r.id]), "record_id": r.id}
            for r in train_records
        ])
        args = train_args(config)
        if config.algorithm == "grpo":
            from trl import GRPOTrainer as Trainer
        else:
            from trl import RLOOTrainer as Trainer
        curve = RewardCurve(show=step_lines_enabled(config.step_lines))
        trainer = Trainer(model=model, reward_funcs=[reward], args=args, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[trainer_callback(curve)])
        if curve.show:
            quiet_trainer_logs(trainer)
        last = _last_checkpoint(out_dir) if resume else None
        with clock("train"), warnings.catch_warnings():
            # TRL toggles checkpointing around generation through the old method names
            warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated",
                                    category=FutureWarning)
            trainer.train(resume_from_checkpoint=str(last) if last else None)
        final = out_dir / "final"
        trainer.save_model(str(final))
        tokenizer.save_pretrained(str(final))
        with clock("eval_after"):
            after = evaluate_policy(str(final), "", eval_records, eval_views, reward, judge,
                                    config, label="after", judge_diagnostic=judge_diag)
        learned = curve.summary()
        overlap = sorted({r.id for r in train_records} & {r.id for r in eval_records})
        results = {
            "config": {**dataclasses.asdict(config), "profile": profile,
                       "profile_options": dict(profile_options or {})},
            "scorer": rt.describe(),
            "judge": judge.describe() if judge is not None else None,
            "train": {
                "records": len(train_records), "steps": trainer.state.global_step,
                "reward_calls": reward.calls,
                **learned,
                "log_history": trainer.state.log_history,
            },
            "seconds": clock.seconds,
            "eval_overlaps_train": len(overlap),
            "before": before,
            "after": after,
            "final_policy": str(final),
        }
    finally:
        rt.close()
        if judge is not None:
            judge.close()
    write_json(out_dir / "rl_results.json", results)  # strict JSON: null + a note for NaN
    return results


class PhaseClock:
    """Wall-clock seconds of the named phases of a run (``with clock("train"): ...``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Time the block under ``name`` (added to an earlier block of the same name)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - start
            self.seconds[name] = round(self.seconds.get(name, 0.0) + spent, 3)


def quiet_trainer_logs(trainer: Any) -> None:
    """Drop the Trainer's own progress output; the step lines of :mod:`rl_progress` replace it.

    Without a terminal the Trainer prints every log dict to standard output (``PrinterCallback``);
    with one it draws a bar and writes the same dicts above it (``ProgressCallback``).
    """
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


class OnlineRLEvaluator:
    """The ``online-rl`` downstream evaluator: :func:`run_rl` with validated :class:`RLConfig`.

    Built through the plugin registry (``register_downstream_evaluators``) like every other
    downstream evaluator; ``prbench rl`` is its command line.
    """

    def __init__(self, options: RLConfig) -> None:
        self.options = options

    def run(
        self,
        train_records: Sequence[Record],
        eval_records: Sequence[Record],
        *,
        profile: str = "none",
        profile_options: Mapping[str, Any] | None = None,
        resume: bool = False,
    ) -> dict[str, Any]:
        """Evaluate, train and evaluate again (see :func:`run_rl`)."""
        return run_rl(self.options, train_records, eval_records, profile=profile,
                      profile_options=profile_options, resume=resume)


def _last_checkpoint(folder: Path) -> Path | None:
    found = [p for p in folder.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    return max(found, key=lambda p: int(p.name.split("-")[-1])) if found else None


def format_summary(results: Mapping[str, Any]) -> str:
    """A small before/after table (markdown)."""
    def cell(v: Any) -> str:
        return "n/a" if v is None else f"{v:.4f}"

    from prbench.tables import markdown_table

    head = ["policy", "mean reward", "mean judge quality (0-1)", "judge failures"]
    rows = [markdown_table(head, [
        [name, cell(results[name]["mean_reward"]), cell(results[name].get("mean_quality")),
         str(results[name].get("judge_failures", "n/a"))] for name in ("before", "after")])]
    train = results["train"]
    rows.append("")
    rows.append(f"trained {train['steps']} steps on {train['records']} records; training reward, "
                f"first step -> last step: {cell(train['reward_first'])} -> "
                f"{cell(train['reward_last'])} (one step's prompts each, not a before/after)")
    curve = train.get("curve") or []
    if curve:
        rows.append("reward by step: " + " ".join(f"{p['reward']:.3f}" for p in curve))
    seconds = results.get("seconds") or {}
    if seconds:
        rows.append("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()))
    if results.get("eval_overlaps_train"):
        rows.append(f"note: {results['eval_overlaps_train']} evaluation record(s) were also "
                    "trained on")
    return "\n".join(rows)
