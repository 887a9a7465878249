"""Offline, isolated set-up for the skywork plugin's tests (prbench.testing)."""

from prbench.testing import isolated_tests

_isolated = isolated_tests()
