"""Model backends shared by scorers, judges, planners, pair generators and Best-of-N policies."""

from prbench.backends.base import (
    BackendFatalError,
    BackendSpec,
    Chat,
    GenerationBackend,
    GenerationConfig,
    GenerationFailedError,
    GenerationFailure,
    Reply,
)
from prbench.backends.factory import build_backend

__all__ = [
    "BackendFatalError",
    "BackendSpec",
    "Chat",
    "GenerationBackend",
    "GenerationConfig",
    "GenerationFailedError",
    "GenerationFailure",
    "Reply",
    "build_backend",
]
