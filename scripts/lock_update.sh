#!/usr/bin/env bash
# Recompiles requirements.lock (exact versions with hashes, what scripts/setup.sh KC_PYTHON=dev installs)
# from requirements-dev.txt (which includes requirements.txt). The versions already in the lock are kept
# where they still satisfy the requirement files; `--upgrade` (or --upgrade-package NAME) moves them to the
# newest ones. Try the newest versions first with scripts/lock_try_newest.sh. Not part of CI.
#   scripts/lock_update.sh [--upgrade | --upgrade-package NAME ...]
# uv (PyPI package) comes from a throwaway venv under ${KC_CACHE:-$HOME/.cache/kerncheck}/uv-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
uvenv="${KC_CACHE:-$HOME/.cache/kerncheck}/uv-venv"
[ -x "$uvenv/bin/uv" ] || { python3 -m venv "$uvenv" && "$uvenv/bin/pip" install -q --disable-pip-version-check uv; }
tmp=$(mktemp)
[ -f requirements.lock ] && cp requirements.lock "$tmp"
# The platform of the machines the commands run on: Debian 12, CPython 3.11, x86-64 (glibc 2.36).
"$uvenv/bin/uv" pip compile requirements-dev.txt --generate-hashes --python-version 3.11 \
  --python-platform x86_64-manylinux_2_28 --index-url https://pypi.org/simple --no-header \
  --output-file "$tmp" "$@" >/dev/null
{
  echo "# requirements.lock: every Python package scripts/test.sh installs (scripts/setup.sh KC_PYTHON=dev),"
  echo "# exact versions with their hashes (pip install --no-deps --require-hashes -r requirements.lock)."
  echo "# Compiled from requirements-dev.txt by scripts/lock_update.sh (uv pip compile); do not edit by hand."
  grep -v '^# requirements.lock\|^# exact versions\|^# Compiled from' "$tmp"
} >requirements.lock
rm -f "$tmp"
git diff --stat -- requirements.lock || true
