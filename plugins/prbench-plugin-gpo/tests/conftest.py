"""Offline, isolated set-up for the gpo plugin's tests (prbench.testing)."""

from prbench.testing import isolated_tests, skip_unless_installed

collect_ignore_glob = skip_unless_installed("prbench_plugin_gpo")
_isolated = isolated_tests(load_plugins="gpo")  # pass whatever else is installed
