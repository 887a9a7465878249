"""The pluggy hook specifications of prbench.

Every hook receives a single ``register`` callback (the llm/datasette style): a plugin calls it once
per component it contributes. New keyword arguments can be added to ``register`` later without
breaking existing plugins, because plugins never implement a fixed signature beyond ``register``.

A plugin module implements any subset of the hooks::

    from prbench import hookimpl

    @hookimpl
    def register_scorers(register):
        register("word-overlap", "my_plugin.scorer:WordOverlap", description="...")

Registration must stay cheap: pass a ``"module:attribute"`` string or a callable that imports its
heavy dependencies (torch, transformers, ...) only when it is called.
"""

from __future__ import annotations

from typing import Protocol

import pluggy

PROJECT_NAME = "prbench"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class ComponentRegister(Protocol):
    """The ``register`` callback passed to the component hooks.

    Args:
        name: the component id, kebab-case (``"embedding-similarity"``), without ``/`` or spaces.
            An id another plugin also registers stays reachable as ``<plugin>/<id>``; asking for
            the bare id is then an error naming both. An invalid id is dropped and recorded
            against the plugin (``prbench plugins`` shows it ``partial``).
        factory: a callable or a ``"module:attribute"`` string naming one. It is built as
            ``factory(options)`` when ``options`` is given and as ``factory()`` otherwise; a
            factory whose signature does not fit is reported at registration (strings are read
            from their source, never imported) and the component dropped. It is only resolved
            and called when the component is used.
        description: one line shown by ``prbench scorers`` / ``prbench plugins``.
        options: a dataclass type whose fields are the component's options (validated: an unknown
            option is an error). ``None`` means the component takes no options.
        diagnostic: ``True`` for components that read hidden fields (narrative, rubric) and are
            therefore not real reward models; they are flagged in every report.
        tags: free-form labels (e.g. ``("pairwise",)`` for judges that compare two answers).
        reads_profile: scorers only: ``False`` declares that the scorer never reads the request's
            ``profile``; the harness then builds no profile for it (profile building can be most
            of a run's time), and the results say the profile was not built.
    """

    def __call__(
        self,
        name: str,
        factory: object,
        *,
        description: str = "",
        options: type | None = None,
        diagnostic: bool = False,
        tags: tuple[str, ...] = (),
        reads_profile: bool = True,
    ) -> None:
        """Register one component."""


class TaskDirRegister(Protocol):
    """The ``register`` callback passed to :func:`register_task_dirs`.

    Args:
        path: a directory of lm-eval task YAML files (searched recursively); one that does not
            exist is dropped and recorded against the plugin. A task YAML there reuses
            prbench's shared task settings with the line
            ``class: !function prbench.harness.plugin_task.PersonalizedRewardBenchTask``.
        description: one line shown by ``prbench plugins``.
    """

    def __call__(self, path: str, *, description: str = "") -> None:
        """Register one task directory."""


@hookspec
def register_scorers(register: ComponentRegister) -> None:
    """Register reward models and judges.

    Called once per plugin when the plugin manager loads (at the start of every ``prbench``
    command and when the ``prbench`` lm-eval model is built). ``register(name, factory, ...)`` takes
    the arguments documented on :class:`ComponentRegister`; the factory must return an object with
    ``score(requests) -> list[float]`` (pointwise) or ``compare(pairs) -> list[float]`` (pairwise,
    tag ``"pairwise"``), see :mod:`prbench.scoring.base`.
    """


@hookspec
def register_profile_builders(register: ComponentRegister) -> None:
    """Register profile builders (user profile -> the RM-visible profile text).

    Called once per plugin at load. The factory returns an object with
    ``build(records) -> list[ProfileView]``, see :mod:`prbench.profiles.base`.
    """


@hookspec
def register_pair_generators(register: ComponentRegister) -> None:
    """Register pair generators (rubric records -> chosen/rejected pairs).

    Called once per plugin at load. The factory returns an object that turns records with a
    question, profile, narrative and rubric into chosen/rejected pairs, see :mod:`prbench.pairs`.
    """


@hookspec
def register_downstream_evaluators(register: ComponentRegister) -> None:
    """Register downstream evaluators (Best-of-N, online RL, ...).

    Called once per plugin at load. The factory returns an object that runs a downstream job with
    one or more scorers and reports per-scorer quality, see :mod:`prbench.downstream`.
    """


@hookspec
def register_task_dirs(register: TaskDirRegister) -> None:
    """Register extra lm-eval task folders a plugin ships.

    Called once per plugin at load. ``register(path, description=...)`` takes a directory; ``prbench
    eval`` and the lm-eval start-up hook index these folders next to prbench's own tasks.
    """
