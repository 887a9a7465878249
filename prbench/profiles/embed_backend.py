"""Which runtime computes a profile encoder's vectors: ``embed_backend=auto|torch|openvino``.

``torch`` is the model as loaded (:mod:`prbench.profiles.embed_models`); ``openvino`` is its
transformer converted to OpenVINO (:mod:`prbench.profiles.embed_openvino`), on a CPU only.
``auto`` (:func:`resolve_embed_backend`) decides per machine:

- on a GPU (or any non-CPU device): torch;
- without the ``openvino`` package: torch, with one line saying what is lost;
- in bf16 (``embed_dtype=auto`` on a CPU with AMX, or ``bfloat16``) on a CPU with AMX: OpenVINO
  bf16 (measured 5.5x torch's fp32 speed there, docs/scale.md);
- in fp32: the faster of torch and OpenVINO on this CPU, measured once (a short probe,
  :func:`prbench.profiles.embed_openvino.probe_seconds`) and remembered in
  ``prbench.paths.cache_dir("openvino")/probe.json``, keyed by the CPU's model name and flags,
  the torch and OpenVINO versions, the thread count and the model: the choice is never the
  slower one;
- otherwise (``bfloat16-weights``, or bf16 without AMX): torch.

``PRBENCH_EMBED_PROBE=0`` turns the measuring off: ``auto`` then uses a remembered result where
there is one and torch where there is none (a test suite that must not depend on timings).

The choice (:class:`BackendChoice`) is recorded with the encoder's description (manifests, the
embedding cache's metadata, ranking files): backend, precision, version and why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from prbench.devices import cpu_bf16_flags, read_cpuinfo

#: The values of the encoders' ``embed_backend`` option.
EMBED_BACKENDS: tuple[str, ...] = ("auto", "torch", "openvino")
#: The environment switch of the probe (``0``: never measure).
PROBE_ENV = "PRBENCH_EMBED_PROBE"

#: How much faster OpenVINO must measure for ``auto`` to pick it (a draw stays with torch).
PROBE_MARGIN = 1.1

_WARNED: set[str] = set()


@dataclasses.dataclass(frozen=True)
class BackendChoice:
    """The runtime an encoder uses.

    Attributes:
        backend: ``torch`` or ``openvino``.
        reason: why (``asked for``, or ``auto: ...``).
        settled: False when ``auto`` needed a measurement it could not make (no probe given,
            none remembered) and fell back to torch for that reason alone.
    """

    backend: str
    reason: str
    settled: bool = True


def check_embed_backend(value: str, what: str = "option 'embed_backend'") -> str:
    """``value`` if it is one of :data:`EMBED_BACKENDS`.

    Raises:
        ValueError: another value (naming the option and the choices).
    """
    if value not in EMBED_BACKENDS:
        raise ValueError(f"{what} must be one of {EMBED_BACKENDS}, got {value!r}")
    return value


def cpu_identity(cpuinfo: str | None = None) -> tuple[str, list[str]]:
    """The CPU's model name and its flags, from ``/proc/cpuinfo`` (empty where unreadable)."""
    if cpuinfo is None:
        cpuinfo = read_cpuinfo()
        if cpuinfo is None:
            import platform

            return platform.processor() or platform.machine(), []
    name, flags = "", []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and not name:
            name = value.strip()
        elif key.strip() in ("flags", "Features") and not flags:
            flags = sorted(value.split())
    return name, flags


def probe_key(threads: int, model: str, ov_version: str) -> str:
    """A probe result's key: the CPU's name and flags, torch, OpenVINO, threads and the model."""
    import torch

    name, flags = cpu_identity()
    text = json.dumps([name, flags, torch.__version__, ov_version, threads, model])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _probe_file() -> Path:
    from prbench.paths import cache_dir

    return cache_dir("openvino") / "probe.json"


