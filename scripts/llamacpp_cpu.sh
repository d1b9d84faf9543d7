#!/usr/bin/env bash
# llama.cpp through llama-cpp-python (docs/engines.md "llama.cpp"): its own cached venv, built from
# requirements-llamacpp.lock (the sdist compiles the vendored llama.cpp for this CPU).
#   scripts/llamacpp_cpu.sh install     the venv (${KC_CACHE:-~/.cache/kerncheck}/llamacpp-venv); prints its python
# Idempotent: a complete venv (stamp file = the lock's sha256) is reused. The compile runs at nice 19 with
# CMAKE_BUILD_PARALLEL_LEVEL (default 2) jobs; only libllama/ggml are built (no tools, examples, tests,
# llava: the recipe needs the library only).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${KC_CACHE:-$HOME/.cache/kerncheck}"
venv="$cache/llamacpp-venv"
lock="$root/requirements-llamacpp.lock"
stamp_of() { sha256sum "$lock" | cut -d' ' -f1; }

do_install() {
  if [ -f "$venv/.kc-installed" ] && [ "$(cat "$venv/.kc-installed")" = "$(stamp_of)" ]; then return 0; fi
  rm -rf "$venv"
  local t0=$SECONDS tmp
  tmp="$(mktemp -d)"
  python3 -m venv "$venv"
  # The build backend and the runtime wheels first (hash-checked), then the sdist without build isolation.
  grep -v '^llama-cpp-python' "$lock" >"$tmp/deps.txt"
  grep -E '^(#|llama-cpp-python)' "$lock" >"$tmp/llama.txt"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes -r "$tmp/deps.txt" >&2
  CMAKE_ARGS="${CMAKE_ARGS:-} -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    nice -n 19 "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes \
    --no-build-isolation --no-binary llama-cpp-python -r "$tmp/llama.txt" >&2
  rm -rf "$tmp"
  stamp_of >"$venv/.kc-installed"
  echo "llamacpp_cpu: installed $venv in $((SECONDS - t0)) s" >&2
}

case "${1:-}" in
  install) do_install; echo "$venv/bin/python" ;;
  *) sed -n '2,7p' "$0" >&2; exit 2 ;;
esac
