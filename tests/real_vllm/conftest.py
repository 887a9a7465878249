"""The real-vLLM tests (``make test-vllm``): engine venv, servers, kept out of ``make test``.

``make test-vllm`` builds (or finds) the engine venv with ``.ci/vllm-venv`` and sets
``PRBENCH_VLLM_PYTHON`` to its interpreter, or to ``unbuilt: <why>`` when it could not be built.
Without the variable, a run of the whole suite (``make test``, ``pytest tests``) does not collect
this folder, so no vLLM server starts there; a run that names this folder collects it and every
test skips with one line saying how to run them.

The folder is not called ``vllm``: ``tests/`` is on ``sys.path`` in a test run, where a folder of
that name would be found as the ``vllm`` package (trl then takes vLLM for installed and fails).

Each server is started once, for the one test module that uses it, and stopped when that module
is done (a cold start takes minutes on a CPU; one server at a time): the classifier server
(``--runner pooling --convert classify``) and the generation server of the judges.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_vllm._server import (
    JUDGE_MODEL_LEN,
    VLLMServer,
    build_classifier,
    build_verdict_lm,
)

ENV = "PRBENCH_VLLM_PYTHON"
HERE = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave this folder out of runs that do not ask for it (``make test``)."""
    if os.environ.get(ENV):
        return None
    path = Path(collection_path).resolve()
    if path != HERE and HERE not in path.parents:
        return None
    named = [Path(str(a).split("::")[0]).resolve() for a in config.args]
    asked = any(a == HERE or HERE in a.parents for a in named)
    return None if asked else True


#: set (to 1) where the real engine must run, as in CI on this project's machine kind: there a
#: venv that could not be built fails the tests instead of skipping them
REQUIRED = "PRBENCH_VLLM_REQUIRED"


def _without(why: str) -> None:
    if os.environ.get(REQUIRED) == "1":
        pytest.fail(f"{why}; {REQUIRED}=1 says the real vLLM tests must run here", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def vllm_python() -> str:
    """The engine venv's python, or a skip (a failure where required) saying why there is none."""
    value = os.environ.get(ENV, "")
    if not value:
        _without(f"{ENV} is not set: run these tests with `make test-vllm`, which builds the "
                 "vLLM engine venv (.ci/vllm-venv) and sets it")
    if value.startswith("unbuilt:"):
        _without(f"the vLLM engine venv could not be built ({value[len('unbuilt:'):].strip()})")
    if not os.access(value, os.X_OK):
        _without(f"{ENV}={value} is not an executable python (run `make test-vllm`)")
    return value


@pytest.fixture(scope="session")
def vllm_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the servers' logs."""
    return tmp_path_factory.mktemp("vllm-logs")


@pytest.fixture(scope="session")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny reward model's folder (see :func:`tests.real_vllm._server.build_classifier`)."""
    return build_classifier(tmp_path_factory.mktemp("vllm-models") / "rm")


@pytest.fixture(scope="session")
def verdict_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny judge model's folder (see :func:`tests.real_vllm._server.build_verdict_lm`)."""
    return build_verdict_lm(tmp_path_factory.mktemp("vllm-models") / "judge")


def _serve(server: VLLMServer) -> Iterator[VLLMServer]:
    server.start()
    print(f"\nvLLM server {server.name!r} answered /health after {server.started_in:.0f} s")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def rm_server(vllm_python: str, classifier: Path, vllm_logs: Path) -> Iterator[VLLMServer]:
    """vLLM serving the classifier as a pooling model (``/pooling``, ``/classify``)."""
    yield from _serve(VLLMServer(
        vllm_python, classifier, name="tiny-rm", log=vllm_logs / "rm.log",
        extra=("--runner", "pooling", "--convert", "classify")))


@pytest.fixture(scope="module")
def judge_server(vllm_python: str, verdict_lm: Path, vllm_logs: Path) -> Iterator[VLLMServer]:
    """vLLM serving the judge model for generation (``/v1/chat/completions``, ``/tokenize``)."""
    yield from _serve(VLLMServer(
        vllm_python, verdict_lm, name="tiny-judge", log=vllm_logs / "judge.log",
        max_model_len=JUDGE_MODEL_LEN, extra=("--runner", "generate")))
