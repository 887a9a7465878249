"""Shared test set-up: every test runs offline, with its own plugin registry and cache dirs."""

import os
import signal
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prbench.testing import isolated_tests

# The Ctrl-C tests (SIGINT to prbench, in this process and in the commands it starts) need
# SIGINT's normal meaning. A shell that starts the suite in the background (`make test &`,
# nohup) hands it SIGINT ignored, which every child would inherit: restore the default here, so
# this process raises KeyboardInterrupt and its children start with the default action.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# ``from tests._x import ...`` must reach this folder. It is a namespace package, and a regular
# package named ``tests`` anywhere on the path wins over it: some wheels ship one (verl and
# OpenRLHF put their own test suites in site-packages as ``tests``; `make setup` removes them).
_TESTS = os.path.dirname(os.path.abspath(__file__))
if _TESTS not in list(getattr(sys.modules.get("tests"), "__path__", [])):
    _package = types.ModuleType("tests")
    _package.__path__ = [_TESTS]
    sys.modules["tests"] = _package


#: offline; per test a fresh process-wide registry and a private prbench cache directory. Core
#: tests see only prbench's built-in plugins (``PRBENCH_LOAD_PLUGINS`` empty), whatever
#: third-party plugins are installed; tests of the entry-point path set their own plugin set.
_isolated = isolated_tests(load_plugins="")


@pytest.fixture
def faulty_plugin(tmp_path: Path) -> Iterator[Path]:
    """The throwaway faulty plugin (``tests/_faults_fixtures.FAULTY``) as a ``--plugin`` file.

    Saved as ``faulty.py`` under ``tmp_path``, so the plugin is named ``faulty``; the task state
    is reset around the test, as a run that loads a new plugin file needs.
    """
    from prbench.harness import tasks
    from tests._faults_fixtures import FAULTY

    path = tmp_path / "faulty.py"
    path.write_text(FAULTY, encoding="utf-8")
    tasks.reset()
    yield path
    tasks.reset()


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures ``prbench.analysis.plots`` saves during a test, kept for inspection."""
    from prbench.analysis import plots

    kept: list[Any] = []
    real = plots._save

    def keep(fig: Any, path: Any) -> Path:
        kept.append(fig)
        return real(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    return kept
