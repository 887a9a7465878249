"""Hook implementations and options of ``rm-r1`` and ``rm-r1-scalar`` (no heavy imports here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from prbench import hookimpl
from prbench.hookspecs import ComponentRegister
from prbench.judges.common import BackendOptions

#: The public checkpoints (README); the DeepSeek-distilled ones use the ``reasoning`` prompt.
CHECKPOINTS = (
    "gaotang/RM-R1-Qwen2.5-Instruct-7B",
    "gaotang/RM-R1-Qwen2.5-Instruct-14B",
    "gaotang/RM-R1-Qwen2.5-Instruct-32B",
    "gaotang/RM-R1-DeepSeek-Distilled-Qwen-7B",
    "gaotang/RM-R1-DeepSeek-Distilled-Qwen-14B",
    "gaotang/RM-R1-DeepSeek-Distilled-Qwen-32B",
)


@dataclasses.dataclass(frozen=True)
class RMR1Options(BackendOptions):
    """Options of ``rm-r1``: the generation backend (see ``BackendOptions``) plus the judge's."""

    max_new_tokens: int = dataclasses.field(
        default=8192,
        metadata={"help": "tokens per reply; RM-R1 traces are long (a cut trace is invalid)"},
    )
    prompt_style: Literal["auto", "instruct", "reasoning"] = dataclasses.field(
        default="auto",
        metadata={"help": "instruct (system-turn rubric prompt) or reasoning (DeepSeek-distilled,"
                          " <think>); auto picks reasoning when the model name has 'deepseek'"},
    )
    orders: Literal["both", "one"] = dataclasses.field(
        default="both",
        metadata={"help": "'both' judges each pair in both orders; 'one' a seeded single order"},
    )

    def style(self) -> str:
        """The prompt style to use (``auto`` resolved from the model name)."""
        if self.prompt_style != "auto":
            return self.prompt_style
        return "reasoning" if "deepseek" in self.model.lower() else "instruct"


@dataclasses.dataclass(frozen=True)
class RMR1ScalarOptions(RMR1Options):
    """Options of ``rm-r1-scalar``: ``rm-r1`` plus the reference answer each response faces."""

    reference_text: str = dataclasses.field(
        default="", metadata={"help": "one reference answer used for every question"}
    )
    reference_file: str = dataclasses.field(
        default="",
        metadata={"help": "JSON/JSONL rows {id, reference}: a reference answer per record id"},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if bool(self.reference_text) == bool(self.reference_file):
            raise ValueError(
                "rm-r1-scalar needs exactly one of reference_text=<answer> or "
                "reference_file=<JSON/JSONL with id and reference per record>"
            )
        if self.reference_file and not Path(self.reference_file).expanduser().is_file():
            raise ValueError(f"reference_file {self.reference_file!r} does not exist")


@hookimpl
def register_scorers(register: ComponentRegister) -> None:
    """Register the judge and its scalar (Best-of-N) mode."""
    register(
        "rm-r1",
        "prbench_plugin_rm_r1.judge:RMR1Judge",
        options=RMR1Options,
        tags=("pairwise", "llm"),
        description="RM-R1 reasoning RM: rubric, eval, <answer>[[A]]</answer>; both orders, strict",
    )
    register(
        "rm-r1-scalar",
        "prbench_plugin_rm_r1.judge:RMR1ScalarScorer",
        options=RMR1ScalarOptions,
        tags=("pointwise", "llm"),
        description="RM-R1 win rate of each response against a fixed reference (both orders)",
    )
