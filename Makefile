# The study's commands. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
NOTEBOOK ?=
FORCE ?=
REF ?= reference/$(PROFILE)
REPORT ?= outputs
NEW ?=
STAMP := $(VENV)/.studylib-installed
GPU_STAMP := $(VENV)/.studylib-gpu
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help setup setup-gpu setup-tensorrt gpu-check gpu-proof browser report reference reanalyse run render plan compare check-report lint test test-full lab clean distclean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 14
	@echo "variables: PROFILE=$(PROFILE) (params/<name>.yaml)  NOTEBOOK=01_eager_vs_compiled  FORCE=1"

setup: $(STAMP)  ## create the virtual environment from requirements.lock (only when missing or changed)

# The environment is (re)built only when it is missing or the lock changed. Where `make setup-gpu` ran (its stamp) or
# runs (GPU=1), the lock less its torch and onnxruntime pins and the GPU overlay are installed in one pip command,
# constrained by the overlay's resolution (requirements-gpu.resolved.txt, the same command's dry run from PyPI): the
# CPU lock's torch is never installed first (on PyPI it is a CUDA 13 build), and both onnxruntime builds, which write
# the same files, are removed before onnxruntime-gpu is installed.
GPU_WANTED = [ -f $(GPU_STAMP) ] || [ -n "$(GPU)" ]
GPU_INSTALL = grep -v -E '^(torch|onnxruntime)==' requirements.lock > $(VENV)/requirements.lock.gpu; \
	$(PY) -m pip uninstall -q -y onnxruntime onnxruntime-gpu; \
	$(PY) -m pip install -q -r $(VENV)/requirements.lock.gpu -r requirements-gpu.txt -c requirements-gpu.resolved.txt \
	  2> >(grep -v "^WARNING: Location" >&2)
$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if $(GPU_WANTED); then echo "installing the lock with the GPU overlay (requirements-gpu.txt)"; $(GPU_INSTALL); \
	  touch $(VENV)/.studylib-gpu-fresh; else $(PY) -m pip install -q -r requirements.lock 2> >(grep -v "^WARNING: Location" >&2); fi
	$(PY) -m pip install -q --no-deps -e . 2> >(grep -v "^WARNING: Location" >&2)
	$(PY) -m ipykernel install --sys-prefix --name studylib --display-name "Python (studylib)"
	touch $@

setup-gpu:  ## on a CUDA machine: the CUDA 12 stack of requirements-gpu.txt (torch, TensorFlow, JAX, onnxruntime-gpu)
	@$(MAKE) --no-print-directory GPU=1 $(GPU_STAMP)

$(GPU_STAMP): $(STAMP) requirements-gpu.txt requirements-gpu.resolved.txt
	@if [ -f $(VENV)/.studylib-gpu-fresh ]; then rm $(VENV)/.studylib-gpu-fresh; else $(GPU_INSTALL); fi
	touch $@

setup-tensorrt: $(GPU_STAMP)  ## after setup-gpu: TensorRT 10 for ort-tensorrt (requirements-gpu-tensorrt.txt, from NVIDIA's index)
	$(PY) -m pip install -q -r requirements-gpu-tensorrt.txt -c requirements-gpu.resolved.txt

gpu-check: $(STAMP)  ## on a CUDA machine: one tiny operation per GPU path, its output device, CUDA/cuDNN, the TF32 probe (exit 2 without a GPU)
	$(PY) -m studylib.gpu_check --profile $(if $(filter cpu,$(PROFILE)),gpu-smoke,$(PROFILE))

# The proof's output is kept in PROOF_OUT (commit it under reference/ from a GPU machine).
PROOF_OUT ?= outputs/gpu-proof.txt
gpu-proof: $(STAMP)  ## on one GPU, under 10 min by its estimate: one line per check: each runtime's output device and wait, TensorRT cache, OOM row, study 01 smoke (exit 2 without a GPU)
	@mkdir -p $(dir $(PROOF_OUT)); set -o pipefail; $(PY) -m studylib.gpu_proof 2>&1 | tee $(PROOF_OUT)