def remembered_probe(key: str) -> dict[str, float] | None:
    """The probe result stored under ``key`` (``None`` when there is none or it is unreadable)."""
    try:
        data = json.loads(_probe_file().read_text(encoding="utf-8"))
        got = data[key]
        return {"torch": float(got["torch"]), "openvino": float(got["openvino"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember_probe(key: str, result: dict[str, float]) -> None:
    """Store a probe result under ``key`` (written atomically: readers see a whole file)."""
    path = _probe_file()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[key] = result
    from prbench.outputs import write_text

    write_text(path, json.dumps(data, indent=1, sort_keys=True))


def note_once(text: str) -> None:
    """Write ``prbench: note: text`` to stderr, once per process."""
    if text not in _WARNED:
        _WARNED.add(text)
        sys.stderr.write(f"prbench: note: {text}\n")


def resolve_embed_backend(
    requested: str,
    device: str,
    precision: str,
    *,
    ov_version: str | None,
    probe: Callable[[], dict[str, float]] | None = None,
    probe_id: str | None = None,
) -> BackendChoice:
    """The runtime an encoder runs on (see the module's docstring for ``auto``'s rule).

    Args:
        requested: ``auto``, ``torch`` or ``openvino``.
        device: the resolved device.
        precision: the resolved ``embed_dtype`` (``float32``, ``bfloat16``, ``bfloat16-weights``).
        ov_version: the installed OpenVINO version (``None``: not installed).
        probe: measures ``{"torch": s, "openvino": s}`` for one fp32 batch on this CPU.
        probe_id: the key of the remembered probe result (:func:`probe_key`).

    Raises:
        ValueError: an unknown value.
        prbench.profiles.embed_openvino.OpenVINOMissingError: ``openvino`` asked for, not installed.
        prbench.profiles.embed_openvino.OpenVINOBackendError: ``openvino`` asked for on a
            device other than the CPU, or in ``bfloat16-weights``.
    """
    from prbench.profiles.embed_openvino import (
        INSTALL_HINT,
        OV_PRECISIONS,
        OpenVINOBackendError,
        OpenVINOMissingError,
    )

    setting = check_embed_backend((requested or "auto").strip().lower())
    on_cpu = device.split(":", 1)[0] == "cpu"
    if setting == "torch":
        return BackendChoice("torch", "asked for")
    if setting == "openvino":
        if ov_version is None:
            raise OpenVINOMissingError(
                f"embed_backend=openvino needs the openvino package; install it with "
                f"{INSTALL_HINT}, or pass embed_backend=torch"
            )
        if not on_cpu:
            raise OpenVINOBackendError(
                f"embed_backend=openvino runs on the CPU, and the encoder's device is {device}; "
                "pass device=cpu, or embed_backend=torch"
            )
        if precision not in OV_PRECISIONS:
            raise OpenVINOBackendError(
                f"embed_backend=openvino runs embed_dtype float32 or bfloat16, not {precision}; "
                "pass embed_dtype=bfloat16 (OpenVINO's bf16) or embed_backend=torch"
            )
        return BackendChoice("openvino", "asked for")
    if not on_cpu:
        return BackendChoice("torch", f"auto: torch runs {device}")
    if ov_version is None:
        note_once("the openvino package is not installed, so the profile encoder runs on torch "
                  "(OpenVINO embeds 1.2-5x faster on many CPUs, most with AMX); install it with "
                  f"{INSTALL_HINT}")
        return BackendChoice("torch", "auto: openvino is not installed")
    if precision == "bfloat16" and "amx_bf16" in cpu_bf16_flags():
        return BackendChoice("openvino", "auto: the CPU has AMX (amx_bf16): OpenVINO bf16 "
                                         "(measured 5.5x torch fp32 there, docs/scale.md)")
    if precision != "float32":
        return BackendChoice("torch", f"auto: {precision} runs on torch without AMX")
    got = remembered_probe(probe_id) if probe_id is not None else None
    if got is None:
        if probe is None:
            return BackendChoice("torch", "auto: not measured on this CPU", settled=False)
        if os.environ.get(PROBE_ENV, "1").strip() == "0":
            return BackendChoice("torch", f"auto: not measured on this CPU ({PROBE_ENV}=0)",
                                 settled=False)
        got = probe()
        if probe_id is not None:
            remember_probe(probe_id, got)
    ratio = got["torch"] / got["openvino"] if got["openvino"] > 0 else 0.0
    measured = (f"a 16 x 128-token fp32 batch took {got['torch'] * 1000:.0f} ms in torch and "
                f"{got['openvino'] * 1000:.0f} ms in OpenVINO on this CPU")
    if ratio > PROBE_MARGIN:
        return BackendChoice("openvino", f"auto: {measured} ({ratio:.2f}x)")
    return BackendChoice("torch", f"auto: {measured} (OpenVINO {ratio:.2f}x)")
