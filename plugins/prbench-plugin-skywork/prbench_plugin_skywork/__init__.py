"""prbench plugin: the Skywork-Reward v0.1, v0.2 and V2 sequence-classifier reward models."""

__version__ = "0.1.0"
