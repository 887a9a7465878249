"""The released peers' own code, loaded in a CPU test process (verl 0.9.1, OpenRLHF 0.11.2).

Both are installed with ``pip install --no-deps`` (the ``peers`` extra installs what their config,
loader and agent-executor modules import; ``make setup`` does both). Only the modules a test needs
are imported:

- verl: the reward-function loader ``verl.trainer.ppo.reward.get_custom_reward_fn`` and the hydra
  config of ``main_ppo`` (``verl/trainer/config/ppo_trainer.yaml``). ``import verl`` itself runs
  ``verl/__init__.py``, which imports ``verl.protocol`` and with it Ray and tensordict (about 250
  MB, not installed). When those are missing, :func:`verl_loader` enters the ``verl`` package
  without running its ``__init__`` (the submodules are verl's own files, unchanged); the one name
  the loader module imports from the package top, ``DataProto``, is a batch container that the
  loader never uses and is bound to ``None``.
- OpenRLHF: ``openrlhf.utils.agent`` (the single-turn agent executor with its remote-reward and
  ``reward_func`` paths, and the prompt truncation); vLLM is replaced by :class:`ScriptedEngine`,
  which "generates" a fixed answer for the token ids it is given and records them.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: the overrides the docs give for verl's ``main_ppo``, word for word (``{url}`` is the server's
#: address, ``http://HOST:8000`` in the docs)
VERL_OVERRIDES = (
    "reward.custom_reward_function.path=pkg://prbench.downstream.verl_reward",
    "reward.custom_reward_function.name=compute_score",
    "+reward.custom_reward_function.reward_kwargs.server_url={url}",
)


def verl_config_dir() -> Path:
    """verl's hydra config folder (``verl/trainer/config``) of the installed release."""
    spec = importlib.util.find_spec("verl")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("verl is not installed")
    return Path(spec.origin).parent / "trainer" / "config"


def compose_verl_config(overrides: Sequence[str]) -> Any:
    """``main_ppo``'s config (``ppo_trainer``) composed by hydra with ``overrides``."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        return compose(config_name="ppo_trainer", overrides=list(overrides))


@contextmanager
def verl_loader() -> Iterator[Callable[[Any], Any]]:
    """verl's ``get_custom_reward_fn``; ``sys.modules`` is restored afterwards."""
    saved = {k: v for k, v in sys.modules.items() if k == "verl" or k.startswith("verl.")}
    try:
        if not all(importlib.util.find_spec(m) for m in ("ray", "tensordict")):
            spec = importlib.util.find_spec("verl")
            assert spec is not None and spec.origin is not None
            package = types.ModuleType("verl")
            package.__path__ = [os.path.dirname(spec.origin)]
            package.__spec__ = spec
            package.__file__ = spec.origin
            package.DataProto = None  # type: ignore[attr-defined]
            sys.modules["verl"] = package
        module = importlib.import_module("verl.trainer.ppo.reward")
        yield module.get_custom_reward_fn
    finally:
        for name in [k for k in sys.modules if k == "verl" or k.startswith("verl.")]:
            del sys.modules[name]
        sys.modules.update(saved)


@dataclasses.dataclass
class _Output:
    token_ids: list[int]
    text: str
    finish_reason: str = "stop"
    logprobs: Any = None


@dataclasses.dataclass
class _RequestOutput:
    outputs: list[_Output]


class ScriptedEngine:
    """Stands in for OpenRLHF's vLLM engine: answers every prompt with ``answer`` + EOS.

    Attributes:
        prompts: the token ids of each prompt it was asked to continue (after OpenRLHF's cut).
    """

    def __init__(self, tokenizer: Any, answer: str) -> None:
        self.ids = tokenizer(text=answer, add_special_tokens=False)["input_ids"]
        self.ids = [*self.ids, tokenizer.eos_token_id]
        self.text = tokenizer.decode(self.ids, skip_special_tokens=True)
        self.prompts: list[list[int]] = []

    async def generate(self, prompt_ids: list[int], sampling_params: Any,
                       multi_modal_data: Any = None) -> _RequestOutput:
        self.prompts.append(list(prompt_ids))
        return _RequestOutput([_Output(list(self.ids), self.text)])


def sampling_params(max_tokens: int) -> Any:
    """The two fields of vLLM's ``SamplingParams`` that the executor reads."""
    return types.SimpleNamespace(max_tokens=max_tokens, logprobs=None)
