"""Offline, isolated set-up for the rm-r1 plugin's tests."""

from __future__ import annotations

import os

import pytest

for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_var] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from prbench.testing import reset_registry

    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("prbench_cache")))
    reset_registry()
    yield
    reset_registry()
