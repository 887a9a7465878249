"""The one place that turns a device setting into a device this machine has.

Every model-running component (scorers, profile encoders, generation backends, the lm-eval
adapter) resolves its ``device`` option with :func:`resolve_device` (a string) or
:func:`torch_device` (a ``torch.device``):

- ``auto`` (or nothing) -> ``cuda`` when CUDA is available, else ``cpu``;
- a CUDA (or MPS) device on a machine without one -> ``cpu``, with ONE warning per process and
  device string — or none at all when the user did not ask for it (``explicit=False``: lm-eval
  0.4.13 passes ``device="cuda:0"`` to every model when ``--device`` is not given, see
  :func:`lm_eval_default_device`);
- anything else is checked by torch (an unknown device is a ``ValueError``).

Nothing here imports torch at module import time.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger(__name__)

#: What lm-eval 0.4.13 hands a model as ``device`` when the user gave no ``--device``
#: (``EvaluatorConfig.device``'s default).
LM_EVAL_DEFAULT_DEVICE = "cuda:0"

_warned: set[str] = set()


def _fallback(requested: str, kind: str, *, explicit: bool) -> str:
    if explicit and requested not in _warned:
        _warned.add(requested)
        logger.warning("device %r asked for but %s is not available; using the CPU", requested,
                       kind)
    else:
        logger.debug("device %r: %s not available, using the CPU", requested, kind)
    return "cpu"


def resolve_device(requested: str | None, *, explicit: bool = True) -> str:
    """The device to run on, as a string torch accepts.

    Args:
        requested: ``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``, ... (``None``/empty = auto).
        explicit: whether the user asked for this device; a fallback to the CPU is then warned
            about (once per process and device string), otherwise it is silent.

    Returns:
        The device name (``cuda``/``cpu`` for auto; ``cpu`` for an accelerator that is missing).

    Raises:
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
        return _fallback(text, "CUDA", explicit=explicit)
    if parsed.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if not (mps is not None and mps.is_available()):
            return _fallback(text, "MPS", explicit=explicit)
    return setting


def torch_device(requested: str | None, *, explicit: bool = True) -> Any:
    """:func:`resolve_device` as a ``torch.device``."""
    import torch

    return torch.device(resolve_device(requested, explicit=explicit))


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
    "device_flag_given",
    "lm_eval_default_device",
    "resolve_device",
    "torch_device",
]
