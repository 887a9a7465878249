"""prbench: a harness for Personalized RewardBench.

Importing this package is cheap: it pulls in neither torch nor transformers. Heavy libraries are
imported inside the component factories that need them.
"""

from __future__ import annotations

__version__ = "0.1.0"

from prbench.hookspecs import hookimpl

__all__ = ["__version__", "hookimpl"]
