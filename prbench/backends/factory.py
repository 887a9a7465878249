"""Building the generation backend a :class:`~prbench.backends.base.BackendSpec` names.

The factory sits above the concrete backends (:mod:`prbench.backends.hf_causal`,
:mod:`prbench.backends.http`), which import the protocol from :mod:`prbench.backends.base`; the
concrete module is imported only when a backend of its kind is built.
"""

from __future__ import annotations

from prbench.backends.base import BackendSpec, GenerationBackend

__all__ = ["build_backend"]


def build_backend(spec: BackendSpec) -> GenerationBackend:
    """Build the backend a spec names (imports the heavy module only now).

    Raises:
        ValueError: an unknown backend or a missing required setting.
    """
    if not spec.model:
        raise ValueError("a backend needs `model` (a hub id, local folder or served model name)")
    if spec.backend == "hf":
        from prbench.backends.hf_causal import HFCausalBackend

        return HFCausalBackend(spec)
    if spec.backend == "openai":
        from prbench.backends.http import OpenAIBackend

        return OpenAIBackend(spec)
    raise ValueError(f"unknown backend {spec.backend!r}; use 'hf' or 'openai'")
