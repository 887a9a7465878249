"""The one line a plugin's task YAML needs to reuse prbench's shared task settings.

A plugin ships task YAMLs through the ``register_task_dirs`` hook. lm-eval 0.4.13 resolves an
``include:`` path relative to the YAML, so a plugin outside this repository cannot include
prbench's ``_template_yaml`` by a path that holds on every install; ``!function`` references,
however, fall back to importable modules. So a plugin task names this class::

    class: !function prbench.harness.plugin_task.PersonalizedRewardBenchTask
    task: my_plugin_sample_noprofile
    dataset_kwargs:
      prbench_domain: "*"
      prbench_condition: noprofile
      prbench_default_data: sample

and gets everything ``_template_yaml`` sets (the data loader, the ``[chosen, rejected]`` choices,
strict accuracy with ties as their own metric, margin, invalid), read from the installed prbench.
Keys the plugin's YAML sets win; ``metadata`` is merged key by key.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lm_eval.api.task import ConfigurableTask

#: the ``class:`` value of a plugin task YAML
CLASS_REFERENCE = "prbench.harness.plugin_task.PersonalizedRewardBenchTask"


def template_path() -> Path:
    """The shared ``_template_yaml`` of the installed prbench (wheel or checkout)."""
    from prbench.harness.tasks import builtin_task_dir

    return builtin_task_dir() / "personalized_rewardbench" / "_template_yaml"


@functools.lru_cache(maxsize=1)
def _shared(path: str) -> dict[str, Any]:
    from lm_eval.tasks._yaml_loader import load_yaml

    return load_yaml(path, resolve_func=True)


def shared_config() -> dict[str, Any]:
    """The settings of ``_template_yaml`` with its ``!function`` references resolved (a copy)."""
    return copy.deepcopy(_shared(str(template_path())))


def merged_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The shared prbench settings under a plugin task's own config (its keys win).

    Args:
        config: the task config lm-eval built from the plugin's YAML (``class`` is dropped).
    """
    own = {k: v for k, v in dict(config or {}).items() if k != "class"}
    merged = shared_config()
    shared_meta = merged.get("metadata") or {}
    merged.update(own)
    own_meta = own.get("metadata")
    if isinstance(own_meta, Mapping):
        merged["metadata"] = {**shared_meta, **own_meta}
    return merged


class PersonalizedRewardBenchTask(ConfigurableTask):
    """A prbench task defined by a plugin: ``_template_yaml``'s settings plus the YAML's own."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Build the task from the plugin YAML's config merged over the shared settings."""
        super().__init__(config=merged_config(config), **kwargs)


__all__ = [
    "CLASS_REFERENCE",
    "PersonalizedRewardBenchTask",
    "merged_config",
    "shared_config",
    "template_path",
]
