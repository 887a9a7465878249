"""SynthesizeMe (persona induction + persona-conditioned judging) as a prbench plugin."""

__version__ = "0.1.0"
