"""Offline, isolated set-up for the synthesizeme plugin's tests (prbench.testing)."""

from prbench.testing import isolated_tests, skip_unless_installed

collect_ignore_glob = skip_unless_installed("prbench_plugin_synthesizeme")
_isolated = isolated_tests(load_plugins="synthesizeme")  # pass whatever else is installed
