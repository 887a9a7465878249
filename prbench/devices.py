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

The precision that goes with a device is chosen here too: :func:`resolve_dtype` (model weights:
``auto`` is float32 on a CPU, bf16 or fp16 on CUDA) and :func:`resolve_embed_dtype` (profile
encoders), and the CPU thread count of the profile encoders (:func:`resolve_threads`: never more
threads than the cores other processes leave free).

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


# -- precision of the profile encoders ---------------------------------------------------------

#: The values of the encoders' ``embed_dtype`` option: ``bfloat16`` is fp32 weights under bf16
#: autocast, ``bfloat16-weights`` the transformer's weights cast to bf16 (pooling in fp32).
EMBED_DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "bfloat16-weights")

#: CPU flags (``/proc/cpuinfo``) that mean bf16 matrix products run natively: AVX-512 BF16 (AMD
#: Zen 4 and later, Intel Cooper Lake) and AMX (Intel Sapphire Rapids and later).
NATIVE_BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def read_cpuinfo() -> str | None:
    """The text of ``/proc/cpuinfo`` (its first MiB), or ``None`` where there is none (macOS)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return fh.read(1 << 20)
    except OSError:
        return None


def cpu_bf16_flags(cpuinfo: str | None = None) -> list[str]:
    """The CPU flags that mean native bf16, as this machine reports them (empty when none).

    Args:
        cpuinfo: the text of ``/proc/cpuinfo`` (read from the system when ``None``; a system
            without that file, e.g. macOS, reports none).

    Returns:
        The flags of :data:`NATIVE_BF16_CPU_FLAGS` found, sorted.
    """
    if cpuinfo is None:
        cpuinfo = read_cpuinfo()
        if cpuinfo is None:
            return []
    found: set[str] = set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            found.update(NATIVE_BF16_CPU_FLAGS.intersection(value.split()))
    return sorted(found)


def native_bf16(device: str) -> tuple[bool, str]:
    """Whether ``device`` computes bf16 natively, and why (for manifests).

    Args:
        device: a resolved device string (``cpu``, ``cuda``, ``cuda:N``, ``mps``).

    Returns:
        ``(True, reason)`` where bf16 runs natively (a CPU with AVX-512 BF16 or AMX; a CUDA
        device torch reports bf16 support for), else ``(False, reason)``.
    """
    kind = device.split(":", 1)[0]
    if kind == "cpu":
        flags = cpu_bf16_flags()
        if flags:
            return True, f"CPU flags {', '.join(flags)}"
        return False, "the CPU has no native bf16 (no avx512_bf16 or amx_bf16 flag)"
    if kind == "cuda":
        import torch

        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return True, f"{torch.cuda.get_device_name(device)} supports bf16"
        return False, "this CUDA device has no bf16 support"
    return False, f"bf16 autocast is not used on {kind}"


def resolve_embed_dtype(requested: str, device: str) -> tuple[str, str]:
    """The precision a profile encoder runs in: ``float32``, ``bfloat16`` or ``bfloat16-weights``.

    Args:
        requested: ``auto`` (bf16 autocast on a CPU with AMX; fp32 on other CPUs, those with
            AVX-512 BF16 alone included, where bf16 was measured slower than fp32 for profile
            encoders, and on GPUs, where bf16 autocast was measured slower and bf16 weights are
            not measured yet), ``float32``, ``bfloat16`` (fp32 weights under
            bf16 autocast, even where bf16 is emulated, and slow) or ``bfloat16-weights``.
        device: the resolved device the encoder runs on.

    Returns:
        ``(dtype, reason)``: the dtype used and why (recorded in manifests).

    Raises:
        ValueError: an unknown value (naming the option and the choices).
    """
    setting = (requested or "auto").strip().lower()
    if setting not in EMBED_DTYPES:
        raise ValueError(f"option 'embed_dtype' must be one of {EMBED_DTYPES}, got {requested!r}")
    if setting != "auto":
        return setting, "asked for"
    native, why = native_bf16(device)
    if native and not device.startswith("cpu"):
        # measured (benchmarks/bench_profiles.py on an H200): the profile encoders are far from
        # compute-bound on a GPU, so autocast's casts cost more than bf16 matmuls save
        return "float32", (f"auto: {why}, but bf16 autocast was slower than fp32 for profile "
                           "encoders on a GPU (0.84-0.92x, H200) and bf16 weights are not "
                           "measured there; pass embed_dtype=bfloat16-weights to use them")
    if not native:
        return "float32", f"auto: {why}"
    if "amx_bf16" in cpu_bf16_flags():  # AMX tiles: bf16 products far beyond fp32's peak
        # autocast, not bf16 weights: those kept a top-10 overlap of 0.975 with fp32 on
        # synthetic posts, below the 0.99 autocast keeps (docs/scale.md)
        return "bfloat16", f"auto: {why} (AMX)"
    # measured (docs/scale.md): with AVX-512 BF16 alone, a bf16 product has no more throughput
    # than an fp32 one, and the encoder cost 1.5x the CPU time of fp32 in bf16
    return "float32", (f"auto: {why}, but no AMX: bf16 ran the profile encoder at 0.62-0.71x "
                       "its fp32 speed there (docs/scale.md); pass "
                       "embed_dtype=bfloat16-weights to use it")


def resolve_dtype(requested: str, device: Any) -> str:
    """The dtype name to load weights with (``auto``: float32 on CPU, bf16 — else fp16 — on CUDA).

    Args:
        requested: ``auto`` or a dtype name (``float32``, ``bfloat16``, ``float16``), kept as is.
        device: the resolved ``torch.device`` the model runs on.
    """
    if requested != "auto":
        return requested
    if device.type == "cuda":
        import torch

        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return "float32"


# -- CPU threads of the profile encoders ------------------------------------------------------

#: How the run queue is sampled before each decision: samples, and seconds between them.
RUN_QUEUE_SAMPLES = 8
RUN_QUEUE_INTERVAL_S = 0.005


def _running_in_system() -> int:
    """Threads of the whole system runnable now (running or waiting for a core).

    The first number of the fourth field of ``/proc/loadavg`` (``running/total``); it counts
    the thread reading it.
    """
    with open("/proc/loadavg", encoding="ascii") as fh:
        return int(fh.read().split()[3].split("/")[0])


def _running_in_this_process() -> int:
    """This process's threads in state ``R`` (running or runnable), from ``/proc/self/task``."""
    import os

    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:  # the thread ended between the listing and the read
            continue
        # the state follows the command name, which is in parentheses and may hold spaces
        if stat[stat.rindex(")") + 2 :].startswith("R"):
            count += 1
    return count


