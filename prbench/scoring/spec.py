"""A scorer as the user gave it, resolved once: the component, its typed options, the runtime's.

``--model_args scorer=ID,K=V,...`` (or the same keys from JSON, a sweep row, a server config) is
read once into a :class:`ScorerSpec` by :func:`resolve_scorer`: the scorer looked up in the
registry, every key checked against what that scorer and the runtime take (a key that differs
from a known one only by case is an error naming the right one), the options validated by the
scorer's options dataclass, the device resolved. Everything after that (``prbench eval``'s
lm-eval model, a sweep cell, the reward server) takes the spec and calls :meth:`ScorerSpec.build`;
nothing parses the text again.

The keys lm-eval itself passes to a model (``pretrained``, ``batch_size``, ``max_batch_size``,
``device``, ``trust_remote_code``) go to the scorer's option of that name where it has one;
``pretrained`` is also the run's label. ``prbench_*`` keys belong to the tasks and are left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from prbench.options import OptionsError, options_to_dict
from prbench.scoring.runtime import ScorerRuntime, runtime_of

#: the scorer of a run whose ``--model_args`` names none
DEFAULT_SCORER = "embedding-similarity"
#: lm-eval's model arguments; each goes to the scorer's option of that name where it has one
LM_KEYS = ("pretrained", "batch_size", "max_batch_size", "device", "trust_remote_code")
#: keys that belong to the tasks (lm-eval hands ``--model_args`` to them too)
TASK_KEY_PREFIX = "prbench_"


def parse_batch_size(value: Any, name: str = "batch_size") -> int | None:
    """A batch size as lm-eval gives it (an int, ``"8"``, ``"auto"``, ``"auto:4"``).

    Returns:
        The batch size, or ``None`` for ``auto`` (the scorer keeps its own default).

    Raises:
        OptionsError: not a positive integer and not ``auto``.
    """
    if value is None:
        return None
    text = str(value).strip().lower()
    if text.startswith("auto"):
        return None
    message = f"{name} must be a positive integer or 'auto', got {value!r}"
    try:
        size = int(text)
    except ValueError:
        raise OptionsError(message) from None
    if size < 1:
        raise OptionsError(message)
    return size


@dataclasses.dataclass(frozen=True)
class ScorerSpec:
    """One scorer, resolved: what to build and how to run it.

    Attributes:
        component: the registry's component (``prbench.plugins.Component``).
        options: the scorer's validated options object (``None`` for a scorer without options).
        runtime_options: the runtime's options (``cache``, ``cache_path``, ``chunk_size``, ...).
        label: ``pretrained=`` as given (the run's label), else ``None``.
        device: the device the scorer runs on (``cpu`` unless it has a ``device`` option).
        batch_size: the batch size given (``None``: the scorer's default).
        max_batch_size: as given, else ``None``.
        given: the keys as given (scorer id first), for the results' ``model_args``.
    """

    component: Any
    options: Any
    runtime_options: Any
    label: str | None
    device: str
    batch_size: int | None
    max_batch_size: int | None
    given: dict[str, Any]

    @property
    def pairwise(self) -> bool:
        """Whether the scorer is a pairwise judge (tag ``pairwise``)."""
        return "pairwise" in self.component.tags

    def option_names(self) -> set[str]:
        """The scorer's option names."""
        return _fields(self.component)

    def with_device(self, device: str) -> ScorerSpec:
        """The same spec on another device (a data-parallel process's own)."""
        options = self.options
        if options is not None and "device" in self.option_names():
            options = dataclasses.replace(options, device=device)
        return dataclasses.replace(self, options=options, device=device)

    def build(self, **runtime_overrides: Any) -> ScorerRuntime:
        """The scorer in its runtime, built now.

        Args:
            **runtime_overrides: runtime settings fixed by the caller (e.g. ``progress=False``),
                over the spec's runtime options.
        """
        return runtime_of(self.component, self.options, self.runtime_options,
                          **runtime_overrides)

    def describe_options(self) -> dict[str, Any]:
        """The scorer's options as recorded (JSON values)."""
        return options_to_dict(self.options)


def _fields(component: Any) -> set[str]:
    opts = component.options
    return {f.name for f in dataclasses.fields(opts)} if opts is not None else set()


def check_key_case(keys: Any, known: set[str], *, flag: str) -> None:
    """Refuse a key that differs from a known key only by case (``Scorer=`` for ``scorer=``).

    Raises:
        OptionsError: naming the key given and the one meant.
    """
    lowered = {k.lower(): k for k in known}
    for key in keys:
        meant = lowered.get(str(key).lower())
        if meant is not None and meant != key:
            raise OptionsError(
                f"{flag}: {key!r} is not an option; option names are case-sensitive: write "
                f"{meant}= (not {key}=)"
            )


def resolve_scorer(
    given: Mapping[str, Any],
    *,
    flag: str = "--model_args",
    lm_keys: bool = True,
    device: str | None = None,
    device_explicit: bool = True,
    batch_size: Any = None,
    max_batch_size: Any = None,
    registry: Any = None,
) -> ScorerSpec:
    """Read a scorer's keys once into a :class:`ScorerSpec`.

    Args:
        given: the keys (``scorer`` and the options), values as text or JSON values.
        flag: how the user gave them (named in errors).
        lm_keys: read lm-eval's model keys (``pretrained``, ``device``, ``batch_size``, ...) and
            leave ``prbench_*`` task keys out, as the ``prbench`` lm-eval model does; ``False``
            (:func:`build_runtime`): every key is the scorer's or the runtime's option.
        device: a device given outside ``given`` (``--device``); ``device=`` in ``given`` wins.
        device_explicit: whether ``device`` is the user's request (a missing accelerator is then
            an error) or only a default (then the CPU stands in).
        batch_size: a batch size given outside ``given`` (``--batch_size``); ``given`` wins.
        max_batch_size: likewise.
        registry: the plugin registry (default: :func:`prbench.plugins.get_registry`).

    Raises:
        prbench.plugins.UnknownComponentError: no such scorer.
        OptionsError: an unknown, misspelt (by case) or invalid option, or a bad batch size.
        prbench.devices.DeviceError: a device the machine lacks, asked for explicitly.
    """
    from prbench.devices import resolve_device
    from prbench.scoring.runtime_options import RUNTIME_KEYS, split_options

    if registry is None:
        from prbench.plugins import get_registry

        registry = get_registry()
    raw = {str(k): v for k, v in given.items()}
    check_key_case(raw, {"scorer"}, flag=flag)
    scorer = str(raw.pop("scorer", "") or DEFAULT_SCORER)
    component = registry.get("scorer", scorer)
    fields = _fields(component)
    check_key_case(raw, {*fields, *RUNTIME_KEYS, *(LM_KEYS if lm_keys else ())}, flag=flag)
    if not lm_keys:
        runtime_options, scorer_raw = split_options(component, raw)
        return ScorerSpec(
            component=component, options=component.parse_options(scorer_raw),
            runtime_options=runtime_options, label=None, device="cpu", batch_size=None,
            max_batch_size=None, given={"scorer": scorer, **raw})
    lm = {k: raw.pop(k) for k in LM_KEYS if k in raw}
    options = {k: v for k, v in raw.items() if not k.startswith(TASK_KEY_PREFIX)}
    if "device" in lm:
        device, device_explicit = str(lm["device"]), True
    resolved = "cpu"
    if "device" in fields and device not in (None, ""):
        resolved = resolve_device(str(device), explicit=device_explicit,
                                  option="device" if "device" in lm else "--device")
    elif device not in (None, "") and device_explicit:
        resolve_device(str(device), explicit=True, option="--device")  # asked for: must exist
    size = parse_batch_size(lm.get("batch_size", batch_size))
    most = lm.get("max_batch_size", max_batch_size)
    label = lm.get("pretrained")
    for name, value in (("pretrained", label), ("device", resolved if "device" in fields and
                                                   device not in (None, "") else None),
                        ("batch_size", size), ("max_batch_size", most),
                        ("trust_remote_code", lm.get("trust_remote_code"))):
        if value is not None and name in fields:
            options[name] = value
    runtime_options, scorer_raw = split_options(component, options)
    parsed = component.parse_options(scorer_raw)
    return ScorerSpec(
        component=component, options=parsed, runtime_options=runtime_options,
        label=str(label) if label is not None else None, device=resolved, batch_size=size,
        max_batch_size=parse_batch_size(most, "max_batch_size") if most is not None else None,
        given={"scorer": scorer, **{k: v for k, v in given.items() if k != "scorer"}},
    )


def build_runtime(
    scorer_id: str,
    options: Mapping[str, Any] | None = None,
    *,
    registry: Any = None,
    **runtime_overrides: Any,
) -> ScorerRuntime:
    """Build a registered scorer with validated options, wrapped in its runtime.

    The one way every command builds a scorer: :func:`resolve_scorer` reads the options once
    into a :class:`ScorerSpec` (a key that differs from an option only by case names it), and
    :meth:`ScorerSpec.build` builds it.

    Args:
        scorer_id: the scorer id (``length``, ``hf-classifier``, ``plugin/id``, ...).
        options: raw options; the runtime's keys
            (:data:`~prbench.scoring.runtime_options.RUNTIME_KEYS`) are taken out first, the
            rest is validated against the scorer's options.
        registry: the plugin registry (default :func:`prbench.plugins.get_registry`).
        **runtime_overrides: runtime settings fixed by the caller (e.g. ``progress=False``), over
            the options.

    Raises:
        prbench.plugins.UnknownComponentError: no such scorer.
        OptionsError: an unknown or invalid option.
        TypeError: the scorer built lacks ``score()`` (``compare()`` for a pairwise judge).
    """
    given = {**dict(options or {}), "scorer": str(scorer_id)}
    spec = resolve_scorer(given, flag=f"scorer {str(scorer_id)!r}", lm_keys=False,
                          registry=registry)
    return spec.build(**runtime_overrides)


__all__ = [
    "DEFAULT_SCORER",
    "LM_KEYS",
    "ScorerSpec",
    "build_runtime",
    "check_key_case",
    "parse_batch_size",
    "resolve_scorer",
]
