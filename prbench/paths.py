"""Where prbench keeps its caches."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """The prbench cache root (``$PRBENCH_CACHE_DIR``, else ``~/.cache/prbench``) joined with parts.

    The directory is created if missing.
    """
    root = os.environ.get("PRBENCH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "prbench"
    )
    path = Path(root, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
