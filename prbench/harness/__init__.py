"""The lm-eval bridge: the ``prbench`` model, the task folders, ``prbench eval`` and its manifest.

Nothing here is imported by ``import prbench``; the modules that need lm-eval import it themselves.
"""
