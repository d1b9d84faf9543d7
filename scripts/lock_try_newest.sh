#!/usr/bin/env bash
# Tries the newest versions the requirement files allow, in a scratch venv, and reports what breaks: run it
# when bumping the lock (then scripts/lock_update.sh --upgrade), not in CI. Needs a build (scripts/test.sh or
# setup.sh) for the C++ binaries the Python tests drive; downloads the newest wheels (torch: ~5 GB).
#   scripts/lock_try_newest.sh [pytest args, e.g. tests/py/test_numeric.py]
# Prints the packages whose newest version differs from the lock, then the pytest run's failures.
# Exit code: pytest's (0 when nothing breaks).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
cache="${KC_CACHE:-$HOME/.cache/kerncheck}"
uvenv="$cache/uv-venv"
[ -x "$uvenv/bin/uv" ] || { python3 -m venv "$uvenv" && "$uvenv/bin/pip" install -q --disable-pip-version-check uv; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kc-newest.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
"$uvenv/bin/uv" pip compile requirements-dev.txt --upgrade --python-version 3.11 \
  --python-platform x86_64-manylinux_2_28 --index-url https://pypi.org/simple --no-header --no-annotate \
  --output-file "$scratch/newest.txt" >/dev/null
echo "== newest versions that differ from requirements.lock"
python3 - "$scratch/newest.txt" requirements.lock <<'PY'
import re, sys
pin = lambda f: dict(m.groups() for m in re.finditer(r"^([A-Za-z0-9_.-]+)==([^ \\;]+)", open(f).read(), re.M))
new, old = pin(sys.argv[1]), pin(sys.argv[2])
for n in sorted(set(new) | set(old)):
    if new.get(n) != old.get(n):
        print(f"  {n}: {old.get(n, '-')} -> {new.get(n, '-')}")
PY
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install -q --disable-pip-version-check -r "$scratch/newest.txt"
echo "== tests/py with the newest versions (C++ binaries from ${KC_BUILD_DIR:-build}/)"
set +e
B="$ROOT/${KC_BUILD_DIR:-build}"
KC_BUILD_DIR="$B" KC_BIN="$B/src/kerncheck" KC_TEST_DATA="$ROOT/tests/data" PYTHONDONTWRITEBYTECODE=1 \
  KC_SMOLLM2_GGUF=$(PYTHON="$scratch/venv/bin/python" scripts/fetch_smollm2.sh) KC_NO_SKIP=1 \
  "$scratch/venv/bin/python" -m pytest -q -p no:cacheprovider \
  "${@:-tests/py}" 2>&1 | tail -n 60
rc=${PIPESTATUS[0]}
echo "lock_try_newest: pytest exited $rc"
exit "$rc"