def runnable_elsewhere(
    samples: int = RUN_QUEUE_SAMPLES, interval_s: float = RUN_QUEUE_INTERVAL_S
) -> float | None:
    """Threads of *other* processes that want a core now, averaged over a few samples.

    Each sample is the kernel's count of runnable threads less this process's own runnable
    threads. Unlike the 1-minute load average this sees the machine as it is now: a job that
    ended seconds ago no longer counts, and one that just started already does.

    Args:
        samples: how many times the run queue is read.
        interval_s: seconds between two reads.

    Returns:
        The mean over the samples (``>= 0``), or ``None`` where ``/proc`` cannot be read.
    """
    import time

    seen: list[int] = []
    for i in range(max(1, samples)):
        if i:
            time.sleep(interval_s)
        try:
            system = _running_in_system()
            own = _running_in_this_process()
        except (OSError, ValueError, IndexError):
            return None
        seen.append(max(0, system - own))
    return sum(seen) / len(seen)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), at least 1."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def check_thread_count(count: int, *, cpus: int | None = None) -> None:
    """Refuse an ``embed_threads`` count above this machine's CPUs.

    More threads than CPUs only slow each other down, and a count in the thousands ends in
    "can't start new thread" and a crash inside torch: the range is 1 to the CPU count.

    Args:
        count: the threads asked for (already known to be >= 1).
        cpus: the machine's CPU count (``os.cpu_count()`` when ``None``).

    Raises:
        ValueError: ``count`` above the CPU count (naming the option and the range).
    """
    import os

    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    if count > cpus:
        raise ValueError(
            f"option 'embed_threads' must be auto or 1..{cpus} (this machine's CPUs), "
            f"got {count}: more threads than CPUs only wait on each other"
        )


def resolve_threads(
    requested: int | str | None,
    device: str,
    *,
    default: int,
    others: float | None = None,
    cpus: int | None = None,
) -> tuple[int, str]:
    """The intra-op thread count a CPU encoder runs with, and why (for manifests and logs).

    Args:
        requested: ``auto`` (or ``None``): torch's own count (``default``), lowered to the cores
            the other processes leave free when the machine is busy; a positive count is kept.
        device: the resolved device (on a GPU the count is left as it is).
        default: torch's thread count before the encoder changes it.
        others: threads of other processes that want a core now (:func:`runnable_elsewhere`
            when ``None``).
        cpus: the usable CPUs (:func:`usable_cpus` when ``None``).

    Returns:
        ``(threads, reason)``.

    Raises:
        ValueError: a count below 1 or a value that is neither a count nor ``auto``.
    """
    text = "auto" if requested is None else str(requested).strip().lower()
    if text != "auto":
        try:
            count = int(text)
        except ValueError:
            raise ValueError(
                f"option 'embed_threads' must be auto or a positive integer, got {requested!r}"
            ) from None
        if count < 1:
            raise ValueError(f"option 'embed_threads' must be at least 1, got {count}")
        check_thread_count(count)  # the machine's CPUs, whatever `cpus` says
        return count, "asked for"
    if not device.startswith("cpu"):
        return default, f"auto: {device} computes; torch's {default} thread(s) kept"
    cpus = usable_cpus() if cpus is None else cpus
    if others is None:
        others = runnable_elsewhere()
        if others is None:  # pragma: no cover - no /proc on this system
            return default, "auto: the run queue cannot be read here; torch's count kept"
    free = cpus - others
    # measured (docs/scale.md): past the cores, every thread more slows all of them down
    threads = max(1, min(default, int(free + 0.5)))
    return threads, (f"auto: {cpus} CPU(s), {others:.1f} thread(s) of other processes want "
                     f"one now, so ~{max(0.0, free):.1f} free; torch's default {default}")