report: $(STAMP)  ## run every notebook of PROFILE (default cpu) and render HTML + outputs/index.html
	$(PY) -m studylib run --report --profile $(PROFILE) $(if $(NOTEBOOK),--notebook $(NOTEBOOK)) $(if $(FORCE),--force)

reference: $(STAMP)  ## from a clean commit: measure PROFILE (cpu: ~75 min on 2 cores) and publish it under reference/ (the committed report)
	$(PY) -m studylib reference --profile $(PROFILE)

reanalyse: $(STAMP)  ## analyse the results in REPORT (outputs, or REPORT=reference) again and rewrite its pages, summary and index; measures nothing
	$(PY) -m studylib reanalyse $(REPORT)

run: $(STAMP)  ## only execute the notebooks (no HTML)
	$(PY) -m studylib run --profile $(PROFILE) $(if $(NOTEBOOK),--notebook $(NOTEBOOK)) $(if $(FORCE),--force)

render: $(STAMP)  ## only render executed notebooks to HTML and rewrite the index
	$(PY) -m studylib report --profile $(PROFILE)

plan: $(STAMP)  ## list what PROFILE would measure and roughly how long it takes
	$(PY) -m studylib plan --profile $(PROFILE)

compare: $(STAMP)  ## compare a re-run with the committed reference: make compare NEW=outputs/cpu (REF=reference/cpu; CHECK=1 fails on miscalibration)
	@if [ -z "$(NEW)" ]; then echo "error: NEW is empty: name the re-run's folder, e.g. make compare NEW=outputs/$(PROFILE) (REF defaults to reference/$(PROFILE))" >&2; exit 2; fi
	$(PY) -m studylib compare "$(REF)" "$(NEW)" $(if $(CHECK),--check)

# The browser test drives the system's headless Chromium (Debian package `chromium`) through Playwright's
# executable_path; installed here when missing. Playwright's own browser download (`playwright install`) is never used.
browser:  ## install headless Chromium for the browser test (Debian/Ubuntu apt; root or sudo)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "installing chromium (Debian package) for the browser test"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null; }

check-report: $(STAMP) browser  ## open REPORT/index.html (outputs, or REPORT=reference) and every page it links in headless Chromium, offline; screenshots to outputs/screenshots/
	$(PY) tests/browser.py $(REPORT)

lint: $(STAMP)  ## ruff: lint and import order of src/ and tests/ (pyproject.toml's [tool.ruff])
	$(PY) -m ruff check src tests

# Two pytest-xdist workers, one test module at a time each, the end-to-end report first (tests/conftest.py): one worker
# spends the run on that report while the other takes the rest. TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2
test: $(STAMP) browser lint  ## run ruff, then the test suite (unit tests, the smoke-fast end-to-end report, the browser tests) in two workers; full ones are left out
	$(PY) -m pytest -q -p no:cacheprovider --durations=15 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not full" tests

test-full: $(STAMP) browser lint  ## the tests marked full: the whole smoke profile end to end, and Run All on its notebook (~10 min)
	$(PY) -m pytest -q -p no:cacheprovider --durations=15 -m full tests

# JupyterLab refuses to start as root (most containers) without --allow-root; it is added only then.
# LAB_DIR and LAB_ARGS let the browser test start it exactly this way on a copy, on a port of its own.
LAB_DIR ?= notebooks
LAB_ARGS ?=
lab: $(STAMP)  ## open JupyterLab on notebooks/ with the project's kernel (as root too)
	$(VENV)/bin/jupyter lab --notebook-dir=$(LAB_DIR) $$([ "$$(id -u)" = 0 ] && echo --allow-root) $(LAB_ARGS)

clean:  ## remove everything runs wrote under outputs/ (the committed reference/ stays)
	rm -rf outputs

distclean: clean  ## also remove the virtual environment (never a conda environment named by VENV)
	@if [ -d "$(VENV)/conda-meta" ]; then echo "error: $(VENV) is a conda environment: remove it with conda, not make distclean" >&2; exit 2; fi
	rm -rf $(VENV)
