"""prbench plugin: InternLM2-Reward, scored through the checkpoint's own remote code."""

__version__ = "0.1.0"
