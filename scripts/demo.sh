#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, fetch SmolLM2-135M and run `kerncheck demo` (the
# attention experiments end to end; docs/demo.md). Idempotent: setup.sh installs only what is missing, the
# model is fetched once, and the demo reuses every finished file in its output folder.
#   scripts/demo.sh                     quick preset (≤ 10 min on 2 idle cores), output in kerncheck-demo/
#   KC_DEMO_PRESET=full scripts/demo.sh the full corpus (hours)
#   KC_DEMO_OUT=dir scripts/demo.sh     another output folder
# Exit code: 0 when every expectation held, 1 when one did not, 3 on bad input.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian packages: the build set and the demo's corpus sources (scripts/packages.txt); Python: a venv with pip
# only (fetch_smollm2.sh downloads with it); the CLI only (scripts/test.sh builds the rest).
KC_APT_SETS="${KC_APT_SETS:-} demo" KC_TARGETS=kerncheck scripts/setup.sh
BIN=${KC_BUILD_DIR:-build}/src/kerncheck
MODEL=$(PYTHON=.venv/bin/python scripts/fetch_smollm2.sh)
start=$(date +%s)
set +e
"$BIN" demo --preset "${KC_DEMO_PRESET:-quick}" --out-dir "${KC_DEMO_OUT:-kerncheck-demo}" --model "$MODEL"
rc=$?
set -e
echo "demo.sh: kerncheck demo exited $rc after $(( $(date +%s) - start )) s"
exit $rc
