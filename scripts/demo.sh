#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, and run kerncheck on the shipped examples.
# (Until the model demo lands this is the tensor-level demo: `kerncheck compare` on sample tensors and
# built-in op cases, some of which are meant to fail — a failing case is the point of the demo.)
set -euo pipefail
cd "$(dirname "$0")/.."
KC_TARGETS=kerncheck scripts/setup.sh   # the CLI only; scripts/test.sh builds the rest
BIN=${KC_BUILD_DIR:-build}/src/kerncheck
OUT=${KC_DEMO_OUT:-demo-out}
mkdir -p "$OUT"
set +e
"$BIN" compare -i examples/cases.csv --spec examples/spec.toml --json "$OUT/compare.json" --junit "$OUT/compare.xml"
rc=$?
set -e
echo
echo "demo: exit code $rc (0 all passed, 1 some failed as intended, 3 bad input); reports in $OUT/"
[ "$rc" -le 1 ]
