"""Downstream checks: Best-of-N candidate pools, Best-of-N selection, online RL."""
