"""The one place that turns a device setting into a device this machine has.

Every model-running component (scorers, profile encoders, generation backends, the lm-eval
adapter) resolves its ``device`` option with :func:`resolve_device` (a string) or
:func:`torch_device` (a ``torch.device``):

- ``auto`` (or nothing) -> ``cuda`` when CUDA is available, else ``cpu``;
- a CUDA (or MPS) device the user asked for on a machine without one -> a :class:`DeviceError`
  naming the option (the user asked for a GPU: running on the CPU instead would be a silent
  change); ``auto`` is the setting that falls back;
- the same device when the user did not ask for it (``explicit=False``: lm-eval 0.4.13 passes
  ``device="cuda:0"`` to every model when ``--device`` is not given, see
  :func:`lm_eval_default_device`) -> ``cpu``, silently;
- anything else is checked by torch (an unknown device is a ``ValueError``).

Nothing here imports torch at module import time.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

from prbench.errors import PrbenchUserError

logger = logging.getLogger(__name__)

#: What lm-eval 0.4.13 hands a model as ``device`` when the user gave no ``--device``
#: (``EvaluatorConfig.device``'s default).
LM_EVAL_DEFAULT_DEVICE = "cuda:0"



class DeviceError(PrbenchUserError, ValueError):
    """A device that does not exist here (CUDA asked for on a machine without it), or no device."""


def _fallback(requested: str, kind: str, *, explicit: bool, option: str) -> str:
    if explicit:
        raise DeviceError(
            f"{option}={requested!r} asks for {kind}, which is not available on this machine; "
            f"use {option}=auto (the GPU when there is one, else the CPU) or {option}=cpu"
        )
    logger.debug("device %r: %s not available, using the CPU", requested, kind)
    return "cpu"


def resolve_device(
    requested: str | None, *, explicit: bool = True, option: str = "device"
) -> str:
    """The device to run on, as a string torch accepts.

    Args:
        requested: ``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``, ... (``None``/empty = auto).
        explicit: whether the user asked for this device; a missing accelerator is then an
            error, otherwise a silent fall back to the CPU.
        option: how the user gave it (``device``, ``--device``), named in the error.

    Returns:
        The device name (``cuda``/``cpu`` for auto; ``cpu`` for an accelerator that is missing
        and was not asked for).

    Raises:
        DeviceError: an accelerator asked for (``explicit``) that this machine lacks.
        ValueError: a device string torch does not understand.
    """
    import torch

    text = (requested or "").strip()
    setting = text.lower() or "auto"
    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(setting)
    except RuntimeError as exc:
        raise ValueError(f"unknown device {text!r}: {exc}") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        return _fallback(text, "CUDA", explicit=explicit, option=option)
    if parsed.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if not (mps is not None and mps.is_available()):
            return _fallback(text, "MPS", explicit=explicit, option=option)
    return setting


def torch_device(
    requested: str | None, *, explicit: bool = True, option: str = "device"
) -> Any:
    """:func:`resolve_device` as a ``torch.device``."""
    import torch

    return torch.device(resolve_device(requested, explicit=explicit, option=option))


def device_flag_given(argv: Sequence[str] | None = None) -> bool:
    """Whether the command line has a ``--device`` flag (``--device X`` or ``--device=X``)."""
    args = sys.argv[1:] if argv is None else argv
    return any(a == "--device" or a.startswith("--device=") for a in args)


def lm_eval_default_device(device: Any, argv: Sequence[str] | None = None) -> bool:
    """True when ``device`` is only lm-eval's default, not something the user asked for.

    lm-eval 0.4.13 fills ``device="cuda:0"`` when ``--device`` is absent (``lm_eval run`` and
    ``prbench eval`` alike), so that value without a ``--device`` flag on the command line is
    not a request.
    """
    return str(device).strip() == LM_EVAL_DEFAULT_DEVICE and not device_flag_given(argv)


__all__ = [
    "LM_EVAL_DEFAULT_DEVICE",
    "DeviceError",
    "device_flag_given",
    "lm_eval_default_device",
    "resolve_device",
    "torch_device",
]
