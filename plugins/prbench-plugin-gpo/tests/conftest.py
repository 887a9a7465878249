"""Offline, isolated set-up for the gpo plugin's tests."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("prbench_plugin_gpo") is None:  # not installed: skip
    collect_ignore_glob = ["test_*.py"]

for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_var] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from prbench.testing import reset_registry

    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("prbench_cache")))
    monkeypatch.setenv("PRBENCH_LOAD_PLUGINS", "gpo")  # pass whatever else is installed
    reset_registry()
    yield
    reset_registry()
