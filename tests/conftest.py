"""Shared test set-up: every test runs offline, with its own plugin registry and cache dirs."""

from __future__ import annotations

import os
import sys
import types

import pytest

for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_var] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# ``from tests._x import ...`` must reach this folder. It is a namespace package, and a regular
# package named ``tests`` anywhere on the path wins over it: some wheels ship one (verl and
# OpenRLHF put their own test suites in site-packages as ``tests``; `make setup` removes them).
_TESTS = os.path.dirname(os.path.abspath(__file__))
if _TESTS not in list(getattr(sys.modules.get("tests"), "__path__", [])):
    _package = types.ModuleType("tests")
    _package.__path__ = [_TESTS]
    sys.modules["tests"] = _package


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh process-wide registry and a private prbench cache directory per test.

    Core tests see only prbench's built-in plugins (``PRBENCH_LOAD_PLUGINS`` empty), whatever
    third-party plugins are installed; tests of the entry-point path set their own plugin set.
    """
    from prbench.plugins import reset_registry

    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("prbench_cache")))
    monkeypatch.setenv("PRBENCH_LOAD_PLUGINS", "")
    reset_registry()
    yield
    reset_registry()
