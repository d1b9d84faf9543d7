#!/usr/bin/env bash
# Installs what kerncheck needs on a fresh Debian 12 machine and builds it. Idempotent: packages already
# present are not reinstalled, the virtual environment and build folder are reused.
#   scripts/setup.sh            build in build/ (Release)
#   KC_BUILD_DIR=dir KC_CMAKE_ARGS="..." scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

APT_PKGS=(build-essential cmake pkg-config libopenblas-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev
  libfmt-dev libxxhash-dev libssl-dev libpcre2-dev libgtest-dev libbenchmark-dev python3-venv python3-dev)
missing=()
for p in "${APT_PKGS[@]}" ${KC_EXTRA_APT:-}; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python for tests, benches and the Python front end: a venv beside the sources.
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import sys; sys.exit(0)" 2>/dev/null; then rm -rf .venv; python3 -m venv .venv; fi
# KC_REQUIREMENTS: the list to install (scripts/test.sh asks for requirements-dev.txt, which adds torch).
REQ=${KC_REQUIREMENTS:-requirements.txt}
stamp=.venv/.requirements.$(cat "$REQ" requirements.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/pip install -q --disable-pip-version-check -r "$REQ"
  touch "$stamp"
fi

BUILD=${KC_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=${KC_BUILD_TYPE:-Release} \
  -DPython3_EXECUTABLE="$ROOT/.venv/bin/python" ${KC_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j"$(nproc)" ${KC_TARGETS:+--target $KC_TARGETS}
