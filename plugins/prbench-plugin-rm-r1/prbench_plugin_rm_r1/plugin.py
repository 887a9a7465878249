"""Hook implementations and options of ``rm-r1`` and ``rm-r1-scalar`` (no heavy imports here)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Literal

from prbench.api import BackendOptions, ComponentRegister, hookimpl

#: The public checkpoints (README); the DeepSeek-distilled ones use the ``reasoning`` prompt.
CHECKPOINTS = (
    "gaotang/RM-R1-Qwen2.5-Instruct-7B",
    "gaotang/RM-R1-Qwen2.5-Instruct-14B",
    "gaotang/RM-R1-Qwen2.5-Instruct-32B",
    "gaotang/RM-R1-DeepSeek-Distilled-Qwen-7B",
    "gaotang/RM-R1-DeepSeek-Distilled-Qwen-14B",
    "gaotang/RM-R1-DeepSeek-Distilled-Qwen-32B",
)


#: Default ``max_new_tokens`` per style: reasoning traces run to tens of thousands of tokens (the
#: authors evaluate with a 50,000-token budget); the instruct checkpoints write shorter ones.
BUDGETS = {"reasoning": 32768, "instruct": 8192}

#: Name fragments (lower case) that mark a reasoning (DeepSeek-distilled) checkpoint.
_REASONING_NAMES = ("deepseek", "r1-distill", "reasoning")


def detect_style(model: str) -> tuple[str, str]:
    """The style of a checkpoint and where it was read: ``(style, "name" | "config" | "default")``.

    The model name (or folder) is checked first for ``DeepSeek``, ``R1-Distill`` or
    ``reasoning``; a local folder's ``config.json`` (its ``_name_or_path``) and
    ``tokenizer_config.json`` (a chat template that opens a ``<think>`` block) next; otherwise
    ``instruct``.
    """
    if any(part in model.lower() for part in _REASONING_NAMES):
        return "reasoning", "name"
    folder = Path(model).expanduser()
    if folder.is_dir():
        for name in ("config.json", "tokenizer_config.json"):
            try:
                data = json.loads((folder / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(data, dict):
                continue
            origin = str(data.get("_name_or_path", "")).lower()
            template = data.get("chat_template")
            if any(part in origin for part in _REASONING_NAMES) or (
                isinstance(template, str) and "<think>" in template
            ):
                return "reasoning", "config"
    return "instruct", "default"


@dataclasses.dataclass(frozen=True)
class RMR1Options(BackendOptions):
    """Options of ``rm-r1``: the generation backend (see ``BackendOptions``) plus the judge's.

    ``max_new_tokens=0`` (the default) takes the budget of the style (:data:`BUDGETS`); the
    resolved number replaces it, so results record the budget that ran.
    """

    max_new_tokens: int = dataclasses.field(
        default=0,
        metadata={"help": "tokens per reply; 0 = by style (reasoning 32768, instruct 8192); on a "
                          "served model at most its max_model_len - prompt tokens; a trace cut at "
                          "the budget is invalid (`truncated`) under parse=strict",
                  "ge": 0, "le": 1_048_576},
    )
    style: Literal["auto", "instruct", "reasoning"] = dataclasses.field(
        default="auto",
        metadata={"help": "instruct (Qwen2.5-Instruct: system-turn prompt) or reasoning "
                          "(DeepSeek-distilled, <think>); auto reads the model name/config"},
    )
    orders: Literal["both", "one"] = dataclasses.field(
        default="both",
        metadata={"help": "'both' judges each pair in both orders; 'one' a seeded single order"},
    )
    parse: Literal["strict", "original"] = dataclasses.field(
        default="strict",
        metadata={"help": "strict: one marker inside <answer> after the reasoning; original: "
                          "exactly one of [[A]]/[[B]] anywhere in the reply, reasoning_content "
                          "and cut replies included (the authors' rule)"},
    )
    system_prompt_file: str = dataclasses.field(
        default="",
        metadata={"help": "template of the system turn ({question} {answer_a} {answer_b} "
                          "{profile}); '' = prbench's wording"},
    )
    user_prompt_file: str = dataclasses.field(
        default="",
        metadata={"help": "template of the user turn (same fields); '' = prbench's wording"},
    )

    def __post_init__(self) -> None:
        if self.max_new_tokens < 0:
            raise ValueError("max_new_tokens must be 0 (by style) or a positive number")
        if self.max_new_tokens == 0:
            object.__setattr__(self, "max_new_tokens", BUDGETS[self.resolved_style()[0]])
        super().__post_init__()
        if self.system_prompt_file or self.user_prompt_file:
            from prbench_plugin_rm_r1.prompts import load_templates

            load_templates(self.system_prompt_file, self.user_prompt_file)

    def resolved_style(self) -> tuple[str, str]:
        """``(style, source)``: the option when set (source ``option``), else detected from the
        model (:func:`detect_style`).
        """  # noqa: D205
        if self.style != "auto":
            return self.style, "option"
        return detect_style(self.model)


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
