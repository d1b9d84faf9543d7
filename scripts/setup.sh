#!/usr/bin/env bash
# Installs what kerncheck needs on a fresh Debian 12 machine and builds it. Idempotent: packages already
# present are not reinstalled, the virtual environment and build folder are reused.
#   scripts/setup.sh            build in build/ (Release)
#   KC_BUILD_DIR=dir KC_CMAKE_ARGS="..." KC_TARGETS="kerncheck ..." scripts/setup.sh
# What it installs:
#   Debian packages: scripts/packages.txt, the "build" set plus the sets in KC_APT_SETS (e.g. "test demo").
#   Python (.venv/): KC_PYTHON=none (default: a venv with pip only, which fetch_smollm2.sh uses) or
#   KC_PYTHON=dev: every package of requirements.lock, exact versions checked by hash (pip --require-hashes);
#   done again only when the lock changes (stamp .venv/.lock-<hash>).
# CMake uses ccache as the compiler launcher when it is installed (KC_CCACHE=0: never); nothing needs it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

sets=" build ${KC_APT_SETS:-} "
pkgs=()
while read -r p rest; do
  [[ -z "$p" || "$p" == \#* ]] && continue
  for s in $rest; do
    if [[ "$sets" == *" $s "* ]]; then pkgs+=("$p"); break; fi
  done
done <scripts/packages.txt
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python for tests, benches and the Python front end: a venv beside the sources.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import sys" 2>/dev/null; then
  rm -rf .venv
  python3 -m venv .venv
fi
case "${KC_PYTHON:-none}" in
  none) ;;
  dev)
    stamp=.venv/.lock-$(sha256sum requirements.lock | cut -c1-16)
    if [ ! -f "$stamp" ]; then
      echo "setup: installing requirements.lock into .venv" >&2
      # The lock is complete (every dependency pinned with its hashes): nothing is resolved here.
      .venv/bin/pip install -q --disable-pip-version-check --no-deps --require-hashes -r requirements.lock
      rm -f .venv/.lock-* .venv/.requirements.*
      touch "$stamp"
    fi
    ;;
  *) echo "setup: KC_PYTHON: expected none or dev, got '${KC_PYTHON}'" >&2; exit 3 ;;
esac

BUILD=${KC_BUILD_DIR:-build}
launcher=()
if [ "${KC_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # Hits from any checkout folder (a clean clone, a worktree): paths under the checkout are hashed relative
  # to it, and the build folder's own path is not hashed (it would be, with -g, in the sanitized build).
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
fi
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=${KC_BUILD_TYPE:-Release} \
  -DPython3_EXECUTABLE="$ROOT/.venv/bin/python" "${launcher[@]}" ${KC_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j"$(nproc)" ${KC_TARGETS:+--target $KC_TARGETS}
