"""Shared test set-up: every test runs offline, with its own plugin registry and cache dirs."""

from __future__ import annotations

import os

import pytest

for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_var] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


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
