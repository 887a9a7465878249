"""Shared test set-up: every test runs offline, with its own plugin registry and cache dirs."""

from prbench.testing import isolated_tests

#: offline; per test a fresh process-wide registry and a private prbench cache directory. Core
#: tests see only prbench's built-in plugins (``PRBENCH_LOAD_PLUGINS`` empty), whatever
#: third-party plugins are installed; tests of the entry-point path set their own plugin set.
_isolated = isolated_tests(load_plugins="")
