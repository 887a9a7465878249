"""prbench.testing: the stand-ins plugin tests build on work with the real backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from prbench.backends.base import BackendSpec, GenerationConfig
from prbench.backends.factory import build_backend
from prbench.testing import LoopbackOpenAI, ScriptedBackend, build_tiny_causal_lm

CHAT = [{"role": "user", "content": "Which answer fits the person?"}]


def test_scripted_backend_replies_and_records() -> None:
    backend = ScriptedBackend(lambda chat: chat[-1]["content"].upper(), fingerprint="fp")
    replies = backend.generate([CHAT, CHAT], GenerationConfig())
    assert replies == ["WHICH ANSWER FITS THE PERSON?"] * 2
    assert backend.chats == [CHAT, CHAT] and backend.fingerprint == "fp"
    with pytest.raises(NotImplementedError):
        backend.logprobs([CHAT], ["x"])


def test_loopback_server_answers_the_openai_backend() -> None:
    with LoopbackOpenAI(lambda chat: f"seen {len(chat)} message(s)") as server:
        backend = build_backend(BackendSpec(backend="openai", model="m", base_url=server.base_url,
                                            cache_dir="", max_retries=0))
        assert backend.generate([CHAT], GenerationConfig(max_new_tokens=8)) == ["seen 1 message(s)"]
    assert server.calls == 1


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_tiny_causal_lm_loads_and_generates(tmp_path: Path, arch: str) -> None:
    from transformers import AutoConfig, AutoTokenizer

    folder = build_tiny_causal_lm(tmp_path / arch, arch=arch)  # type: ignore[arg-type]
    assert AutoConfig.from_pretrained(folder).model_type == arch
    tok = AutoTokenizer.from_pretrained(folder)
    text = tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    assert text.startswith("<s>") == (arch == "llama") and CHAT[0]["content"] in text
    backend = build_backend(BackendSpec(backend="hf", model=str(folder), device="cpu"))
    [reply] = backend.generate([CHAT], GenerationConfig(max_new_tokens=4))
    assert isinstance(reply, str)


def test_isolated_tests_gives_each_test_an_offline_fresh_setup() -> None:
    """tests/conftest.py binds ``isolated_tests(load_plugins="")``: this test runs under it."""
    import os

    from prbench.plugins import get_registry

    assert all(os.environ[v] == "1" for v in
               ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"))
    assert os.environ["PRBENCH_LOAD_PLUGINS"] == ""
    cache = Path(os.environ["PRBENCH_CACHE_DIR"])
    assert cache.is_dir() and list(cache.iterdir()) == []  # private and fresh
    loaded = {p.origin for p in get_registry().plugins.values() if p.disabled is None}
    assert loaded == {"builtin"}  # installed plugins are listed, not loaded


def test_skip_unless_installed_ignores_a_missing_plugins_tests() -> None:
    from prbench.testing import skip_unless_installed

    assert skip_unless_installed("prbench") == []
    assert skip_unless_installed("prbench_plugin_no_such_thing") == ["test_*.py"]
