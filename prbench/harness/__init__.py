"""The lm-eval bridge: the ``prbench`` model, the task folders and the run manifest.

Nothing here is imported by ``import prbench``; the modules that need lm-eval import it themselves.
"""
