"""Model backends shared by scorers, judges, planners, pair generators and Best-of-N policies."""

from prbench.backends.base import (
    BackendSpec,
    Chat,
    GenerationBackend,
    GenerationConfig,
    build_backend,
)

__all__ = ["BackendSpec", "Chat", "GenerationBackend", "GenerationConfig", "build_backend"]
