"""The built-in lm-eval task folder (``tasks/personalized_rewardbench``), registered as plugins do.

``prbench eval``, the ``lm_eval.tasks`` entry point and the lm-eval start-up hook index every
folder registered through ``register_task_dirs``; prbench's own goes through the same hook.
"""

from __future__ import annotations

from prbench.hookspecs import hookimpl


@hookimpl
def register_task_dirs(register) -> None:
    """Register prbench's task folder (``prbench/_tasks`` in a wheel, ``tasks/`` in a checkout)."""
    from prbench.harness.tasks import builtin_task_dir

    register(
        str(builtin_task_dir()),
        description="personalized_rewardbench: the benchmark, its bundled sample and a custom-data "
        "task, each with and without the retrieved profile",
    )
