"""Offline, isolated set-up for the internlm2 plugin's tests (prbench.testing)."""

from prbench.testing import isolated_tests

_isolated = isolated_tests()
